import logging

import pytest

from airflow_flinkchain.functions import DEAD_LETTER_TAG, FilterFunction, MapFunction
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.operators.base import StreamOperator
from airflow_flinkchain.runtime.core.operators.simple import SinkOperator

from .helpers import K, build_job, edge, node, run


class Recorded(MapFunction):
    def __init__(self, name, calls, fail_in=None, fail_on=None):
        self.name, self.calls, self.fail_in, self.fail_on = name, calls, fail_in, fail_on

    def open(self, ctx):
        self.calls.append(("open", self.name, ctx.operator_name, ctx.get_index_of_this_subtask(), ctx.run_id))
        if self.fail_in == "open":
            raise RuntimeError("open failed")

    def map(self, value):
        if self.fail_in == "process" and value == self.fail_on:
            raise ValueError(f"bad value {value}")
        return value

    def close(self):
        self.calls.append(("close", self.name))
        if self.fail_in == "close":
            raise RuntimeError("close failed")


@pytest.fixture
def disposed(monkeypatch):
    calls = []
    for cls in (StreamOperator, SinkOperator):
        def recording_dispose(self, _original=cls.dispose):
            calls.append(("dispose", self.name))
            if self.name == "m2" and self.node.settings.get("fail_dispose"):
                raise RuntimeError("dispose failed")
            _original(self)

        monkeypatch.setattr(cls, "dispose", recording_dispose)
    return calls


def chain_of_three(calls, fail_at=None, fail_in=None, fail_on=None, fail_dispose=False):
    maps = [node(i, K.MAP, Recorded(f"m{i}", calls, fail_in if i == fail_at else None, fail_on), name=f"m{i}",
                 settings={"fail_dispose": fail_dispose}) for i in (1, 2, 3)]
    return build_job([node(0, K.SOURCE, name="src")] + maps + [node(4, K.SINK, name="out")],
                     [edge(0, 1), edge(1, 2), edge(2, 3), edge(3, 4)])


def test_lifecycle_order(disposed):
    calls = []
    w, _ = run(chain_of_three(calls), [1])
    assert [c[:2] for c in calls] == [("open", "m3"), ("open", "m2"), ("open", "m1"),
                                      ("close", "m1"), ("close", "m2"), ("close", "m3")]
    assert calls[0][2:] == ("m3", 0, "run-1")
    assert disposed == [("dispose", n) for n in ("out", "m3", "m2", "m1", "src")]
    assert w.sink[("out", 0)].closed


@pytest.mark.parametrize("phase", ["open", "process", "close"])
def test_failure_in_any_phase_still_disposes_everything(disposed, phase):
    calls = []
    with pytest.raises(ChainExecutionError) as info:
        run(chain_of_three(calls, fail_at=2, fail_in=phase, fail_on=7), [1, 7, 3])
    err = info.value
    assert err.operator == "m2" and err.phase == phase and err.subtask == 0 and "src -> m1" in err.chain
    assert f"during {phase}" in str(err) and "'m2'" in str(err)
    assert isinstance(err.__cause__, (RuntimeError, ValueError))
    if phase == "process":
        assert "record: 7" in str(err) and "on_error" in str(err)
    assert disposed == [("dispose", n) for n in ("out", "m3", "m2", "m1", "src")]


def test_failing_dispose_is_logged_and_the_others_still_run(disposed, caplog):
    calls = []
    with caplog.at_level(logging.ERROR):
        run(chain_of_three(calls, fail_dispose=True), [1])
    assert disposed == [("dispose", n) for n in ("out", "m3", "m2", "m1", "src")]
    assert "dispose of operator 'm2'" in caplog.text


def test_record_repr_is_truncated():
    job = build_job([node(0, K.SOURCE), node(1, K.MAP, lambda s: 1 / 0, name="div")], [edge(0, 1)])
    with pytest.raises(ChainExecutionError) as info:
        run(job, ["x" * 1000])
    assert "ZeroDivisionError" in str(info.value) and len(info.value.record_repr) == 200
    assert info.value.record_repr.endswith("...")


def failing_graph(policy):
    """map fails on 3, filter fails on 5 and drops evens, flat_map fails on 7; all errors per `policy`."""
    def m(x):
        if x == 3:
            raise ValueError("three")
        return x

    class F(FilterFunction):
        def filter(self, x):
            if x == 5:
                raise KeyError("five")
            return x % 2 == 1

    def fm(x):
        if x == 7:
            raise RuntimeError("seven")
        return [x, x]

    nodes = [node(0, K.SOURCE), node(1, K.MAP, m, name="m"), node(2, K.FILTER, F(), name="f"),
             node(3, K.FLAT_MAP, fm, name="fm"), node(4, K.SINK, name="out")]
    nodes += [node(4 + i, K.SINK, name=f"dlq{i}") for i in (1, 2, 3)]  # one dead-letter sink per operator
    edges = [edge(0, 1), edge(1, 2), edge(2, 3), edge(3, 4)]
    edges += [edge(i, 4 + i, output_tag=DEAD_LETTER_TAG.tag_id) for i in (1, 2, 3)]
    return build_job(nodes, edges, on_error=policy)


@pytest.mark.parametrize("policy", ["dead_letter", "skip"])
def test_dead_letter_and_skip_policies_balance_the_books(policy):
    w, m = run(failing_graph(policy), range(10))
    assert w.sink_values("out") == [1, 1, 9, 9]
    for key in ("m", "f"):
        d = m.operator(key).to_dict()
        assert d["records_in"] == d["records_out"] + d["filtered"] + d["dead_lettered"] + d["skipped"]
    fm = m.operator("fm").to_dict()
    assert fm["records_in"] == 3 and fm["records_out"] == 4
    bad = "dead_lettered" if policy == "dead_letter" else "skipped"
    assert [m.operator(k).to_dict()[bad] for k in ("m", "f", "fm")] == [1, 1, 1]
    dead = [v for i in (1, 2, 3) for v in w.sink_values(f"dlq{i}")]
    if policy == "skip":
        assert dead == []
    else:
        assert dead == [
            {"record": 3, "operator": "m", "error_type": "ValueError", "error": "three"},
            {"record": 5, "operator": "f", "error_type": "KeyError", "error": "'five'"},
            {"record": 7, "operator": "fm", "error_type": "RuntimeError", "error": "seven"},
        ]


def test_per_operator_policy_overrides_the_pipeline_default():
    job = build_job([node(0, K.SOURCE), node(1, K.MAP, lambda x: 1 // x, name="inv", on_error="skip"),
                     node(2, K.SINK, name="out")], [edge(0, 1), edge(1, 2)], on_error="fail")
    w, m = run(job, [0, 1])
    assert w.sink_values("out") == [1] and m.operator("inv").skipped == 1


def test_flat_map_failure_mid_iteration_keeps_earlier_outputs_and_continues():
    def gen(x):
        yield x
        if x == 2:
            raise ValueError("boom")
        yield -x

    job = build_job([node(0, K.SOURCE), node(1, K.FLAT_MAP, gen, name="g", on_error="skip"),
                     node(2, K.SINK, name="out")], [edge(0, 1), edge(1, 2)])
    w, m = run(job, [1, 2, 3])
    assert w.sink_values("out") == [1, -1, 2, 3, -3]
    assert m.operator("g").records_out == 5
