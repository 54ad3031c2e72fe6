"""BLAST+ 2.12's HSP filters across a query's subjects, and within one subject's HSPs.

* culling (-culling_limit; hspfilter_culling.c): an HSP is dropped once `limit` HSPs that
  dominate it (cover at least half of its query range and beat it on score and length)
  have been seen, in a forest of query-range trees;
* the best-hit filter (-best_hit_overhang, -best_hit_score_edge; hspfilter_besthit.c): an
  HSP is dropped when another that covers its query range has a better E-value and a
  better score per letter, by the score edge;
* the subject best hit (-subject_besthit; Blast_HSPListSubjectBestHit): of one subject's
  HSPs, those whose query range lies within a better one's (3 letters of slack), on either
  strand, are dropped.

blastn runs the first two twice (CBlastOptionsLocal adds them for both stages): on the
preliminary HSPs, over each query's subjects in database order (prelim_filtered: culling
with 3 more dominating HSPs allowed, the best-hit filter without overhang), and after the
traceback, over the query's best subjects in E-value order (traced_filtered). Their outcome
depends on the order the HSPs come in, which these functions keep.
"""

import numpy as np

from .numba_start import njit
from .stats import EVALUE_EQUAL_BELOW

CULLING_PRELIM_EXTRA = 3       # the preliminary culling's allowance beyond a limit above 1
SUBJECT_BESTHIT_RANGE_DIFF = 3  # DEFAULT_SUBJECT_BESTHIT_NUCL_MAX_RANGE_DIFF
CULLING_FORK_SIZE = 20         # HSPs a leaf holds before it is split (kNumHSPtoFork)


def has_query_filter(options) -> bool:
    """Whether culling or the best-hit filter is on: both need every subject of a query,
    and both change the HSPs that max_hsps and the query coverage test see."""
    return options.culling_limit > 0 or options.best_hit_overhang > 0


# ----------------------------------------------------------------------------------------------
# the stages


def prelim_filtered(by_query: dict, query_lengths: list, options) -> dict:
    """A batch's preliminary HSPs ({query index: {ordinal: Hsps}}, each in score order with
    E-values; query_lengths[q] the letters of query q) through the preliminary writer
    blastn uses: culling or the best-hit filter, over each query's subjects in ordinal
    order (blastn's single-thread order). Subjects left without HSPs are dropped."""
    filtered = {}
    for q, subjects in by_query.items():
        ordinals = sorted(o for o, hsps in subjects.items() if len(hsps))
        if not ordinals:
            continue
        lists = [subjects[o] for o in ordinals]
        keep = _keep(lists, ordinals, query_lengths[q], options, prelim=True)
        filtered[q] = _split_kept(lists, ordinals, keep)
    return filtered


def traced_filtered(ranked: list, query_length: int, options) -> list:
    """A query's traced subjects [(ordinal, Hsps)], best first, each's HSPs in E-value order,
    through the traceback's pipe blastn uses: culling or the best-hit filter. Subjects
    left without HSPs are dropped; the rest keep their order."""
    if not ranked:
        return ranked
    ordinals = [o for o, _ in ranked]
    lists = [hsps for _, hsps in ranked]
    kept = _split_kept(lists, ordinals, _keep(lists, ordinals, query_length, options,
                                              prelim=False))
    return [(o, kept[o]) for o in ordinals if o in kept]


def subject_best_hit(hsps, query_length: int):
    """One subject's traced HSPs (in score order) without those Blast_HSPListSubjectBestHit
    drops."""
    if len(hsps) < 2:
        return hsps
    keep = subject_best_hit_keep(hsps.context.astype(np.int64), hsps.q_start.astype(np.int64),
                                 hsps.q_end.astype(np.int64),
                                 np.full(len(hsps), query_length, dtype=np.int64))
    return hsps if keep.all() else hsps.take(keep)


def _keep(lists: list, ordinals: list, query_length: int, options, prelim: bool) -> np.ndarray:
    """The filter's verdict on the HSPs of `lists` (one subject's each, ordinals[i]'s), in
    the order they come: a boolean per HSP."""
    context = np.concatenate([h.context for h in lists]).astype(np.int64)
    q_start = np.concatenate([h.q_start for h in lists]).astype(np.int64)
    q_end = np.concatenate([h.q_end for h in lists]).astype(np.int64)
    minus = context % 2 == 1
    # query ranges on the plus strand, as both filters compare them
    begin = np.where(minus, query_length - q_end, q_start)
    end = np.where(minus, query_length - q_start, q_end)
    score = np.concatenate([h.score for h in lists]).astype(np.int64)
    sid = np.repeat(np.asarray(ordinals, dtype=np.int64), [len(h) for h in lists])
    if options.culling_limit:
        limit = options.culling_limit
        if prelim and limit > 1:
            limit += CULLING_PRELIM_EXTRA
        s_start = np.concatenate([h.s_start for h in lists]).astype(np.int64)
        return cull(begin, end, score, sid, s_start, int(query_length), int(limit))
    overhang = 0.0 if prelim else float(options.best_hit_overhang)
    evalue = np.concatenate([h.evalue for h in lists]).astype(np.float64)
    capacity = best_hit_capacity(options)
    kept, place = best_hits(begin, end - begin, score, evalue, overhang,
                            float(options.best_hit_score_edge), sid, capacity)
    # the filter's final list goes to a hit list of `capacity` subjects
    entries = np.flatnonzero(kept)
    entries = entries[np.argsort(place[entries], kind="stable")]
    keep = np.zeros(kept.size, dtype=np.bool_)
    keep[entries[best_subjects(entries, evalue, score, sid, capacity)]] = True
    return keep


def best_hit_capacity(options) -> int:
    """The subjects the best-hit filter keeps a query (BlastHSPBestHitParamsNew's
    prelim_hitlist_size, the preliminary hit list's), which also bounds the HSPs it holds
    before it prunes."""
    from .engine import prelim_hitlist_size

    return prelim_hitlist_size(options)


def _split_kept(lists: list, ordinals: list, keep: np.ndarray) -> dict:
    """{ordinal: its kept Hsps} for the subjects with any kept."""
    out, at = {}, 0
    for ordinal, hsps in zip(ordinals, lists):
        mine = keep[at:at + len(hsps)]
        at += len(hsps)
        if mine.all():
            out[ordinal] = hsps
        elif mine.any():
            out[ordinal] = hsps.take(mine)
    return out


# ----------------------------------------------------------------------------------------------
# culling: hspfilter_culling.c's trees. A node covers query letters [begin, end] and holds the
# HSPs that straddle its midpoint (or all of a leaf's); each HSP has a merit, the dominating
# HSPs it may still meet. The trees' shape decides which HSPs meet, so it is kept as BLAST
# grows and prunes it, node by node.
#
# HSPs: int64 columns begin, end, score, sid, s_offset (hsps), and merit, next (its node's
# list), alive. Nodes: int64 columns begin, end, left, right, head, parent (-1: none).

N_BEGIN, N_END, N_LEFT, N_RIGHT, N_HEAD, N_PARENT = range(6)
H_BEGIN, H_END, H_SCORE, H_SID, H_S_OFFSET = range(5)


@njit(cache=True, nogil=True)
def cull(begin, end, score, sid, s_offset, query_length, limit):
    """Which HSPs a culling tree over query letters [0, query_length] keeps, the HSPs
    (plus-strand query ranges [begin, end), scores, subject ordinals and starts) added in
    order, each with merit `limit`: a boolean per HSP."""
    n = begin.size
    hsps = np.empty((n, 5), dtype=np.int64)
    hsps[:, H_BEGIN] = begin
    hsps[:, H_END] = end
    hsps[:, H_SCORE] = score
    hsps[:, H_SID] = sid
    hsps[:, H_S_OFFSET] = s_offset
    merit = np.full(n, limit, dtype=np.int64)
    following = np.full(n, -1, dtype=np.int64)
    alive = np.zeros(n, dtype=np.bool_)
    nodes = np.full((2 * n + 1, 6), -1, dtype=np.int64)
    nodes[0, N_BEGIN] = 0
    nodes[0, N_END] = query_length
    used = 1
    for a in range(n):
        used = _save(hsps, merit, following, alive, nodes, used, a)
    return alive


@njit(cache=True, nogil=True)
def _dominates(hsps, p, y):
    """s_DominateTest: HSP p dominates HSP y."""
    b1 = hsps[p, H_BEGIN]
    b2 = hsps[y, H_BEGIN]
    e1 = hsps[p, H_END]
    e2 = hsps[y, H_END]
    s1 = hsps[p, H_SCORE]
    s2 = hsps[y, H_SCORE]
    l1 = e1 - b1
    l2 = e2 - b2
    overlap = min(e1, e2) - max(b1, b2)
    if 2 * overlap < l2:
        return False
    # twice the score's relative difference plus the length's
    d = 4 * s1 * l1 + 2 * s1 * l2 - 2 * s2 * l1 - 4 * s2 * l2
    if (s1 == s2 and b1 == b2 and l1 == l2) or d == 0:
        if s1 != s2:
            return s1 > s2
        if hsps[p, H_SID] != hsps[y, H_SID]:
            return hsps[p, H_SID] < hsps[y, H_SID]
        return hsps[p, H_S_OFFSET] <= hsps[y, H_S_OFFSET]
    return d > 0


@njit(cache=True, nogil=True)
def _save(hsps, merit, following, alive, nodes, used, a):
    """s_SaveHSP: HSP a meets the HSPs on its way down; if its merit lasts, it joins the
    deepest node it fits and counts against the HSPs it dominates. Returns the nodes used."""
    t = 0
    node = 0
    while t >= 0:
        if not _full_pass(hsps, merit, following, nodes[t, N_HEAD], a):
            return used
        mid = (nodes[t, N_BEGIN] + nodes[t, N_END]) // 2
        node = t
        if hsps[a, H_END] < mid:
            t = nodes[t, N_LEFT]
        elif hsps[a, H_BEGIN] > mid:
            t = nodes[t, N_RIGHT]
        else:
            break
    following[a] = nodes[node, N_HEAD]
    nodes[node, N_HEAD] = a
    alive[a] = True
    if nodes[node, N_LEFT] < 0 and nodes[node, N_RIGHT] < 0:
        if _process_list(hsps, merit, following, alive, nodes, node, a) >= CULLING_FORK_SIZE:
            used = _fork(hsps, following, nodes, node, used)
        return used
    _process_list(hsps, merit, following, alive, nodes, node, a)
    for side in (N_LEFT, N_RIGHT):
        if nodes[node, side] >= 0:
            _process_tree(hsps, merit, following, alive, nodes, nodes[node, side], a)
    return used


@njit(cache=True, nogil=True)
def _full_pass(hsps, merit, following, head, y):
    """s_FullPass: each HSP of a list that dominates y costs y a merit; False once y has
    none left."""
    p = head
    while p >= 0:
        if _dominates(hsps, p, y):
            merit[y] -= 1
            if merit[y] <= 0:
                return False
        p = following[p]
    return True


@njit(cache=True, nogil=True)
def _process_list(hsps, merit, following, alive, nodes, node, y):
    """s_ProcessHSPList: each other HSP of the node that y dominates loses a merit, and
    leaves with none; with y < 0 (s_MarkDownHSPList) every HSP of the node loses one.
    Returns the HSPs left."""
    count = 0
    before = -1
    p = nodes[node, N_HEAD]
    while p >= 0:
        r = p
        p = following[r]
        count += 1
        if y < 0 or (r != y and _dominates(hsps, y, r)):
            merit[r] -= 1
            if merit[r] <= 0:
                _unlink(following, alive, nodes, node, before, r)
                count -= 1
                continue
        before = r
    return count


@njit(cache=True, nogil=True)
def _unlink(following, alive, nodes, node, before, r):
    if before < 0:
        nodes[node, N_HEAD] = following[r]
    else:
        following[before] = following[r]
    alive[r] = False


@njit(cache=True, nogil=True)
def _fork(hsps, following, nodes, node, used):
    """s_ForkChildren: the node's HSPs that lie wholly on one side of its midpoint move to
    that side's child (made when missing). Returns the nodes used."""
    mid = (nodes[node, N_BEGIN] + nodes[node, N_END]) // 2
    before = -1
    p = nodes[node, N_HEAD]
    while p >= 0:
        r = p
        p = following[r]
        side = -1
        if hsps[r, H_END] < mid:
            side = N_LEFT
        elif hsps[r, H_BEGIN] > mid:
            side = N_RIGHT
        if side < 0:
            before = r
            continue
        if nodes[node, side] < 0:
            child = used
            used += 1
            nodes[child, N_BEGIN] = nodes[node, N_BEGIN] if side == N_LEFT else mid
            nodes[child, N_END] = mid if side == N_LEFT else nodes[node, N_END]
            nodes[child, N_PARENT] = node
            nodes[node, side] = child
        child = nodes[node, side]
        if before < 0:
            nodes[node, N_HEAD] = p
        else:
            following[before] = p
        following[r] = nodes[child, N_HEAD]
        nodes[child, N_HEAD] = r
    return used


@njit(cache=True, nogil=True)
def _drop_node(nodes, node):
    """The node leaves the tree (s_CTreeNodeFree): its parent forgets it."""
    parent = nodes[node, N_PARENT]
    if nodes[parent, N_LEFT] == node:
        nodes[parent, N_LEFT] = -1
    else:
        nodes[parent, N_RIGHT] = -1


@njit(cache=True, nogil=True)
def _is_leaf(nodes, node):
    return nodes[node, N_LEFT] < 0 and nodes[node, N_RIGHT] < 0


@njit(cache=True, nogil=True)
def _mark_down_tree(hsps, merit, following, alive, nodes, top):
    """s_MarkDownCTree: every HSP under `top` loses a merit; nodes left empty and without
    children go, children before their parents."""
    order = _preorder(nodes, top)
    for k in range(order.size - 1, -1, -1):
        node = order[k]
        if _process_list(hsps, merit, following, alive, nodes, node, -1) <= 0 and \
                _is_leaf(nodes, node):
            _drop_node(nodes, node)


@njit(cache=True, nogil=True)
def _preorder(nodes, top):
    """The nodes under `top` (itself included), each before its children."""
    order = np.empty(nodes.shape[0], dtype=np.int64)
    stack = np.empty(nodes.shape[0], dtype=np.int64)
    stack[0] = top
    depth = 1
    count = 0
    while depth > 0:
        depth -= 1
        node = stack[depth]
        order[count] = node
        count += 1
        for side in (N_RIGHT, N_LEFT):
            if nodes[node, side] >= 0:
                stack[depth] = nodes[node, side]
                depth += 1
    return order[:count]


# what s_ProcessCTree does at a node it reaches, after the nodes below it
AT_COVERED = 0    # x covers the node's range: every HSP under it loses a merit
AT_LEAF = 1       # x against the leaf's HSPs
AT_ONE_SIDE = 2   # x lies on one side of the midpoint: nothing here
AT_STRADDLE = 3   # x straddles the midpoint: x against the node's own HSPs


@njit(cache=True, nogil=True)
def _process_tree(hsps, merit, following, alive, nodes, top, x):
    """s_ProcessCTree: the HSPs under `top` that the new HSP x dominates lose a merit; nodes
    left empty and without children go. The nodes are visited as BLAST's recursion visits
    them, and each one's work is done after the work below it."""
    visited = np.empty(nodes.shape[0], dtype=np.int64)
    action = np.empty(nodes.shape[0], dtype=np.int64)
    stack = np.empty(nodes.shape[0], dtype=np.int64)
    stack[0] = top
    depth = 1
    count = 0
    while depth > 0:
        depth -= 1
        node = stack[depth]
        visited[count] = node
        count += 1
        if hsps[x, H_BEGIN] <= nodes[node, N_BEGIN] and hsps[x, H_END] >= nodes[node, N_END]:
            action[count - 1] = AT_COVERED
            continue
        if _is_leaf(nodes, node):
            action[count - 1] = AT_LEAF
            continue
        mid = (nodes[node, N_BEGIN] + nodes[node, N_END]) // 2
        if hsps[x, H_END] < mid:
            sides = (N_LEFT, N_LEFT)
            action[count - 1] = AT_ONE_SIDE
        elif hsps[x, H_BEGIN] > mid:
            sides = (N_RIGHT, N_RIGHT)
            action[count - 1] = AT_ONE_SIDE
        else:
            sides = (N_RIGHT, N_LEFT)
            action[count - 1] = AT_STRADDLE
        for k in range(2 if action[count - 1] == AT_STRADDLE else 1):
            child = nodes[node, sides[k]]
            if child >= 0:
                stack[depth] = child
                depth += 1
    for k in range(count - 1, -1, -1):
        node = visited[k]
        if action[k] == AT_COVERED:
            _mark_down_tree(hsps, merit, following, alive, nodes, node)
        elif action[k] == AT_LEAF:
            if _process_list(hsps, merit, following, alive, nodes, node, x) <= 0:
                _drop_node(nodes, node)
        elif action[k] == AT_STRADDLE:
            if _process_list(hsps, merit, following, alive, nodes, node, x) <= 0 and \
                    _is_leaf(nodes, node):
                _drop_node(nodes, node)


# ----------------------------------------------------------------------------------------------
# the best-hit filter: s_BlastHSPBestHitRun's list of kept HSPs, sorted by where their
# (widened) query ranges begin


@njit(cache=True, nogil=True)
def best_hits(begin, length, score, evalue, overhang, score_edge, sid, capacity):
    """Which HSPs the best-hit filter keeps, the HSPs (plus-strand query starts and
    lengths, scores, E-values, subjects) added in order: a boolean per HSP, and each kept
    one's place in the filter's final list (-1 for the others). Once it holds more HSPs
    than twice `capacity` subjects' worth (at first; twice what it keeps after), only the
    HSPs of its best `capacity` subjects stay, their ranges no longer widened
    (s_BlastHSPBestHitRun's prune)."""
    n = begin.size
    kept = np.zeros(n, dtype=np.bool_)
    low = np.empty(n, dtype=np.int64)    # the kept HSPs' ranges, widened by their overhang
    high = np.empty(n, dtype=np.int64)
    following = np.full(n, -1, dtype=np.int64)
    head = -1
    count = 0
    most = 2 * capacity
    edge = 1.0 - score_edge
    for a in range(n):
        start = begin[a]
        stop = start + length[a]
        if _beaten(head, following, low, high, length, score, evalue, start, stop,
                   score[a] / length[a] / edge, evalue[a]):
            continue
        reach = int(2.0 * length[a] * overhang / (1.0 - 2.0 * overhang))
        widen = int(length[a] * overhang)
        head, dropped = _drop_beaten(head, following, kept, low, high, length, score, evalue,
                                     start - reach, stop + reach, start - widen, stop + widen,
                                     score[a] / length[a] * edge, evalue[a])
        low[a] = start - widen
        high[a] = stop + widen
        kept[a] = True
        head = _insert_by_low(head, following, low, a)
        count += 1 - dropped
        if count > most:
            head, count = _prune(head, following, kept, low, high, begin, length, score,
                                 evalue, sid, capacity)
            most = 2 * count
    place = np.full(n, -1, dtype=np.int64)
    entries = _walk(head, following, count)
    for k in range(entries.size):
        place[entries[k]] = k
    return kept, place


@njit(cache=True, nogil=True)
def _walk(head, following, count):
    """The list's HSPs in its order."""
    entries = np.empty(count, dtype=np.int64)
    k = 0
    p = head
    while p >= 0:
        entries[k] = p
        k += 1
        p = following[p]
    return entries[:k]


@njit(cache=True, nogil=True)
def best_subjects(entries, evalue, score, sid, capacity):
    """The `capacity` best subjects of a list's HSPs (`entries`, in the list's order), as
    Blast_HitListUpdate keeps them: by best E-value (tiny ones equal), then the score of
    the subject's first HSP in the list, then the higher ordinal. A boolean per entry."""
    subjects = np.unique(sid[entries])
    group = np.searchsorted(subjects, sid[entries])
    best = np.full(subjects.size, np.inf)
    first = np.full(subjects.size, -1, dtype=np.int64)
    for k in range(entries.size):
        g = group[k]
        if first[g] < 0:
            first[g] = score[entries[k]]
        best[g] = min(best[g], evalue[entries[k]])
    keep_group = np.ones(subjects.size, dtype=np.bool_)
    if subjects.size > capacity:
        best = np.where(best < EVALUE_EQUAL_BELOW, 0.0, best)
        order = np.argsort(-subjects, kind="mergesort")
        order = order[np.argsort(-first[order], kind="mergesort")]
        order = order[np.argsort(best[order], kind="mergesort")]
        keep_group[order[capacity:]] = False
    return keep_group[group]


@njit(cache=True, nogil=True)
def _prune(head, following, kept, low, high, begin, length, score, evalue, sid, capacity):
    """Keep the HSPs of the list's best `capacity` subjects, relinked by their ranges
    unwidened, each placed before those of equal start already relinked (s_ExportToHitlist,
    then s_ImportFromHitlist). Returns (head, count)."""
    entries = _walk(head, following, kept.size)
    stay = best_subjects(entries, evalue, score, sid, capacity)
    for k in range(entries.size):
        if not stay[k]:
            kept[entries[k]] = False
    entries = entries[stay]
    # relinked in turn, each before the equal starts: equal starts end in reverse
    order = np.argsort(-np.arange(entries.size), kind="mergesort")
    order = order[np.argsort(begin[entries[order]], kind="mergesort")]
    head = -1
    for k in range(order.size - 1, -1, -1):
        e = entries[order[k]]
        low[e] = begin[e]
        high[e] = begin[e] + length[e]
        following[e] = head
        head = e
    return head, entries.size


@njit(cache=True, nogil=True)
def _beaten(head, following, low, high, length, score, evalue, start, stop, density,
            evalue_new):
    """A kept HSP covers [start, stop) with an E-value as good and a better score per
    letter than `density`."""
    p = head
    while p >= 0 and high[p] < stop:
        p = following[p]
    while p >= 0 and low[p] <= start:
        if high[p] >= stop and evalue[p] <= evalue_new and score[p] / length[p] > density:
            return True
        p = following[p]
    return False


@njit(cache=True, nogil=True)
def _drop_beaten(head, following, kept, low, high, length, score, evalue, reach_low,
                 reach_high, start, stop, density, evalue_new):
    """Drop the kept HSPs starting in [reach_low, reach_high) that lie within [start,
    stop) once their own widening is taken off, with an E-value no better and a score per
    letter below `density`. Returns (the list's head, how many were dropped)."""
    dropped = 0
    before = -1
    p = head
    while p >= 0 and low[p] < reach_low:
        before = p
        p = following[p]
    while p >= 0 and low[p] < reach_high:
        own = (high[p] - low[p] - length[p]) // 2
        nxt = following[p]
        if low[p] + own >= start and high[p] - own <= stop and evalue[p] >= evalue_new \
                and score[p] / length[p] < density:
            kept[p] = False
            dropped += 1
            if before < 0:
                head = nxt
            else:
                following[before] = nxt
        else:
            before = p
        p = nxt
    return head, dropped


@njit(cache=True, nogil=True)
def _insert_by_low(head, following, low, a):
    """HSP a into the list, before the first that starts at or after it. Returns the head."""
    before = -1
    p = head
    while p >= 0 and low[p] < low[a]:
        before = p
        p = following[p]
    following[a] = p
    if before < 0:
        return a
    following[before] = a
    return head


# ----------------------------------------------------------------------------------------------
# one subject's best hits: Blast_HSPListSubjectBestHit


@njit(cache=True, nogil=True)
def subject_best_hit_keep(context, q_start, q_end, query_length):
    """Of one subject's HSPs (score order; query_length: each one's query's letters), those
    not within an earlier kept one's query range (widened by a few letters) on its strand,
    nor, in a second pass over the survivors, on the other strand (the range mirrored): a
    boolean per HSP."""
    range_diff = SUBJECT_BESTHIT_RANGE_DIFF
    n = context.size
    keep = np.ones(n, dtype=np.bool_)
    for i in range(n - 1):
        if not keep[i]:
            continue
        low = max(q_start[i] - range_diff, 0)
        high = q_end[i] + range_diff
        for j in range(i + 1, n):
            if keep[j] and context[j] == context[i] and q_start[j] >= low and \
                    q_end[j] <= high:
                keep[j] = False
    first = np.flatnonzero(keep)
    for a in range(first.size - 1):
        i = first[a]
        if not keep[i]:
            continue
        other = context[i] + 1 if context[i] % 2 == 0 else context[i] - 1
        high = query_length[i] - (q_start[i] - range_diff)
        low = query_length[i] - (q_end[i] + range_diff)
        for b in range(a + 1, first.size):
            j = first[b]
            if keep[j] and context[j] == other and q_start[j] >= low and q_end[j] <= high:
                keep[j] = False
    return keep
