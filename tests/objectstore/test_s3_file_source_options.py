"""CSV and JSON lines sources on S3, read by the subtasks with pyarrow, give the rows and
types Spark's reader gives for the same files (a local copy), with the options Spark
users set (header, sep, inferSchema, nullValue); an option the pyarrow path does not
implement is refused naming the source."""

from __future__ import annotations

import json
import math

import pytest

from airflow_flinkchain.io import CsvSource, JsonLinesSource
from airflow_flinkchain.runtime.connectors.file_rows import read_file_table
from airflow_flinkchain.runtime.exchange.layout import Location

pytestmark = [pytest.mark.s3]

HEADER = "i,l,d,b,dt,ts,ts2,s,e,mix,ib,dts,sp,q,nan,ws,big"
CSV_FILES = {
    "a.csv": HEADER + "\n"
    '1,1,1.5,true,2024-01-01,2024-01-01 10:00:00,2024-01-01T10:00:00Z,x,,1,1,2024-01-01,+3,"",NaN, 1,1\n'
    "2,3000000000,1e5,False,2024-02-29,2024-01-01 10:00,2024-01-01T10:00:00.123+01:00,y,,2.5,true,"
    "2024-01-01 10:00:00,-4,a,Infinity,2,99999999999999999999\n"
    ",5,.5,TRUE,,2024-01-01 10:00:00.5,2024-01-01,z,,3,,2024-01-02,5,,1.,3,\n",
    "b.csv": HEADER + "\n7,8,9,false,2024-03-01,2024-03-01 00:00:00,2024-03-01T00:00:00,w,,4,0,2024-03-01,6,b,-Infinity,4,2\n",
    "_ignored.csv": "not,data\n",
}
SEMICOLON_FILES = {"p.txt": "k;v\nNA;1\nb;NA\nc;\n"}
JSON_FILES = {
    "a.json": '{"z": 1, "a": "2024-01-01T10:00:00", "n": {"y": 1, "b": "2024-01-01"}, "arr": [1, 2], "m": 1, "s": 1}\n'
              '{"z": 2, "a": "x", "m": 2.5, "s": "t", "big": 3000000000}\n',
    "b.json": '{"z": 3.5, "a": null, "n": {"y": 2.5, "c": true}, "arr": [1.5], "m": 3, "s": {"k": 1}, "e": null}\n',
    "c.json": '{"m": 4, "z": 4}\n',
}
CASES = [  # (name, files, source factory, Spark reader options as FileSourceReader sets them)
    ("csv_inferred", CSV_FILES, lambda p: CsvSource(p), {"header": True, "inferSchema": True}),
    ("csv_strings", CSV_FILES, lambda p: CsvSource(p, inferSchema=False), {"header": True, "inferSchema": False}),
    ("csv_headerless", CSV_FILES, lambda p: CsvSource(p, header=False, inferSchema="false"),
     {"header": False, "inferSchema": False}),
    ("csv_sep_null", SEMICOLON_FILES, lambda p: CsvSource(p, sep=";", nullValue="NA"),
     {"header": True, "sep": ";", "nullValue": "NA", "inferSchema": True}),
    ("json", JSON_FILES, lambda p: JsonLinesSource(p), {}),
]


def _write(folder: str, files: dict) -> None:
    for name, text in files.items():
        Location(folder).join(name).write_text(text)


def _comparable(table) -> tuple:
    """(field names and types, rows) with NaN comparable and timestamps as UTC instants."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = []
    for f, col in zip(table.schema, table.columns):
        if pa.types.is_timestamp(f.type):
            col = pc.cast(col, pa.timestamp("us", tz="UTC"))
        cols.append(col)
    table = pa.table(cols, names=table.column_names)
    rows = [json.dumps({k: ("NaN" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()},
                       default=str) for r in table.to_pylist()]
    return [(f.name, str(f.type)) for f in table.schema], rows


@pytest.mark.spark
def test_s3_sources_read_as_sparks_reader_reads_the_files(s3_server, spark, tmp_path):
    bucket = f"s3://{s3_server.new_bucket()}"
    for name, files, make, options in CASES:
        local, remote = str(tmp_path / name), f"{bucket}/{name}"
        _write(local, files)
        _write(remote, files)
        fmt = "json" if name == "json" else "csv"
        want = _comparable(spark.read.format(fmt).options(**options).load(local).toArrow())
        got_table, file_rows = read_file_table(make(remote), remote, f"source {name!r}")
        assert _comparable(got_table) == want, name
        assert sum(file_rows) == got_table.num_rows and len(file_rows) == len([f for f in files if f[0] != "_"])


def test_an_option_the_pyarrow_reader_does_not_implement_is_refused_naming_the_source(s3_server):
    bucket = f"s3://{s3_server.new_bucket()}"
    _write(f"{bucket}/in", {"a.csv": "x\n1\n"})
    with pytest.raises(ValueError) as err:
        read_file_table(CsvSource(f"{bucket}/in", mode="FAILFAST"), f"{bucket}/in", "source 'clicks'")
    assert "source 'clicks'" in str(err.value) and "'mode'" in str(err.value)
    with pytest.raises(ValueError) as err:
        read_file_table(JsonLinesSource(f"{bucket}/in", multiLine=True), f"{bucket}/in", "source 'events'")
    assert "source 'events'" in str(err.value) and "'multiLine'" in str(err.value)
