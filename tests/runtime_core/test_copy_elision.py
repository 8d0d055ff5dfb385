"""Object reuse off: cheap copies (copying.copy_record) and copies elided only
where no one but the chain holds the record (fused.py `_private_test`)."""

from __future__ import annotations

import copy
import datetime
import decimal
import sys

import pytest

from airflow_flinkchain.runtime.core import copying
from airflow_flinkchain.runtime.core.copying import IMMUTABLE_TYPES, copy_record

from .helpers import K, build_job, edge, node, run


@pytest.fixture(params=["c", "python"])
def accelerator(request, monkeypatch):
    """Run a test with the C flat-dict check and with the pure-Python loops that replace it."""
    if request.param == "python":
        monkeypatch.setattr(copying, "flat_immutable", None)
        monkeypatch.setattr(copying, "flat_refcount", None)
    elif copying.flat_immutable is None:
        pytest.skip("the C accelerator runtime/core/_flatcheck is not built (no compiler at install time)")
    return request.param


def _flat_by_loops(value):
    return type(value) is dict and all(type(x) in IMMUTABLE_TYPES for kv in value.items() for x in kv)


class _Key:
    def __hash__(self):
        return 1


def test_c_flat_check_answers_as_the_python_loops():
    if copying.flat_immutable is None:
        pytest.skip("the C accelerator runtime/core/_flatcheck is not built (no compiler at install time)")
    values = [{}, {"x": 1}, {"x": 1, "s": "a", "f": 1.5, "b": True, "n": None, "by": b"x", "c": 1j},
              {"d": decimal.Decimal(1), "t": datetime.datetime(2024, 1, 1), "dt": datetime.date(2024, 1, 1)},
              {"x": []}, {"x": (1, 2)}, {"x": bytearray(b"a")}, {(1,): 1}, {_Key(): 1}, {"x": {}},
              {1: 2, 2.5: "x"}, type("D", (dict,), {})(x=1), [1], (1,), 1, "s", None, {"x": True, "y": [1]}]
    for v in values:
        assert copying.flat_immutable(v) is _flat_by_loops(v), v
        if copying.flat_refcount is not None:  # -1, or what sys.getrefcount says at the same place
            if _flat_by_loops(v):
                assert copying.flat_refcount(v) == sys.getrefcount(v), v
            else:
                assert copying.flat_refcount(v) == -1, v


def test_copy_record_has_deepcopy_semantics(accelerator):
    shared = [1, 2]
    rec = {"a": shared, "b": shared, "t": (shared, 3), "s": {1, 2}, "fs": frozenset({(1, 2)}), "n": None}
    c = copy_record(rec)
    assert c == rec == copy.deepcopy(rec)
    assert c["a"] is c["b"] is c["t"][0] and c["a"] is not shared  # aliasing inside a record is kept
    assert c["s"] is not rec["s"] and c["fs"] is rec["fs"]
    cyc = []
    cyc.append(cyc)
    c = copy_record(cyc)
    assert c[0] is c and c is not cyc

    class Obj:
        def __init__(self):
            self.v = [1]

    o = Obj()
    c = copy_record({"o": o, "p": o})
    assert c["o"] is c["p"] and c["o"] is not o and c["o"].v is not o.v
    flat = {"x": 1, "y": "s"}
    assert copy_record(flat) == flat and copy_record(flat) is not flat
    assert copy_record((1, "a")) == (1, "a")
    t = (1, [2])
    assert copy_record(t)[1] is not t[1]


def _collect_chain(*fns_and_kinds):
    """source -> fns... -> sink; returns the sink's records as objects."""
    seen = []

    class Sink:
        def write(self, value, timestamp=None):
            seen.append(value)

        def close(self):
            pass

    nodes = [node(0, K.SOURCE)] + [node(i + 1, kind, fn) for i, (kind, fn) in enumerate(fns_and_kinds)]
    nodes.append(node(len(nodes), K.SINK))
    edges = [edge(i, i + 1) for i in range(len(nodes) - 1)]
    job = build_job(nodes, edges)

    class Writers:
        def record_writer_factory(self, e, k):
            raise AssertionError

        def sink_writer_factory(self, n, k):
            return Sink()

    run(job, [1, 2, 3], writers=Writers())
    return seen


def test_a_record_the_function_keeps_is_copied_and_later_mutations_are_invisible(accelerator):
    kept = []

    def keeping_map(x):
        d = {"x": x}
        kept.append(d)
        return d

    seen = _collect_chain((K.MAP, keeping_map))
    for d in kept:
        d["x"] = "mutated"
    assert seen == [{"x": 1}, {"x": 2}, {"x": 3}]
    assert all(a is not b for a, b in zip(seen, kept))


def test_flat_map_re_emitting_its_input_or_a_kept_list_copies(accelerator):
    buf = []

    def emit_twice(d):
        return [d, d]

    def from_kept_list(d):
        buf[:] = [{"y": d["x"]}]
        return buf

    seen = _collect_chain((K.MAP, lambda x: {"x": x}), (K.FLAT_MAP, emit_twice), (K.FLAT_MAP, from_kept_list))
    assert [s["y"] for s in seen] == [1, 1, 2, 2, 3, 3]
    assert len({id(s) for s in seen}) == 6  # every emission is its own object
    for d in buf:
        d["y"] = "mutated"
    assert "mutated" not in [s["y"] for s in seen]


def test_nested_mutable_values_are_still_copied(accelerator):
    shared = []

    def nest(x):
        return {"x": x, "shared": shared}

    seen = _collect_chain((K.MAP, nest))
    shared.append("mutated")
    assert all(s["shared"] == [] for s in seen)


def test_flat_map_emitting_its_own_input_hands_it_on_without_a_copy(accelerator):
    """Nothing but the chain holds the input of `lambda d: [d, ...]` once the function
    returned, so the copy is elided (an unobservable optimisation: checked by identity);
    a flat_map that keeps its input gets a copy handed on instead."""
    produced = []
    kept = []

    def make(x):
        d = {"x": x}
        produced.append(id(d))
        return d

    seen = _collect_chain((K.MAP, make), (K.FLAT_MAP, lambda d: [d, {"x": -d["x"]}]))
    assert [s["x"] for s in seen] == [1, -1, 2, -2, 3, -3]
    # (the first record of every 1024 takes the timed, unfused wiring, which always copies)
    assert [id(s) for s in seen[2::2]] == produced[1:]

    def keep_input(d):
        kept.append(d)
        return [d]

    seen = _collect_chain((K.MAP, lambda x: {"x": x}), (K.FLAT_MAP, keep_input))
    assert seen == kept and all(a is not b for a, b in zip(seen, kept))
    kept[0]["x"] = "mutated"
    assert seen[0] == {"x": 1}


@pytest.mark.parametrize("producer", [K.FILTER, K.SOURCE])
def test_fan_out_after_a_filter_or_source_gives_each_branch_its_own_record(accelerator, producer):
    """A filter's or source's output needs no copy when one operator consumes it; with
    several chained consumers, one mutating its input must not change what another sees."""
    def mutate(d):
        d["x"] = "mutated"
        return d

    nodes = [node(0, K.SOURCE)]
    if producer is K.FILTER:
        nodes.append(node(1, K.FILTER, lambda d: True))
    fan = nodes[-1].id
    n = len(nodes)
    nodes += [node(n, K.MAP, mutate), node(n + 1, K.SINK, name="mutated"),
              node(n + 2, K.MAP, lambda d: dict(d)), node(n + 3, K.SINK, name="kept")]
    edges = [edge(i, i + 1) for i in range(fan)] + [edge(fan, n), edge(n, n + 1), edge(fan, n + 2),
                                                     edge(n + 2, n + 3)]
    for first, second in ((n, n + 2), (n + 2, n)):  # either branch first in the fan-out
        ordered = [e for e in edges if e.source_id != fan] + [edge(fan, first), edge(fan, second)]
        writers, _ = run(build_job(nodes, ordered), [{"x": i} for i in range(3)])
        assert writers.sink_values("kept") == [{"x": 0}, {"x": 1}, {"x": 2}]
        assert writers.sink_values("mutated") == [{"x": "mutated"}] * 3
