"""Input channels read one after the other, with what their watermark statuses say about
their upstream subtasks (docs/event-time.md, "Idle source subtasks").

A downstream subtask reads its channels in a fixed order, where Flink's would interleave
them as they arrive, so a channel's statuses before its first record are the upstream
subtask's state from the start:
* idle from the start (a source subtask without a split, or whose only split goes on from the
  subtask before it): the valve leaves the channel out from the start (`initially_idle`);
* a piece of a file read after the previous subtask's piece of it: that subtask's channel ends
  idle (after its last record), this one starts idle then active (before its first record).
  The file is one split read on one channel after the other: the split's watermark is handed
  over from the ending channel to the next (`WatermarkValve.hand_over`), as one subtask reading
  the whole file would go on, and the ending channel's idle end is dropped: applied before the
  next channel counts, it would leave every channel idle for a moment, and the valve would jump
  to the highest watermark of any channel, one of a file already read.
"""

from __future__ import annotations

from collections import deque
from itertools import takewhile
from typing import Any, Iterable, Iterator, Sequence

from airflow_flinkchain.runtime.core.elements import WatermarkStatus
from airflow_flinkchain.runtime.core.valve import WatermarkValve

IDLE, ACTIVE = "idle", "active"  # watermark statuses among a channel's stored marks


class ChannelMarks:
    """What a channel's marks (watermarks as ints, statuses as IDLE / ACTIVE) before its first
    record (`leading`) and after its last (`trailing`; both all of them when it has no record)
    say: `initially_idle`, `continues` (starts idle then active: the next piece of a split) and
    `idle_tail` (elements from its final idle status, after its last record, to its end)."""

    __slots__ = ("initially_idle", "continues", "idle_tail")

    def __init__(self, leading: Sequence, trailing: Sequence):
        statuses = [m for m in leading if type(m) is str]
        self.initially_idle = bool(statuses) and statuses[0] == IDLE
        self.continues = statuses[:2] == [IDLE, ACTIVE]
        self.idle_tail = 0
        for index in range(len(trailing) - 1, -1, -1):
            if type(trailing[index]) is str:
                if trailing[index] == IDLE:
                    self.idle_tail = len(trailing) - index
                break

    @classmethod
    def of_pairs(cls, marks: Sequence, records: int) -> "ChannelMarks":
        """From stored [position, mark] pairs (position: the records before the mark)."""
        leading = list(takewhile(lambda pm: pm[0] == 0, marks))
        trailing = list(takewhile(lambda pm: pm[0] == records, reversed(marks)))[::-1]
        return cls([m for _, m in leading], [m for _, m in trailing])


NO_MARKS = ChannelMarks((), ())


def merged_pairs(files: list, elements_of, valve: WatermarkValve) -> Iterator[tuple[int, Any]]:
    """(channel, element) of every file in order, for `valve.merge`, with the hand-overs of split
    pieces (module docstring). `elements_of(file)`: its elements; a file has `marks`
    (`ChannelMarks`) and `dataset` (its edge)."""
    marks = [getattr(f, "marks", NO_MARKS) for f in files]
    hands = [i + 1 < len(files) and marks[i].idle_tail and marks[i + 1].continues
             and getattr(files[i], "dataset", None) == getattr(files[i + 1], "dataset", None)
             for i in range(len(files))]
    if not any(hands):
        return ((i, el) for i, f in enumerate(files) for el in elements_of(f))
    return _handing_over(files, elements_of, valve, marks, hands)


def _handing_over(files, elements_of, valve, marks, hands) -> Iterator[tuple[int, Any]]:
    for i, f in enumerate(files):
        elements: Iterable = elements_of(f)
        if i and hands[i - 1]:
            elements = iter(elements)
            for el in elements:  # its leading statuses, up to the one that makes it active
                yield i, el
                if type(el) is WatermarkStatus and not el.idle:
                    break
            valve.hand_over(i - 1, i)
        if hands[i]:
            elements = _without_last(elements, marks[i].idle_tail)
        for el in elements:
            yield i, el


def _without_last(elements: Iterable, n: int) -> Iterator:
    held: deque = deque()
    for el in elements:
        held.append(el)
        if len(held) > n:
            yield held.popleft()
