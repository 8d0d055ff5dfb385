"""How a bounded file source's rows are split among its subtasks, the same on every runner.

The files are taken in name order as one sequence of rows; subtask k of p reads the
contiguous share [k*n/p, (k+1)*n/p) of it. Where that share crosses a file boundary it
holds several splits (one piece of each file), read one after another: each is in the
file's order, so records in order within their file are never late (`core.splits`).
"""

from __future__ import annotations

from typing import Sequence


def subtask_pieces(file_rows: Sequence[int], subtask: int, parallelism: int) -> list[tuple[int, int, int]]:
    """Subtask `subtask`'s splits: (file index, first row, end row) within each file, in order."""
    total = sum(file_rows)
    start = subtask * total // parallelism
    end = (subtask + 1) * total // parallelism
    pieces, offset = [], 0
    for i, rows in enumerate(file_rows):
        lo, hi = max(start, offset), min(end, offset + rows)
        if lo < hi:
            pieces.append((i, lo - offset, hi - offset))
        offset += rows
    return pieces
