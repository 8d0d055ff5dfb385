"""What a WINDOW node runs: Flink's WindowOperatorBuilder settings as frozen data.

The node's `function` is a `WindowSpec`; its `key_selector` is the KeyedStream's
(for `window_all`, the constant key of Flink's NullByteKeySelector).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class WindowFunctionKind(str, enum.Enum):
    """Which WindowedStream method built the operator (how the window contents are kept)."""

    REDUCE = "reduce"  # contents reduced as they arrive
    AGGREGATE = "aggregate"  # contents kept as the accumulator
    PROCESS = "process"  # contents kept as a list, handed whole to a ProcessWindowFunction
    APPLY = "apply"  # contents kept as a list, handed whole to a WindowFunction

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class WindowSpec:
    """`function`: the ReduceFunction / AggregateFunction / (Process)WindowFunction;
    `window_function`: the optional window function after a reduce or aggregate;
    `late_data_tag`: the OutputTag of `side_output_late_data`, or None (late records dropped)."""

    assigner: Any
    function_kind: WindowFunctionKind
    function: Any
    window_function: Any = None
    trigger: Any = None  # None: the assigner's default trigger
    allowed_lateness: int = 0
    late_data_tag: Any = None
    all_windows: bool = False  # window_all: one window operator instance for the whole stream


def null_key(_value: Any) -> int:
    """The key of every record of a `window_all` (Flink's NullByteKeySelector)."""
    return 0


__all__ = ["WindowFunctionKind", "WindowSpec", "null_key"]
