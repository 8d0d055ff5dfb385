"""Names that become path segments: DAG ids, run ids, operator keys (from
uids and names), edge and chain ids, `collect(name)` names, attempt ids.

`path_segment` is the one place that decides how such a name appears on a
file system; the Airflow tasks and the chain runtime both go through it (via
`runtime.exchange.layout.ExchangeArea`), so they always agree on a path.

- A name that would be read as a path is refused: empty, `.`, `..`, or
  holding a path separator (`/`, `\\`) or a NUL. Otherwise an earlier output,
  the run's parent directory or a path outside the exchange root would be
  replaced or deleted.
- Characters outside `[A-Za-z0-9._-]` (Airflow run ids hold `:` and `+`) are
  replaced by `_`, and a hash of the original is appended, so two names
  never share a segment.
- A name longer than `MAX_SEGMENT_LENGTH` keeps a readable prefix and the
  hash: file systems refuse names over 255 bytes, and the layout adds
  prefixes and suffixes (`.json`, hidden staging siblings).

Pure Python (no imports of the package), usable from every layer.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

#: Longest segment made from a name; leaves room under NAME_MAX (255 bytes) for
#: what the layout adds around it (".json", ".{name}.flinkchain-{attempt}").
MAX_SEGMENT_LENGTH = 120
#: Hex digits of sha1 appended to changed names (stable across processes, unlike hash()).
HASH_LENGTH = 6

_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9._-]")
_SEPARATORS = ("/", "\\", "\0")


class UnsafeNameError(ValueError):
    """A name that would be read as a path (see the module doc)."""


def check_name(value: Any, what: str) -> str:
    """`value` if it can name one directory; else UnsafeNameError naming `what`
    (e.g. "operator 'parse': uid") and the fix."""
    if not isinstance(value, str) or not value.strip():
        raise UnsafeNameError(f"{what} must be a non-empty string, got {value!r}: give it a name")
    if value in (".", ".."):
        raise UnsafeNameError(
            f"{what} {value!r} would name the current or the parent directory: use a name with a letter or digit")
    if any(sep in value for sep in _SEPARATORS):
        raise UnsafeNameError(
            f"{what} {value!r} holds a path separator: it names one directory, not a path. "
            "Use '_' or '-' instead of '/' and '\\'")
    return value


def path_segment(value: Any, what: str = "name") -> str:
    """The path segment of a name: the name itself when path-safe and short,
    else its safe characters and a hash (see the module doc).

    >>> path_segment("scheduled__2026-01-02")
    'scheduled__2026-01-02'
    >>> path_segment("manual__2026-01-02T03:04:05+00:00")
    'manual__2026-01-02T03_04_05_00_00-0d530c'
    """
    check_name(value, what)
    if len(value) <= MAX_SEGMENT_LENGTH and _SAFE.match(value):
        return value
    return _with_hash(_UNSAFE_CHAR.sub("_", value), value)


def shortened(name: str, original: str = "", limit: int = MAX_SEGMENT_LENGTH) -> str:
    """`name` when it fits in `limit` characters, else a prefix of it and the
    hash of `original` (default: `name`), so distinct long names stay distinct.
    For readable ids that become paths and task ids (operator keys)."""
    return name if len(name) <= limit else _with_hash(name, original or name, limit)


def _with_hash(readable: str, original: str, limit: int = MAX_SEGMENT_LENGTH) -> str:
    # sha1, not hash(): str hashes differ between processes (workers re-parse).
    digest = hashlib.sha1(original.encode()).hexdigest()[:HASH_LENGTH]
    return f"{readable[:limit - HASH_LENGTH - 1]}-{digest}"
