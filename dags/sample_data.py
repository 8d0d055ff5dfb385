"""The bundled sample data set of the example pipelines, generated deterministically.

Small (a few hundred records), seeded, so every machine and every run sees the
same records. Generated on demand by the pipelines' on_setup hooks (never at
import: the example files must import fast and without I/O) into
`$AIRFLOW_HOME/flinkchain/sample/`. Also usable from tests and notebooks.
"""

from __future__ import annotations

import csv
import json
import os
import random

CLICK_COLUMNS = ("event_id", "ts", "user_id", "event_type", "url", "user_agent", "amount")
EVENT_TYPES = ("view", "click", "purchase")
BOT_AGENTS = ("Googlebot/2.1", "AhrefsBot/7.0", "python-requests/2.31")
HUMAN_AGENTS = ("Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (Macintosh)", "Mozilla/5.0 (iPhone)")


def home() -> str:
    return os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")


def sample_dir() -> str:
    return os.path.join(home(), "flinkchain", "sample")


def output_dir() -> str:
    return os.path.join(home(), "flinkchain", "output")


def sqlite_url() -> str:
    return "sqlite:///" + os.path.join(home(), "flinkchain", "examples.db")


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


def write_clickstream(directory: str) -> str:
    """Write clickstream CSV files (two parts) once; return the directory."""
    path = os.path.join(directory, "clickstream")
    if not os.path.exists(os.path.join(path, "_SUCCESS")):
        os.makedirs(path, exist_ok=True)
        rows = clickstream_rows()
        for part in range(2):
            with open(os.path.join(path, f"part-{part}.csv"), "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=CLICK_COLUMNS)
                w.writeheader()
                w.writerows(rows[part::2])
        open(os.path.join(path, "_SUCCESS"), "w").close()
    return path


def write_orders(directory: str) -> str:
    """Write orders as JSON lines once; return the directory."""
    path = os.path.join(directory, "orders")
    if not os.path.exists(os.path.join(path, "_SUCCESS")):
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "orders.json"), "w") as fh:
            for r in order_rows():
                fh.write(json.dumps(r) + "\n")
        open(os.path.join(path, "_SUCCESS"), "w").close()
    return path


def ensure_sample_data() -> str:
    """Generate every sample file (idempotent); return the sample directory."""
    d = sample_dir()
    write_clickstream(d)
    write_orders(d)
    return d
