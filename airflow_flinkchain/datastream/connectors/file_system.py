"""PyFlink's `pyflink.datastream.connectors.file_system` builders over this project's file
connectors (`airflow_flinkchain.io`):

    FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()
        -> io.sources.TextLineFileSource(path): one str record per line, one split per file
    FileSink.for_row_format(path, Encoder.simple_string_encoder())
            .with_output_file_config(OutputFileConfig.builder().with_part_prefix("p").build())
            .with_rolling_policy(RollingPolicy.default_rolling_policy()).build()
        -> io.sinks.RowFormatFileSink(path, ...): one line per record, one part file per subtask

`FileSource` and `FileSink` here are PyFlink's builder classes; the descriptors of
`airflow_flinkchain.io.sources.FileSource` / `io.sinks.FileSink` keep their own names there.
The rolling policy is accepted and kept: a run's part files are complete when it commits
(no rolling, no time buckets); `disable_compact()` is accepted (no compaction, always). Bulk
formats, continuous monitoring, custom enumerators, split assigners, bucket assigners, the
bucket check interval and compaction raise UnsupportedFeatureError.

Examples:
    >>> source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), "/data/in").build()
    >>> source.describe()
    'text files at /data/in'
    >>> sink = (FileSink.for_row_format("/data/out", Encoder.simple_string_encoder())
    ...         .with_output_file_config(OutputFileConfig.builder().with_part_prefix("prefix")
    ...                                  .with_part_suffix(".ext").build())
    ...         .with_rolling_policy(RollingPolicy.default_rolling_policy()).build())
    >>> sink.part_file(0)
    'prefix-0-0.ext'
"""

from __future__ import annotations

from typing import Any, Optional

from airflow_flinkchain.common.serialization import Encoder
from airflow_flinkchain.common.time import Duration  # noqa: F401  (PyFlink offers it here)
from airflow_flinkchain.graph.errors import UnsupportedFeatureError
from airflow_flinkchain.io.sinks import RowFormatFileSink
from airflow_flinkchain.io.sources import TextLineFileSource

__all__ = ["FileSource", "FileSourceBuilder", "StreamFormat", "FileSink", "OutputFileConfig", "RollingPolicy",
           "DefaultRollingPolicy", "OnCheckpointRollingPolicy", "Encoder"]


class StreamFormat:
    """A record format read from a file stream; only the text line format is offered."""

    def __init__(self, charset_name: str = "UTF-8"):
        "".encode(charset_name)
        self.charset_name = charset_name

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> "StreamFormat":
        """One str record per line (Flink's TextLineInputFormat)."""
        return StreamFormat(charset_name)

    def __repr__(self) -> str:
        return f"StreamFormat.text_line_format({self.charset_name!r})"


class FileSourceBuilder:
    """What `FileSource.for_record_stream_format` returns; `build()` gives the source."""

    def __init__(self, stream_format: StreamFormat, paths: tuple):
        if not isinstance(stream_format, StreamFormat):
            raise UnsupportedFeatureError(f"FileSource.for_record_stream_format({type(stream_format).__name__})",
                                          "Use StreamFormat.text_line_format().")
        if len(paths) != 1:
            raise UnsupportedFeatureError(f"a FileSource of {len(paths)} paths",
                                          "Give one file or directory (a directory is read recursively).")
        self._format = stream_format
        self._path = paths[0]

    def process_static_file_set(self) -> "FileSourceBuilder":
        """The files present when the run starts, read once (the default)."""
        return self

    def monitor_continuously(self, discovery_interval: Any) -> "FileSourceBuilder":
        raise UnsupportedFeatureError("FileSource monitor_continuously() of a text line format",
                                      "Monitored file sources read Parquet, CSV or JSON lines in stream runs: "
                                      "FileSource(path, format, monitor=True) of airflow_flinkchain.io.sources.")

    def set_file_enumerator(self, file_enumerator: Any) -> "FileSourceBuilder":
        raise UnsupportedFeatureError("FileSourceBuilder.set_file_enumerator()")

    def set_split_assigner(self, split_assigner: Any) -> "FileSourceBuilder":
        raise UnsupportedFeatureError("FileSourceBuilder.set_split_assigner()")

    def build(self) -> TextLineFileSource:
        return TextLineFileSource(self._path, charset=self._format.charset_name)


class FileSource:
    """PyFlink's FileSource entry points."""

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        return FileSourceBuilder(stream_format, paths)

    @staticmethod
    def for_bulk_file_format(bulk_format: Any, *paths: str) -> Any:
        raise UnsupportedFeatureError("FileSource.for_bulk_file_format()",
                                      "Read Parquet, CSV or JSON lines with the sources of "
                                      "airflow_flinkchain.io.sources.")


class OutputFileConfig:
    """Part file names: `{part_prefix}-{subtask}-0{part_suffix}`."""

    def __init__(self, part_prefix: str = "part", part_suffix: str = ""):
        self.part_prefix = part_prefix
        self.part_suffix = part_suffix

    @staticmethod
    def builder() -> "OutputFileConfig.OutputFileConfigBuilder":
        return OutputFileConfig.OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix

    class OutputFileConfigBuilder:
        def __init__(self) -> None:
            self.part_prefix = "part"
            self.part_suffix = ""

        def with_part_prefix(self, prefix: str) -> "OutputFileConfig.OutputFileConfigBuilder":
            self.part_prefix = prefix
            return self

        def with_part_suffix(self, suffix: str) -> "OutputFileConfig.OutputFileConfigBuilder":
            self.part_suffix = suffix
            return self

        def build(self) -> "OutputFileConfig":
            return OutputFileConfig(self.part_prefix, self.part_suffix)


class RollingPolicy:
    """When Flink rolls a part file; accepted and kept here (a run writes one part file per
    subtask, complete at the run's commit)."""

    @staticmethod
    def default_rolling_policy(part_size: int = 1024 * 1024 * 128, rollover_interval: int = 60 * 1000,
                               inactivity_interval: int = 60 * 1000) -> "DefaultRollingPolicy":
        return DefaultRollingPolicy(part_size, rollover_interval, inactivity_interval)

    @staticmethod
    def on_checkpoint_rolling_policy() -> "OnCheckpointRollingPolicy":
        return OnCheckpointRollingPolicy()


class DefaultRollingPolicy(RollingPolicy):
    def __init__(self, part_size: int, rollover_interval: int, inactivity_interval: int):
        self.part_size = part_size
        self.rollover_interval = rollover_interval
        self.inactivity_interval = inactivity_interval

    def __repr__(self) -> str:
        return (f"RollingPolicy.default_rolling_policy({self.part_size}, {self.rollover_interval}, "
                f"{self.inactivity_interval})")


class OnCheckpointRollingPolicy(RollingPolicy):
    def __repr__(self) -> str:
        return "RollingPolicy.on_checkpoint_rolling_policy()"


class FileSink:
    """PyFlink's FileSink entry points."""

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> "FileSink.RowFormatBuilder":
        return FileSink.RowFormatBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: Any) -> Any:
        raise UnsupportedFeatureError("FileSink.for_bulk_format()",
                                      "Write Parquet, CSV or JSON lines with the sinks of airflow_flinkchain.io.sinks.")

    class BaseBuilder:
        """PyFlink's builder methods of both formats (`RowFormatBuilder` is the one offered)."""

        def __init__(self, base_path: str, encoder: Encoder):
            self._path = base_path
            self._encoder = encoder
            self._config = OutputFileConfig()
            self._rolling_policy: Optional[RollingPolicy] = None

        def with_bucket_check_interval(self, interval: int) -> "FileSink.BaseBuilder":
            raise UnsupportedFeatureError(
                "FileSink.RowFormatBuilder.with_bucket_check_interval()",
                "There are no open buckets whose rolling policy is checked over time: each run's part files are "
                "complete when the run commits. Remove the call.")

        def with_bucket_assigner(self, bucket_assigner: Any) -> "FileSink.BaseBuilder":
            raise UnsupportedFeatureError("FileSink.RowFormatBuilder.with_bucket_assigner()",
                                          "Put a template such as {{ ds }} in the path instead.")

        def with_output_file_config(self, output_file_config: OutputFileConfig) -> "FileSink.BaseBuilder":
            self._config = output_file_config
            return self

        def enable_compact(self, strategy: Any, compactor: Any) -> "FileSink.BaseBuilder":
            raise UnsupportedFeatureError("FileSink.RowFormatBuilder.enable_compact()",
                                          "Each subtask writes one part file per run; compact the files after "
                                          "the run (e.g. in a downstream task) if they are too small.")

        def disable_compact(self) -> "FileSink.BaseBuilder":
            """Compaction is off, as here always."""
            return self

        def with_rolling_policy(self, rolling_policy: RollingPolicy) -> "FileSink.BaseBuilder":
            """Kept on the sink, not applied: a run's part files are complete when it commits."""
            self._rolling_policy = rolling_policy
            return self

        def build(self) -> RowFormatFileSink:
            return RowFormatFileSink(self._path, charset=self._encoder.charset_name,
                                     part_prefix=self._config.part_prefix, part_suffix=self._config.part_suffix,
                                     rolling_policy=self._rolling_policy)

    class RowFormatBuilder(BaseBuilder):
        """What `FileSink.for_row_format` returns; `build()` gives the sink."""

        def __init__(self, base_path: str, encoder: Encoder):
            if not isinstance(encoder, Encoder):
                raise UnsupportedFeatureError(f"FileSink.for_row_format(encoder={type(encoder).__name__})",
                                              "Use Encoder.simple_string_encoder().")
            super().__init__(base_path, encoder)
