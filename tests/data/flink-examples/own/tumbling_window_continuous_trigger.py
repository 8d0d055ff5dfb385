"""A tumbling event-time window with a ContinuousEventTimeTrigger, written for this project
(not one of Apache Flink's files): 10 ms windows that also fire every 5 ms of event time,
counting the records of each firing. Runs on PyFlink as it is, with the package renamed
back (record_expected.py does so)."""

from typing import Iterable

from airflow_flinkchain.common import Time, Types, WatermarkStrategy
from airflow_flinkchain.common.watermark_strategy import TimestampAssigner
from airflow_flinkchain.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from airflow_flinkchain.datastream.window import ContinuousEventTimeTrigger, TimeWindow, TumblingEventTimeWindows


class SecondField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return value[1]


class Count(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    def process(self, key: str, context: ProcessWindowFunction.Context[TimeWindow],
                elements: Iterable[tuple]) -> Iterable[tuple]:
        window = context.window()
        yield key, window.start, window.end, sum(1 for _ in elements)

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        pass


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    events = env.from_collection(
        [("hi", 1), ("hi", 2), ("hi", 3), ("hi", 4), ("hi", 5), ("hi", 8), ("hi", 9), ("hi", 15)],
        type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    counts = (events
              .assign_timestamps_and_watermarks(
                  WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(SecondField()))
              .key_by(lambda e: e[0], key_type=Types.STRING())
              .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
              .trigger(ContinuousEventTimeTrigger.of(Time.milliseconds(5)))
              .process(Count(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()])))
    counts.print()
    env.execute()


if __name__ == "__main__":
    main()
