"""The package is typed (PEP 561) and user functions have callable types in the API."""

import tomllib
import typing
from importlib import resources
from pathlib import Path

from airflow_flinkchain import function_types as ft
from airflow_flinkchain.api.datastream import DataStream, KeyedStream
from airflow_flinkchain.api.pipeline import StreamPipeline

REPO = Path(__file__).resolve().parents[2]


def test_py_typed_is_shipped():
    assert resources.files("airflow_flinkchain").joinpath("py.typed").is_file()
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["airflow_flinkchain"]


def test_user_functions_are_typed_in_the_signatures():
    hints = {
        (cls.__name__, name): typing.get_type_hints(getattr(cls, name),
                                             localns={"StreamPipeline": StreamPipeline, "DataStream": DataStream})
        for cls, name in [(DataStream, "map"), (DataStream, "flat_map"), (DataStream, "filter"),
                          (DataStream, "process"), (DataStream, "key_by"), (DataStream, "split"),
                          (DataStream, "partition_custom"), (KeyedStream, "reduce"), (StreamPipeline, "on_setup")]
    }
    assert hints[("DataStream", "map")]["func"] == ft.MapLike
    assert hints[("DataStream", "flat_map")]["func"] == ft.FlatMapLike
    assert hints[("DataStream", "filter")]["func"] == ft.FilterLike
    assert hints[("DataStream", "process")]["func"] == ft.ProcessLike
    assert hints[("DataStream", "key_by")]["key_selector"] == ft.KeySelectorLike
    assert hints[("DataStream", "split")]["selector"] == ft.OutputSelectorLike
    assert hints[("DataStream", "partition_custom")]["partitioner"] == ft.PartitionerLike
    assert hints[("KeyedStream", "reduce")]["func"] == ft.ReduceLike
    assert hints[("StreamPipeline", "on_setup")]["fn"] == ft.HookCallable
