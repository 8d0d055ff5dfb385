"""Record copies when object reuse is off (Flink's CopyingChainingOutput).

`copy_record(v)` has the semantics of `copy.deepcopy(v)` (the copy shares no
mutable object with `v`; aliasing and cycles inside `v` are preserved), made
cheap by dispatching on the exact type:

  * immutable scalars (`IMMUTABLE_TYPES`) are returned as they are;
  * a dict / list / set whose keys and items are all immutable scalars - the
    usual record - is copied shallowly in C (`dict.copy()`, `list(...)`): a
    shallow copy of such a container IS a deep copy;
  * nested dict / list / tuple / set / frozenset of builtins go through a
    recursive copier that keeps a deepcopy-compatible memo (so two references
    to one list in the record stay one list in the copy, and cycles work);
  * anything else (class instances, dict subclasses, ...) falls back to
    `copy.deepcopy` with that same memo, honouring `__deepcopy__`.

Tuples and frozensets are copied only when they hold something mutable.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import sys
from typing import Any

from airflow_flinkchain.runtime.core.accelerator import FLATCHECK

IMMUTABLE_TYPES = frozenset({
    int, float, str, bytes, bool, type(None), complex,
    decimal.Decimal, datetime.date, datetime.datetime, datetime.time, datetime.timedelta,
})

_IMM = IMMUTABLE_TYPES

# The optional C accelerator (accelerator.py; same answers as the loops below).
flat_immutable = None
flat_refcount = None  # -1, or the refcount of a flat dict (see _flatcheck.c); None when not built
if FLATCHECK is not None:
    FLATCHECK.set_immutable_types(IMMUTABLE_TYPES)
    flat_immutable = FLATCHECK.flat_immutable
    _probe = {"probe": 1}
    if FLATCHECK.flat_refcount(_probe) == sys.getrefcount(_probe):  # the RC_* calibration holds for it
        flat_refcount = FLATCHECK.flat_refcount
    del _probe
_all_immutable = _IMM.issuperset  # _all_immutable(map(type, items)): one C loop, no Python frame per item
_deepcopy = copy.deepcopy


def copy_record(value: Any) -> Any:
    """A copy of `value` with deepcopy semantics, or `value` itself when nothing in it can change."""
    t = type(value)
    if t in _IMM:
        return value
    if t is dict:  # a plain loop beats map + issuperset for record-sized dicts
        if flat_immutable is not None:
            return value.copy() if flat_immutable(value) else _copy_nested(value, {})
        for v in value.values():
            if type(v) not in _IMM:
                return _copy_nested(value, {})
        for k in value:
            if type(k) not in _IMM:
                return _copy_nested(value, {})
        return value.copy()
    elif t is list:
        if _all_immutable(map(type, value)):
            return value.copy()
    elif t is tuple or t is frozenset:
        if _all_immutable(map(type, value)):
            return value
    elif t is set:
        if _all_immutable(map(type, value)):
            return value.copy()
    return _copy_nested(value, {})


def _copy_nested(value: Any, memo: dict) -> Any:
    t = type(value)
    if t in _IMM:
        return value
    done = memo.get(id(value))
    if done is not None:
        return done
    if t is dict:
        out: Any = {}
        memo[id(value)] = out
        for k, v in value.items():
            out[k if type(k) in _IMM else _copy_nested(k, memo)] = v if type(v) in _IMM else _copy_nested(v, memo)
    elif t is list:
        out = []
        memo[id(value)] = out
        out.extend([v if type(v) in _IMM else _copy_nested(v, memo) for v in value])
    elif t is tuple:
        items = [v if type(v) in _IMM else _copy_nested(v, memo) for v in value]
        # a tuple can only reach itself through a mutable container, which is in the memo by now
        done = memo.get(id(value))
        if done is not None:
            return done
        out = value if all(a is b for a, b in zip(items, value)) else tuple(items)
        memo[id(value)] = out
    elif t is set or t is frozenset:
        items = [v if type(v) in _IMM else _copy_nested(v, memo) for v in value]
        out = value if t is frozenset and all(a is b for a, b in zip(items, value)) else t(items)
        memo[id(value)] = out
    else:
        return _deepcopy(value, memo)  # deepcopy's memo is {id(original): copy}, the same as ours
    _keep_alive(value, memo)
    return out


def _keep_alive(value: Any, memo: dict) -> None:
    # as copy._keep_alive: the originals must outlive the copy, or their ids could be reused
    try:
        memo[id(memo)].append(value)
    except KeyError:
        memo[id(memo)] = [value]


# ---- copy elision for records nobody else references -----------------------
# A value whose only references are the generated chain code's own locals
# cannot be mutated later by anyone but the operator it is handed to, so
# copying it would be unobservable. CPython's refcount tells exactly that;
# RC_PRIVATE is sys.getrefcount of a value held by one local variable
# (calibrated here; None on interpreters without refcounts: never elide).

# RC_ITEM / RC_SEQ: the same for an item of a list or tuple being iterated
# by a `for` loop (the sequence holds one more reference to the item; the
# loop's iterator one more to the sequence). RC_ITEM_LOCAL: such an item that
# one more local variable holds (a flat_map emitting its own input record).

def _calibrate() -> tuple:
    getrefcount = getattr(sys, "getrefcount", None)
    if getrefcount is None or sys.implementation.name != "cpython":
        return None, None, None, None
    v = {"probe": 1}
    private = getrefcount(v)
    local = {"probe": 1}
    for item in [local]:
        item_local = getrefcount(item)
    seq = [{"probe": 1}]
    for item in seq:
        return private, getrefcount(item), getrefcount(seq), item_local
    raise AssertionError


RC_PRIVATE, RC_ITEM, RC_SEQ, RC_ITEM_LOCAL = _calibrate()
