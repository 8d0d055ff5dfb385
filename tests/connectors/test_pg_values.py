"""PostgreSQL text output -> Python values (pg_values), for the forms a single table does not
show: explicit array bounds, quoting and NULL, negative intervals, values Python cannot hold,
domains and arrays of types found in the catalog."""

from __future__ import annotations

import datetime

import pytest

from airflow_flinkchain.runtime.connectors.pg_values import PgValues, interval, parse_array


@pytest.mark.parametrize("text, element, want", [
    ("{}", int, []),
    ("{1,NULL,-3}", int, [1, None, -3]),
    ("[0:1]={5,6}", int, [5, 6]),
    ("{{1,2},{3,NULL}}", int, [[1, 2], [3, None]]),
    ('{"a,b","c\\"d","e\\\\f","NULL",NULL,""}', str, ["a,b", 'c"d', "e\\f", "NULL", None, ""]),
])
def test_arrays(text, element, want):
    assert parse_array(text, element) == want


def test_box_arrays_use_the_element_delimiter():
    assert parse_array("{(1,1),(0,0);(2,2),(1,1)}", str, ";") == ["(1,1),(0,0)", "(2,2),(1,1)"]


@pytest.mark.parametrize("text, want", [
    ("PT0S", datetime.timedelta(0)),
    ("P-1D", datetime.timedelta(days=-1)),
    ("P1Y2M-3DT4H5M6.789S", datetime.timedelta(days=365 + 60 - 3, hours=4, minutes=5, seconds=6.789)),
    ("PT-1.5S", datetime.timedelta(seconds=-1.5)),
])
def test_intervals(text, want):
    assert interval(text) == want


def test_values_python_cannot_hold_stay_text_and_catalog_types_resolve():
    looked_up = []

    def lookup(oids):  # (oid, typtype, typbasetype, typelem, element delimiter)
        looked_up.append(oids)
        rows = {90001: (90001, "d", 23, 0, ","), 90002: (90002, "b", 0, 90003, ","), 90003: (90003, "e", 0, 0, ","),
                90004: (90004, "d", 1184, 0, ",")}
        return [rows[o] for o in oids if o in rows]

    values = PgValues(lookup)
    date, ts, tm, dom, enums, dom_ts, gone = values.converters([1082, 1114, 1083, 90001, 90002, 90004, 90009])
    assert (date("infinity"), date("2000-01-01 BC"), ts("-infinity"), tm("24:00:00")) == \
        ("infinity", "2000-01-01 BC", "-infinity", "24:00:00")
    assert dom("7") == 7 and enums("{sad,happy}") == ["sad", "happy"] and gone("x") == "x"
    assert dom_ts("2024-01-02 03:04:05+00") == datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert values.decode(16, "t") is True and values.decode(16, None) is None
    values.converters([90001, 90002])
    assert looked_up == [[90001, 90002, 90004, 90009], [90003]]  # once per type, element types after
