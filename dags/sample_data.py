"""The bundled sample data set of the example pipelines, generated deterministically.

Small (a few hundred records), seeded, so every machine and every run sees the
same records. Generated on demand by the pipelines' on_setup hooks (never at
import: the example files must import fast and without I/O) into
`{root}/sample/`. Also usable from tests and notebooks.

`root()` is where the examples keep their sample data, outputs and checkpoints:
`$FLINKCHAIN_EXAMPLES_ROOT`, a path or an object store URI such as
`s3://bucket/flinkchain` (written through `pyarrow.fs`, configured the standard AWS
way), else `$AIRFLOW_HOME/flinkchain`. The SQLite database of the SQL sinks stays in
`$AIRFLOW_HOME/flinkchain/` (the Airflow side writes it).
"""

from __future__ import annotations

import csv
import io
import json
import os
import random

import pendulum

CLICK_COLUMNS = ("event_id", "ts", "user_id", "event_type", "url", "user_agent", "amount")
EVENT_TYPES = ("view", "click", "purchase")
BOT_AGENTS = ("Googlebot/2.1", "AhrefsBot/7.0", "python-requests/2.31")
HUMAN_AGENTS = ("Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (Macintosh)", "Mozilla/5.0 (iPhone)")


def home() -> str:
    return os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")


def example_dag_args(*tags: str) -> dict:
    """The DAG arguments every example shares (plus its own `tags`)."""
    return {"start_date": pendulum.datetime(2026, 1, 1, tz="UTC"), "catchup": False,
            "tags": ["flinkchain", "example", *tags]}


ROOT_ENV = "FLINKCHAIN_EXAMPLES_ROOT"


def root() -> str:
    return os.environ.get(ROOT_ENV) or os.path.join(home(), "flinkchain")


def join(base: str, *parts: str) -> str:
    """`base/parts...` for a path or a URI."""
    return "/".join([base.rstrip("/"), *parts]) if "://" in base else os.path.join(base, *parts)


def filesystem(location: str):
    """(pyarrow filesystem, path on it) of a path or URI."""
    import pyarrow.fs as pafs

    return pafs.FileSystem.from_uri(location if "://" in location else os.path.abspath(location))


def exists(location: str) -> bool:
    import pyarrow.fs as pafs

    fs, path = filesystem(location)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def write_text(location: str, text: str) -> str:
    """Write one file (its parent directory made first); return its location."""
    import pyarrow.fs as pafs

    fs, path = filesystem(location)
    if isinstance(fs, pafs.LocalFileSystem):  # an object store has no directories to make
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as f:
        f.write(text.encode())
    return location


def _write_once(directory: str, files: dict) -> str:
    """The files {name: text} into `directory`, then `_SUCCESS`; nothing when `_SUCCESS` exists."""
    if not exists(join(directory, "_SUCCESS")):
        for name, text in files.items():
            write_text(join(directory, name), text)
        write_text(join(directory, "_SUCCESS"), "")
    return directory


def sample_dir() -> str:
    return join(root(), "sample")


def output_dir() -> str:
    return join(root(), "output")


def sqlite_path() -> str:
    return os.path.join(home(), "flinkchain", "examples.db")


def sqlite_url() -> str:
    return "sqlite:///" + sqlite_path()


def clickstream_rows(n: int = 400, seed: int = 7) -> list[dict]:
    """Click events of 25 users; ~10% bots, ~5% malformed (bad user, time, type or amount)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        user = f"u{rng.randrange(25):02d}"
        kind = rng.choices(EVENT_TYPES, weights=(6, 3, 1))[0]
        row = {
            "event_id": f"e{i:05d}",
            "ts": f"2026-01-01T{(i * 7) // 3600 % 24:02d}:{(i * 7) // 60 % 60:02d}:{(i * 7) % 60:02d}Z",
            "user_id": user,
            "event_type": kind,
            "url": f"/p/{rng.randrange(40)}",
            "user_agent": rng.choice(BOT_AGENTS) if rng.random() < 0.1 else rng.choice(HUMAN_AGENTS),
            "amount": f"{rng.randrange(500, 20000) / 100:.2f}" if kind == "purchase" else "",
        }
        fault = rng.random()
        if fault < 0.0125:
            row["user_id"] = ""
        elif fault < 0.025:
            row["ts"] = "yesterday"
        elif fault < 0.0375:
            row["event_type"] = "hover"
        elif fault < 0.05 and kind == "purchase":
            row["amount"] = "-1"
        rows.append(row)
    return rows


def order_rows(n: int = 300, seed: int = 11) -> list[dict]:
    """Orders of 12 customers over 3 regions; some delivered late, a few invalid."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        promised = rng.randrange(1, 6)
        rows.append({
            "order_id": i,
            "customer": f"c{rng.randrange(12):02d}",
            "region": rng.choice(("eu", "us", "apac")),
            "quantity": rng.randrange(0, 6) if rng.random() < 0.05 else rng.randrange(1, 6),
            "unit_price": round(rng.uniform(2, 80), 2),
            "promised_days": promised,
            "delivered_days": promised + rng.choice((0, 0, 0, 1, 3)),
        })
    return rows


SENSORS = ("s01", "s02", "s03")
#: 2026-01-01T00:00:00Z in epoch milliseconds: the sensor readings' first minute.
SENSOR_START_MS = 1767225600000


def sensor_readings(minutes: int = 8, seed: int = 5) -> list[dict]:
    """Temperature readings of 3 sensors every 2-6 s of event time (`ts`, epoch ms), in arrival
    order: most arrive up to 4 s out of order, ~4% 25-90 s late; s02 runs hot (+25 degrees, with
    a few normal readings between) in minutes 3-5.
    Built in memory (no I/O), so a DAG file may call it at parse time."""
    rng = random.Random(seed)
    readings = []
    for sensor in SENSORS:
        temperature, ts = 70.0 + rng.uniform(-5, 5), SENSOR_START_MS + rng.randrange(3000)
        while ts < SENSOR_START_MS + minutes * 60_000:
            temperature = min(max(temperature + rng.uniform(-2, 2), 62.0), 78.0)
            minute = (ts - SENSOR_START_MS) // 60_000
            hot = 25.0 if sensor == "s02" and 3 <= minute < 5 and rng.random() > 0.15 else 0.0
            delay = rng.randrange(25_000, 90_000) if rng.random() < 0.04 else rng.randrange(4000)
            readings.append((ts + delay, {"sensor": sensor, "temperature": round(temperature + hot, 1), "ts": ts}))
            ts += rng.randrange(2000, 6000)
    return [r for _arrival, r in sorted(readings, key=lambda a: (a[0], a[1]["sensor"]))]


TIERS = ("bronze", "silver", "gold")
ENRICHMENT_RULES = ({"name": "discount:gold", "value": 0.10}, {"name": "discount:silver", "value": 0.05},
                    {"name": "review_above", "value": 400.0}, {"name": "discount:silver", "value": 0.04})


def enrichment_orders(n: int = 240, seed: int = 5) -> list[dict]:
    """Orders of 10 customers, one per second of event time (`ts`, ms), arriving up to 3 s out of order."""
    rng = random.Random(seed)
    rows = [{"order_id": i, "customer": f"k{rng.randrange(10):02d}", "amount": round(rng.uniform(5, 500), 2),
             "ts": 1_000 * i + rng.randrange(0, 1_000)} for i in range(n)]
    return sorted(rows, key=lambda r: r["ts"] + rng.randrange(0, 3_000))


def enrichment_customers(seed: int = 6) -> list[dict]:
    """Tier versions of customers k00..k08 (`valid_from`, ms): a first tier at 0, then up to two
    changes; k09 has no version (its orders stay unenriched)."""
    rng = random.Random(seed)
    rows = []
    for c in range(9):
        rows.append({"customer": f"k{c:02d}", "tier": rng.choice(TIERS), "valid_from": 0})
        for _ in range(rng.randrange(0, 3)):
            rows.append({"customer": f"k{c:02d}", "tier": rng.choice(TIERS), "valid_from": rng.randrange(1, 240) * 1_000})
    return sorted(rows, key=lambda r: r["valid_from"] + rng.randrange(0, 2_000))


def write_json_lines(path: str, rows) -> str:
    """Write `rows` as one JSON lines file in `path` once; return the directory."""
    return _write_once(path, {"part-0.json": "".join(json.dumps(r) + "\n" for r in rows)})


def write_enrichment(directory: str) -> str:
    """Write the enrichment example's orders, customers and rules (JSON lines) once; return its directory."""
    path = join(directory, "enrichment")
    write_json_lines(join(path, "orders"), enrichment_orders())
    write_json_lines(join(path, "customers"), enrichment_customers())
    write_json_lines(join(path, "rules"), ENRICHMENT_RULES)
    return path


def write_clickstream(directory: str) -> str:
    """Write clickstream CSV files (two parts) once; return the directory."""
    rows = clickstream_rows()
    files = {}
    for part in range(2):
        fh = io.StringIO(newline="")
        w = csv.DictWriter(fh, fieldnames=CLICK_COLUMNS)
        w.writeheader()
        w.writerows(rows[part::2])
        files[f"part-{part}.csv"] = fh.getvalue()
    return _write_once(join(directory, "clickstream"), files)


def write_orders(directory: str) -> str:
    """Write orders as JSON lines once; return the directory."""
    return _write_once(join(directory, "orders"), {"orders.json": "".join(json.dumps(r) + "\n" for r in order_rows())})


def ensure_sample_data() -> str:
    """Generate every sample file (idempotent) and the SQLite database's folder (the examples' root
    may be elsewhere); return the sample directory."""
    os.makedirs(os.path.dirname(sqlite_path()), exist_ok=True)
    d = sample_dir()
    write_clickstream(d)
    write_orders(d)
    write_enrichment(d)
    return d
