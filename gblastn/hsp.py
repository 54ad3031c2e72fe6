"""HSP records shared by the extension, traceback, statistics and output stages.

Coordinates, everywhere in these records:

* query coordinates are **context-relative** (0 = first letter of that strand of that query,
  as BLAST's HSP query.offset); context c is query c // 2, plus strand when c is even, the
  reverse complement when odd;
* subject coordinates are 0-based on the subject's plus strand;
* every range is half-open: [start, end).

Stages pass these as structures of arrays (one numpy array per field), not lists of objects.
"""

from dataclasses import dataclass, field, fields

import numpy as np

from .layouts import HSP_CONTEXT, HSP_FIELDS, HSP_Q_END, HSP_Q_GAPPED_START, HSP_Q_START, \
    HSP_SCORE, HSP_S_END, HSP_S_GAPPED_START, HSP_S_START, OP_DEL, OP_SUB


@dataclass
class Hsps:
    """Gapped HSPs (preliminary or traced) of one subject, as a structure of arrays."""

    context: np.ndarray        # int32
    q_start: np.ndarray        # int32, context-relative
    q_end: np.ndarray          # int32, exclusive
    s_start: np.ndarray        # int32
    s_end: np.ndarray          # int32, exclusive
    score: np.ndarray          # int32, raw score
    q_gapped_start: np.ndarray  # int32, the seed point the gapped extension started from
    s_gapped_start: np.ndarray  # int32
    evalue: np.ndarray = None   # float64, filled by stats
    bitscore: np.ndarray = None  # float64, filled by stats
    # traceback only: edit script of HSP i is ops[op_start[i]:op_start[i+1]] with run lengths
    op_start: np.ndarray = None  # int64, len n+1
    ops: np.ndarray = None       # uint8 (gblastn.layouts' OP_*)
    op_len: np.ndarray = None    # int32
    counts: np.ndarray = None    # int64 [n, 4] (output.tabular's COUNT_* columns)
    # -db_hard_mask: the identities the traceback counted on the masked letters (as counts
    # holds them), which SAM and tabular columns without the letters report; the reports
    # that read the true letters count again
    masked_identities: np.ndarray = None

    def __len__(self) -> int:
        return len(self.score)

    @classmethod
    def empty(cls) -> "Hsps":
        z = np.zeros(0, dtype=np.int32)
        return cls(z, z, z, z, z, z, z, z)

    def span(self, start: int, end: int) -> "Hsps":
        """HSPs start:end, as views of these (E-values, counts and edit scripts included):
        a subject's HSPs split by query take one of these each, not a copy. Each field's
        view is made when it is first read (HspsSpan), and `joined` reads the fields of
        many spans from what they span."""
        return HspsSpan.of(self, start, end)

    def take(self, index) -> "Hsps":
        """The HSPs at `index` (an index array or boolean mask), edit scripts included."""
        index = np.arange(len(self))[index]
        out = Hsps(*(getattr(self, f)[index] for f in
                     ("context", "q_start", "q_end", "s_start", "s_end", "score",
                      "q_gapped_start", "s_gapped_start")))
        if self.evalue is not None:
            out.evalue, out.bitscore = self.evalue[index], self.bitscore[index]
        if self.counts is not None:
            out.counts = self.counts[index]
        if self.masked_identities is not None:
            out.masked_identities = self.masked_identities[index]
        if self.ops is not None:
            starts, ends = self.op_start[index], self.op_start[index + 1]
            sizes = ends - starts
            out.op_start = np.zeros(index.size + 1, dtype=np.int64)
            np.cumsum(sizes, out=out.op_start[1:])
            # every run of the picked scripts: its script's start, plus its rank within it
            pick = np.repeat(starts - out.op_start[:-1], sizes) + np.arange(out.op_start[-1])
            out.ops, out.op_len = self.ops[pick], self.op_len[pick]
        return out


class _SpannedField:
    """A field of an HspsSpan: the spanned HSPs' field, sliced when first read and then kept
    (a non-data descriptor: once the span holds its own value, that is read directly)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, span, owner=None):
        if span is None:
            return self
        whole, start, end = span.spanned
        value = getattr(whole, self.name)
        span.__dict__[self.name] = value = None if value is None else value[start:end]
        return value


class _SpannedScript(_SpannedField):
    """op_start, ops or op_len of an HspsSpan: the spanned HSPs' edit scripts, their starts
    counted from the span's first run."""

    def __get__(self, span, owner=None):
        if span is None:
            return self
        whole, start, end = span.spanned
        script = dict(op_start=None, ops=None, op_len=None)
        if whole.ops is not None:
            first, last = whole.op_start[start], whole.op_start[end]
            script = dict(op_start=whole.op_start[start:end + 1] - first,
                          ops=whole.ops[first:last], op_len=whole.op_len[first:last])
        span.__dict__.update(script)
        return script[self.name]


class HspsSpan(Hsps):
    """HSPs start:end of another Hsps (Hsps.span; the traceback's split of a group's final
    HSPs by task), each field a view made when first read. A batch of short reads splits
    into tens of thousands of (query, subject) pairs, and a dozen views made for each, under
    the GIL, cost more than the stages that read two or three of them. One made by
    dataclasses.replace holds its own fields, as any Hsps."""

    context = _SpannedField()
    q_start = _SpannedField()
    q_end = _SpannedField()
    s_start = _SpannedField()
    s_end = _SpannedField()
    score = _SpannedField()
    q_gapped_start = _SpannedField()
    s_gapped_start = _SpannedField()
    evalue = _SpannedField()
    bitscore = _SpannedField()
    counts = _SpannedField()
    masked_identities = _SpannedField()
    op_start = _SpannedScript()
    ops = _SpannedScript()
    op_len = _SpannedScript()

    spanned = None  # (whole, start, end); None in one made by dataclasses.replace

    @classmethod
    def of(cls, whole: Hsps, start: int, end: int) -> "HspsSpan":
        span = object.__new__(cls)
        span.spanned = (whole, start, end)
        return span

    def __len__(self) -> int:
        spanned = self.spanned
        return spanned[2] - spanned[1] if spanned else len(self.score)

    def __reduce__(self):
        """Pickled as an Hsps of its own fields, without what it spans."""
        return Hsps, tuple(getattr(self, name) for name in _HSPS_FIELDS)


@dataclass
class PackedHsps:
    """Many subjects' Hsps, each under a key (a row of ints), as one structure of arrays:
    what a worker sends another. A list of Hsps pickles array by array, and Dask ships each
    array as a frame of its own: 2,000 frames and 25 ms a hop for 160 subjects."""

    keys: np.ndarray   # int64 [subjects, key length]
    arrays: dict       # Hsps field -> the subjects' arrays end to end; None where none has it
    bounds: dict       # Hsps field -> int64 [subjects + 1]: subject i's part of arrays[field]
    present: dict      # Hsps field -> bool [subjects]: whether subject i has that field

    @classmethod
    def of(cls, keyed: list) -> "PackedHsps":
        """[(key, Hsps)] packed: each key a tuple of ints, all of one length."""
        keys = np.array([key for key, _ in keyed] or np.zeros((0, 0)), dtype=np.int64)
        arrays, bounds, present = {}, {}, {}
        for name in _HSPS_FIELDS:
            parts = [getattr(hsps, name) for _, hsps in keyed]
            present[name] = np.array([part is not None for part in parts], dtype=bool)
            sizes = [0 if part is None else len(part) for part in parts]
            bounds[name] = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
            given = [part for part in parts if part is not None]
            arrays[name] = np.concatenate(given) if given else None
        return cls(keys, arrays, bounds, present)

    def unpacked(self) -> list:
        """[(key, Hsps)] as packed: each field a view of the packed arrays (None where the
        subject had none)."""
        columns = {name: (self.arrays[name], self.bounds[name].tolist(),
                          self.present[name].tolist()) for name in _HSPS_FIELDS}
        return [(tuple(key), Hsps(**{name: array[ends[i]:ends[i + 1]] if has[i] else None
                                     for name, (array, ends, has) in columns.items()}))
                for i, key in enumerate(self.keys.tolist())]


_HSPS_FIELDS = tuple(f.name for f in fields(Hsps))


@dataclass
class SubjectHits:
    """The final HSPs of one query against one subject, in BLAST's output order."""

    ordinal: int
    hsps: Hsps


@dataclass
class QueryResult:
    """Everything the output stage needs for one query."""

    query_index: int
    query_id: str
    query_defline: str
    query_length: int
    subjects: list = field(default_factory=list)  # of SubjectHits, in output order


# ==============================================================================================
# HSP management: ordering, containment, common endpoints, rescoring with ambiguities.
# These follow BLAST+ 2.12 (blast_hits.c, blast_itree.c) rule for rule, tie breaks included.

from .alphabet import AMBIGUOUS_MIN  # noqa: E402
from .hspfilters import subject_best_hit_keep  # noqa: E402
from .numba_start import njit  # noqa: E402

# the Hsps fields of the rows' columns (gblastn.layouts' HSP_* order)
_HSP_FIELDS = ("context", "q_start", "q_end", "s_start", "s_end", "score",
               "q_gapped_start", "s_gapped_start")


def score_order(hsps: Hsps) -> np.ndarray:
    """Blast_HSPListSortByScore (ScoreCompareHSPs): score desc, s_start asc, s_end desc,
    q_start asc, q_end desc; equal keys keep their order."""
    return np.lexsort((-hsps.q_end.astype(np.int64), hsps.q_start, -hsps.s_end.astype(np.int64),
                       hsps.s_start, -hsps.score.astype(np.int64)))


def hsps_from_rows(rows, scripts=None) -> Hsps:
    """Hsps from an int array [n, HSP_FIELDS] (hsp_rows) and, optionally, one
    (ops, lengths) pair of arrays per HSP."""
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, HSP_FIELDS)
    out = Hsps(*(rows[:, i].astype(np.int32) for i in range(HSP_FIELDS)))
    if scripts is not None:
        sizes = np.array([len(o) for o, _ in scripts], dtype=np.int64)
        out.op_start = np.zeros(len(scripts) + 1, dtype=np.int64)
        np.cumsum(sizes, out=out.op_start[1:])
        out.ops = np.concatenate([np.asarray(o, dtype=np.uint8) for o, _ in scripts]) \
            if scripts else np.zeros(0, dtype=np.uint8)
        out.op_len = np.concatenate([np.asarray(n, dtype=np.int32) for _, n in scripts]) \
            if scripts else np.zeros(0, dtype=np.int32)
    return out


def hsp_rows(hsps: Hsps) -> np.ndarray:
    """The HSPs as rows: an int64 array [n, HSP_FIELDS], the columns gblastn.layouts names."""
    return np.column_stack([getattr(hsps, f).astype(np.int64) for f in _HSP_FIELDS]) \
        .reshape(-1, HSP_FIELDS)


# the fields a view made by Hsps.span (or the traceback's split) shares with what it spans
SPANNED_FIELDS = frozenset(_HSP_FIELDS + ("evalue", "bitscore", "counts"))


def joined(lists: list, names: tuple) -> list:
    """Each named field of the Hsps in `lists`, end to end, as np.concatenate joins them.
    Where every one is a view made by Hsps.span (or the traceback's split), the fields are
    taken from what they span, one index for all: a batch of short reads joins tens of
    thousands of views of an HSP or two, and numpy's cost per piece held the GIL longer
    than the copying."""
    spans = [getattr(hsps, "spanned", None) for hsps in lists]
    wholes, number, which, starts, ends = [], {}, [], [], []
    if len(lists) > 1 and SPANNED_FIELDS.issuperset(names) and None not in spans:
        for whole, start, end in spans:
            k = number.get(id(whole))
            if k is None:
                k = number[id(whole)] = len(wholes)
                wholes.append(whole)
            which.append(k)
            starts.append(start)
            ends.append(end)
    if not wholes or any(getattr(whole, name) is None for whole in wholes for name in names):
        return [np.concatenate([getattr(hsps, name) for hsps in lists]) for name in names]
    starts, sizes = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)
    sizes -= starts
    whole_start = np.zeros(len(wholes), dtype=np.int64)
    np.cumsum([len(whole) for whole in wholes[:-1]], out=whole_start[1:])
    out_start = np.zeros(len(lists), dtype=np.int64)
    np.cumsum(sizes[:-1], out=out_start[1:])
    index = np.repeat(whole_start[which] + starts - out_start, sizes) + \
        np.arange(int(sizes.sum()))
    return [(getattr(wholes[0], name) if len(wholes) == 1 else
             np.concatenate([getattr(whole, name) for whole in wholes]))[index]
            for name in names]


def rows_by_score(lists: list) -> np.ndarray:
    """hsp_rows(h)[score_order(h)] of each Hsps in `lists`, one after the other: a few numpy
    calls for all of them, since a job has thousands of lists and numpy's fixed cost per
    call, paid for each list on its own, would hold its traceback searches back."""
    if not lists:
        return np.zeros((0, HSP_FIELDS), dtype=np.int64)
    rows = np.column_stack([field.astype(np.int64) for field in joined(lists, _HSP_FIELDS)]) \
        .reshape(-1, HSP_FIELDS)
    owner = np.repeat(np.arange(len(lists)), [len(h) for h in lists])
    if _in_score_order(rows, owner):
        return rows
    # score_order's keys, the list first: each list's rows stay together, in its own order
    order = np.lexsort((-rows[:, HSP_Q_END], rows[:, HSP_Q_START], -rows[:, HSP_S_END],
                        rows[:, HSP_S_START], -rows[:, HSP_SCORE], owner))
    return rows[order]


def _in_score_order(rows: np.ndarray, owner: np.ndarray) -> bool:
    """Whether rows_by_score's sort would leave the rows as they are. The preliminary HSPs
    come in score order (subject_hsps_by_query), so the six-key sort finds them in order
    and moves nothing, and this check costs less than the sort. Each key decides the pairs
    that the keys before it left tied."""
    pairs = np.arange(rows.shape[0] - 1)
    for column, sign in ((owner, 1), (rows[:, HSP_SCORE], -1), (rows[:, HSP_S_START], 1),
                         (rows[:, HSP_S_END], -1), (rows[:, HSP_Q_START], 1),
                         (rows[:, HSP_Q_END], -1)):
        step = (column[pairs + 1] - column[pairs]) * sign
        if (step < 0).any():
            return False
        pairs = pairs[step == 0]
        if not pairs.size:
            break
    return True


# ----------------------------------------------------------------------------------------------
# containment "tree" (BlastIntervalTree used with eQueryAndSubject).  The interval tree only
# speeds up exhaustive searches, so any index that finds the same HSPs gives the same answers.
# What matters is which HSPs it holds: adding an HSP first evicts those sharing its start or
# end that it beats, and is refused when one already held beats it.
#
# Our index: a containing HSP must lie within min_diag_separation of the new one's start
# diagonal or of its end diagonal (when that is not 0), so held HSPs are chained by
# (context, start diagonal // separation) and by (context, end diagonal // separation) in
# two small hash tables, and a test walks the three neighbouring buckets of each.  Chains
# keep insertion order, which is the order the eviction rule must see.  Without a
# separation (blastn's DP tasks) the chains are per exact diagonal (the eviction rule only
# compares HSPs sharing a start or an end point, hence a diagonal), and a containing HSP
# starts at most the longest held subject span before the new one's subject start: held
# HSPs are also chained by (context, subject start // BLOCK_LETTERS), and a test walks the
# blocks back over that span, instead of every HSP held.
#
# A tree is a tuple (entries, heads, width):
#   entries int64 [capacity, 10]: context, q_start, q_end, s_start, s_end, score, alive,
#       next entry in its start chain, in its end chain, in its subject block's (-1: none);
#   heads int64 [3, slots, 2]: first and last entry of each start (0) / end (1) / subject
#       block (2) chain;
#   width int64 [2]: the diagonal bucket width (0: exact diagonals, block tests), and the
#       longest subject span held.

T_CTX, T_QS, T_QE, T_SS, T_SE, T_SCORE, T_ALIVE = range(7)
_T_NEXT = 7  # + 0 for the start chain, + 1 for the end chain, + 2 for the subject block's
_CHAINS = 3
BLOCK_SHIFT = 9  # subject blocks of BLOCK_LETTERS, the unit of a test's walk back
BLOCK_LETTERS = 1 << BLOCK_SHIFT


@njit(cache=True, nogil=True)
def alloc_tree(capacity, min_diag_separation):
    """An empty containment tree for at most `capacity` HSPs, indexed for tests with this
    min_diag_separation (other values still work, by a linear scan)."""
    cap = max(capacity, 1)
    slots = 16
    while slots < 2 * cap:
        slots *= 2
    # an entry is read only once tree_add has written all of it: not zeroed, so that the
    # pages of a capacity far above the HSPs held (a chunk's every ungapped hit) are never
    # touched (docs/perf/whole-search.md)
    entries = np.empty((cap, _T_NEXT + _CHAINS), dtype=np.int64)
    heads = np.full((_CHAINS, slots, 2), -1, dtype=np.int64)
    width = np.zeros(2, dtype=np.int64)
    width[0] = max(min_diag_separation, 0)
    return entries, heads, width


def new_tree(capacity: int, min_diag_separation: int = 0):
    """Python-side alloc_tree."""
    return alloc_tree(int(capacity), int(min_diag_separation))


@njit(cache=True, nogil=True)
def _slot(ctx, bucket, mask):
    x = (ctx * 1000003 + bucket) * 2654435761
    return (x ^ (x >> 17)) & mask


@njit(cache=True, nogil=True)
def _bucket(diag, width):
    if width > 0:
        return diag // width
    return diag


@njit(cache=True, nogil=True)
def _holds(t, ctx, qs, qe, ss, se, score, min_diag_separation):
    """s_HSPIsContained: t envelops the HSP (range ends count as inside), in its context,
    with at least its score, and near its start or end diagonal when that is asked for."""
    if t[T_ALIVE] == 0 or t[T_CTX] != ctx or score > t[T_SCORE]:
        return False
    if not (t[T_QS] <= qs <= t[T_QE] and t[T_SS] <= ss <= t[T_SE]):
        return False
    if not (t[T_QS] <= qe <= t[T_QE] and t[T_SS] <= se <= t[T_SE]):
        return False
    if min_diag_separation == 0:
        return True
    return abs((t[T_QS] - t[T_SS]) - (qs - ss)) < min_diag_separation or \
        abs((t[T_QE] - t[T_SE]) - (qe - se)) < min_diag_separation


@njit(cache=True, nogil=True)
def tree_contains(tree, n, ctx, qs, qe, ss, se, score, min_diag_separation):
    """BlastIntervalTreeContainsHSP: is the HSP enveloped by a held one with at least its
    score, in the same context, and (when min_diag_separation is set) close to its start or
    end diagonal?  n: entries used."""
    entries, heads, width = tree
    w = width[0]
    mask = heads.shape[1] - 1
    # a container without a separation starts in [ss - longest span, ss]: the subject
    # blocks there, unless they outnumber the HSPs held
    first = (ss - width[1]) >> BLOCK_SHIFT
    last = ss >> BLOCK_SHIFT
    if w != min_diag_separation or (w == 0 and last - first >= n):
        for j in range(n):
            if _holds(entries[j], ctx, qs, qe, ss, se, score, min_diag_separation):
                return True
        return False
    if w == 0:
        for block in range(last, first - 1, -1):
            k = heads[2, _slot(ctx, block, mask), 0]
            while k >= 0:
                if _holds(entries[k], ctx, qs, qe, ss, se, score, 0):
                    return True
                k = entries[k, _T_NEXT + 2]
        return False
    for which in range(2):
        diag = qs - ss if which == 0 else qe - se
        b = _bucket(diag, w)
        for bb in range(b - 1, b + 2):
            k = heads[which, _slot(ctx, bb, mask), 0]
            while k >= 0:
                if _holds(entries[k], ctx, qs, qe, ss, se, score, min_diag_separation):
                    return True
                k = entries[k, _T_NEXT + which]
    return False


@njit(cache=True, nogil=True)
def _new_one_wins(t, qs, qe, ss, se, score):
    """s_HSPsHaveCommonEndpoint's choice: higher score, then the shorter query range, then
    the shorter subject range; a tie keeps the held HSP."""
    if score != t[T_SCORE]:
        return score > t[T_SCORE]
    if qe - qs != t[T_QE] - t[T_QS]:
        return qe - qs < t[T_QE] - t[T_QS]
    if se - ss != t[T_SE] - t[T_SS]:
        return se - ss < t[T_SE] - t[T_SS]
    return False


@njit(cache=True, nogil=True)
def tree_add(tree, n, ctx, qs, qe, ss, se, score):
    """BlastIntervalTreeAddHSP; returns the new number of entries used."""
    entries, heads, width = tree
    w = width[0]
    mask = heads.shape[1] - 1
    # held HSPs sharing the start (then the end) share its diagonal, hence its chain
    for which in range(2):
        diag = qs - ss if which == 0 else qe - se
        k = heads[which, _slot(ctx, _bucket(diag, w), mask), 0]
        while k >= 0:
            t = entries[k]
            k = t[_T_NEXT + which]
            if t[T_ALIVE] == 0 or t[T_CTX] != ctx:
                continue
            if which == 0:
                shared = t[T_QS] == qs and t[T_SS] == ss
            else:
                shared = t[T_QE] == qe and t[T_SE] == se
            if not shared:
                continue
            if _new_one_wins(t, qs, qe, ss, se, score):
                t[T_ALIVE] = 0
            else:
                return n
    t = entries[n]
    t[T_CTX] = ctx
    t[T_QS] = qs
    t[T_QE] = qe
    t[T_SS] = ss
    t[T_SE] = se
    t[T_SCORE] = score
    t[T_ALIVE] = 1
    width[1] = max(width[1], se - ss)
    for which in range(_CHAINS):
        if which < 2:
            slot = _slot(ctx, _bucket(qs - ss if which == 0 else qe - se, w), mask)
        else:
            slot = _slot(ctx, ss >> BLOCK_SHIFT, mask)
        t[_T_NEXT + which] = -1
        if heads[which, slot, 0] < 0:
            heads[which, slot, 0] = n
        else:
            entries[heads[which, slot, 1], _T_NEXT + which] = n
        heads[which, slot, 1] = n
    return n + 1


@njit(cache=True, nogil=True)
def containment_keep(rows, min_diag_separation):
    n = rows.shape[0]
    keep = np.zeros(n, dtype=np.bool_)
    tree = alloc_tree(n, min_diag_separation)
    used = 0
    for i in range(n):
        r = rows[i]
        if tree_contains(tree, used, r[HSP_CONTEXT], r[HSP_Q_START], r[HSP_Q_END],
                         r[HSP_S_START], r[HSP_S_END], r[HSP_SCORE], min_diag_separation):
            continue
        keep[i] = True
        used = tree_add(tree, used, r[HSP_CONTEXT], r[HSP_Q_START], r[HSP_Q_END],
                        r[HSP_S_START], r[HSP_S_END], r[HSP_SCORE])
    return keep


@njit(cache=True, nogil=True)
def score_order_rows(rows):
    """score_order for rows [n, HSP_FIELDS] (hsp_rows), in compiled code: the index order."""
    order = np.arange(rows.shape[0])
    _stable_sort(order, order.size, rows, BY_SCORE)
    return order


@njit(cache=True, nogil=True)
def max_hsps_candidates(rows, index, max_hsps):
    """The rows at `index` (in E-value order, which is kept) that max_hsps may keep: the
    first max_hsps in that order or in score order. Which order applies is known only
    once the query's subjects are counted (engine.within_hsp_limits); the rest can go."""
    if max_hsps <= 0 or index.size <= max_hsps:
        return index
    keep = np.zeros(index.size, dtype=np.bool_)
    keep[:max_hsps] = True
    keep[score_order_rows(rows[index])[:max_hsps]] = True
    return index[keep]


@njit(cache=True, nogil=True)
def ranked_order(rows, index, rank_of):
    """The order (positions within `index`) of the rows at `index` by rank_of (float64, one
    per row at `index`; equal values tie), then as score_order; stable."""
    ranked = np.empty((index.size, RANK_COLUMN + 1), dtype=np.int64)
    ranked[:, :HSP_FIELDS] = rows[index]
    ranked[:, RANK_COLUMN] = np.searchsorted(np.unique(rank_of), rank_of)
    order = np.arange(index.size)
    _stable_sort(order, order.size, ranked, BY_RANK)
    return order


@njit(cache=True, nogil=True)
def take_rows(rows, op_start, ops, op_len, index):
    """Hsps.take for rows [n, HSP_FIELDS] and their edit scripts: the rows at `index`, in its
    order. Returns rows, op_start, ops, op_len."""
    out_start = np.zeros(index.size + 1, dtype=np.int64)
    for k in range(index.size):
        h = index[k]
        out_start[k + 1] = out_start[k] + op_start[h + 1] - op_start[h]
    out_ops = np.empty(out_start[index.size], dtype=np.uint8)
    out_len = np.empty(out_start[index.size], dtype=np.int32)
    out_rows = np.empty((index.size, HSP_FIELDS), dtype=np.int64)
    for k in range(index.size):
        h = index[k]
        out_rows[k] = rows[h]
        a = op_start[h]
        size = op_start[h + 1] - a
        out_ops[out_start[k]:out_start[k] + size] = ops[a:a + size]
        out_len[out_start[k]:out_start[k] + size] = op_len[a:a + size]
    return out_rows, out_start, out_ops, out_len


# ----------------------------------------------------------------------------------------------
# common endpoints: Blast_HSPListPurgeHSPsWithCommonEndpoints


# the orders _stable_sort knows
BY_START = 0   # context, q_start, s_start, then score, q_end, s_end descending
BY_END = 1     # context, q_end, s_end, then score descending, q_start, s_start descending
BY_SCORE = 2   # score descending, s_start, s_end descending, q_start, q_end descending
BY_RANK = 3    # RANK_COLUMN (a rank the caller puts there), then as BY_SCORE
RANK_COLUMN = HSP_FIELDS  # after a row's own columns


@njit(cache=True, nogil=True)
def _key_before(rows, a, b, order):
    """Whether row a sorts before row b in `order` (BY_START, BY_END, BY_SCORE, BY_RANK)."""
    ra = rows[a]
    rb = rows[b]
    if order == BY_END:
        ka = (ra[HSP_CONTEXT], ra[HSP_Q_END], ra[HSP_S_END], -ra[HSP_SCORE], -ra[HSP_Q_START],
              -ra[HSP_S_START])
        kb = (rb[HSP_CONTEXT], rb[HSP_Q_END], rb[HSP_S_END], -rb[HSP_SCORE], -rb[HSP_Q_START],
              -rb[HSP_S_START])
    elif order == BY_START:
        ka = (ra[HSP_CONTEXT], ra[HSP_Q_START], ra[HSP_S_START], -ra[HSP_SCORE], -ra[HSP_Q_END],
              -ra[HSP_S_END])
        kb = (rb[HSP_CONTEXT], rb[HSP_Q_START], rb[HSP_S_START], -rb[HSP_SCORE], -rb[HSP_Q_END],
              -rb[HSP_S_END])
    elif order == BY_SCORE:
        ka = (-ra[HSP_SCORE], ra[HSP_S_START], -ra[HSP_S_END], ra[HSP_Q_START], -ra[HSP_Q_END], 0)
        kb = (-rb[HSP_SCORE], rb[HSP_S_START], -rb[HSP_S_END], rb[HSP_Q_START], -rb[HSP_Q_END], 0)
    else:
        ka = (ra[RANK_COLUMN], -ra[HSP_SCORE], ra[HSP_S_START], -ra[HSP_S_END], ra[HSP_Q_START],
              -ra[HSP_Q_END])
        kb = (rb[RANK_COLUMN], -rb[HSP_SCORE], rb[HSP_S_START], -rb[HSP_S_END], rb[HSP_Q_START],
              -rb[HSP_Q_END])
    return ka < kb


@njit(cache=True, nogil=True)
def _stable_sort(order, count, rows, key):
    """order[:count] sorted by _key_before in `key` order, equal keys keeping their order
    (merge sort)."""
    work = np.empty(count, dtype=np.int64)
    width = 1
    src = order[:count].copy()
    while width < count:
        for lo in range(0, count, 2 * width):
            mid = min(lo + width, count)
            hi = min(lo + 2 * width, count)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if _key_before(rows, src[j], src[i], key):
                    work[k] = src[j]
                    j += 1
                else:
                    work[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                work[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                work[k] = src[j]
                j += 1
                k += 1
        src, work = work, src
        width *= 2
    order[:count] = src


@njit(cache=True, nogil=True)
def purge_rows(rows_in, op_start, ops, op_len, purge):
    """Blast_HSPListPurgeHSPsWithCommonEndpoints on rows [n, HSP_FIELDS] (hsp_rows) and their
    edit scripts. Returns (rows, op_start, ops, op_len, count): the kept HSPs first (count
    of them), then the trimmed ones (purge False) in BLAST's order."""
    n = rows_in.shape[0]
    rows = rows_in.copy()
    order = np.arange(n)
    # a trimmed HSP's script: its first and last runs, and the two runs' new lengths
    first_run = op_start[:n].copy()
    last_run = op_start[1:].copy() - 1
    first_len = np.full(n, -1, dtype=np.int64)
    last_len = np.full(n, -1, dtype=np.int64)
    count = n
    for at_end in (False, True):
        _stable_sort(order, count, rows, BY_END if at_end else BY_START)
        i = 0
        while i < count:
            while i + 1 < count and order[i] >= 0 and order[i + 1] >= 0:
                w = order[i]
                loser = order[i + 1]
                same = rows[w, HSP_CONTEXT] == rows[loser, HSP_CONTEXT] and (
                    (rows[w, HSP_Q_END] == rows[loser, HSP_Q_END] and
                     rows[w, HSP_S_END] == rows[loser, HSP_S_END]) if at_end
                    else (rows[w, HSP_Q_START] == rows[loser, HSP_Q_START] and
                          rows[w, HSP_S_START] == rows[loser, HSP_S_START]))
                if not same:
                    break
                count -= 1
                trimmed = False
                if not purge and not at_end and rows[loser, HSP_Q_END] > rows[w, HSP_Q_END]:
                    _cut(rows, loser, ops, op_len, first_run, last_run, first_len, last_len,
                         rows[w, HSP_Q_END], rows[w, HSP_S_END], True)
                    trimmed = True
                elif not purge and at_end and rows[loser, HSP_Q_START] < rows[w, HSP_Q_START]:
                    _cut(rows, loser, ops, op_len, first_run, last_run, first_len, last_len,
                         rows[w, HSP_Q_START], rows[w, HSP_S_START], False)
                    trimmed = True
                # the loser (trimmed, or -1 when deleted) moves behind the kept ones
                for k in range(i + 1, count):
                    order[k] = order[k + 1]
                order[count] = loser if trimmed else -1
            i += 1
    kept = 0
    for k in range(n):
        if order[k] >= 0:
            kept += 1
    out_rows = np.empty((kept, HSP_FIELDS), dtype=np.int64)
    out_start = np.zeros(kept + 1, dtype=np.int64)
    total = 0
    m = 0
    for k in range(n):
        h = order[k]
        if h >= 0:
            out_rows[m] = rows[h]
            total += last_run[h] - first_run[h] + 1
            out_start[m + 1] = total
            m += 1
    out_ops = np.empty(total, dtype=np.uint8)
    out_len = np.empty(total, dtype=np.int32)
    m = 0
    for k in range(n):
        h = order[k]
        if h < 0:
            continue
        at = out_start[m]
        for r in range(first_run[h], last_run[h] + 1):
            out_ops[at] = ops[r]
            out_len[at] = op_len[r]
            at += 1
        if first_len[h] >= 0:
            out_len[out_start[m]] = first_len[h]
        if last_len[h] >= 0:
            out_len[out_start[m + 1] - 1] = last_len[h]
        m += 1
    return out_rows, out_start, out_ops, out_len, count


@njit(cache=True, nogil=True)
def _cut(rows, h, ops, op_len, first_run, last_run, first_len, last_len, q_cut, s_cut,
         cut_begin):
    """Trim HSP h's row and script window in place (cut_off_gap_edit_script's rule)."""
    lo = first_run[h]
    hi = last_run[h] + 1
    lens = op_len[lo:hi].copy()
    if first_len[h] >= 0:
        lens[0] = first_len[h]
    if last_len[h] >= 0:
        lens[lens.size - 1] = last_len[h]
    q0, q1, s0, s1, new_ops, new_lens = cut_off_gap_edit_script(
        ops[lo:hi], lens, rows[h, HSP_Q_START], rows[h, HSP_Q_END], rows[h, HSP_S_START],
        rows[h, HSP_S_END], q_cut, s_cut, cut_begin)
    rows[h, HSP_Q_START] = q0
    rows[h, HSP_Q_END] = q1
    rows[h, HSP_S_START] = s0
    rows[h, HSP_S_END] = s1
    # the new script is a run window of the old one: find where it starts
    start = lo + (lens.size - new_lens.size) if cut_begin else lo
    first_run[h] = start
    last_run[h] = start + new_lens.size - 1
    first_len[h] = new_lens[0] if new_lens.size else -1
    last_len[h] = new_lens[new_lens.size - 1] if new_lens.size else -1


@njit(cache=True, nogil=True)
def cut_off_gap_edit_script(ops, lens, q_start, q_end, s_start, s_end, q_cut, s_cut,
                            cut_begin):
    """Trim an HSP at the first point of its script at or past (q_cut, s_cut)
    (s_CutOffGapEditScript).

    Used when an HSP shares its start (cut_begin True: drop what lies before the better
    HSP's end) or its end (cut_begin False: drop what lies after the better HSP's start)
    with a better one.  Gap runs are passed whole, so a cut can keep a trailing gap;
    rescoring (`reevaluate_with_ambiguities`) follows.  Returns (q_start, q_end, s_start,
    s_end, ops, lens), unchanged when the script never reaches that point."""
    q_cut -= q_start
    s_cut -= s_start
    q_id = 0
    s_id = 0
    done = 0
    found = False
    index = 0
    while index < ops.size:
        done = 0
        while done < lens[index]:
            if ops[index] == OP_SUB:
                q_id += 1
                s_id += 1
                done += 1
            elif ops[index] == OP_DEL:
                s_id += lens[index]
                done += lens[index]
            else:
                q_id += lens[index]
                done += lens[index]
            if q_id >= q_cut and s_id >= s_cut:
                found = True
                break
        if found:
            break
        index += 1
    if not found:
        return q_start, q_end, s_start, s_end, ops.copy(), lens.copy()
    if cut_begin:
        out_ops = np.empty(ops.size - index, dtype=np.uint8)
        out_lens = np.empty(ops.size - index, dtype=np.int32)
        count = 0
        if done < lens[index]:
            out_ops[0] = ops[index]
            out_lens[0] = lens[index] - done
            count = 1
        for k in range(index + 1, ops.size):
            out_ops[count] = ops[k]
            out_lens[count] = lens[k]
            count += 1
        return (q_start + q_id, q_end, s_start + s_id, s_end,
                out_ops[:count].copy(), out_lens[:count].copy())
    out_ops = ops[:index + 1].copy()
    out_lens = lens[:index + 1].copy()
    if done < lens[index]:
        out_lens[index] = done
    return q_start, q_start + q_id, s_start, s_start + s_id, out_ops, out_lens


# ----------------------------------------------------------------------------------------------
# rescoring with the true letters: Blast_HSPReevaluateWithAmbiguitiesGapped


@njit(cache=True, nogil=True)
def reevaluate_with_ambiguities(query, q_base, q_length, subject, q_start, s_start, ops, nums,
                                matrix, reward, penalty, gap_open, gap_extend, cutoff):
    """Rescore an HSP's edit script with the real matrix (ambiguity codes included), keep its
    best-scoring part, extend that by exact unambiguous matches at both ends, and report
    whether it still reaches `cutoff`.

    Linear (0/0) gap costs use (reward - 2*penalty)/2 per gap column, in half units when
    the reward is odd.  `ops`/`nums` are modified.  Returns (keep, score, q_start, q_end,
    s_start, s_end, first_run, last_run, last_run_length): the new script is
    runs first_run..last_run with the last one's length replaced."""
    factor = 1
    if gap_open == 0 and gap_extend == 0:
        if reward % 2 == 1:
            factor = 2
        g_open = 0
        g_extend = (reward - 2 * penalty) * factor // 2
    else:
        g_open = gap_open
        g_extend = gap_extend
    size = ops.size
    qp = q_start
    sp = s_start
    score = 0
    total = 0
    best_qs = qp
    best_qe = qp
    cur_qs = qp
    best_ss = sp
    best_se = sp
    cur_ss = sp
    best_first = 0
    best_last = 0
    cur_first = 0
    best_last_num = -1
    for index in range(size):
        op_index = 0
        while op_index < nums[index]:
            if ops[index] == OP_SUB:
                total += factor * matrix[query[q_base + qp] & 15, subject[sp]]
                qp += 1
                sp += 1
                op_index += 1
            elif ops[index] == OP_DEL:
                total -= g_open + g_extend * nums[index]
                sp += nums[index]
                op_index += nums[index]
            else:
                total -= g_open + g_extend * nums[index]
                qp += nums[index]
                op_index += nums[index]
            if total < 0:
                # restart after this point; forget the best so far unless it passed the cutoff
                if op_index < nums[index]:
                    nums[index] -= op_index
                    cur_first = index
                    op_index = 0
                else:
                    cur_first = index + 1
                total = 0
                cur_qs = qp
                cur_ss = sp
                if score < cutoff:
                    best_qs = qp
                    best_ss = sp
                    score = 0
                    best_first = cur_first
                    best_last = cur_first
            elif total > score:
                score = total
                best_qs = cur_qs
                best_ss = cur_ss
                best_qe = qp
                best_se = sp
                best_first = cur_first
                best_last = index
                best_last_num = op_index
    score //= factor

    if best_first < size and best_last < size:
        # exact unambiguous matches just outside the best part join it
        qi = best_qs
        si = best_ss
        ext = 0
        while qi > 0 and si > 0:
            qi -= 1
            si -= 1
            a = query[q_base + qi]
            if a != subject[si] or a >= AMBIGUOUS_MIN:
                break
            ext += 1
        best_qs -= ext
        best_ss -= ext
        nums[best_first] += ext
        if best_last == best_first:
            best_last_num += ext
        score += ext * reward
        qi = best_qe
        si = best_se
        ext = 0
        while qi < q_length and si < subject.size and query[q_base + qi] < AMBIGUOUS_MIN:
            a = query[q_base + qi]
            b = subject[si]
            qi += 1
            si += 1
            if a != b:
                break
            ext += 1
        best_qe += ext
        best_se += ext
        nums[best_last] += ext
        best_last_num += ext
        score += ext * reward

    keep = score >= cutoff
    return keep, score, best_qs, best_qe, best_ss, best_se, best_first, best_last, best_last_num


@njit(cache=True, nogil=True)
def query_coverage(aligned, query_length):
    """Blast_HSPGetQueryCoverage: the percentage of a query of `query_length` letters that
    `aligned` of them cover, with BLAST's half a percent added below 99 %."""
    percent = 100.0 * aligned / np.float64(query_length)
    return percent + 0.5 if percent < 99 else percent


@njit(cache=True, nogil=True)
def covering(rows, index, context_length, percent):
    """The rows at `index` (its order kept) that cover at least `percent` of their context
    (Blast_HSPListReapByQueryCoverage)."""
    keep = np.empty(index.size, dtype=np.bool_)
    for k in range(index.size):
        r = rows[index[k]]
        keep[k] = query_coverage(r[HSP_Q_END] - r[HSP_Q_START],
                                 context_length[r[HSP_CONTEXT]]) >= percent
    return index[keep]


@njit(cache=True, nogil=True)
def count_identities(query, q_base, subject, q_start, s_start, ops, nums):
    """Identical letter pairs (equal codes, so N/N counts) and alignment length (columns,
    gaps included) of an edit script (Blast_HSPGetNumIdentities)."""
    ident = 0
    length = 0
    qp = q_base + q_start
    sp = s_start
    for i in range(ops.size):
        length += nums[i]
        if ops[i] == OP_SUB:
            for _ in range(nums[i]):
                if query[qp] == subject[sp]:
                    ident += 1
                qp += 1
                sp += 1
        elif ops[i] == OP_DEL:
            sp += nums[i]
        else:
            qp += nums[i]
    return ident, length


# ----------------------------------------------------------------------------------------------
# a subject's preliminary HSPs, chunk by chunk, as rows [n, HSP_FIELDS] (hsp_rows): each chunk's
# purge, sort and merge in compiled code, since the prelim threads do it for every chunk, and
# Python would hold the GIL for each


@njit(cache=True, nogil=True)
def chunk_rows(rows, offset, purge):
    """A chunk's HSPs (rows from the gapped stage, in hit order): common endpoints purged
    (Blast_HSPListPurgeHSPsWithCommonEndpoints) if `purge`, sorted by score, and the subject
    coordinates moved by the chunk's `offset` (Blast_HSPListAdjustOffsets)."""
    n = rows.shape[0]
    kept = rows
    if purge:
        kept, _, _, _, _ = purge_rows(rows, np.zeros(n + 1, dtype=np.int64),
                                      np.zeros(0, dtype=np.uint8),
                                      np.zeros(0, dtype=np.int32), True)
    out = kept[score_order_rows(kept)]
    for i in range(out.shape[0]):
        out[i, HSP_S_START] += offset
        out[i, HSP_S_END] += offset
        out[i, HSP_S_GAPPED_START] += offset
    return out


@njit(cache=True, nogil=True)
def merge_chunk_rows(combined, new, split, overlap, diag_close, allow_gap=True):
    """Blast_HSPListsMerge for successive subject chunks, without traceback (allow_gap: true
    in a gapped search, false in an ungapped one): an HSP of the new chunk that starts in the
    overlap strip [split, split + overlap) and lies within diag_close diagonals of one of the
    previous chunks' HSPs reaching into the strip is folded into it (_merge_two_rows). `combined` and `new`
    come sorted by score (score_order); `combined` is changed in place. Returns the merged
    rows, sorted by score as a stable sort of `combined` then `new` would sort them.

    The rows are merged in order rather than sorted again: a long subject's rows grow chunk
    by chunk, and sorting all of them at every chunk would be quadratic in its chunks."""
    keep_new = np.ones(new.shape[0], dtype=np.bool_)
    changed = np.zeros(combined.shape[0], dtype=np.bool_)
    for i in range(combined.shape[0]):
        if combined[i, HSP_S_END] <= split:
            continue
        for j in range(new.shape[0]):
            if new[j, HSP_S_START] >= split + overlap or not keep_new[j] or \
                    combined[i, HSP_CONTEXT] != new[j, HSP_CONTEXT]:
                continue
            end_diag = combined[i, HSP_Q_END] - combined[i, HSP_S_END]
            start_diag = new[j, HSP_Q_START] - new[j, HSP_S_START]
            if abs(end_diag - start_diag) < diag_close and \
                    _merge_two_rows(combined, i, new, j, allow_gap):
                keep_new[j] = False
                changed[i] = True
    merged = np.concatenate((combined, new[keep_new]))
    # a stable sort orders by (key, position): the unchanged rows, the changed ones (sorted
    # again) and the new ones are each in that order already, so merging them is enough
    moved = np.flatnonzero(changed)
    _stable_sort(moved, moved.size, merged, BY_SCORE)
    order = _merge_by_key(merged, np.flatnonzero(~changed), moved)
    order = _merge_by_key(merged, order, np.arange(combined.shape[0], merged.shape[0]))
    return merged[order]


@njit(cache=True, nogil=True)
def subject_rows(found, bounds, starts, overlap, diag_close, best_hit_lengths, gapped):
    """A subject's preliminary rows from its chunks' gapped rows: chunk k's rows are
    found[bounds[k]:bounds[k + 1]] and it starts at letter starts[k] (the chunks in order,
    each with rows); each chunk goes through chunk_rows and is merged into those before it
    (merge_chunk_rows). One compiled call for the subject: a chromosome has dozens of
    chunks, and a call per chunk from Python would take the GIL back twice for each.
    With -subject_besthit, best_hit_lengths holds the contexts' lengths, and the rows go
    through the subject best hit after each chunk, as blastn's engine does (else it is
    empty). `gapped`: false for an ungapped search, whose rows BLAST keeps as found (no
    purge) and merges across chunks on one diagonal only."""
    rows = _best_hit_rows(chunk_rows(found[bounds[0]:bounds[1]], starts[0], gapped),
                          best_hit_lengths)
    for k in range(1, starts.size):
        more = chunk_rows(found[bounds[k]:bounds[k + 1]], starts[k], gapped)
        rows = _best_hit_rows(merge_chunk_rows(rows, more, starts[k], overlap, diag_close,
                                               gapped), best_hit_lengths)
    return rows


@njit(cache=True, nogil=True)
def _best_hit_rows(rows, context_length):
    """The rows (score order) without those the subject best hit drops; all of them
    without context lengths."""
    if context_length.size == 0 or rows.shape[0] < 2:
        return rows
    contexts = rows[:, HSP_CONTEXT].copy()
    keep = subject_best_hit_keep(contexts, rows[:, HSP_Q_START].copy(),
                                 rows[:, HSP_Q_END].copy(), context_length[contexts])
    return rows[keep]


@njit(cache=True, nogil=True)
def _merge_by_key(rows, first, second):
    """Two index lists, each sorted by (BY_SCORE key, index), merged in that order."""
    out = np.empty(first.size + second.size, dtype=np.int64)
    i = j = 0
    for k in range(out.size):
        if j < second.size and (i == first.size or _key_before(rows, second[j], first[i],
                                                                BY_SCORE) or
                                (not _key_before(rows, first[i], second[j], BY_SCORE) and
                                 second[j] < first[i])):
            out[k] = second[j]
            j += 1
        else:
            out[k] = first[i]
            i += 1
    return out


@njit(cache=True, nogil=True)
def _merge_two_rows(a, i, b, j, allow_gap):
    """s_BlastMergeTwoHSPs: b's row j, starting or ending inside the box of a's row i, is
    folded into it; with allow_gap (gapped searches) on any diagonal, which merges the HSPs
    of a repeat's shifted copies, else on a's diagonal only."""
    if not allow_gap and \
            (a[i, HSP_S_START] - b[j, HSP_S_START]) - (a[i, HSP_Q_START] - b[j, HSP_Q_START]) != 0:
        return False
    start_inside = a[i, HSP_Q_START] <= b[j, HSP_Q_START] <= a[i, HSP_Q_END] and \
        a[i, HSP_S_START] <= b[j, HSP_S_START] <= a[i, HSP_S_END]
    end_inside = a[i, HSP_Q_START] <= b[j, HSP_Q_END] <= a[i, HSP_Q_END] and \
        a[i, HSP_S_START] <= b[j, HSP_S_END] <= a[i, HSP_S_END]
    if not (start_inside or end_inside):
        return False
    density = (a[i, HSP_SCORE] + b[j, HSP_SCORE]) / \
        ((a[i, HSP_Q_END] - a[i, HSP_Q_START]) + (b[j, HSP_Q_END] - b[j, HSP_Q_START]))
    a[i, HSP_Q_START] = min(a[i, HSP_Q_START], b[j, HSP_Q_START])
    a[i, HSP_S_START] = min(a[i, HSP_S_START], b[j, HSP_S_START])
    a[i, HSP_Q_END] = max(a[i, HSP_Q_END], b[j, HSP_Q_END])
    a[i, HSP_S_END] = max(a[i, HSP_S_END], b[j, HSP_S_END])
    if b[j, HSP_SCORE] > a[i, HSP_SCORE]:
        a[i, HSP_Q_GAPPED_START] = b[j, HSP_Q_GAPPED_START]
        a[i, HSP_S_GAPPED_START] = b[j, HSP_S_GAPPED_START]
        a[i, HSP_SCORE] = b[j, HSP_SCORE]
    a[i, HSP_SCORE] = max(int(density * (a[i, HSP_Q_END] - a[i, HSP_Q_START])), a[i, HSP_SCORE])
    return True
