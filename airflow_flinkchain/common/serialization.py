"""`Encoder`, named as PyFlink's `pyflink.common.serialization`: how a row-format file sink
writes a record.

>>> Encoder.simple_string_encoder()
Encoder.simple_string_encoder('UTF-8')
"""

from __future__ import annotations


class Encoder:
    """Writes each record as its string form (as `print()` shows it) and a newline, in `charset`
    (Flink's SimpleStringEncoder)."""

    def __init__(self, charset_name: str = "UTF-8"):
        "".encode(charset_name)  # an unknown charset fails here, when the pipeline is written
        self.charset_name = charset_name

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "Encoder":
        return Encoder(charset_name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Encoder) and other.charset_name == self.charset_name

    def __hash__(self) -> int:
        return hash(("Encoder", self.charset_name))

    def __repr__(self) -> str:
        return f"Encoder.simple_string_encoder({self.charset_name!r})"
