"""`from_collection` at run time: the records travel as data, not inside the plan.

When a plan is serialized (`ship_plan`), the items of every collection source
are written once as a single-channel exchange dataset (pickled records, Parquet,
in batches) and the pickled plan holds a `StoredCollection` (location + count)
in their place. Subtask 0 streams the records back batch by batch: the plan
stays small whatever the collection's size, and neither the driver's plan
broadcast nor a worker holds the collection twice.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Iterable, Iterator, Optional

from airflow_flinkchain.io.sources import CollectionSource
from airflow_flinkchain.runtime.connectors.base import ConnectorContext, SourceReader, register_source
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, open_channel
from airflow_flinkchain.runtime.exchange.layout import Location


class StoredCollection:
    """The items of a collection source, written as a dataset; iterable any number of
    times. Iterating yields what the chain's input takes: bare values, StreamRecords
    (timestamped items) and Watermarks, in the collection's order."""

    def __init__(self, location: Location, count: int, dataset: str):
        self.location = location
        self.count = count
        self.dataset = dataset

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Any]:
        for f in open_channel(self.location, self.dataset, None):
            yield from f.elements()

    def __repr__(self) -> str:
        return f"StoredCollection({self.location.uri!r}, {self.count} records)"


class CollectionShipper:
    """`substitute` hook of `dumps_plan`: writes each non-empty collection source's items
    under `data_dir` (once per descriptor) and pickles a StoredCollection in their place."""

    def __init__(self, data_dir: Location):
        self.data_dir = data_dir
        self.shipped: dict[int, tuple[CollectionSource, CollectionSource]] = {}  # id -> (original, stored)

    def __call__(self, obj: Any) -> Optional[CollectionSource]:
        if not isinstance(obj, CollectionSource) or isinstance(obj.items, StoredCollection) or not obj.items:
            return None
        if id(obj) in self.shipped:
            return self.shipped[id(obj)][1]
        index = len(self.shipped)
        dataset = f"collection:{index}"
        location = self.data_dir.join(f"collection-{index}")
        if location.exists():
            location.delete()  # a re-run of the setup replaces what it wrote
        writer = DatasetWriter(location, dataset, 0, 1, channel_dirs=False)
        channel = writer.channel(0)
        for item in obj.items:  # timestamps and watermarks are kept as the exchange keeps them
            if type(item) is StreamRecord:
                channel.add(item.value, item.timestamp)
            elif type(item) is Watermark:
                channel.add_watermark(item.timestamp)
            else:
                channel.add(item)
        writer.close()
        # a plain CollectionSource: subclasses (testing.TestingSource) may have other constructors
        settings = {f.name: getattr(obj, f.name) for f in fields(CollectionSource)}
        stored = CollectionSource(**{**settings, "items": StoredCollection(location, len(obj.items), dataset)})
        self.shipped[id(obj)] = (obj, stored)  # the original is kept: its id stays unique while pickling
        return stored


@register_source(CollectionSource)
class CollectionReader(SourceReader):
    """Non-parallel: every item goes to subtask 0."""

    def __init__(self, descriptor: CollectionSource, ctx: ConnectorContext):
        # a StoredCollection (a shipped plan) is a reference; a tuple (a plan that was
        # pickled as is) travels with the reader
        self.items = descriptor.items

    def read(self, subtask: int, batches: Iterator[Any]) -> Iterable[Any]:
        return self.items if subtask == 0 else ()
