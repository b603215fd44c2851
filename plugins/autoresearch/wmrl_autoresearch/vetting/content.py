"""Whether two tables hold the same data, judged by content (never by name).

Two datasets can be the same data under another name: another package's copy with renamed
columns, a different column chosen as the target, rows in another order, one firm more, a
column re-coded (``True``/``False`` for ``1``/``0``). A held-out task with a training twin
measures nothing about transfer, so the pool build (:mod:`.build`) compares every held-out
table with every training table by the two rules below, and drops the training twin.

Each column is reduced to the multiset of its normalised values (numbers rounded to
:data:`SIGNIFICANT_DIGITS` significant digits, booleans as 0/1, strings case-folded), which
ignores the column's name, its role (feature or target) and the row order.

**Rule R: shared rows.** Only *informative* columns count: at least :data:`MIN_DISTINCT` distinct
values and not a run of consecutive integers (a row counter, a year, a firm index or a 1-5
scale tells nothing about which rows a table holds). For the table :math:`A` with fewer rows,
each informative column :math:`a` is paired one-to-one (greedily, best first) with the column
:math:`b` of :math:`B` of highest containment

.. math:: c(a, b) = \\frac{|m(a) \\cap m(b)|}{\\min(|m(a)|, |m(b)|)}

(:math:`m` the multiset of values, :math:`\\cap` the multiset intersection), kept when
:math:`c \\ge` :data:`COLUMN_CONTAINMENT`. With at least two kept pairs, the row tuples over
those columns are compared the same way: :math:`T` is the containment of :math:`A`'s tuples in
:math:`B`'s, and :math:`T_0` the same after permuting each of :math:`A`'s kept columns
independently (seeded), i.e. the overlap that value distributions alone produce. The tables
share rows when :math:`T - T_0 \\ge` :data:`ROW_EXCESS`. Containment of the *smaller* table
tolerates one copy holding extra rows (statsmodels' Grunfeld has an 11th firm); 0.9 tolerates a
few rows cleaned differently; the chance correction keeps two unrelated tables whose columns
are coarse codes (ages in 5-year bins, school years) from matching.

**Rule S: same study.** Two samples of one survey (``statsmodels.fair``, the Redbook sample,
and ``Ecdat/Fair``, the Psychology Today sample of the same questionnaire) share no rows but
the same variables coded the same way. A *distinctive coding* is a numeric column with
:data:`MIN_CODES` to :data:`MAX_CODES` distinct values that are not a run of consecutive
integers (``{17.5, 22, 27, ...}`` ages, ``{9, 12, 14, 16, 17, 20}`` school years; not
``{1..5}``, not ``{0, 1}``). Two codings match when one's set of values is contained in the
other's up to :data:`CODE_CONTAINMENT` (one survey may use an extra level). The tables are one
study when at least :data:`MIN_SHARED_CODES` codings match one-to-one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = [
    "CODE_CONTAINMENT",
    "COLUMN_CONTAINMENT",
    "MAX_CODES",
    "MAX_CODE_DISTANCE",
    "MAX_INTEGER_DENSITY",
    "MIN_CODES",
    "MIN_DISTINCT",
    "MIN_SHARED_CODES",
    "ROW_EXCESS",
    "SIGNIFICANT_DIGITS",
    "ColumnProfile",
    "ContentMatch",
    "TableProfile",
    "compare_tables",
    "coding_similarity",
    "containment",
    "is_distinctive_coding",
    "is_integer_run",
    "jaccard",
    "profile_table",
    "round_significant",
    "total_variation",
]

SIGNIFICANT_DIGITS = 6
MIN_DISTINCT = 5
COLUMN_CONTAINMENT = 0.9
ROW_EXCESS = 0.5
MIN_CODES = 4
MAX_CODES = 30
CODE_CONTAINMENT = 0.6
MAX_INTEGER_DENSITY = 0.6
MAX_CODE_DISTANCE = 0.4
MIN_SHARED_CODES = 2

_MISSING = np.uint64(0x9E3779B97F4A7C15)  # the hash of an empty cell: equal in both tables, like any value


def round_significant(x: np.ndarray, digits: int = SIGNIFICANT_DIGITS) -> np.ndarray:
    """``x`` rounded to ``digits`` significant digits: :math:`\\mathrm{round}(x \\cdot 10^k) / 10^k`,
    :math:`k = d - 1 - \\lfloor \\log_{10}|x| \\rfloor` (0 and non-finite values unchanged)."""
    x = np.asarray(x, dtype=float)
    out = x.copy()
    ok = np.isfinite(x) & (x != 0)
    k = digits - 1 - np.floor(np.log10(np.abs(x[ok])))
    out[ok] = np.round(x[ok] * 10.0**k) / 10.0**k
    return out


def is_integer_run(values: np.ndarray) -> bool:
    """Whether the distinct ``values`` are exactly the integers ``min..max`` (a counter, a year, a scale)."""
    v = np.unique(np.asarray(values, dtype=float))
    return bool(len(v) > 0 and np.all(v == np.round(v)) and v[-1] - v[0] == len(v) - 1)


def is_distinctive_coding(codes: np.ndarray) -> bool:
    """Whether a set of distinct values identifies how a variable was coded: it holds a non-integer
    (``17.5``), or its integers fill at most :data:`MAX_INTEGER_DENSITY` of their range,
    :math:`n / (\\max - \\min + 1)` (school years ``9, 12, 14, 16, 17, 20``: 0.5). Dense integer sets
    (counts, scales, pixel intensities, allele numbers) occur in unrelated tables alike."""
    v = np.unique(np.asarray(codes, dtype=float))
    if len(v) == 0:
        return False
    if not np.all(v == np.round(v)):
        return True
    return bool(len(v) / (v[-1] - v[0] + 1) <= MAX_INTEGER_DENSITY)


def total_variation(codes_a: np.ndarray, shares_a: np.ndarray, codes_b: np.ndarray, shares_b: np.ndarray) -> float:
    """Total variation distance :math:`\\tfrac12 \\sum_v |p_a(v) - p_b(v)|` of two value distributions
    (``codes`` sorted distinct values, ``shares`` their probabilities; a value missing on one side has 0)."""
    union = np.union1d(codes_a, codes_b)
    pa = np.zeros(len(union))
    pb = np.zeros(len(union))
    pa[np.searchsorted(union, codes_a)] = shares_a
    pb[np.searchsorted(union, codes_b)] = shares_b
    return float(0.5 * np.abs(pa - pb).sum())


def coding_similarity(a: ColumnProfile, b: ColumnProfile) -> float:
    """Rule S's score of two codings: their :func:`jaccard`, or 0 when their value distributions differ
    by more than :data:`MAX_CODE_DISTANCE` in total variation."""
    if a.codes is None or b.codes is None or a.shares is None or b.shares is None:
        return 0.0
    if total_variation(a.codes, a.shares, b.codes, b.shares) > MAX_CODE_DISTANCE:
        return 0.0
    return jaccard(a.codes, b.codes)


def containment(a: np.ndarray, b: np.ndarray) -> float:
    """Multiset containment :math:`|m(a) \\cap m(b)| / \\min(|a|, |b|)` of two hash arrays (0 when one is empty)."""
    if len(a) == 0 or len(b) == 0:
        return 0.0
    va, ca = np.unique(a, return_counts=True)
    vb, cb = np.unique(b, return_counts=True)
    _, ia, ib = np.intersect1d(va, vb, assume_unique=True, return_indices=True)
    return float(np.minimum(ca[ia], cb[ib]).sum() / min(len(a), len(b)))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """:math:`|A \\cap B| / |A \\cup B|` of two sets of distinct values (0 when both are empty)."""
    union = len(np.union1d(a, b))
    return float(len(np.intersect1d(a, b)) / union) if union else 0.0


@dataclass(frozen=True)
class ColumnProfile:
    """One column, name-free: per-row value hashes, and what rules R and S need to know about it."""

    name: str
    hashes: np.ndarray  # uint64, one per row (empty cells hash to one constant)
    informative: bool  # usable for rule R
    codes: np.ndarray | None  # sorted distinct values when it is a distinctive coding (rule S)
    shares: np.ndarray | None = None  # the share of the present rows holding each of ``codes``


@dataclass(frozen=True)
class TableProfile:
    """A table's columns, name-free (see :func:`profile_table`)."""

    n_rows: int
    columns: tuple[ColumnProfile, ...]


def _column_profile(name: str, col: pd.Series) -> ColumnProfile | None:
    values = col.to_numpy()
    if pd.api.types.is_bool_dtype(col) or pd.api.types.is_numeric_dtype(col):
        numbers = round_significant(col.astype(float).to_numpy())
        present = numbers[np.isfinite(numbers)]
        hashes = pd.util.hash_array(numbers)
        hashes[~np.isfinite(numbers)] = _MISSING
        distinct, counts = np.unique(present, return_counts=True)
        informative = len(distinct) >= MIN_DISTINCT and not is_integer_run(present)
        common = counts >= 2  # a value seen once (an imputed 2.116 among integer codes) is not part of the coding
        codes, shares = distinct[common], counts[common] / max(1, counts[common].sum())
        if not (MIN_CODES <= len(codes) <= MAX_CODES and is_distinctive_coding(codes)):
            codes = shares = None
    else:
        present_mask = col.notna().to_numpy()
        text = np.array([str(v).strip().casefold() if ok else "" for v, ok in zip(values, present_mask)], dtype=object)
        hashes = pd.util.hash_array(text)
        hashes[~present_mask] = _MISSING
        informative = len(set(text[present_mask].tolist())) >= MIN_DISTINCT
        codes = shares = None
    if len(np.unique(hashes)) <= 1:
        return None  # a constant column says nothing
    return ColumnProfile(str(name), hashes.astype(np.uint64), informative, codes, shares)


def profile_table(df: pd.DataFrame) -> TableProfile:
    """The content profile of a table (every column, whatever its role; the index is ignored)."""
    df = df.loc[:, ~df.columns.duplicated()]
    columns = tuple(p for c in df.columns if (p := _column_profile(c, df[c])) is not None)
    return TableProfile(len(df), columns)


@dataclass(frozen=True)
class ContentMatch:
    """The verdict of :func:`compare_tables`, with its evidence.

    :param rule: ``"rows"`` (rule R), ``"study"`` (rule S) or ``None`` (different data).
    :param pairs: matched ``(column of A, column of B, containment)``, for rule R's or rule S's pairs.
    :param rows: :math:`T`, the row-tuple containment (rule R; NaN when under two pairs).
    :param chance: :math:`T_0`, the same after permuting columns independently.
    """

    rule: str | None
    pairs: tuple[tuple[str, str, float], ...] = field(default=())
    rows: float = float("nan")
    chance: float = float("nan")

    @property
    def same(self) -> bool:
        return self.rule is not None

    def describe(self) -> str:
        pairs = ", ".join(f"{a}~{b}" for a, b, _ in self.pairs)
        if self.rule == "rows":
            return f"shares rows (columns {pairs}; row containment {self.rows:.2f} vs chance {self.chance:.2f})"
        if self.rule == "study":
            return f"same study, other sample (same codings of {pairs})"
        return "different data"


def _greedy_pairs(scores: list[tuple[float, int, int]], threshold: float) -> list[tuple[int, int, float]]:
    """One-to-one pairs, best score first, among those ``>= threshold``."""
    used_a, used_b, pairs = set(), set(), []
    for score, i, j in sorted(scores, reverse=True):
        if score >= threshold and i not in used_a and j not in used_b:
            used_a.add(i)
            used_b.add(j)
            pairs.append((i, j, score))
    return pairs


def _row_hashes(columns: Sequence[np.ndarray]) -> np.ndarray:
    """One hash per row of the tuple of ``columns`` (order-sensitive combination)."""
    h = np.zeros(len(columns[0]), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in columns:
            h = (h * np.uint64(1_000_003)) ^ c
    return h


def compare_tables(a: TableProfile, b: TableProfile, *, seed: int = 0) -> ContentMatch:
    """Rule R, then rule S (module docstring): whether ``a`` and ``b`` hold the same data."""
    if a.n_rows > b.n_rows:
        a, b = b, a
        swapped = True
    else:
        swapped = False
    scores = [
        (containment(ca.hashes, cb.hashes), i, j)
        for i, ca in enumerate(a.columns)
        if ca.informative
        for j, cb in enumerate(b.columns)
        if cb.informative
    ]
    pairs = _greedy_pairs(scores, COLUMN_CONTAINMENT)

    def named(ps):
        out = tuple((a.columns[i].name, b.columns[j].name, round(s, 3)) for i, j, s in ps)
        return tuple((y, x, s) for x, y, s in out) if swapped else out

    if len(pairs) >= 2:
        cols_a = [a.columns[i].hashes for i, _, _ in pairs]
        rows_b = _row_hashes([b.columns[j].hashes for _, j, _ in pairs])
        observed = containment(_row_hashes(cols_a), rows_b)
        rng = np.random.default_rng(seed)
        chance = containment(_row_hashes([c[rng.permutation(len(c))] for c in cols_a]), rows_b)
        if observed - chance >= ROW_EXCESS:
            return ContentMatch("rows", named(pairs), observed, chance)
    code_scores = [
        (coding_similarity(ca, cb), i, j)
        for i, ca in enumerate(a.columns)
        if ca.codes is not None
        for j, cb in enumerate(b.columns)
        if cb.codes is not None
    ]
    codes = _greedy_pairs(code_scores, CODE_CONTAINMENT)
    if len(codes) >= MIN_SHARED_CODES:
        return ContentMatch("study", named(codes))
    return ContentMatch(None)
