"""How a bounded file source's rows are split among its subtasks, the same on every runner.

The files are taken in name order as one sequence of rows; subtask k of p reads the
contiguous share [k*n/p, (k+1)*n/p) of it. Where that share crosses a file boundary it
holds several splits (one piece of each file), read one after another: each is in the
file's order, so records in order within their file are never late (`core.splits`). A file
read by several subtasks is one split read piece after piece: each piece but the first goes on
from the previous subtask's (`pieces_layout`).
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


def pieces_layout(file_rows: Sequence[int], pieces: Sequence[tuple[int, int, int]]) -> tuple[bool, bool]:
    """(whether the first piece goes on from the previous subtask's, whether the last goes on in
    the next subtask's): one file read by consecutive subtasks, a piece each (`core.splits`)."""
    if not pieces:
        return False, False
    first, last = pieces[0], pieces[-1]
    return first[1] > 0, last[2] < file_rows[last[0]]
