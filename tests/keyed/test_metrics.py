"""Counters and time of keyed operators in BATCH mode, whose records are processed at the
end of the input (replay), and of the operators chained after them."""

from __future__ import annotations

from .util import pipeline


def test_batch_keyed_head_and_its_chained_operators_are_counted_and_timed():
    p, src = pipeline("batch", [((i % 10, i), i) for i in range(3000)])
    keyed = src.key_by(lambda r: r[0])
    keyed.map(lambda r: r).name("kmap").filter(lambda r: r[1] % 2 == 0).name("after").collect("a")
    keyed.reduce(lambda a, b: (a[0], a[1] + b[1])).name("red").collect("b")
    res = p.execute_local()
    kmap, after, red = (res.operator_metrics(n)[0] for n in ("kmap", "after", "red"))
    assert (kmap["records_in"], kmap["records_out"]) == (3000, 3000)
    assert (after["records_in"], after["filtered"]) == (3000, 1500)
    assert (red["records_in"], red["records_out"]) == (3000, 10)
    assert kmap["time_ms"] > 0 and after["time_ms"] > 0 and red["time_ms"] > 0
