"""Errors of the chain runtime."""

from __future__ import annotations

from typing import Any

RECORD_REPR_LIMIT = 200


def truncated_repr(value: Any, limit: int = RECORD_REPR_LIMIT) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a broken __repr__ must not hide the real error
        text = f"<unrepresentable {type(value).__name__}: {exc!r}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: The phase of a failure outside every operator function: the chain's input (a source's reader,
#: an exchange file) or the runtime between operators. No record to route: on_error does not apply.
READ_INPUT = "read input"


class ChainExecutionError(RuntimeError):
    """A user function (or the runtime around it) failed inside a chain.

    The message names operator, chain, subtask, phase (setup/open/process/
    close/dispose) and the record (truncated repr); the original exception
    is `__cause__`."""

    def __init__(self, *, operator: str, chain: str, subtask: int, phase: str,
                 record: Any = None, has_record: bool = False, cause: BaseException = None):
        self.operator = operator
        self.chain = chain
        self.subtask = subtask
        self.phase = phase
        self.record_repr = truncated_repr(record) if has_record else None
        where = f"operator {operator!r} in chain {chain!r}, subtask {subtask}, during {phase}"
        what = f"{type(cause).__name__}: {cause}" if cause is not None else "failed"
        msg = f"{where}: {what}"
        if has_record:
            msg += f"; record: {self.record_repr}"
        if phase == "process":
            msg += (" (fix the function, or set on_error='dead_letter' / 'skip' on the operator"
                    " or the pipeline to route bad records aside)")
        elif phase == READ_INPUT:
            msg += (" (no operator function failed, so on_error, which routes the records a function fails "
                    "on, does not apply: fix the source's input or settings as the error says)")
        super().__init__(msg)


class PartitionerError(ValueError):
    """A custom partitioner returned a channel outside [0, num_channels)."""


class KeySelectorError(Exception):
    """A key selector failed on a record, or returned a key that cannot be grouped."""
