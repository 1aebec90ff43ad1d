"""Gold M2 edits from a tokenised (source, corrected) sentence pair, for any language.

One minimum-cost Levenshtein alignment (insertion = deletion = substitution = 1, match = 0) is
traced back from ``(n, m)`` preferring match/substitution, then deletion, then insertion; every
maximal run of non-matching steps becomes one edit ``source[start:end] -> target[j:l]``. Each
edit's operation type follows ERRANT's top tier: ``M`` missing (insertion), ``U`` unnecessary
(deletion), ``R`` replacement. Applying the edits to the source gives the target back.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

AlignedEdit = Tuple[int, int, str, str]  # (start, end, operation type, correction)


def align_edits(source: Sequence[str], target: Sequence[str]) -> List[AlignedEdit]:
    """Edits turning ``source`` into ``target``, in source order (see the module docstring)."""
    n, m = len(source), len(target)
    table = [list(range(m + 1))]
    for i in range(1, n + 1):
        above, row = table[-1], [i] * (m + 1)
        for j in range(1, m + 1):
            row[j] = min(above[j - 1] + (source[i - 1] != target[j - 1]), above[j] + 1, row[j - 1] + 1)
        table.append(row)
    steps: List[Tuple[int, int, bool]] = []  # (i, j) before the step, and whether it is a match
    i, j = n, m
    while i or j:
        if i and j and table[i - 1][j - 1] + (source[i - 1] != target[j - 1]) == table[i][j]:
            i, j = i - 1, j - 1
            steps.append((i, j, source[i] == target[j]))
        elif i and table[i - 1][j] + 1 == table[i][j]:
            i -= 1
            steps.append((i, j, False))
        else:
            j -= 1
            steps.append((i, j, False))
    edits: List[AlignedEdit] = []
    run_start = None
    for i, j, is_match in [*reversed(steps), (n, m, True)]:  # a final match closes the last run
        if not is_match and run_start is None:
            run_start = (i, j)
        elif is_match and run_start is not None:
            start, target_start = run_start
            deleted, inserted = i - start, j - target_start
            operation = "M" if not deleted else "U" if not inserted else "R"
            edits.append((start, i, operation, " ".join(target[target_start:j])))
            run_start = None
    return edits
