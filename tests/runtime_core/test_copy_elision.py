"""Object reuse off: cheap copies (copying.copy_record) and copies elided only
where no one but the chain holds the record (fused.py `_private_test`)."""

from __future__ import annotations

import copy

from airflow_flinkchain.runtime.copying import copy_record

from .helpers import K, build_job, edge, node, run


def test_copy_record_has_deepcopy_semantics():
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


def test_a_record_the_function_keeps_is_copied_and_later_mutations_are_invisible():
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


def test_flat_map_re_emitting_its_input_or_a_kept_list_copies():
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


def test_nested_mutable_values_are_still_copied():
    shared = []

    def nest(x):
        return {"x": x, "shared": shared}

    seen = _collect_chain((K.MAP, nest))
    shared.append("mutated")
    assert all(s["shared"] == [] for s in seen)
