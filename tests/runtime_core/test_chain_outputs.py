from airflow_flinkchain.api import StreamPipeline
from airflow_flinkchain.functions import OutputTag, ProcessFunction
from airflow_flinkchain.graph.model import PartitionSpec, Partitioner
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK, StreamRecord, Watermark
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import OperatorChain
from airflow_flinkchain.runtime.core.outputs import (BroadcastingOutputCollector, ChainingOutput, CopyingChainingOutput,
                                                DirectedOutput, RecordWriterOutput)

from .helpers import K, build_job, edge, node, run


def test_linear_chain_fused_values_and_metrics():
    job = build_job([node(0, K.SOURCE), node(1, K.MAP, lambda x: x * 3), node(2, K.FILTER, lambda x: x % 2 == 0),
                     node(3, K.FLAT_MAP, lambda x: (x, x + 1)), node(4, K.SINK, name="out")],
                    [edge(0, 1), edge(1, 2), edge(2, 3), edge(3, 4)])
    w, m = run(job, range(10))
    assert w.sink_values("out") == [y for x in range(10) if (x * 3) % 2 == 0 for y in (x * 3, x * 3 + 1)]
    d = {r["key"]: r for r in m.to_dict()}
    assert d["filter2"]["records_in"] == 10 and d["filter2"]["filtered"] == 5 and d["filter2"]["records_out"] == 5
    assert d["flat_map3"]["records_out"] == 10 and d["out"]["records_in"] == 10
    assert set(d["map1"]) == {"node_id", "key", "name", "subtask", "records_in", "records_out", "side_outputs",
                              "dead_lettered", "skipped", "filtered", "time_ms", "watermark"}


def test_plain_values_and_timestamps_reach_the_sink():
    job = build_job([node(0, K.SOURCE), node(1, K.MAP, lambda x: x + 1), node(2, K.SINK, name="out")],
                    [edge(0, 1), edge(1, 2)])
    w, _ = run(job, [StreamRecord(1, 10), 2, Watermark(5), StreamRecord(3, 20)])
    assert [(r.value, r.timestamp) for r in w.sink[("out", 0)].records] == [(2, 10), (3, None), (4, 20)]
    w, _ = run(job, [1, 2], plain_values=True)
    assert w.sink_values("out") == [2, 3]


def test_output_types_built_as_flink_does():
    nodes = [node(0, K.SOURCE), node(1, K.MAP, lambda x: x), node(2, K.SINK, name="a"), node(3, K.MAP, lambda x: x),
             node(4, K.MAP, lambda x: x, parallelism=2)]
    edges = [edge(0, 1), edge(1, 2), edge(1, 3), edge(3, 4, PartitionSpec(Partitioner.REBALANCE))]
    job = build_job(nodes, edges, chains=[[0, 1, 2, 3], [4]])
    w = MemoryWriters()
    chain = OperatorChain(job, "c0", 0, "r", w.record_writer_factory, w.sink_writer_factory)
    ops = chain.operators
    assert isinstance(ops[0].output, CopyingChainingOutput) and not ops[0].output.needs_copy  # source: fresh values
    assert isinstance(ops[1].output, BroadcastingOutputCollector)
    assert [type(o) for o in ops[1].output.outputs] == [CopyingChainingOutput, CopyingChainingOutput]
    assert isinstance(ops[3].output, RecordWriterOutput)
    reuse = build_job(nodes, edges, chains=[[0, 1, 2, 3], [4]], object_reuse=True)
    chain = OperatorChain(reuse, "c0", 0, "r", w.record_writer_factory, w.sink_writer_factory)
    assert type(chain.operators[0].output) is ChainingOutput
    chain.run([1, 2, 3])
    assert w.edge_values("map3__map4", 0) == [1, 3] and w.edge_values("map3__map4", 1) == [2]  # round robin from subtask 0
    # watermarks go to every channel (MAX at end of input)
    assert w.channel[("map3__map4", 0)].channels[1][-1] == MAX_WATERMARK


def test_without_object_reuse_a_branch_never_sees_a_sibling_mutation():
    def mutate(d):
        d["seen"] = "mutated"
        return d

    nodes = [node(0, K.SOURCE), node(1, K.MAP, lambda x: {"v": x}), node(2, K.MAP, mutate),
             node(3, K.SINK, name="a"), node(4, K.MAP, lambda d: dict(d)), node(5, K.SINK, name="b")]
    edges = [edge(0, 1), edge(1, 2), edge(2, 3), edge(1, 4), edge(4, 5)]
    for reuse in (False, True):  # fan-out copies for all but the last branch even with reuse (Flink)
        w, _ = run(build_job(nodes, edges, object_reuse=reuse), [1])
        assert w.sink_values("b") == [{"v": 1}]


def test_object_reuse_shares_records_along_a_chain():
    shared = {"n": 0}

    def bump(d):
        d["n"] += 1
        return d

    nodes = [node(0, K.SOURCE), node(1, K.MAP, lambda x: shared), node(2, K.MAP, bump), node(3, K.SINK, name="o")]
    edges = [edge(0, 1), edge(1, 2), edge(2, 3)]
    run(build_job(nodes, edges, object_reuse=False), [1, 2])
    assert shared == {"n": 0}  # each downstream got a copy
    run(build_job(nodes, edges, object_reuse=True), [1, 2])
    assert shared == {"n": 2}


class Splitter(ProcessFunction):
    def process_element(self, value, ctx):
        if value < 0:
            ctx.output(OutputTag("neg"), value)
        elif value % 2:
            yield OutputTag("odd"), value
        else:
            yield value


def test_side_outputs_chained_and_across_chains():
    nodes = [node(0, K.SOURCE), node(1, K.PROCESS, Splitter()), node(2, K.SINK, name="main"),
             node(3, K.SINK, name="neg"), node(4, K.MAP, lambda x: x * 10, parallelism=1)]
    edges = [edge(0, 1), edge(1, 2), edge(1, 3, output_tag="neg"), edge(1, 4, output_tag="odd")]
    job = build_job(nodes, edges, chains=[[0, 1, 2, 3], [4]])
    w, m = run(job, [1, 2, -3, 4, 5, "x"[:0] or 6])
    assert w.sink_values("main") == [2, 4, 6]
    assert w.sink_values("neg") == [-3]
    assert w.edge_values("process1__map4") == [1, 5]
    proc = m.operator("process1").to_dict()
    assert proc["records_out"] == 3 and proc["side_outputs"] == {"neg": 1, "odd": 2}


def test_split_select_via_directed_output():
    p = StreamPipeline("split")
    s = p.from_collection([]).map(lambda x: x).split(lambda x: ["even"] if x % 2 == 0 else ["odd", "all"])
    s.select("even").collect("even")
    s.select("odd").collect("odd")
    s.select("odd", "all").collect("odd_or_all")
    s.map(lambda x: x).collect("everything")  # no selected names: every record
    job = p.plan()
    assert len(job.chains) == 1
    w = MemoryWriters()
    chain = OperatorChain(job, job.chains[0].id, 0, "r", w.record_writer_factory, w.sink_writer_factory)
    assert any(isinstance(op.output, DirectedOutput) for op in chain.all_operators)
    chain.run(range(5))
    assert w.sink_values("even") == [0, 2, 4]
    assert w.sink_values("odd") == [1, 3]
    assert w.sink_values("odd_or_all") == [1, 3]  # once each, although selected by two names
    assert w.sink_values("everything") == [0, 1, 2, 3, 4]


def test_api_pipeline_runs_through_run_subtask():
    p = StreamPipeline("api")
    late = OutputTag("odd")

    def proc(v, ctx):
        if v % 2:
            ctx.output(late, v)
        yield v * 10

    m = p.from_collection([]).map(lambda x: x + 1).filter(lambda x: x % 3 != 0).process(proc)
    m.collect("out")
    m.get_side_output(late).collect("odd")
    job = p.plan()
    w = MemoryWriters()
    from airflow_flinkchain.runtime.core.operator_chain import run_subtask
    run_subtask(job, job.chains[0].id, 0, "r", range(6), w.record_writer_factory, w.sink_writer_factory)
    assert w.sink_values("out") == [10, 20, 40, 50]
    assert w.sink_values("odd") == [1, 5]


def _routing(v, ctx):
    if v == 13:
        raise ValueError("bad 13")
    if v % 3 == 0:
        ctx.output(OutputTag("three"), v)
    elif v % 3 == 1:
        yield OutputTag("one"), v
    else:
        yield v
        yield -v


def _process_job(on_error):
    nodes = [node(0, K.SOURCE), node(1, K.MAP, lambda x: x + 1), node(2, K.PROCESS, _routing, on_error=on_error),
             node(3, K.MAP, lambda x: x * 10), node(4, K.SINK, name="main"), node(5, K.SINK, name="three"),
             node(6, K.SINK, name="one")]
    edges = [edge(0, 1), edge(1, 2), edge(2, 3), edge(3, 4), edge(2, 5, output_tag="three"),
             edge(2, 6, output_tag="one")]
    return build_job(nodes, edges)


def test_process_is_fused_with_its_neighbours_keeping_side_outputs_errors_and_counts():
    job = _process_job("skip")
    w = MemoryWriters()
    chain = OperatorChain(job, "c0", 0, "r", w.record_writer_factory, w.sink_writer_factory)
    m = chain.run(range(3000))  # > 1024: the timed (unfused) and the fused wiring both run
    assert [op.name for op in chain.head.fast_segment.ops] == ["source0", "map1", "process2", "map3", "main"]
    vs = [v for v in range(1, 3001) if v != 13]
    assert w.sink_values("main") == [y for v in vs if v % 3 == 2 for y in (v * 10, -v * 10)]
    assert w.sink_values("three") == [v for v in vs if v % 3 == 0]
    assert w.sink_values("one") == [v for v in vs if v % 3 == 1]
    proc = m.operator("process2").to_dict()
    assert proc["records_in"] == 3000 and proc["skipped"] == 1
    assert proc["records_out"] == 2 * sum(1 for v in vs if v % 3 == 2)
    assert proc["side_outputs"] == {"three": sum(1 for v in vs if v % 3 == 0), "one": sum(1 for v in vs if v % 3 == 1)}
    assert m.operator("map3").to_dict()["records_in"] == proc["records_out"]


def test_fused_process_failure_names_operator_and_record():
    from airflow_flinkchain.runtime.core.errors import ChainExecutionError

    try:
        run(_process_job("fail"), range(3000))
    except ChainExecutionError as exc:
        assert "process2" in str(exc) and "13" in str(exc) and "bad 13" in str(exc)
    else:
        raise AssertionError("no error")
