"""docs/porting.md's API table stays true: it covers exactly the public names of PyFlink's
DataStream API (tests/data/pyflink_names.json, generated from the PyFlink 2.3.0 wheel by
scripts/pyflink_names.py), and every name marked supported or differs exists here under the
same path (imported, without PyFlink; a method that only raises UnsupportedFeatureError is
not offered); a name marked not supported is not offered."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _table_module():
    spec = importlib.util.spec_from_file_location("porting_table", ROOT / "scripts" / "porting_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TABLE = _table_module()
ENTRIES = TABLE.names()
ROWS = TABLE.rows(TABLE.PAGE.read_text())


def test_the_name_list_is_pyflinks():
    doc = json.loads(TABLE.NAMES.read_text())
    assert doc["pyflink"] == "2.3.0" and len(ENTRIES) > 1000
    names = [e["name"] for e in ENTRIES]
    assert len(names) == len(set(names))
    for name in ("pyflink.datastream.StreamExecutionEnvironment.get_execution_environment",
                 "pyflink.datastream.DataStream.key_by", "pyflink.common.Row", "pyflink.common.Types.ROW_NAMED",
                 "pyflink.datastream.connectors.file_system.FileSource.for_record_stream_format",
                 "pyflink.datastream.window.SessionWindowTimeGapExtractor.extract"):
        assert name in names, name


def test_the_table_covers_exactly_the_name_list():
    listed, expected = set(ROWS), {e["name"] for e in ENTRIES}
    assert not expected - listed, f"PyFlink names missing from docs/porting.md: {sorted(expected - listed)[:20]}"
    assert not listed - expected, f"rows of names PyFlink does not have: {sorted(listed - expected)[:20]}"


def test_a_differing_name_says_how():
    silent = [name for name, (status, note) in ROWS.items() if status == "differs" and not note]
    assert not silent, silent


@pytest.mark.parametrize("status", ["supported", "differs"])
def test_names_marked_supported_exist_here(status):
    missing = [name for name, (s, _) in ROWS.items() if s == status and not TABLE.offered(name)]
    assert not missing, f"marked {status} but not in airflow_flinkchain: {missing[:20]}"


def test_classes_marked_supported_are_importable_from_pyflinks_other_modules():
    missing = [(e["name"], alias) for e in ENTRIES if ROWS.get(e["name"], ("",))[0] == "supported"
               for alias in e.get("aliases", []) if TABLE.resolve(alias) is None]
    assert not missing, missing[:20]


def test_names_marked_not_supported_do_not_exist_here():
    present = [name for name, (s, _) in ROWS.items() if s == "not supported" and TABLE.offered(name)]
    assert not present, f"marked not supported but offered by airflow_flinkchain: {present[:20]}"


def test_the_page_is_in_the_site_and_the_readme():
    assert "porting.md" in (ROOT / "mkdocs.yml").read_text()
    assert "(docs/porting.md)" in (ROOT / "README.md").read_text()
