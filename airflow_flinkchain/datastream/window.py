"""PyFlink's `pyflink.datastream.window`: windows, assigners and triggers (defined in
`airflow_flinkchain.window` and `.window_triggers`). Processing-time windows and triggers
raise UnsupportedFeatureError: runs here are replayable, so time is event time."""

from airflow_flinkchain.graph.errors import unsupported_names
from airflow_flinkchain.window import (CountSlidingWindowAssigner, CountTumblingWindowAssigner, CountWindow,
                                       DynamicEventTimeSessionWindows, EventTimeSessionWindows, GlobalWindow,
                                       GlobalWindows, MergingWindowAssigner, SessionWindowTimeGapExtractor,
                                       SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows, Window,
                                       WindowAssigner)
from airflow_flinkchain.window_triggers import (ContinuousEventTimeTrigger, CountTrigger, EventTimeTrigger,
                                                NeverTrigger, PurgingTrigger, Trigger, TriggerResult)

__all__ = [
    "Window", "TimeWindow", "CountWindow", "GlobalWindow", "WindowAssigner", "MergingWindowAssigner",
    "TumblingEventTimeWindows", "SlidingEventTimeWindows", "EventTimeSessionWindows",
    "DynamicEventTimeSessionWindows", "SessionWindowTimeGapExtractor", "GlobalWindows",
    "CountTumblingWindowAssigner", "CountSlidingWindowAssigner", "Trigger", "TriggerResult", "EventTimeTrigger",
    "CountTrigger", "PurgingTrigger", "ContinuousEventTimeTrigger", "NeverTrigger",
]

_PROCESSING_TIME = ("Use the event-time counterpart with a WatermarkStrategy "
                    "(runs are replayable, so time is event time).")
__getattr__ = unsupported_names(__name__, dict.fromkeys(
    ("TumblingProcessingTimeWindows", "SlidingProcessingTimeWindows", "ProcessingTimeSessionWindows",
     "DynamicProcessingTimeSessionWindows", "ProcessingTimeTrigger", "ContinuousProcessingTimeTrigger"),
    _PROCESSING_TIME))
