"""BLAST's tabulated nucleotide scoring systems (s_GetNuclValuesArray): for each
(reward, penalty), the gap costs it supports with their Karlin-Altschul parameters, and the
check that a search's scores are among them. Numpy-free: the command line checks its options
with it before any search module is imported."""

import functools
import math
from dataclasses import dataclass

from .errors import OptionsError

# Rows: (open, extend, lambda, K, H, alpha, beta). A first row of (0, 0) is the linear
# (megablast, greedy) entry, kept apart from the affine rows as BLAST does.

@dataclass(frozen=True)
class _ScoringTable:
    rows: tuple
    infinite_open: int    # gap costs at or above both of these use the ungapped block
    infinite_extend: int
    round_down: bool      # odd scores count as the even score below for E-values


_TABLES = {
    (1, -5): _ScoringTable(((0, 0, 1.39, 0.747, 1.38, 1.00, 0),
                            (3, 3, 1.39, 0.747, 1.38, 1.00, 0)), 3, 3, False),
    (1, -4): _ScoringTable(((0, 0, 1.383, 0.738, 1.36, 1.02, 0),
                            (1, 2, 1.36, 0.67, 1.2, 1.1, 0),
                            (0, 2, 1.26, 0.43, 0.90, 1.4, -1),
                            (2, 1, 1.35, 0.61, 1.1, 1.2, -1),
                            (1, 1, 1.22, 0.35, 0.72, 1.7, -3)), 2, 2, False),
    (2, -7): _ScoringTable(((0, 0, 0.69, 0.73, 1.34, 0.515, 0),
                            (2, 4, 0.68, 0.67, 1.2, 0.55, 0),
                            (0, 4, 0.63, 0.43, 0.90, 0.7, -1),
                            (4, 2, 0.675, 0.62, 1.1, 0.6, -1),
                            (2, 2, 0.61, 0.35, 0.72, 1.7, -3)), 4, 4, True),
    (1, -3): _ScoringTable(((0, 0, 1.374, 0.711, 1.31, 1.05, 0),
                            (2, 2, 1.37, 0.70, 1.2, 1.1, 0),
                            (1, 2, 1.35, 0.64, 1.1, 1.2, -1),
                            (0, 2, 1.25, 0.42, 0.83, 1.5, -2),
                            (2, 1, 1.34, 0.60, 1.1, 1.2, -1),
                            (1, 1, 1.21, 0.34, 0.71, 1.7, -2)), 2, 2, False),
    (2, -5): _ScoringTable(((0, 0, 0.675, 0.65, 1.1, 0.6, -1),
                            (2, 4, 0.67, 0.59, 1.1, 0.6, -1),
                            (0, 4, 0.62, 0.39, 0.78, 0.8, -2),
                            (4, 2, 0.67, 0.61, 1.0, 0.65, -2),
                            (2, 2, 0.56, 0.32, 0.59, 0.95, -4)), 4, 4, True),
    (1, -2): _ScoringTable(((0, 0, 1.28, 0.46, 0.85, 1.5, -2),
                            (2, 2, 1.33, 0.62, 1.1, 1.2, 0),
                            (1, 2, 1.30, 0.52, 0.93, 1.4, -2),
                            (0, 2, 1.19, 0.34, 0.66, 1.8, -3),
                            (3, 1, 1.32, 0.57, 1.0, 1.3, -1),
                            (2, 1, 1.29, 0.49, 0.92, 1.4, -1),
                            (1, 1, 1.14, 0.26, 0.52, 2.2, -5)), 2, 2, False),
    (2, -3): _ScoringTable(((0, 0, 0.55, 0.21, 0.46, 1.2, -5),
                            (4, 4, 0.63, 0.42, 0.84, 0.75, -2),
                            (2, 4, 0.615, 0.37, 0.72, 0.85, -3),
                            (0, 4, 0.55, 0.21, 0.46, 1.2, -5),
                            (3, 3, 0.615, 0.37, 0.68, 0.9, -3),
                            (6, 2, 0.63, 0.42, 0.84, 0.75, -2),
                            (5, 2, 0.625, 0.41, 0.78, 0.8, -2),
                            (4, 2, 0.61, 0.35, 0.68, 0.9, -3),
                            (2, 2, 0.515, 0.14, 0.33, 1.55, -9)), 6, 4, True),
    (3, -4): _ScoringTable(((6, 3, 0.389, 0.25, 0.56, 0.7, -5),
                            (5, 3, 0.375, 0.21, 0.47, 0.8, -6),
                            (4, 3, 0.351, 0.14, 0.35, 1.0, -9),
                            (6, 2, 0.362, 0.16, 0.45, 0.8, -4),
                            (5, 2, 0.330, 0.092, 0.28, 1.2, -13),
                            (4, 2, 0.281, 0.046, 0.16, 1.8, -23)), 6, 3, True),
    (4, -5): _ScoringTable(((0, 0, 0.22, 0.061, 0.22, 1.0, -15),
                            (6, 5, 0.28, 0.21, 0.47, 0.6, -7),
                            (5, 5, 0.27, 0.17, 0.39, 0.7, -9),
                            (4, 5, 0.25, 0.10, 0.31, 0.8, -10),
                            (3, 5, 0.23, 0.065, 0.25, 0.9, -11)), 12, 8, False),
    (1, -1): _ScoringTable(((3, 2, 1.09, 0.31, 0.55, 2.0, -2),
                            (2, 2, 1.07, 0.27, 0.49, 2.2, -3),
                            (1, 2, 1.02, 0.21, 0.36, 2.8, -6),
                            (0, 2, 0.80, 0.064, 0.17, 4.8, -16),
                            (4, 1, 1.08, 0.28, 0.54, 2.0, -2),
                            (3, 1, 1.06, 0.25, 0.46, 2.3, -4),
                            (2, 1, 0.99, 0.17, 0.30, 3.3, -10)), 4, 2, False),
    (3, -2): _ScoringTable(((5, 5, 0.208, 0.030, 0.072, 2.9, -47),), 5, 5, False),
    (5, -4): _ScoringTable(((10, 6, 0.163, 0.068, 0.16, 1.0, -19),
                            (8, 6, 0.146, 0.039, 0.11, 1.3, -29)), 25, 10, False),
}


@dataclass
class ScoringSystem:
    """The table rows that apply to one (reward, penalty), scaled back by their gcd."""

    affine: list           # of (open, extend, lambda, K, H, alpha, beta)
    linear: tuple | None   # the (0, 0) row, if the table has one
    infinite_open: int
    infinite_extend: int
    round_down: bool


@functools.lru_cache(maxsize=None)
def scoring_system(reward: int, penalty: int) -> ScoringSystem:
    """s_GetNuclValuesArray + s_AdjustGapParametersByGcd. Raises OptionsError when the
    substitution scores have no table."""
    divisor = math.gcd(reward, penalty)  # BLAST_Gcd, the same for a positive reward
    table = _TABLES.get((reward // divisor, penalty // divisor))
    if table is None:
        raise OptionsError(f"Substitution scores {reward // divisor} and "
                           f"{penalty // divisor} are not supported")
    rows = list(table.rows)
    linear = rows.pop(0) if rows[0][0] == 0 and rows[0][1] == 0 else None

    def scaled(row):
        if divisor == 1:
            return row
        # gap costs grow with the scores; lambda and alpha shrink; K, H and beta stay
        return (row[0] * divisor, row[1] * divisor, row[2] / divisor, row[3], row[4],
                row[5] / divisor, row[6])

    return ScoringSystem([scaled(r) for r in rows], scaled(linear) if linear else None,
                          table.infinite_open * divisor, table.infinite_extend * divisor,
                          table.round_down)


def find_row(system: ScoringSystem, gapopen: int, gapextend: int):
    """The table row for these gap costs, or None (Blast_KarlinBlkNuclGappedCalc's lookup)."""
    if gapopen == 0 and gapextend == 0 and system.linear is not None:
        return system.linear
    for row in system.affine:
        if row[0] == gapopen and row[1] == gapextend:
            return row
    return None


def is_infinite_regime(system: ScoringSystem, gapopen: int, gapextend: int) -> bool:
    return gapopen >= system.infinite_open and gapextend >= system.infinite_extend


def check_supported_scoring(reward: int, penalty: int, gapopen: int, gapextend: int) -> None:
    """Raise OptionsError, worded as BLAST's, when the scoring system cannot be used for a
    gapped search: no table for the (gcd-reduced) substitution scores, or gap costs that are
    neither tabulated nor in the infinite regime."""
    system = scoring_system(reward, penalty)
    if find_row(system, gapopen, gapextend) is not None:
        return
    if is_infinite_regime(system, gapopen, gapextend):
        return
    lines = [f"Gap existence and extension values {gapopen} and {gapextend} are not "
             f"supported for substitution scores {reward} and {penalty}"]
    for row in system.affine:
        lines.append(f"{row[0]} and {row[1]} are supported existence and extension values")
    lines.append(f"{system.infinite_open} and {system.infinite_extend} are supported "
                 "existence and extension values")
    lines.append(f"Any values more stringent than {system.infinite_open} and "
                 f"{system.infinite_extend} are supported")
    raise OptionsError("\n".join(lines))
