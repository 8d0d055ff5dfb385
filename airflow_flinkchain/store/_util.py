"""Small helpers shared by the store's writer and readers."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Optional


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def to_db_time(value: Any) -> Optional[datetime]:
    """ISO string or datetime -> naive UTC (the store keeps UTC without tzinfo,
    the same on every backend). Naive inputs are taken as UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def from_db_time(value: Optional[datetime]) -> Optional[str]:
    return None if value is None else value.replace(tzinfo=timezone.utc).isoformat()


def canonical_json(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)


def plan_hash(plan: dict) -> str:
    return hashlib.sha256(canonical_json(plan).encode()).hexdigest()
