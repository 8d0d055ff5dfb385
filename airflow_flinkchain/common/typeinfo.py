"""Type information, named as PyFlink's `pyflink.common.typeinfo` (`Types`, `TypeInformation`).

A stream declared with a PyFlink type (`output_type=` / `type_info=`) gets its records
as PyFlink hands them to the next Python function after its Java serializer: `coerce`
gives that value (a `Row` for ROW types, a tuple for TUPLE, a float rounded to float32
for FLOAT, ...). Records stay pickled between chains.

>>> Types.FLOAT().coerce(0.1)
0.10000000149011612
>>> Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()]).coerce((1, "a"))
Row(id=1, name='a')
>>> Types.TUPLE([Types.STRING(), Types.FLOAT()]).coerce(["a", 1.1])
('a', 1.100000023841858)
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any, Callable, Optional

from airflow_flinkchain.common.types import Row
from airflow_flinkchain.graph.errors import UnsupportedFeatureError

_FLOAT32 = struct.Struct("f")


def _float32(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _FLOAT32.unpack(_FLOAT32.pack(value))[0]
    return value


def _float64(value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _java_scientific(text: str) -> str:
    """Shortest digits `text` in Java's computerized scientific notation ("1.0E7", "-1.5E-4")."""
    sign, digits, exponent = Decimal(text).normalize().as_tuple()
    figures = "".join(map(str, digits))
    return f"{'-' if sign else ''}{figures[0]}.{figures[1:] or '0'}E{exponent + len(figures) - 1}"


def java_double_string(value: float, float32: bool = False) -> str:
    """Java's Double.toString (Float.toString when `float32`): the shortest digits that read back
    as the same value, decimal notation in [1e-3, 1e7), else "d.dddE[-]n"."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(float(value))
    if float32:
        for precision in range(1, 10):
            candidate = f"{value:.{precision}g}"
            if _float32(float(candidate)) == value:
                text = repr(float(candidate))
                break
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        if "e" in text:  # repr's own scientific form inside Java's decimal range cannot happen; be safe
            text = f"{float(text):f}".rstrip("0")
        return text if "." in text else text + ".0"
    return _java_scientific(text)


class TypeInformation:
    """Type of a stream's records or a state's values."""

    def coerce(self, value: Any) -> Any:
        """`value` as PyFlink returns it after serializing it with this type."""
        return value

    def java_string(self, value: Any) -> str:
        """`value` as Flink prints it (`print()`, `Encoder.simple_string_encoder()`): Java's
        toString of the value this type serializes to."""
        return _java_object_string(value)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))


class BasicTypeInfo(TypeInformation):
    def __init__(self, name: str, arrow: Optional[str]):
        self.name = name
        self.arrow = arrow  # pyarrow alias of the column, None when records stay pickled

    def coerce(self, value: Any) -> Any:
        if self.name == "FLOAT":
            return _float32(value)
        if self.name == "DOUBLE":
            return _float64(value)
        return value

    def java_string(self, value: Any) -> str:
        if isinstance(value, float) and self.name in ("FLOAT", "DOUBLE"):
            return java_double_string(value, float32=self.name == "FLOAT")
        return _java_object_string(value)

    def __repr__(self) -> str:
        return f"Types.{self.name}()"


class PickledBytesTypeInfo(BasicTypeInfo):
    """Any picklable Python value (PyFlink's default record type); printed as `str(value)`."""

    def __init__(self) -> None:
        super().__init__("PICKLED_BYTE_ARRAY", None)

    def java_string(self, value: Any) -> str:
        return record_string(value)


def _java_object_string(value: Any) -> str:
    """Java's toString of a value of no declared type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_string(value)
    return str(value)


def _fields(value: Any, n: int, what: str) -> list:
    if isinstance(value, Row):
        values = list(value)
    elif isinstance(value, (tuple, list)):
        values = list(value)
    else:
        raise TypeError(f"a {what} record must be a tuple, list or Row of {n} fields, got {value!r}")
    if len(values) != n:
        raise TypeError(f"a {what} record must have {n} fields, got {len(values)}: {value!r}")
    return values


class RowTypeInfo(TypeInformation):
    def __init__(self, field_types: list, field_names: Optional[list] = None):
        self.field_types = list(field_types)
        self.named = field_names is not None
        self.field_names = list(field_names) if field_names is not None else [f"f{i}" for i in range(len(field_types))]
        if len(self.field_names) != len(self.field_types):
            raise ValueError(f"ROW_NAMED: {len(self.field_names)} names for {len(self.field_types)} types")

    def get_field_names(self) -> list:
        return list(self.field_names)

    def get_field_types(self) -> list:
        return list(self.field_types)

    def coerce(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, dict):
            values = [value.get(n) for n in self.field_names]
        elif isinstance(value, Row) and value.has_field_names() and \
                set(value.get_field_names()) == set(self.field_names):
            values = [value[n] for n in self.field_names]  # by name, as PyFlink's named rows
        else:
            values = _fields(value, len(self.field_types), "ROW")
        row = Row(*(t.coerce(v) for t, v in zip(self.field_types, values)))
        row.set_field_names(list(self.field_names))
        if isinstance(value, Row):
            row.set_row_kind(value.get_row_kind())
        return row

    def java_string(self, value: Any) -> str:
        """Flink's Row.toString: "+I[1,a]"."""
        row = self.coerce(value)
        fields = ",".join(t.java_string(v) for t, v in zip(self.field_types, row))
        return f"{row.get_row_kind()}[{fields}]"

    def __repr__(self) -> str:
        return f"RowTypeInfo({self.field_names}, {self.field_types})"


class TupleTypeInfo(TypeInformation):
    def __init__(self, field_types: list):
        self.field_types = list(field_types)

    def get_field_types(self) -> list:
        return list(self.field_types)

    def coerce(self, value: Any) -> Any:
        if value is None:
            return None
        return tuple(t.coerce(v) for t, v in zip(self.field_types, _fields(value, len(self.field_types), "TUPLE")))

    def java_string(self, value: Any) -> str:
        """Flink's Tuple.toString: "(a,1)"."""
        return "(" + ",".join(t.java_string(v) for t, v in zip(self.field_types, self.coerce(value))) + ")"

    def __repr__(self) -> str:
        return f"TupleTypeInfo({self.field_types})"


class ListTypeInfo(TypeInformation):
    """LIST, BASIC_ARRAY, PRIMITIVE_ARRAY, OBJECT_ARRAY: a Python list of the element type."""

    def __init__(self, element_type: TypeInformation, kind: str = "LIST"):
        self.element_type = element_type
        self.kind = kind

    def coerce(self, value: Any) -> Any:
        if value is None:
            return None
        return [self.element_type.coerce(v) for v in value]

    def java_string(self, value: Any) -> str:
        return "[" + ", ".join(self.element_type.java_string(v) for v in self.coerce(value)) + "]"

    def __repr__(self) -> str:
        return f"Types.{self.kind}({self.element_type!r})"


class MapTypeInfo(TypeInformation):
    def __init__(self, key_type: TypeInformation, value_type: TypeInformation):
        self.key_type = key_type
        self.value_type = value_type

    def coerce(self, value: Any) -> Any:
        if value is None:
            return None
        return {self.key_type.coerce(k): self.value_type.coerce(v) for k, v in value.items()}

    def java_string(self, value: Any) -> str:
        items = self.coerce(value).items()
        pairs = (f"{self.key_type.java_string(k)}={self.value_type.java_string(v)}" for k, v in items)
        return "{" + ", ".join(pairs) + "}"

    def __repr__(self) -> str:
        return f"Types.MAP({self.key_type!r}, {self.value_type!r})"


def record_string(value: Any, type_info: Optional[TypeInformation] = None) -> str:
    """A record as Flink prints and string-encodes it: Java's toString of its declared PyFlink
    type, `str(value)` for Python objects (PyFlink's PICKLED_BYTE_ARRAY default)."""
    if type_info is not None:
        return type_info.java_string(value)
    return value if isinstance(value, str) else str(value)


def _basic(name: str, arrow: Optional[str]) -> Callable[[], BasicTypeInfo]:
    info = BasicTypeInfo(name, arrow)
    return staticmethod(lambda: info)


def _unsupported(name: str, instead: str) -> Callable[[], BasicTypeInfo]:
    def factory(*args: Any, **kwargs: Any) -> BasicTypeInfo:
        raise UnsupportedFeatureError(f"Types.{name}()", instead)
    return staticmethod(factory)


class Types:
    """PyFlink's type information factory (`Types.INT()`, `Types.ROW_NAMED([...], [...])`, ...)."""

    STRING = _basic("STRING", "string")
    BYTE = _basic("BYTE", "int8")
    BOOLEAN = _basic("BOOLEAN", "bool")
    SHORT = _basic("SHORT", "int16")
    INT = _basic("INT", "int32")
    LONG = _basic("LONG", "int64")
    FLOAT = _basic("FLOAT", "float")
    DOUBLE = _basic("DOUBLE", "double")
    CHAR = _basic("CHAR", "string")
    BIG_INT = _basic("BIG_INT", None)
    BIG_DEC = _unsupported("BIG_DEC", "Declare Types.PICKLED_BYTE_ARRAY() and keep decimal.Decimal values, "
                                      "or Types.DOUBLE().")
    INSTANT = _basic("INSTANT", "timestamp[ms]")
    SQL_DATE = _basic("SQL_DATE", "date32")
    SQL_TIME = _basic("SQL_TIME", "time64[us]")
    SQL_TIMESTAMP = _basic("SQL_TIMESTAMP", "timestamp[us]")
    LOCAL_DATE = _basic("LOCAL_DATE", "date32")
    LOCAL_TIME = _basic("LOCAL_TIME", "time64[us]")
    LOCAL_DATE_TIME = _basic("LOCAL_DATE_TIME", "timestamp[us]")
    PICKLED_BYTE_ARRAY = staticmethod(lambda _info=PickledBytesTypeInfo(): _info)
    VOID = _basic("VOID", None)

    @staticmethod
    def ROW(field_types: list) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: list, field_types: list) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: list) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type_info)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type, "PRIMITIVE_ARRAY")

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type, "BASIC_ARRAY")

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type, "OBJECT_ARRAY")

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> MapTypeInfo:
        return MapTypeInfo(key_type_info, value_type_info)


def to_output_type(type_info: Any, where: str = "stream") -> Any:
    """What `parse_output_type` accepts for a PyFlink type: a `ROW_NAMED` of basic types becomes
    the dict {field: pyarrow alias} (records are then dicts with these keys); every other type
    keeps records pickled (None). Anything that is not a TypeInformation passes unchanged.
    Used for columnar outputs (batch operators, asset schemas)."""
    if not isinstance(type_info, TypeInformation):
        return type_info
    if isinstance(type_info, RowTypeInfo) and type_info.named and type_info.field_types and all(
            isinstance(t, BasicTypeInfo) and t.arrow is not None for t in type_info.field_types):
        return {n: t.arrow for n, t in zip(type_info.field_names, type_info.field_types)}
    return None
