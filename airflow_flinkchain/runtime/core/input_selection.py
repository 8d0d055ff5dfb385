"""The input of a two-input chain head (Flink's StreamTwoInputProcessor and its
InputSelection): two inputs, each its channels merged through its own
WatermarkValve, read in a fixed interleaving.

* A broadcast input 2 (`BroadcastConnectedStream`) is read in full first, then
  input 1, in both runtime modes (Flink's batch execution prioritises the
  broadcast side; in STREAMING Flink fixes no order, and this is one valid one).
* Otherwise the inputs alternate record by record, starting with input 1 (Flink's
  fair selection when both inputs have data): the elements of input 1 up to and
  including its next record (watermarks before it go along), then those of
  input 2, and so on; when one input ends, the rest of the other follows. Within
  an input, records keep their channel order (channels one after another).
  The same order in BATCH mode, where a keyed operator buffers both inputs and
  replays each key's records sorted by timestamp (ties: this arrival order).

`elements()` yields `(input number, element)`: bare values, StreamRecords,
Watermarks (the input's combined ones), and `(n, END_OF_INPUT)` once input n is
exhausted (its watermark is then the MAX watermark, as at the end of a source).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from airflow_flinkchain.runtime.core.elements import Watermark, WatermarkStatus

END_OF_INPUT = object()


class TwoInputs:
    def __init__(self, input1: Iterable[Any], input2: Iterable[Any], broadcast_first: bool = False):
        self.input1 = input1
        self.input2 = input2
        self.broadcast_first = broadcast_first

    def elements(self) -> Iterator[tuple[int, Any]]:
        if self.broadcast_first:
            for el in self.input2:
                yield 2, el
            yield 2, END_OF_INPUT
            for el in self.input1:
                yield 1, el
            yield 1, END_OF_INPUT
            return
        yield from _alternate(iter(self.input1), iter(self.input2))


def _alternate(current: Iterator, other: Iterator) -> Iterator[tuple[int, Any]]:
    wm_type, status_type, end = Watermark, WatermarkStatus, END_OF_INPUT
    n, m = 1, 2
    while True:
        for el in current:
            yield n, el
            t = type(el)
            if t is not wm_type and t is not status_type:
                break  # a record: the other input's turn
        else:  # `current` ended: the rest of the other one
            yield n, end
            for el in other:
                yield m, el
            yield m, end
            return
        current, other, n, m = other, current, m, n
