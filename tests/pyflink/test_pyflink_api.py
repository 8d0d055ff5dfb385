"""PyFlink's module tree and behaviour without Spark: names at PyFlink's paths, Row, type
coercion and Flink's print format, print() lines, execute() clearing the job, function
classes, and clear errors for what is not supported."""

from __future__ import annotations

import importlib
import pickle
from typing import Iterable

import pytest

import airflow_flinkchain
from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Row, Types
from airflow_flinkchain.graph.errors import PlanningError, UnsupportedFeatureError

# What Flink's own DataStream examples import (pyflink 2.3.0 examples/datastream), at PyFlink's paths.
PYFLINK_IMPORTS = {
    "airflow_flinkchain.common": ["WatermarkStrategy", "Encoder", "Types", "Time", "Duration", "Row", "RowKind",
                                  "Configuration", "TypeInformation"],
    "airflow_flinkchain.common.typeinfo": ["Types", "TypeInformation", "RowTypeInfo", "TupleTypeInfo"],
    "airflow_flinkchain.common.watermark_strategy": ["TimestampAssigner", "WatermarkStrategy"],
    "airflow_flinkchain.common.time": ["Duration", "Time"],
    "airflow_flinkchain.common.types": ["Row", "RowKind"],
    "airflow_flinkchain.common.configuration": ["Configuration"],
    "airflow_flinkchain.common.serialization": ["Encoder"],
    "airflow_flinkchain.datastream": ["StreamExecutionEnvironment", "RuntimeExecutionMode", "DataStream",
                                      "KeyedStream", "WindowedStream", "AllWindowedStream", "ConnectedStreams",
                                      "DataStreamSink", "ProcessWindowFunction", "WindowFunction", "OutputTag",
                                      "KeyedProcessFunction", "MapFunction", "TimeWindow", "CountWindow"],
    "airflow_flinkchain.datastream.functions": ["KeyedProcessFunction", "RuntimeContext", "ProcessWindowFunction",
                                                "AggregateFunction", "CoMapFunction", "ValueStateDescriptor"],
    "airflow_flinkchain.datastream.window": ["TumblingEventTimeWindows", "SlidingEventTimeWindows",
                                             "EventTimeSessionWindows", "SessionWindowTimeGapExtractor",
                                             "TimeWindow", "CountWindow", "CountTrigger", "PurgingTrigger"],
    "airflow_flinkchain.datastream.state": ["ValueStateDescriptor", "StateTtlConfig", "MapStateDescriptor"],
    "airflow_flinkchain.datastream.state_backend": ["HashMapStateBackend", "EmbeddedRocksDBStateBackend"],
    "airflow_flinkchain.datastream.execution_mode": ["RuntimeExecutionMode"],
    "airflow_flinkchain.datastream.connectors": ["FileSource", "FileSink", "StreamFormat"],
    "airflow_flinkchain.datastream.connectors.file_system": ["FileSource", "StreamFormat", "FileSink",
                                                             "OutputFileConfig", "RollingPolicy"],
}


@pytest.mark.parametrize("module", sorted(PYFLINK_IMPORTS))
def test_pyflink_names_import_from_pyflink_paths(module):
    mod = importlib.import_module(module)
    missing = [n for n in PYFLINK_IMPORTS[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lacks {missing}"


def test_each_name_has_one_definition_and_the_old_paths_keep_working():
    from airflow_flinkchain import common, datastream, functions, window
    from airflow_flinkchain.common import typeinfo, watermark_strategy
    from airflow_flinkchain.datastream import functions as ds_functions, window as ds_window

    assert datastream.DataStream is airflow_flinkchain.DataStream
    assert datastream.KeyedStream is airflow_flinkchain.KeyedStream
    assert datastream.RuntimeExecutionMode is common.RuntimeExecutionMode is airflow_flinkchain.RuntimeExecutionMode
    assert common.Types is typeinfo.Types is airflow_flinkchain.Types
    assert common.WatermarkStrategy is watermark_strategy.WatermarkStrategy
    assert ds_functions.CoMapFunction is functions.CoMapFunction is airflow_flinkchain.CoMapFunction
    assert ds_functions.ProcessWindowFunction is functions.ProcessWindowFunction
    assert ds_window.TumblingEventTimeWindows is window.TumblingEventTimeWindows
    assert ds_window.CountTrigger is window.CountTrigger
    assert issubclass(datastream.StreamExecutionEnvironment, StreamPipeline)


def test_unsupported_pyflink_names_raise_a_clear_error_naming_them_and_the_porting_page():
    with pytest.raises(UnsupportedFeatureError, match=r"Types\.BIG_DEC\(\).*porting\.md"):
        Types.BIG_DEC()
    env = importlib.import_module("airflow_flinkchain.datastream").StreamExecutionEnvironment()
    with pytest.raises(UnsupportedFeatureError, match=r"StreamExecutionEnvironment\.add_jars\(\).*porting\.md"):
        env.add_jars("file:///flink-connector-kafka.jar")
    with pytest.raises(UnsupportedFeatureError, match=r"DataStream\.execute_and_collect\(\).*porting\.md"):
        env.from_collection([1]).execute_and_collect()
    with pytest.raises(UnsupportedFeatureError, match=r"TumblingProcessingTimeWindows.*porting\.md"):
        from airflow_flinkchain.datastream.window import TumblingProcessingTimeWindows  # noqa: F401
    with pytest.raises(UnsupportedFeatureError, match=r"KafkaSource"):
        from airflow_flinkchain.datastream.connectors import KafkaSource  # noqa: F401
    with pytest.raises(AttributeError):  # a name PyFlink does not have either stays an AttributeError
        importlib.import_module("airflow_flinkchain.datastream").NoSuchThing
    assert issubclass(UnsupportedFeatureError, PlanningError)


# ---- Row ---------------------------------------------------------------------------------

def test_row_access_construction_and_equality_as_pyflink():
    r = Row(id=1, info="a")
    assert (r.id, r[0], r["info"], r[-1], list(r), len(r)) == (1, 1, "a", "a", [1, "a"], 2)
    assert r.as_dict() == {"id": 1, "info": "a"} and "info" in r and "x" not in r
    assert repr(r) == "Row(id=1, info='a')" and repr(Row(1, "a")) == "<Row(1, 'a')>"
    assert Row(info="a", id=1) == r and hash(Row(1, "a")) == hash((1, "a"))
    assert Row(1, "a") != r and Row(1, "a") != (1, "a")
    assert Row("name", "age")("Alice", 11) == Row(name="Alice", age=11)
    r["id"] = 2
    assert r.id == 2
    with pytest.raises(AttributeError):
        r.nothing
    with pytest.raises(ValueError):
        Row(1, b=2)
    nested = Row(key=1, value=Row(name="a"))
    assert nested.as_dict(recursive=True) == {"key": 1, "value": {"name": "a"}}
    assert pickle.loads(pickle.dumps(r)) == r and pickle.loads(pickle.dumps(r)).info == "a"


# ---- type information --------------------------------------------------------------------

def test_type_info_coerces_records_as_pyflink_serializers_return_them():
    assert Types.FLOAT().coerce(110.1) == 110.0999984741211  # float32, as PyFlink
    assert Types.DOUBLE().coerce(3) == 3.0 and isinstance(Types.DOUBLE().coerce(3), float)
    assert Types.TUPLE([Types.STRING(), Types.FLOAT()]).coerce(["a", 0.1]) == ("a", 0.10000000149011612)
    named = Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])
    assert named.coerce((1, "x")) == Row(id=1, info="x")
    assert named.coerce({"info": "x", "id": 1}).id == 1
    assert named.coerce(Row(info="x", id=1)) == Row(id=1, info="x")
    assert Types.ROW([Types.INT(), Types.FLOAT()]).coerce((1, 0.1))[1] == 0.10000000149011612
    assert Types.LIST(Types.FLOAT()).coerce((0.1,)) == [0.10000000149011612]
    assert Types.BASIC_ARRAY(Types.INT()).coerce((1, 2)) == [1, 2]
    assert Types.PRIMITIVE_ARRAY(Types.FLOAT()).coerce([0.5]) == [0.5]
    assert Types.MAP(Types.STRING(), Types.FLOAT()).coerce({"a": 0.1}) == {"a": 0.10000000149011612}
    assert Types.PICKLED_BYTE_ARRAY().coerce({"a": 1}) == {"a": 1}
    assert Types.SQL_TIMESTAMP().coerce(None) is None
    with pytest.raises(TypeError, match="2 fields"):
        Types.TUPLE([Types.STRING(), Types.INT()]).coerce(("a",))


@pytest.mark.parametrize("type_info, value, printed", [
    (Types.TUPLE([Types.STRING(), Types.INT()]), ("To", 4), "(To,4)"),
    (Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()]), (1, "a"), "+I[1,a]"),
    (Types.ROW([Types.INT(), Types.FLOAT()]), (1, 1.1), "+I[1,1.1]"),
    (Types.TUPLE([Types.INT(), Types.FLOAT()]), (1, 1.1), "(1,1.1)"),
    (Types.LIST(Types.FLOAT()), [1.1, 2.2], "[1.1, 2.2]"),
    (Types.MAP(Types.STRING(), Types.INT()), {"a": 1}, "{a=1}"),
    (Types.DOUBLE(), 1e7, "1.0E7"),
    (Types.DOUBLE(), 0.00015, "1.5E-4"),
    (Types.BOOLEAN(), True, "true"),
    (Types.STRING(), None, "null"),
    (Types.PICKLED_BYTE_ARRAY(), ("Alice", 110.0999984741211), "('Alice', 110.0999984741211)"),
    (None, Row(id=1, info="a"), "Row(id=1, info='a')"),
])
def test_records_print_as_pyflink_prints_them(type_info, value, printed):
    """Expected strings: what PyFlink 2.3.0's print() wrote for these types."""
    from airflow_flinkchain.io.sinks import PrintSink

    assert PrintSink("p", type_info=type_info).line(value, 0, 1) == printed


def test_print_prefixes_as_flinks_print_sink_writer():
    from airflow_flinkchain.io.sinks import PrintSink

    assert PrintSink("p").line("x", 0, 1) == "x"
    assert PrintSink("p").line("x", 1, 2) == "2> x"
    assert PrintSink("p", "out").line("x", 0, 1) == "out> x"
    assert PrintSink("p", "out").line("x", 2, 3) == "out:3> x"


# ---- the environment ---------------------------------------------------------------------

def env(**kwargs):
    from airflow_flinkchain.datastream import StreamExecutionEnvironment

    return StreamExecutionEnvironment.get_execution_environment(**kwargs)


def test_the_environment_takes_stream_pipelines_default_runtime_mode():
    assert env().runtime_mode == StreamPipeline("x").runtime_mode


def test_print_without_and_with_subtask_prefix(capsys):
    e = env()
    e.set_runtime_mode("batch")
    numbers = e.from_collection([1, 2, 3, 4], type_info=Types.INT())
    numbers.map(lambda x: x * 10).print()
    e.execute_local()
    assert capsys.readouterr().out.splitlines() == ["10", "20", "30", "40"]
    e.set_parallelism(2)
    numbers.map(lambda x: (str(x), x * 1.1), output_type=Types.TUPLE([Types.STRING(), Types.FLOAT()])).print()
    e.execute_local()
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines) == ["1> (1,1.1)", "1> (3,3.3)", "2> (2,2.2)", "2> (4,4.4)"]  # rebalanced round robin


def test_execute_runs_what_was_declared_since_the_last_execute(capsys):
    e = env()
    e.set_runtime_mode("batch")
    source = e.from_collection(["a", "b"])
    source.map(str.upper).print()
    e.execute_local()
    assert capsys.readouterr().out.splitlines() == ["A", "B"]
    source.map(lambda s: s + s).print()  # the earlier source feeds the new job, as in Flink
    assert [c.name for c in e.plan().chains] == ["Collection Source -> Map -> Print to Std. Out"]
    e.execute_local()
    assert capsys.readouterr().out.splitlines() == ["aa", "bb"]
    with pytest.raises(PlanningError, match="no operators defined since the last execute"):
        e.execute_local()


def test_from_collection_type_info_and_key_by_key_type_as_pyflink(capsys):
    from airflow_flinkchain.datastream import KeyedProcessFunction

    class Sum(KeyedProcessFunction):
        def open(self, runtime_context):
            from airflow_flinkchain.datastream.state import ValueStateDescriptor

            self.state = runtime_context.get_state(ValueStateDescriptor("state", Types.FLOAT()))

        def process_element(self, value, ctx):
            current = (self.state.value() or 0) + value[1]
            self.state.update(current)
            yield value[0], current

    e = env()
    e.set_runtime_mode("batch")
    ds = e.from_collection([("Alice", 110.1), ("Bob", 30.2), ("Alice", 20.0)],
                           type_info=Types.TUPLE([Types.STRING(), Types.FLOAT()]))
    ds.key_by(lambda v: v[0], key_type=Types.STRING()).process(Sum()).print()
    e.execute_local()
    assert sorted(capsys.readouterr().out.splitlines()) == [
        "('Alice', 110.0999984741211)", "('Alice', 130.0999984741211)", "('Bob', 30.200000762939453)"]
    with pytest.raises(PlanningError, match="key_type must be a PyFlink TypeInformation"):
        ds.key_by(lambda v: v[0], key_type=str)


def test_row_named_records_have_attribute_access_and_reduce_keeps_the_type(capsys):
    e = env()
    e.set_runtime_mode("batch")
    rows = e.from_collection([(1, "x"), (2, "y"), (3, "x")],
                             type_info=Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()]))
    rows.print()
    rows.map(lambda r: (r.info, r.id), output_type=Types.TUPLE([Types.STRING(), Types.INT()])) \
        .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print()
    e.execute_local()
    assert sorted(capsys.readouterr().out.splitlines()) == ["(x,4)", "(y,2)", "+I[1,x]", "+I[2,y]", "+I[3,x]"]


def test_function_classes_are_subscriptable_and_dynamic_session_gaps(capsys):
    from airflow_flinkchain.common import WatermarkStrategy
    from airflow_flinkchain.common.watermark_strategy import TimestampAssigner
    from airflow_flinkchain.datastream import ProcessWindowFunction, WindowFunction
    from airflow_flinkchain.datastream.window import (CountWindow, EventTimeSessionWindows,
                                                      SessionWindowTimeGapExtractor, TimeWindow)

    class Ts(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return int(value[1])

    class Gap(SessionWindowTimeGapExtractor):
        def extract(self, element):
            return element[1]

    class Count(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
        def process(self, key: str, context: ProcessWindowFunction.Context[TimeWindow],
                    elements: Iterable[tuple]) -> Iterable[tuple]:
            return [(key, context.window().start, context.window().end, len(list(elements)))]

    class Sum(WindowFunction[tuple, tuple, str, CountWindow]):
        def apply(self, key, window, inputs):
            return [(key, sum(i[0] for i in inputs))]

    e = env()
    e.set_runtime_mode("streaming")
    data = e.from_collection([("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 8), ("hi", 9), ("hi", 15)],
                             type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    data.assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())) \
        .key_by(lambda x: x[0], key_type=Types.STRING()) \
        .window(EventTimeSessionWindows.with_dynamic_gap(Gap())) \
        .process(Count(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()])).print()
    e.execute_local()
    # every gap reaches the next element: one session (what PyFlink 2.3.0 prints for its example)
    assert capsys.readouterr().out.splitlines() == ["(hi,1,30,7)"]
    data.map(lambda x: (x[1], x[0])).key_by(lambda x: x[1]).count_window(2) \
        .apply(Sum(), Types.TUPLE([Types.STRING(), Types.INT()])).print()
    e.execute_local()
    assert sorted(capsys.readouterr().out.splitlines()) == ["(hi,17)", "(hi,3)", "(hi,7)"]  # 15 waits for a pair


def test_configuration_sets_the_environment():
    from airflow_flinkchain.common import Configuration

    c = Configuration().set_integer("parallelism.default", 3).set_string("execution.runtime-mode", "STREAMING")
    e = env(configuration=c.set_string("pipeline.name", "orders"))
    assert (e.get_parallelism(), e.runtime_mode, e.name) == (3, "streaming", "orders")


def test_a_typed_output_tag_coerces_its_side_output_as_pyflink(capsys):
    from airflow_flinkchain.datastream import OutputTag, ProcessFunction

    small = OutputTag("small", Types.TUPLE([Types.STRING(), Types.FLOAT()]))

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            if value < 1:
                ctx.output(small, ("small", value))
            else:
                yield value

    e = env()
    e.set_runtime_mode("batch")
    big = e.from_collection([0.1, 2.5]).process(Split())
    big.get_side_output(small).map(lambda t: t[1]).print()
    big.get_side_output(small).print()
    e.execute_local()
    assert sorted(capsys.readouterr().out.splitlines()) == ["(small,0.1)", "0.10000000149011612"]
    assert OutputTag("t", type_info=Types.INT()).output_type == Types.INT()
