"""A source subtask's input as its splits, read one after another (Flink's SourceReader
over the splits assigned to it).

A record is late only against the watermark of its own split: the watermark of a subtask
reading several splits is the minimum over them, as a WatermarkValve's over its channels
(a split not started yet holds it back, a finished split no longer does). The chain tells
its timestamp assigners where each split starts (`start_split(index, count)`), from an
empty iterator placed before the split's records: no cost per record.

Before the first record the assigners also learn the subtask's `SplitLayout`
(`read_splits(layout)`): whether it has no split at all, and whether its first split goes
on from the subtask before it or its last split goes on in the subtask after it (one file
read by several subtasks, each a contiguous piece: `connectors.file_splits`). From it they
mark the subtask's output idle where it must not hold the watermark downstream back
(docs/event-time.md, "Idle source subtasks").
"""

from __future__ import annotations

from itertools import chain
from typing import Callable, Iterable, Iterator, Sequence


class SplitLayout:
    """`count` splits; `continues`: the first goes on from the previous subtask's last;
    `continued`: the last goes on in the next subtask's first."""

    __slots__ = ("count", "continues", "continued")

    def __init__(self, count: int, continues: bool = False, continued: bool = False):
        self.count, self.continues, self.continued = count, bool(continues), bool(continued)

    def __repr__(self) -> str:
        return f"SplitLayout({self.count}, continues={self.continues}, continued={self.continued})"


class SourceSplits:
    """`splits`: one iterable of records per split, in reading order (read lazily).
    `continuous`: the splits are one stream read in order with one watermark (the files of a
    monitored directory: they arrive one after another, and stream runs read them so); no
    splits are no split, also then. `continues` / `continued`: see `SplitLayout`."""

    def __init__(self, splits: Sequence[Iterable], continuous: bool = False, continues: bool = False,
                 continued: bool = False):
        splits = list(splits)
        self.splits = [chain.from_iterable(splits)] if continuous and splits else splits
        self.layout = SplitLayout(len(self.splits), continues, continued)

    def __len__(self) -> int:
        return len(self.splits)

    def __iter__(self) -> Iterator:
        return chain.from_iterable(self.splits)

    def records(self, listeners: Sequence[Callable[[int, int], None]]) -> Iterator:
        """The records of every split; each listener is called with (split index, split count)
        before the split's first record is read."""
        if not listeners or len(self.splits) < 2:
            return iter(self)
        count = len(self.splits)
        parts: list = []
        for index, split in enumerate(self.splits):
            parts.append(_SplitStart(listeners, index, count))
            parts.append(split)
        return chain.from_iterable(parts)


class _SplitStart:
    """An empty iterator that notifies the listeners when it is reached."""

    def __init__(self, listeners: Sequence[Callable[[int, int], None]], index: int, count: int):
        self.listeners, self.index, self.count = listeners, index, count

    def __iter__(self) -> "_SplitStart":
        return self

    def __next__(self):
        for listener in self.listeners:
            listener(self.index, self.count)
        raise StopIteration
