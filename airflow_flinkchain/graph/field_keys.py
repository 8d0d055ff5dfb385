"""Key selectors that select one field of a dict record (docs/vectorized.md, "Vectorized
aggregations"; planner/vectorized.py: the operators that take Arrow batches because of them).

A key selector is a *field key* when its result is `record[name]` for a constant str `name`
and nothing else: `operator.itemgetter("k")`, `lambda r: r["k"]`, a function or a
KeySelector's `get_key` whose whole body is `return value["k"]`. Over a batch of dict
records (one column per field) its key is then the column `name`, so keys can be grouped,
hashed to key groups and partitioned per column instead of per record. Anything else
(`r["k"].lower()`, `r[0]`, a closure) is called per record, as always.

>>> from operator import itemgetter
>>> field_key(itemgetter("k")), field_key(lambda r: r["k"]), field_key(lambda r: r[0])
('k', 'k', None)
"""

from __future__ import annotations

import dis
import operator
from typing import Any, Optional


_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_FAST_CHECK"})
_SKIP = frozenset({"RESUME", "NOP", "CACHE", "NOT_TAKEN"})


def field_key(selector: Any) -> Optional[str]:
    """The field name `selector` returns of a dict record, or None when it is not a field key."""
    if selector is None:
        return None
    if type(selector) is operator.itemgetter:
        items = selector.__reduce__()[1]
        return items[0] if len(items) == 1 and type(items[0]) is str else None
    get_key = getattr(selector, "get_key", None)
    if get_key is not None and not isinstance(selector, type):
        selector = get_key
    return _returned_field(selector, 1, False)


def timestamp_field(assigner: Any) -> Optional[str]:
    """The field a TimestampAssigner returns of a dict record: a callable `(value, ts)` given to
    `with_timestamp_assigner` (`lambda r, ts: r["ts"]`, a function whose body is only
    `return value["ts"]`) or an `extract_timestamp` that is only that; None otherwise."""
    fn = getattr(assigner, "_fn", None)  # with_timestamp_assigner(callable) wraps it
    if fn is None:
        fn = getattr(assigner, "extract_timestamp", None)
    if fn is None or isinstance(fn, type):
        return None
    return _returned_field(fn, 2, True)


def _returned_field(func: Any, nargs: int, defaults: bool) -> Optional[str]:
    """The name when `func(arg0, ...)` (nargs positional arguments, and when `defaults` more
    with default values) is only `return arg0[name]`."""
    skip = 0
    if hasattr(func, "__func__") and getattr(func, "__self__", None) is not None:
        func, skip = func.__func__, 1  # a bound method: its first argument is self
    code = getattr(func, "__code__", None)
    if code is None or code.co_flags & 0x0C:  # *args / **kwargs
        return None
    optional = len(getattr(func, "__defaults__", None) or ()) if defaults else 0
    if not code.co_argcount - optional <= skip + nargs <= code.co_argcount or code.co_kwonlyargcount:
        return None
    try:
        ops = [i for i in dis.get_instructions(func) if i.opname not in _SKIP]
    except Exception:  # pragma: no cover - an object dis cannot read
        return None
    if len(ops) != 4 or ops[0].opname not in _LOADS or ops[0].arg != skip or ops[1].opname != "LOAD_CONST":
        return None
    subscript = ops[2].opname == "BINARY_SUBSCR" or (ops[2].opname == "BINARY_OP" and ops[2].argrepr == "[]")
    name = ops[1].argval
    return name if subscript and ops[3].opname == "RETURN_VALUE" and type(name) is str else None
