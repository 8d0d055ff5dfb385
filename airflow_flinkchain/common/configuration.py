"""`Configuration`, named as PyFlink's `pyflink.common.configuration`: string keys to values,
given to `StreamExecutionEnvironment.get_execution_environment(configuration)`.

>>> c = Configuration().set_integer("parallelism.default", 2)
>>> c.get_integer("parallelism.default", 1), c.get_string("missing", "x"), c.to_dict()
(2, 'x', {'parallelism.default': '2'})
"""

from __future__ import annotations

from typing import Any, Optional


class Configuration:
    """Key/value settings; values are kept as strings as Flink's Configuration shows them."""

    def __init__(self, other: Optional["Configuration"] = None):
        self._values: dict[str, str] = dict(other._values) if other is not None else {}

    @staticmethod
    def from_dict(values: dict) -> "Configuration":
        c = Configuration()
        for k, v in values.items():
            c.set_string(k, v)
        return c

    def _set(self, key: str, value: Any) -> "Configuration":
        self._values[str(key)] = value if isinstance(value, str) else (
            ("true" if value else "false") if isinstance(value, bool) else str(value))
        return self

    def set_string(self, key: str, value: str) -> "Configuration":
        return self._set(key, value)

    def set_integer(self, key: str, value: int) -> "Configuration":
        return self._set(key, int(value))

    def set_float(self, key: str, value: float) -> "Configuration":
        return self._set(key, float(value))

    def set_boolean(self, key: str, value: bool) -> "Configuration":
        return self._set(key, bool(value))

    def get_string(self, key: str, default_value: Optional[str] = None) -> Optional[str]:
        return self._values.get(key, default_value)

    def get_integer(self, key: str, default_value: int) -> int:
        return int(self._values[key]) if key in self._values else default_value

    def get_float(self, key: str, default_value: float) -> float:
        return float(self._values[key]) if key in self._values else default_value

    def get_boolean(self, key: str, default_value: bool) -> bool:
        return self._values[key].lower() == "true" if key in self._values else default_value

    def contains_key(self, key: str) -> bool:
        return key in self._values

    def key_set(self) -> set:
        return set(self._values)

    def remove_config(self, key: str) -> bool:
        return self._values.pop(key, None) is not None

    def add_all(self, other: "Configuration", prefix: Optional[str] = None) -> "Configuration":
        for k, v in other._values.items():
            self._values[(prefix or "") + k] = v
        return self

    def to_dict(self) -> dict:
        return dict(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and other._values == self._values

    def __repr__(self) -> str:
        return f"Configuration({self._values!r})"
