"""X-drop DP gapped extension (gblastn.dynprog): score-only and traceback DP against a
reference DP and BLAST's own library, edit scripts consistent with scores, start points and
subject windows, script cut-off and rescoring, and golden HSPs from blastn."""

import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gblastn import dynprog
from gblastn.alphabet import encode_blastna, pack_2bit, score_matrix
from gblastn.hsp import cut_off_gap_edit_script, reevaluate_with_ambiguities
from gblastn.layouts import OP_DEL, OP_INS, OP_SUB

BLASTN = score_matrix(2, -3)
SHORT = score_matrix(1, -3)
NEG = -(10**12)
needs_blastn = pytest.mark.skipif(shutil.which("blastn") is None, reason="blastn not installed")


# --------------------------------------------------------------------------------------
# an independent, slow, full-matrix X-drop DP (rows = row letters, columns = column letters)

def reference_xdrop(rows, cols, matrix, gap_open, gap_extend, x_dropoff):
    """Every cell of the (m+1) x (n+1) matrix, visited row by row; a cell is dead when its
    score is more than X below the best seen so far, and dead cells feed nothing.

    One quirk of BLAST's band is modelled on purpose: every row of its band ends with a
    dead cell, except row 0 (the leading gap), which ends at its last live cell. So the
    diagonal from that last cell of row 0 into row 1 is never looked at (libblast 2.12's
    Blast_SemiGappedAlign returns 0 where a plain DP finds a leading gap of that length
    followed by matches)."""
    x_dropoff = max(x_dropoff, gap_open + gap_extend)
    m, n = len(rows), len(cols)
    if m == 0 or n == 0:
        return 0, 0, 0
    oe = gap_open + gap_extend
    H = [[NEG] * (n + 1) for _ in range(m + 1)]
    E = [[NEG] * (n + 1) for _ in range(m + 1)]   # ends in a gap, coming from above
    best, best_a, best_b = 0, 0, 0
    H[0][0] = 0
    E[0][0] = -oe
    row0_last = 0
    for b in range(1, n + 1):
        if -(gap_open + b * gap_extend) >= -x_dropoff:
            H[0][b] = -(gap_open + b * gap_extend)
            E[0][b] = H[0][b] - oe
            row0_last = b
    for a in range(1, m + 1):
        F = NEG  # ends in a gap, coming from the left
        for b in range(0, n + 1):
            diag = H[a - 1][b - 1] + int(matrix[rows[a - 1], cols[b - 1]]) if b > 0 and H[a - 1][b - 1] > NEG else NEG
            if a == 1 and b - 1 == row0_last < n:
                diag = NEG  # the quirk: not in BLAST's band
            score = max(diag, E[a - 1][b], F)
            if score <= NEG // 2 or best - score > x_dropoff:
                F = NEG
                continue
            if score > best:
                best, best_a, best_b = score, a, b
            H[a][b] = score
            E[a][b] = max(score - oe, E[a - 1][b] - gap_extend)
            F = max(score - oe, F - gap_extend)
    return best, best_a, best_b


def run_xdrop(rows, cols, matrix, gap_open, gap_extend, x_dropoff, packed=False):
    rows_arr = pack_2bit(rows) if packed else np.asarray(rows, dtype=np.uint8)
    return dynprog.xdrop_score(rows_arr, -1, 1, len(rows), packed,
                               np.asarray(cols, dtype=np.uint8), -1, 1, len(cols),
                               matrix, gap_open, gap_extend, x_dropoff)


def related_pair(rng, n, sub_rate=0.1, indel_rate=0.05):
    """A random sequence and a mutated copy of it (substitutions and 1-3 letter indels)."""
    a = rng.integers(0, 4, n).astype(np.uint8)
    out = []
    i = 0
    while i < n:
        r = rng.random()
        if r < indel_rate / 2:
            out.extend(rng.integers(0, 4, int(rng.integers(1, 4))))
        elif r < indel_rate:
            i += int(rng.integers(1, 4))
            continue
        out.append(a[i] if rng.random() > sub_rate else (a[i] + rng.integers(1, 4)) % 4)
        i += 1
    return a, np.array(out, dtype=np.uint8)


pairs = st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 60), st.floats(0, 0.4),
                  st.floats(0, 0.2), st.sampled_from([(BLASTN, 5, 2), (SHORT, 5, 2), (BLASTN, 0, 3)]),
                  st.integers(1, 60))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs)
def test_score_only_matches_reference(case):
    seed, n, sub_rate, indel_rate, (matrix, go, ge), x = case
    rng = np.random.default_rng(seed)
    a, b = related_pair(rng, n, sub_rate, indel_rate)
    want = reference_xdrop(a, b, matrix, go, ge, x)
    assert run_xdrop(a, b, matrix, go, ge, x) == want
    if go == 5:  # packed rows only ever hold plain bases
        assert run_xdrop(a, b, matrix, go, ge, x, packed=True) == want
    # the traceback aligner runs the same DP
    score, used_a, used_b, _, _, _ = dynprog.align_ex(a, -1, 1, len(a), b, -1, 1, len(b),
                                                   matrix, go, ge, x)
    assert (score, used_a, used_b) == want


def test_leading_gap_of_full_row_zero_is_not_taken():
    """BLAST's band quirk: with X = 9 (5/2 gaps), row 0 holds gaps of 1 and 2 columns; the
    diagonal from the 2-column gap into row 1 is never computed, so a leading 2-letter gap
    followed by 16 matches, which a plain DP finds, is missed (libblast 2.12 returns 0 too)."""
    rows = encode_blastna("TTGAATAGACGGCGAAATCAT")
    cols = encode_blastna("AATTGAATAGACGGCGAAAATCAT")
    assert run_xdrop(rows, cols, BLASTN, 5, 2, 9) == (0, 0, 0)
    assert run_xdrop(rows, cols, BLASTN, 5, 2, 9, packed=True) == (0, 0, 0)
    assert dynprog.align_ex(rows, -1, 1, len(rows), cols, -1, 1, len(cols),
                            BLASTN, 5, 2, 9)[:3] == (0, 0, 0)
    assert reference_xdrop(rows, cols, BLASTN, 5, 2, 9) == (0, 0, 0)
    # one more letter of X lets row 0 hold the 3-column gap, and the 2-column one feeds row 1
    assert run_xdrop(rows, cols, BLASTN, 5, 2, 11) == (26, 21, 24)


def test_score_only_backward_equals_forward_on_reversed():
    rng = np.random.default_rng(7)
    for _ in range(50):
        a, b = related_pair(rng, int(rng.integers(5, 120)))
        fwd = run_xdrop(a[::-1].copy(), b[::-1].copy(), BLASTN, 5, 2, 33)
        back = dynprog.xdrop_score(a, len(a), -1, len(a), False, b, len(b), -1, len(b),
                                   BLASTN, 5, 2, 33)
        assert fwd == back


def test_score_only_long_band_grows():
    """Long, highly similar sequences make the band walk far: the column arrays must grow."""
    rng = np.random.default_rng(3)
    a, b = related_pair(rng, 3000, 0.03, 0.01)
    got = run_xdrop(a, b, BLASTN, 5, 2, 33, packed=True)
    assert got[0] > 4000
    assert got == dynprog.align_ex(a, -1, 1, len(a), b, -1, 1, len(b), BLASTN, 5, 2, 33)[:3]


def _libblast_score_only():
    """BLAST's own score-only X-drop DP, Blast_SemiGappedAlign from the libblast.so that the
    installed blastn 2.12 links (x86-64 struct layouts of 2.12), as a function
    (rows, cols, matrix, gap_open, gap_extend, x) -> (score, rows used, cols used); None
    when there is no such library."""
    import ctypes
    import platform
    blastn = shutil.which("blastn")
    if blastn is None or platform.machine() != "x86_64" or shutil.which("ldd") is None:
        return None
    version = subprocess.run([blastn, "-version"], capture_output=True, text=True).stdout
    if "2.12." not in version:
        return None
    linked = subprocess.run(["ldd", blastn], capture_output=True, text=True).stdout
    path = next((line.split("=>")[1].split("(")[0].strip() for line in linked.splitlines()
                 if line.strip().startswith("libblast.so") and "=>" in line), None)
    if not path:
        return None
    align = ctypes.CDLL(path).Blast_SemiGappedAlign
    align.restype = ctypes.c_int32
    ptr, i32 = ctypes.c_void_p, ctypes.c_int32
    align.argtypes = [ptr, ptr, i32, i32, ctypes.POINTER(i32), ctypes.POINTER(i32),
                      ctypes.c_ubyte, ptr, ptr, ptr, i32, ctypes.c_ubyte, ctypes.c_ubyte, ptr]

    def put(buffer, offset, value):
        ctypes.memmove(ctypes.addressof(buffer) + offset, ctypes.byref(value), ctypes.sizeof(value))

    def score(rows, cols, matrix, gap_open, gap_extend, x_dropoff):
        table = np.ascontiguousarray(matrix, dtype=np.int32)
        row_ptrs = (ptr * table.shape[0])(*[table[i].ctypes.data for i in range(table.shape[0])])
        score_matrix_struct = (ptr * 8)(ctypes.addressof(row_ptrs))     # SBlastScoreMatrix
        score_blk = (ctypes.c_ubyte * 256)()                          # BlastScoreBlk
        put(score_blk, 24, ptr(ctypes.addressof(score_matrix_struct)))  # .matrix
        gap_align = (ctypes.c_ubyte * 256)()                          # BlastGapAlignStruct
        put(gap_align, 64, ptr(ctypes.addressof(score_blk)))          # .sbp
        put(gap_align, 72, i32(x_dropoff))                            # .gap_x_dropoff
        params = (ctypes.c_ubyte * 64)()                              # BlastScoringParameters
        put(params, 12, i32(gap_open))
        put(params, 16, i32(gap_extend))
        # letter k (1-based) at index k; a sentinel row past the end as BLAST's buffers have
        a = np.concatenate([[0], rows, [15] * 8]).astype(np.uint8)
        b = np.concatenate([[0], cols, [15] * 8]).astype(np.uint8)
        a_used, b_used, fence = i32(0), i32(0), ctypes.c_ubyte(0)
        best = align(a.ctypes.data, b.ctypes.data, len(rows), len(cols), ctypes.byref(a_used),
                     ctypes.byref(b_used), 1, None, ctypes.addressof(gap_align),
                     ctypes.addressof(params), 0, 0, 0, ctypes.byref(fence))
        return best, a_used.value, b_used.value
    return score


@pytest.mark.golden
@needs_blastn
def test_score_only_matches_libblast():
    """The kernel (both sequence forms) and the traceback aligner against BLAST's own DP."""
    libblast = _libblast_score_only()
    if libblast is None:
        pytest.skip("no libblast.so of BLAST 2.12 linked by blastn")
    rng = np.random.default_rng(31)
    setups = [(BLASTN, 5, 2), (SHORT, 5, 2), (BLASTN, 0, 3), (BLASTN, 2, 1)]
    for trial in range(1500):
        matrix, go, ge = setups[trial % 4]
        a, b = related_pair(rng, int(rng.integers(1, 90)), rng.random() * 0.4, rng.random() * 0.2)
        x = int(rng.integers(1, 120))
        want = libblast(a, b, matrix, go, ge, x)
        assert run_xdrop(a, b, matrix, go, ge, x) == want, trial
        assert run_xdrop(a, b, matrix, go, ge, x, packed=True) == want, trial
        assert reference_xdrop(a, b, matrix, go, ge, x) == want, trial
        a[rng.integers(0, len(a), 2)] = rng.integers(4, 15, 2)  # ambiguity codes
        want = libblast(a, b, matrix, go, ge, x)
        assert run_xdrop(a, b, matrix, go, ge, x) == want, trial
        assert dynprog.align_ex(a, -1, 1, len(a), b, -1, 1, len(b), matrix, go, ge, x)[:3] == want


# --------------------------------------------------------------------------------------
# preliminary extension set-up (s_BlastDynProgNtGappedAlignment)

def reference_prelim(query, subject, seed_q, seed_s, ungapped_s_end, ungapped_score, matrix, x):
    x = min(x, ungapped_score)
    if ungapped_s_end >= seed_s + 8:
        seed_q, seed_s = seed_q + 3, seed_s + 3
    shift = 4 - seed_s % 4
    ql, sl = seed_q + shift, seed_s + shift
    if ql > len(query) or sl > len(subject):
        ql, sl = ql - 4, sl - 4
    left = reference_xdrop(subject[:sl][::-1], query[:ql][::-1], matrix, 5, 2, x)
    total, q0, s0, q1, s1 = left[0], ql - left[2], sl - left[1], ql, sl
    if ql < len(query) and sl < len(subject):
        right = reference_xdrop(subject[sl:], query[ql:], matrix, 5, 2, x)
        total, q1, s1 = total + right[0], ql + right[2], sl + right[1]
    return total, q0, q1, s0, s1, seed_q, seed_s


def test_prelim_extend_matches_reference():
    rng = np.random.default_rng(11)
    for trial in range(120):
        subject, query = related_pair(rng, int(rng.integers(20, 160)), 0.08, 0.04)
        query = np.concatenate([rng.integers(0, 4, int(rng.integers(0, 20))), query]).astype(np.uint8)
        # an ungapped alignment inside both sequences, and a seed inside it
        length = int(rng.integers(4, min(30, len(query), len(subject)) + 1))
        u_q = int(rng.integers(0, len(query) - length + 1))
        u_s = int(rng.integers(0, len(subject) - length + 1))
        into = int(rng.integers(0, length))
        seed_q, seed_s = u_q + into, u_s + into
        ungapped_score = int(rng.integers(10, 60))
        got = dynprog.prelim_dp_extend(query, pack_2bit(subject), len(subject), seed_q, seed_s,
                                       u_s, length, ungapped_score, BLASTN, 5, 2, 33)
        want = reference_prelim(query, subject, seed_q, seed_s, u_s + length,
                                ungapped_score, BLASTN, 33)
        assert tuple(got) == want, trial


# --------------------------------------------------------------------------------------
# traceback: the script walks the box and rescoring it gives the score

def script_score(query, subject, q0, s0, ops, lens, matrix, go, ge):
    q, s, total = q0, s0, 0
    for op, n in zip(ops, lens):
        if op == OP_SUB:
            total += int(matrix[query[q:q + n], subject[s:s + n]].sum())
            q, s = q + n, s + n
        elif op == OP_DEL:
            total -= go + ge * n
            s += n
        else:
            total -= go + ge * n
            q += n
    return total, q, s


@pytest.mark.parametrize("matrix,x", [(BLASTN, 110), (SHORT, 50), (BLASTN, 20)])
def test_traceback_script_consistent(matrix, x):
    rng = np.random.default_rng(5)
    for trial in range(150):
        subject, query = related_pair(rng, int(rng.integers(10, 300)), rng.random() * 0.25,
                                      rng.random() * 0.1)
        if trial % 5 == 0:  # ambiguity codes on both sides
            query[rng.integers(0, len(query), 3)] = rng.integers(4, 15, 3)
            subject[rng.integers(0, len(subject), 3)] = rng.integers(4, 15, 3)
        q_start = int(rng.integers(0, len(query)))
        s_start = int(rng.integers(0, len(subject)))
        score, q0, q1, s0, s1, ops, lens, _, _ = dynprog.traceback_dp(
            query, q_start, subject, s_start, matrix, 5, 2, x)
        total, q_end, s_end = script_score(query, subject, q0, s0, ops, lens, matrix, 5, 2)
        if ops.size:
            assert (q_end, s_end) == (q1, s1)
            assert total == score
            assert ops[0] == OP_SUB and ops[-1] == OP_SUB
            assert np.all(ops[1:] != ops[:-1]) and np.all(lens > 0)
        # each half is the score-only DP's; pruning a gap at the seam only adds its cost back
        left = dynprog.xdrop_score(query, q_start + 1, -1, q_start + 1, False,
                                   subject, s_start + 1, -1, s_start + 1, matrix, 5, 2, x)
        right = dynprog.xdrop_score(query, q_start, 1, len(query) - q_start - 1, False,
                                    subject, s_start, 1, len(subject) - s_start - 1,
                                    matrix, 5, 2, x)
        if ops.size:
            assert score >= left[0] + right[0]


def test_traceback_cells_grow_between_row_runs():
    """A long alignment fills align_ex's first block of traceback cells many times over
    (the rows go on in a new call after each growth): its script still scores what the
    score-only DP finds, and reads back over the whole alignment."""
    rng = np.random.default_rng(11)
    subject, query = related_pair(rng, 20000, 0.04, 0.01)
    score, q0, q1, s0, s1, ops, lens, _, _ = dynprog.traceback_dp(
        query, 0, subject, 0, BLASTN, 5, 2, 110)
    assert q1 - q0 > 15000
    total, q_end, s_end = script_score(query, subject, q0, s0, ops, lens, BLASTN, 5, 2)
    assert (total, q_end, s_end) == (score, q1, s1)
    right = dynprog.xdrop_score(query, 0, 1, len(query) - 1, False,
                                subject, 0, 1, len(subject) - 1, BLASTN, 5, 2, 110)
    left = dynprog.xdrop_score(query, 1, -1, 1, False, subject, 1, -1, 1, BLASTN, 5, 2, 110)
    assert score == left[0] + right[0]


def test_traceback_workspaces_kept_across_alignments_change_nothing():
    """traceback_dp_in's workspaces, passed from one alignment to the next (a long one
    grows them, shorter ones then start on its stale cells and band), give each
    alignment traceback_dp's result with fresh ones."""
    rng = np.random.default_rng(17)
    cells, band = np.empty(0, np.uint8), np.empty(0, np.int32)
    for length in (20000, 40, 3000, 7, 500, 12000, 300):
        subject, query = related_pair(rng, length, rng.random() * 0.2, rng.random() * 0.05)
        q_start = int(rng.integers(0, len(query)))
        # near the start point's diagonal, so that some alignments are long
        s_start = min(len(subject) - 1, q_start * len(subject) // len(query))
        fresh = dynprog.traceback_dp(query, q_start, subject, s_start, BLASTN, 5, 2, 110)
        *kept, cells, band = dynprog.traceback_dp_in(cells, band, query, q_start, subject,
                                                     s_start, BLASTN, 5, 2, 110)
        assert tuple(kept[:5]) == fresh[:5] and tuple(kept[7:]) == fresh[7:]
        assert np.array_equal(kept[5], fresh[5]) and np.array_equal(kept[6], fresh[6])
    assert cells.size > 1 << 16


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_traceback_letters_outside_the_read_range_change_nothing(seed):
    """traceback_dp reports the subject letters it read: others changed give the same
    alignment (the traceback relies on this to unpack only the letters around the HSPs)."""
    rng = np.random.default_rng(seed)
    core, query = related_pair(rng, int(rng.integers(10, 300)), rng.random() * 0.25,
                               rng.random() * 0.1)
    left = rng.integers(0, 4, int(rng.integers(0, 300))).astype(np.uint8)
    subject = np.concatenate([left, core, rng.integers(0, 4, int(rng.integers(0, 300)))])
    subject = subject.astype(np.uint8)
    q_start = int(rng.integers(0, len(query)))
    s_start = left.size + int(rng.integers(0, len(core)))
    got = dynprog.traceback_dp(query, q_start, subject, s_start, BLASTN, 5, 2, 110)
    read_start, read_end = got[7], got[8]
    if got[5].size:
        assert read_start <= got[3] and got[4] <= read_end
    poisoned = subject.copy()
    outside = np.ones(subject.size, dtype=bool)
    outside[max(read_start, 0):max(read_end, 0)] = False
    poisoned[outside & (subject < 4)] ^= 1
    again = dynprog.traceback_dp(query, q_start, poisoned, s_start, BLASTN, 5, 2, 110)
    assert again[:5] == got[:5] and again[7:] == got[7:]
    assert np.array_equal(again[5], got[5]) and np.array_equal(again[6], got[6])


def test_traceback_long_subject_window():
    """Subjects of 90000+ letters are cut to a window around the start; coordinates stay global."""
    rng = np.random.default_rng(2)
    subject = rng.integers(0, 4, 120000).astype(np.uint8)
    query = subject[100000:100500].copy()
    query[250] = (query[250] + 1) % 4
    score, q0, q1, s0, s1, ops, lens, _, _ = dynprog.traceback_dp(query, 100, subject, 100100,
                                                                  BLASTN, 5, 2, 110)
    assert (q0, q1, s0, s1) == (0, 500, 100000, 100500)
    assert score == 499 * 2 - 3
    assert dynprog.adjust_subject_range(100100, 120000, 100, 500) == (97000, 3100, 6500)


# --------------------------------------------------------------------------------------
# start points, trimming, rescoring

def test_gapped_start_keeps_long_run_and_moves_off_mismatch():
    rng = np.random.default_rng(4)
    s = rng.integers(0, 4, 200).astype(np.uint8)
    q = s.copy()
    assert dynprog.gapped_start_nucl(q, s, 0, 200, 0, 200, 50, 50) == (50, 50)
    q[::9] = (q[::9] + 1) % 4       # runs of 8 only
    q[100:130] = s[100:130]         # one run of 30 (plus neighbours)
    q[100] = s[100]
    got = dynprog.gapped_start_nucl(q, s, 0, 200, 0, 200, 10, 10)
    assert got[0] == got[1] and 99 <= got[0] - 7 and got[0] < 135


def test_gapped_offsets_short_and_window():
    q = np.zeros(50, np.uint8)
    assert dynprog.gapped_offsets(q, q, BLASTN, 10, 20, 30, 40) == (True, 15, 35)
    assert dynprog.gapped_offsets(q, q, BLASTN, 0, 50, 0, 50) == (True, 10, 10)


def test_cut_off_gap_edit_script():
    ops = np.array([OP_SUB, OP_DEL, OP_SUB, OP_INS, OP_SUB], np.uint8)
    lens = np.array([10, 2, 5, 3, 10], np.int32)
    # HSP [100, 128) x [200, 229): cut the start at the other HSP's end (105, 205)
    got = cut_off_gap_edit_script(ops, lens, 100, 128, 200, 229, 105, 205, True)
    assert got[:4] == (105, 128, 205, 229)
    assert list(got[4]) == list(ops) and list(got[5]) == [5, 2, 5, 3, 10]
    # cut the end where the other HSP starts (112, 214): passes the gap whole
    got = cut_off_gap_edit_script(ops, lens, 100, 128, 200, 229, 112, 214, False)
    assert got[:4] == (100, 112, 200, 214)
    assert list(got[4]) == [OP_SUB, OP_DEL, OP_SUB] and list(got[5]) == [10, 2, 2]


def rescore(q, s, ops, lens, cutoff):
    """reevaluate_with_ambiguities on an HSP starting at (10, 10) with blastn's 2/-3, 5/2;
    returns (keep, score, q0, s0, q1, s1, ops, lens) of the result."""
    work = lens.copy()
    keep, score, q0, q1, s0, s1, first, last, last_len = reevaluate_with_ambiguities(
        q, 0, q.size, s, 10, 10, ops, work, BLASTN, 2, -3, 5, 2, cutoff)
    out_lens = work[first:last + 1].copy()
    out_lens[-1] = last_len
    return keep, score, q0, s0, q1, s1, ops[first:last + 1], out_lens


def test_reevaluate_keeps_best_part_and_extends():
    rng = np.random.default_rng(9)
    s = rng.integers(0, 4, 100).astype(np.uint8)
    q = s.copy()
    q[20:28] = (q[20:28] + 1) % 4   # eight mismatches
    ops = np.array([OP_SUB], np.uint8)
    lens = np.array([60], np.int32)
    keep, score, q0, s0, q1, s1, o, ln = rescore(q, s, ops, lens, 30)
    # 10..20 scores 20; the 7th and 8th mismatches drop the sum below zero, and 20 is below
    # the cutoff: restart at 28, keep 28..70, then extend by exact matches to the end
    assert keep and (q0, s0, q1, s1) == (28, 28, 100, 100)
    assert score == 72 * 2 and list(o) == [OP_SUB] and list(ln) == [72]
    # a first part above the cutoff survives the drop when nothing later beats it
    q[34:] = (s[34:] + 1) % 4
    keep, score, q0, s0, q1, s1, o, ln = rescore(q, s, ops, lens, 15)
    assert keep and (q0, q1) == (0, 20) and score == 40 and list(ln) == [20]


# --------------------------------------------------------------------------------------
# golden: BLAST's own alignments, reproduced from a start point inside each one

def btop_of(query, subject, q0, s0, ops, lens):
    letters = np.frombuffer(b"ACGTRYMKWSBDHVN", np.uint8)
    out, run, q, s = [], 0, q0, s0
    for op, n in zip(ops, lens):
        for _ in range(n):
            if op == OP_SUB and query[q] == subject[s]:
                run += 1
                q, s = q + 1, s + 1
                continue
            if run:
                out.append(str(run))
                run = 0
            if op == OP_SUB:
                out.append(chr(letters[query[q]]) + chr(letters[subject[s]]))
                q, s = q + 1, s + 1
            elif op == OP_DEL:
                out.append("-" + chr(letters[subject[s]]))
                s += 1
            else:
                out.append(chr(letters[query[q]]) + "-")
                q += 1
    if run:
        out.append(str(run))
    return "".join(out)


def start_inside(btop, q0, s0):
    """Middle of the longest match run of a BTOP string (0-based query, subject offsets)."""
    import re
    q, s, best = q0, s0, (-1, q0, s0)
    for token in re.findall(r"\d+|[A-Z-]{2}", btop):
        if token.isdigit():
            n = int(token)
            if n > best[0]:
                best = (n, q + n // 2, s + n // 2)
            q, s = q + n, s + n
        else:
            q += token[0] != "-"
            s += token[1] != "-"
    return best[1], best[2]


def anchored_pair(rng, n, sub_rate, indel_rate, task):
    """(query, subject, q_anchor, s_anchor): a mutated copy of a random stretch where the only
    exact run of 11+ letters is a 24-letter anchor, so BLAST's one seed, hence its gapped
    start point, lies in the anchor. (q_anchor, s_anchor) is the anchor's middle."""
    source = rng.integers(0, 4, n).astype(np.uint8)
    longest = 8 if task == "blastn" else 5  # exact runs stay shorter than the word (11 or 7)
    anchor = int(rng.integers(n // 4, 3 * n // 4))
    out, run, i, q_anchor = [], 0, 0, -1
    while i < n:
        if i == anchor:
            q_anchor = len(out) + 12
            out.extend(source[i:i + 24])
            i += 24
            run = 99  # the letter after the anchor must differ
            continue
        r = rng.random()
        if run >= 1 and r < indel_rate:
            if r < indel_rate / 2:
                out.extend(rng.integers(0, 4, int(rng.integers(1, 4))))
            else:
                i += int(rng.integers(1, 4))
            run = 99  # and so must the one after an indel
            continue
        if i >= n:
            break
        if run >= longest or i + 1 == anchor or rng.random() < sub_rate:
            out.append((source[i] + rng.integers(1, 4)) % 4)
            run = 0
        else:
            out.append(source[i])
            run += 1
        i += 1
    mutated = np.array(out, dtype=np.uint8)
    flank = lambda k: rng.integers(0, 4, k).astype(np.uint8)
    width = 300 if task == "blastn" else 100
    s_left = flank(int(rng.integers(0, width)))
    q_left = flank(int(rng.integers(0, 50))) if task == "blastn" else flank(0)
    subject = np.concatenate([s_left, source, flank(int(rng.integers(0, width)))])
    query = np.concatenate([q_left, mutated, flank(int(rng.integers(0, 50))) if task == "blastn" else flank(0)])
    return query, subject, q_left.size + q_anchor, s_left.size + anchor + 12


def blast_hsps(tmp_path, task, query, subject):
    letters = np.frombuffer(b"ACGT", np.uint8)
    qf, sf = tmp_path / "q.fa", tmp_path / "s.fa"
    qf.write_text(">q\n" + letters[query].tobytes().decode() + "\n")
    sf.write_text(">s\n" + letters[subject].tobytes().decode() + "\n")
    out = subprocess.run(["blastn", "-task", task, "-strand", "plus", "-dust", "no",
                          "-outfmt", "6 qstart qend sstart send score btop",
                          "-query", str(qf), "-subject", str(sf)],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        qs, qe, ss, se, score, btop = line.split("\t")
        yield int(qs) - 1, int(qe), int(ss) - 1, int(se), int(score), btop


def run_golden(tmp_path, task, n_pairs, length_range, matrix, x_final, seed):
    """Counts (HSPs holding the anchor, reproduced exactly) and the failures."""
    rng = np.random.default_rng(seed)
    compared = matched = 0
    failures = []
    for k in range(n_pairs):
        query, subject, qa, sa = anchored_pair(rng, int(rng.integers(*length_range)),
                                               rng.uniform(0.0, 0.08), rng.uniform(0.01, 0.08), task)
        for q0, q1, s0, s1, score, btop in blast_hsps(tmp_path, task, query, subject):
            if not (q0 <= qa < q1 and s0 <= sa < s1):
                continue
            gq, gs = dynprog.gapped_start_nucl(query, subject, q0, q1, s0, s1, qa, sa)
            got = dynprog.traceback_dp(query, gq, subject, gs, matrix, 5, 2, x_final)
            mine = (got[1], got[2], got[3], got[4], got[0],
                    btop_of(query, subject, got[1], got[3], got[5], got[6]))
            compared += 1
            if mine == (q0, q1, s0, s1, score, btop):
                matched += 1
            else:
                failures.append((k, (q0, q1, s0, s1, score, btop), mine))
    return compared, matched, failures


@pytest.mark.golden
@needs_blastn
def test_golden_blastn(tmp_path):
    compared, matched, failures = run_golden(tmp_path, "blastn", 60, (150, 700), BLASTN, 110, 2024)
    print(f"blastn: {matched}/{compared} HSPs reproduced")
    assert compared >= 55
    assert not failures, failures[:3]


@pytest.mark.golden
@needs_blastn
def test_golden_blastn_short(tmp_path):
    compared, matched, failures = run_golden(tmp_path, "blastn-short", 60, (50, 150), SHORT, 50, 77)
    print(f"blastn-short: {matched}/{compared} HSPs reproduced")
    assert compared >= 50
    assert not failures, failures[:3]
