// Score-only greedy gapped extension of initial hits (megablast's preliminary gapped stage
// with linear gap costs), one warp per hit. Each warp computes what
// gblastn/gapped.py's _greedy_from_hit computes on the CPU (greedy.py's greedy_linear in both
// directions, on the packed subject, then the start point of _best_start_point); the two
// must stay in step. An extension whose band of diagonals outgrows ROW_CELLS, or that goes on
// for more than max_dist distances (a bound the host sets: a launch lasts as long as its
// longest warp), is marked undone, and the host extends it on the CPU.

typedef long long i64;
typedef unsigned long long u64;

// The kernels' tuning (gblastn.scan.gpu.greedy_defines): ROW_CELLS diagonals kept per
// distance (a power of two), ITEM_WARPS items (a warp each) per block.
#if !defined(ROW_CELLS) || !defined(ITEM_WARPS)
#error "the greedy kernels' defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif
// the records exchanged with the host and the codes they hold, from gblastn/layouts.py
#if !defined(HSP_CONTEXT) || !defined(HSP_Q_START) || !defined(HSP_Q_END) || \
    !defined(HSP_S_START) || !defined(HSP_S_END) || !defined(HSP_Q_GAPPED_START) || \
    !defined(HSP_S_GAPPED_START) || !defined(HSP_FIELDS) || !defined(GAPPED_SCORE) || \
    !defined(GAPPED_Q_START) || !defined(GAPPED_Q_END) || !defined(GAPPED_S_START) || \
    !defined(GAPPED_S_END) || !defined(GAPPED_Q_GAPPED_START) || \
    !defined(GAPPED_S_GAPPED_START) || !defined(GAPPED_FIELDS) || !defined(TAIL_START) || \
    !defined(TAIL_DISTANCES) || !defined(TAIL_READ) || !defined(TAIL_EXTENTS) || \
    !defined(TAIL_RUNS) || !defined(TAIL_FIELDS) || !defined(SCRIPT_RUNS) || \
    !defined(STORE_CELLS) || !defined(STORE_ROWS) || !defined(STORE_WORDS) || \
    !defined(OP_SUB) || !defined(OP_DEL) || !defined(OP_INS) || !defined(RUN_COUNT_SHIFT) || \
    !defined(RUN_OP_MASK) || !defined(INVALID_OFFSET) || !defined(PACKED_STEP)
#error "gblastn.layouts' defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif

#define ROW_MASK (ROW_CELLS - 1)
#define BEST_SLOTS 64       // best scores kept, by distance (a power of two)
#define BEST_MASK (BEST_SLOTS - 1)
#define DIAG_ORIGIN (1 << 28)  // diagonal of the start point: keeps diagonal numbers positive

#include "device_host.cuh"

#ifdef __CUDA_ARCH__
__device__ __forceinline__ int clz64(u64 x) { return __clzll(x); }
__device__ __forceinline__ int ctz64(u64 x) { return x ? __ffsll((i64)x) - 1 : 64; }
#else
static inline int clz64(u64 x) { return x ? __builtin_clzll(x) : 64; }
static inline int ctz64(u64 x) { return x ? __builtin_ctzll(x) : 64; }
#endif

// The 8 bytes from p on, the first in the high bits.
HD u64 load_be64(const unsigned char* p) {
    u64 v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | LOAD(p + i);
    return v;
}

HD int packed_base(const unsigned char* bases, i64 pos) {
    return (LOAD(bases + (pos >> 2)) >> (2 * (3 - (pos & 3)))) & 3;
}

// The query: packed bases and ambiguity bits (gblastn.wordrun.pack_query_words, pointers
// past its WORD_PAD); the subject: one chunk's packed bytes.
struct Letters {
    const unsigned char* q_bases;
    const unsigned char* q_ambig;
    const unsigned char* s_bases;
    i64 s_bytes;
};

HD i64 letter_run(const Letters& L, i64 q_pos, i64 s_pos, i64 n, i64 limit, int direction) {
    while (n < limit) {
        i64 q = q_pos + direction * n;
        i64 s = s_pos + direction * n;
        if ((LOAD(L.q_ambig + (q >> 3)) >> (7 - (q & 7))) & 1) break;
        if (packed_base(L.q_bases, q) != packed_base(L.s_bases, s)) break;
        ++n;
    }
    return n < limit ? n : limit;
}

// wordrun.packed_run_forward
HD i64 run_forward(const Letters& L, i64 q_pos, i64 s_pos, i64 limit) {
    i64 n = 0;
    while (n < limit) {
        i64 q = q_pos + n, s = s_pos + n, byte = s >> 2;
        if (byte + 8 > L.s_bytes) break;
        u64 qw = load_be64(L.q_bases + (q >> 2)) << (2 * (q & 3));
        u64 sw = load_be64(L.s_bases + byte) << (2 * (s & 3));
        u64 aw = load_be64(L.q_ambig + (q >> 3)) << (q & 7);
        i64 step = clz64(qw ^ sw) >> 1;
        i64 amb = clz64(aw);
        if (amb < step) step = amb;
        if (step > PACKED_STEP) step = PACKED_STEP;
        n += step;
        if (step < PACKED_STEP) return n < limit ? n : limit;
    }
    return letter_run(L, q_pos, s_pos, n, limit, 1);
}

// wordrun.packed_run_backward
HD i64 run_backward(const Letters& L, i64 q_pos, i64 s_pos, i64 limit) {
    i64 n = 0;
    while (n < limit) {
        i64 q = q_pos - n, s = s_pos - n, byte = s >> 2;
        if (byte < 7) break;
        u64 qw = load_be64(L.q_bases + (q >> 2) - 7) >> (2 * (3 - (q & 3)));
        u64 sw = load_be64(L.s_bases + byte - 7) >> (2 * (3 - (s & 3)));
        u64 aw = load_be64(L.q_ambig + (q >> 3) - 7) >> (7 - (q & 7));
        i64 step = ctz64(qw ^ sw) >> 1;
        i64 amb = ctz64(aw);
        if (amb < step) step = amb;
        if (step > PACKED_STEP) step = PACKED_STEP;
        n += step;
        if (step < PACKED_STEP) return n < limit ? n : limit;
    }
    return letter_run(L, q_pos, s_pos, n, limit, -1);
}

// One direction from (q_origin, s_origin): greedy.exact_run's view of the sequences.
struct Direction {
    i64 q_origin, len1, s_origin, len2;
    bool reverse;
};

HD i64 exact_run(const Letters& L, const Direction& D, i64 i1, i64 i2) {
    i64 limit = D.len1 - i1 < D.len2 - i2 ? D.len1 - i1 : D.len2 - i2;
    if (limit <= 0) return 0;
    if (D.reverse) return run_backward(L, D.q_origin - 1 - i1, D.s_origin - 1 - i2, limit);
    return run_forward(L, D.q_origin + i1, D.s_origin + i2, limit);
}

struct Reach {
    i64 reach;  // the subject letters read lie below this offset
    i64 dist, seq1_len, seq2_len, seed_q, seed_s, seed_len;
    int diag;   // the best alignment's diagonal (DIAG_ORIGIN: the start point's)
    bool done;  // false: the band outgrew ROW_CELLS, or the search max_dist
};

HD i64 ceil_div(i64 a, i64 b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The X-drop search's costs, from costs and X-drop already doubled for an odd reward: half a
// match, an edit's cost, and how many distances back the X-drop reaches.
struct Costs {
    i64 half, op, xo;
};

// The search's opening: its costs, and the exact run from the origin (`index` letters).
// Returns whether the search ends there, with its Reach in r; otherwise r is the search's
// start at distance 0. Not done: the X-drop reaches back more distances than BEST_SLOTS holds.
HD bool greedy_opening(const Letters& L, const Direction& D, i64 xdrop, i64 match_cost,
                       i64 mismatch_cost, Costs& c, Reach& r, i64& index) {
    c.half = match_cost / 2;
    c.op = match_cost + mismatch_cost;
    c.xo = (xdrop + c.half) / c.op + 1;
    r.done = true;
    index = exact_run(L, D, 0, 0);
    r.reach = index + 1 < D.len2 ? index + 1 : D.len2;
    r.dist = 0;
    r.seq1_len = r.seq2_len = index;
    r.diag = DIAG_ORIGIN;
    r.seed_q = r.seed_s = 0;
    r.seed_len = index;
    if (index == D.len1 || index == D.len2) return true;
    if (c.xo + 2 > BEST_SLOTS) {
        r.done = false;
        return true;
    }
    return false;
}

// After distance d: its best score kept (by the writer: one lane of a warp), the best
// alignment so far updated, then the band's next ends. False where the search stops: done,
// or not done when the band outgrows ROW_CELLS (r.done).
HD bool greedy_next(Reach& r, i64* best, bool writer, i64 d, i64 xo, i64 cur_score,
                    i64 cur_seq2, int cur_diag, int& lower, int& upper, bool end1, bool end2) {
    i64 before = best[(d - 1 + xo) & BEST_MASK];
    if (cur_score >= before) {
        if (writer) best[(d + xo) & BEST_MASK] = cur_score;
        r.dist = d;
        r.diag = cur_diag;
        r.seq2_len = cur_seq2;
        r.seq1_len = cur_seq2 + cur_diag - DIAG_ORIGIN;
    } else if (writer) {
        best[(d + xo) & BEST_MASK] = before;
    }
    if (lower > upper) return false;
    if (!end2) --lower;
    if (!end1) ++upper;
    if (upper - lower + 5 > ROW_CELLS) { r.done = false; return false; }
    return true;
}

// The rows of one direction's search, kept for its traceback (greedy.greedy_linear's walk
// back): row d holds the cells of diagonals [lo[d], lo[d] + its width) from cells[at[d]], as
// the CPU's row d holds them once the search has gone past it. Rows stop being kept when
// STORE_CELLS or STORE_ROWS would be exceeded (the CPU then searches itself).
static_assert(STORE_WORDS == STORE_CELLS + 2 * STORE_ROWS, "a store: cells, at[], lo[]");

struct RowStore {
    int* cells;  // STORE_WORDS ints: the cells, then at[], then lo[]
    int used, rows;
    bool full;
};

HD void store_reset(RowStore* s) {
    if (s == nullptr) return;
    s->used = 0;
    s->rows = 0;
    s->full = false;
}

// Row d (its final cells, in the ring `row`), by `lanes` lanes from `lane` on; rows come in
// order, once each.
HD void keep_row(RowStore* s, i64 d, const int* row, int lo, int width, int lane, int lanes) {
    if (s == nullptr || s->full) return;
    if (d >= STORE_ROWS || s->used + width > STORE_CELLS) {
        s->full = true;
        return;
    }
    int* at = s->cells + STORE_CELLS;
    for (int j = lane; j < width; j += lanes) s->cells[s->used + j] = row[(lo + j) & ROW_MASK];
    at[d] = s->used;
    at[STORE_ROWS + d] = lo;
    s->used += width;
    s->rows = (int)d + 1;
}

HD int kept_cell(const RowStore& s, i64 d, int diag) {
    const int* at = s.cells + STORE_CELLS;
    return s.cells[at[d] + (diag - at[STORE_ROWS + d])];
}

// An edit script's runs, as (count << RUN_COUNT_SHIFT | op) with the OP_* codes, far end
// first (greedy.py's order). Every lane of a warp adds the same runs and writes the same words.
static_assert(OP_SUB <= RUN_OP_MASK && OP_DEL <= RUN_OP_MASK && OP_INS <= RUN_OP_MASK,
              "an op fits below a run's count");

struct Script {
    unsigned* out;
    int n;
    unsigned last;  // the run being added to: out[n - 1] once the next one starts
    bool over;      // more than SCRIPT_RUNS runs
};

HD void script_add(Script& s, int op, i64 count) {
    if (count <= 0 || s.over) return;
    if (s.n > 0 && (int)(s.last & RUN_OP_MASK) == op) {
        s.last += (unsigned)count << RUN_COUNT_SHIFT;
        return;
    }
    if (s.n == SCRIPT_RUNS) {
        s.over = true;
        return;
    }
    if (s.n > 0) s.out[s.n - 1] = s.last;
    s.last = ((unsigned)count << RUN_COUNT_SHIFT) | (unsigned)op;
    ++s.n;
}

// greedy.greedy_linear's walk back, from the best alignment's cell over the kept rows, into
// out (SCRIPT_RUNS words). Returns the number of runs, or -1 where the rows or the runs did
// not fit.
HD int walk_back(const RowStore& s, const Reach& r, unsigned* out) {
    Script script = {out, 0, 0u, false};
    if (r.dist == 0) {
        script_add(script, OP_SUB, r.seq2_len);
    } else {
        if (r.dist > s.rows) return -1;
        i64 d = r.dist, seq2 = r.seq2_len;
        int diag = r.diag;
        while (d > 0) {
            const int left = kept_cell(s, d - 1, diag - 1), mid = kept_cell(s, d - 1, diag),
                      right = kept_cell(s, d - 1, diag + 1);
            int new_diag;
            i64 new_seq2;
            if (left > (mid > right ? mid : right)) {
                new_diag = diag - 1;
                new_seq2 = left;
            } else if (mid > right) {
                new_diag = diag;
                new_seq2 = mid;
            } else {
                new_diag = diag + 1;
                new_seq2 = right;
            }
            if (new_diag == diag) {
                script_add(script, OP_SUB, seq2 - new_seq2);
            } else if (new_diag < diag) {
                script_add(script, OP_SUB, seq2 - new_seq2);
                script_add(script, OP_INS, 1);
            } else {
                script_add(script, OP_SUB, seq2 - new_seq2 - 1);
                script_add(script, OP_DEL, 1);
            }
            --d;
            diag = new_diag;
            seq2 = new_seq2;
        }
        script_add(script, OP_SUB, kept_cell(s, 0, DIAG_ORIGIN));
    }
    if (script.over) return -1;
    if (script.n > 0) out[script.n - 1] = script.last;
    return script.n;
}

// greedy.greedy_linear's search; costs and X-drop already doubled for an odd reward. With a
// store, the rows its walk back reads are kept there (walk_back makes the edit script).
HD Reach greedy_linear(const Letters& L, const Direction& D, i64 xdrop, i64 match_cost,
                       i64 mismatch_cost, i64 max_dist, int* row_a, int* row_b, i64* best,
                       RowStore* store) {
    Costs c;
    Reach r;
    i64 index;
    if (greedy_opening(L, D, xdrop, match_cost, mismatch_cost, c, r, index)) return r;
    const i64 half = c.half, op_cost = c.op, xo = c.xo;
    i64 longest = index;

    const int origin = DIAG_ORIGIN;
    for (int j = 0; j < BEST_SLOTS; ++j) best[j] = 0;
    best[xo & BEST_MASK] = index * match_cost;
    int* prev = row_a;
    int* here = row_b;
    for (int k = origin - 2; k <= origin + 2; ++k) prev[k & ROW_MASK] = INVALID_OFFSET;
    prev[origin & ROW_MASK] = (int)index;
    int lower = origin - 1, upper = origin + 1;
    for (int k = lower - 2; k <= upper + 2; ++k) here[k & ROW_MASK] = INVALID_OFFSET;
    // each row's diagonals as first set: [lo, lo + width)
    int prev_lo = origin - 2, prev_width = 5, here_lo = lower - 2, here_width = upper - lower + 5;
    bool end1 = false, end2 = false;
    for (i64 d = 1;; ++d) {
        if (d > max_dist) { r.done = false; return r; }
        prev[(lower - 1) & ROW_MASK] = INVALID_OFFSET;
        prev[lower & ROW_MASK] = INVALID_OFFSET;
        prev[upper & ROW_MASK] = INVALID_OFFSET;
        prev[(upper + 1) & ROW_MASK] = INVALID_OFFSET;
        keep_row(store, d - 1, prev, prev_lo, prev_width, 0, 1);
        i64 xdrop_score = ceil_div(best[d & BEST_MASK] + op_cost * d - xdrop, half);
        i64 cur_extent = 0, cur_seq2 = 0;
        int cur_diag = 0;
        const int first = lower, last = upper;
        for (int k = first; k <= last; ++k) {
            int a = prev[(k + 1) & ROW_MASK], b = prev[k & ROW_MASK], c = prev[(k - 1) & ROW_MASK];
            i64 seq2 = (a > b ? a : b) + 1;
            if (c > seq2) seq2 = c;
            i64 seq1 = seq2 + k - origin;
            if (seq2 < 0 || seq1 + seq2 < xdrop_score) {
                if (k == lower) ++lower;
                else here[k & ROW_MASK] = INVALID_OFFSET;
                continue;
            }
            upper = k;
            i64 run = exact_run(L, D, seq1, seq2);
            if (run > longest) {
                r.seed_q = seq1;
                r.seed_s = seq2;
                r.seed_len = run;
                longest = run;
            }
            seq1 += run;
            seq2 += run;
            here[k & ROW_MASK] = (int)seq2;
            if (seq2 >= r.reach) r.reach = seq2 + 1 < D.len2 ? seq2 + 1 : D.len2;
            if (seq1 + seq2 > cur_extent) {
                cur_extent = seq1 + seq2;
                cur_seq2 = seq2;
                cur_diag = k;
            }
            if (seq2 == D.len2) { lower = k + 1; end2 = true; }
            if (seq1 == D.len1) { upper = k - 1; end1 = true; }
        }
        if (!greedy_next(r, best, true, d, xo, cur_extent * half - d * op_cost, cur_seq2,
                         cur_diag, lower, upper, end1, end2)) break;
        int* next = prev;  // row d - 1 is no longer read
        for (int k = lower - 2; k <= upper + 2; ++k) next[k & ROW_MASK] = INVALID_OFFSET;
        prev = here;
        here = next;
        prev_lo = here_lo;
        prev_width = here_width;
        here_lo = lower - 2;
        here_width = upper - lower + 5;
    }
    return r;
}

#ifdef __CUDA_ARCH__
#define FULL_WARP 0xffffffffu

// greedy_linear on the 32 lanes of a warp, which all call it with the same arguments and get
// the same Reach: the lanes take a distance's diagonals 32 at a time, and warp votes give
// what the one-thread loop's order decides (the band's new ends, the first longest run, the
// first furthest diagonal). One thread per hit waited on a long alignment's loads one
// diagonal at a time, and a launch lasted as long as its longest hit. row_a, row_b and best
// are the warp's own, in shared memory; the store (if any) is in global memory, and the rows
// the lanes keep there are visible to all of them on return.
__device__ Reach greedy_linear_warp(const Letters& L, const Direction& D, i64 xdrop,
                                    i64 match_cost, i64 mismatch_cost, i64 max_dist,
                                    int* row_a, int* row_b, i64* best, RowStore* store) {
    const int lane = threadIdx.x & 31;
    Costs c;
    Reach r;
    i64 index;
    if (greedy_opening(L, D, xdrop, match_cost, mismatch_cost, c, r, index)) return r;
    const i64 half = c.half, op_cost = c.op, xo = c.xo;
    i64 longest = index;

    const int origin = DIAG_ORIGIN;
    for (int j = lane; j < BEST_SLOTS; j += 32) best[j] = 0;
    int* prev = row_a;
    int* here = row_b;
    for (int k = origin - 2 + lane; k <= origin + 2; k += 32) prev[k & ROW_MASK] = INVALID_OFFSET;
    int lower = origin - 1, upper = origin + 1;
    for (int k = lower - 2 + lane; k <= upper + 2; k += 32) here[k & ROW_MASK] = INVALID_OFFSET;
    __syncwarp();
    if (lane == 0) {
        best[xo & BEST_MASK] = index * match_cost;
        prev[origin & ROW_MASK] = (int)index;
    }
    __syncwarp();
    int prev_lo = origin - 2, prev_width = 5, here_lo = lower - 2, here_width = upper - lower + 5;
    bool end1 = false, end2 = false;
    for (i64 d = 1;; ++d) {
        if (d > max_dist) { r.done = false; return r; }
        if (lane == 0) {
            prev[(lower - 1) & ROW_MASK] = INVALID_OFFSET;
            prev[lower & ROW_MASK] = INVALID_OFFSET;
            prev[upper & ROW_MASK] = INVALID_OFFSET;
            prev[(upper + 1) & ROW_MASK] = INVALID_OFFSET;
        }
        __syncwarp();
        keep_row(store, d - 1, prev, prev_lo, prev_width, lane, 32);
        i64 xdrop_score = ceil_div(best[d & BEST_MASK] + op_cost * d - xdrop, half);
        i64 cur_extent = 0, cur_seq2 = 0;
        int cur_diag = 0;
        const int first = lower, last = upper;
        for (int base = first; base <= last; base += 32) {
            const int k = base + lane;
            const bool active = k <= last;
            bool valid = false;
            int seq1 = 0, seq2 = 0, run = -1;
            if (active) {
                int a = prev[(k + 1) & ROW_MASK], b = prev[k & ROW_MASK],
                    c = prev[(k - 1) & ROW_MASK];
                i64 s2 = (a > b ? a : b) + 1;
                if (c > s2) s2 = c;
                i64 s1 = s2 + k - origin;
                valid = !(s2 < 0 || s1 + s2 < xdrop_score);
                if (valid) {
                    run = (int)exact_run(L, D, s1, s2);
                    seq1 = (int)s1;
                    seq2 = (int)s2;
                }
            }
            const unsigned valid_lanes = __ballot_sync(FULL_WARP, valid);
            const unsigned pruned_lanes = __ballot_sync(FULL_WARP, active && !valid);
            // the first longest run of this distance, if longer than any before
            const int top_run = __reduce_max_sync(FULL_WARP, run);
            if (top_run > longest) {
                int from = __ffs(__ballot_sync(FULL_WARP, valid && run == top_run)) - 1;
                r.seed_q = __shfl_sync(FULL_WARP, seq1, from);
                r.seed_s = __shfl_sync(FULL_WARP, seq2, from);
                r.seed_len = top_run;
                longest = top_run;
            }
            if (valid) {
                seq1 += run;
                seq2 += run;
                here[k & ROW_MASK] = seq2;
            } else if (active) {
                here[k & ROW_MASK] = INVALID_OFFSET;
            }
            const int top_seq2 = __reduce_max_sync(FULL_WARP, valid ? seq2 : -1);
            if (top_seq2 >= r.reach) r.reach = top_seq2 + 1 < D.len2 ? top_seq2 + 1 : D.len2;
            const int extent = valid ? seq1 + seq2 : -1;
            const int top_extent = __reduce_max_sync(FULL_WARP, extent);
            if (top_extent > cur_extent) {
                int from = __ffs(__ballot_sync(FULL_WARP, extent == top_extent)) - 1;
                cur_extent = top_extent;
                cur_seq2 = __shfl_sync(FULL_WARP, seq2, from);
                cur_diag = base + from;
            }
            const unsigned ends2 = __ballot_sync(FULL_WARP, valid && seq2 == D.len2);
            const unsigned ends1 = __ballot_sync(FULL_WARP, valid && seq1 == D.len1);
            if (valid_lanes) {
                int last_valid = 31 - __clz(valid_lanes);
                upper = base + last_valid - ((ends1 >> last_valid) & 1);
            }
            end1 = end1 || ends1;
            end2 = end2 || ends2;
            // the band's lower end: just past the last diagonal that reached the subject's
            // end, then past the pruned diagonals that follow it
            int from = ends2 ? 32 - __clz(ends2) : lower - base;
            if (from >= 0 && from < 32) {
                unsigned rest = ~(pruned_lanes >> from);
                lower = base + from + (rest ? __ffs(rest) - 1 : 32 - from);
            } else if (from == 32) {
                lower = base + 32;
            }
        }
        __syncwarp();
        if (!greedy_next(r, best, lane == 0, d, xo, cur_extent * half - d * op_cost, cur_seq2,
                         cur_diag, lower, upper, end1, end2)) break;
        int* next = prev;  // row d - 1 is no longer read
        for (int k = lower - 2 + lane; k <= upper + 2; k += 32) next[k & ROW_MASK] = INVALID_OFFSET;
        prev = here;
        here = next;
        prev_lo = here_lo;
        prev_width = here_width;
        here_lo = lower - 2;
        here_width = upper - lower + 5;
        __syncwarp();
    }
    __syncwarp();  // the kept rows, for a walk back that reads every lane's writes
    return r;
}
#define GREEDY_LINEAR greedy_linear_warp
#else
#define GREEDY_LINEAR greedy_linear
#endif

// gapped._greedy_from_hit's values (the GAPPED_* columns: score, q_start, q_end, s_start, s_end,
// q_seed, s_seed), from greedy.greedy_gapped_alignment (score-only) and
// greedy._best_start_point.
HD bool greedy_from_hit(const Letters& L, i64 q_base, i64 q_length, i64 s_length, i64 q_off,
                        i64 s_off, i64 xdrop, i64 match_cost, i64 mismatch_cost, i64 reward,
                        i64 penalty, i64 max_dist, int* row_a, int* row_b, i64* best,
                        i64* found) {
    Direction right = {q_base + q_off, q_length - q_off, s_off, s_length - s_off, false};
    Reach rr = GREEDY_LINEAR(L, right, xdrop, match_cost, mismatch_cost, max_dist, row_a, row_b,
                             best, nullptr);
    if (!rr.done) return false;
    Direction left = {q_base + q_off, q_off, s_off, s_off, true};
    Reach rl = GREEDY_LINEAR(L, left, xdrop, match_cost, mismatch_cost, max_dist, row_a, row_b,
                             best, nullptr);
    if (!rl.done) return false;
    i64 q_ext_r = rr.seq1_len, s_ext_r = rr.seq2_len, q_ext_l = rl.seq1_len, s_ext_l = rl.seq2_len;
    found[GAPPED_SCORE] = (q_ext_r + s_ext_r + q_ext_l + s_ext_l) * reward / 2 -
               (rr.dist + rl.dist) * (reward - penalty);
    found[GAPPED_Q_START] = q_off - q_ext_l;
    found[GAPPED_Q_END] = q_off + q_ext_r;
    found[GAPPED_S_START] = s_off - s_ext_l;
    found[GAPPED_S_END] = s_off + s_ext_r;
    // _best_start_point
    i64 q_box_l = q_off - q_ext_l, s_box_l = s_off - s_ext_l;
    i64 q_box_r = q_off + q_ext_r, s_box_r = s_off + s_ext_r;
    i64 q_l = q_off - rl.seed_q, s_l = s_off - rl.seed_s;
    i64 q_r = q_off + rr.seed_q, s_r = s_off + rr.seed_s;
    i64 valid_l = 0, valid_r = 0;
    if (q_r < q_box_r && s_r < s_box_r) {
        i64 room = q_box_r - q_r < s_box_r - s_r ? q_box_r - q_r : s_box_r - s_r;
        valid_r = (room < rr.seed_len ? room : rr.seed_len) / 2;
    } else {
        q_r = q_off;
        s_r = s_off;
    }
    if (q_l > q_box_l && s_l > s_box_l) {
        i64 room = q_l - q_box_l < s_l - s_box_l ? q_l - q_box_l : s_l - s_box_l;
        valid_l = (room < rl.seed_len ? room : rl.seed_len) / 2;
    } else {
        q_l = q_off;
        s_l = s_off;
    }
    if (valid_r > valid_l) {
        found[GAPPED_Q_GAPPED_START] = q_r + valid_r;
        found[GAPPED_S_GAPPED_START] = s_r + valid_r;
    } else {
        found[GAPPED_Q_GAPPED_START] = q_l - valid_l;
        found[GAPPED_S_GAPPED_START] = s_l - valid_l;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// The traceback's searches, ahead: traceback.py's _greedy_traceback_rows finds each HSP's start
// point and aligns from it with the final X-drop; most of that aligner's time goes past the
// alignment's end, where it goes on until every diagonal has dropped. Here the same searches
// run score-only, so that the CPU stops its traceback search at the best distance.

// Query letter q of a context (from q_base) against subject letter s, by code: an ambiguous
// query letter equals no base (the subject letters read here are all bases).
HD bool same_letter(const Letters& L, i64 q_base, i64 q, i64 s) {
    i64 a = q_base + q;
    if ((LOAD(L.q_ambig + (a >> 3)) >> (7 - (a & 7))) & 1) return false;
    return packed_base(L.q_bases, a) == packed_base(L.s_bases, s);
}

// dynprog.gapped_start_nucl: the start point (qg, sg) is kept, or moved along its diagonal.
HD void start_point(const Letters& L, i64 q_base, i64 s_len, i64 q_start, i64 q_end,
                    i64 s_start, i64 s_end, i64& qg, i64& sg) {
    i64 max_run = 10, score = -1, q = qg, s = sg;
    while (q < q_end) {
        bool same = s < s_len && same_letter(L, q_base, q, s);
        ++q;
        ++s;
        if (!same) break;
        if (++score > max_run) return;
    }
    q = qg;
    s = sg;
    while (q >= 0) {
        bool same = s >= 0 && s < s_len && same_letter(L, q_base, q, s);
        --q;
        --s;
        if (!same) break;
        if (++score > max_run) return;
    }
    max_run = 15;
    i64 back = sg - s_start < qg - q_start ? sg - s_start : qg - q_start;
    i64 diag_q = qg - back, diag_s = sg - back;
    i64 length = s_end - diag_s < q_end - diag_q ? s_end - diag_s : q_end - diag_q;
    i64 max_score = 0, max_offset = diag_q, run = 0, index = diag_q;
    bool match = false, prev_match = false;
    while (index < diag_q + length) {
        match = same_letter(L, q_base, index, index + diag_s - diag_q);
        if (match != prev_match) {
            prev_match = match;
            if (match) {
                run = 1;
            } else if (run > max_score) {
                max_score = run;
                max_offset = index - run / 2;
            }
        } else if (match) {
            if (++run > max_run) {
                qg = index - max_run / 2;
                sg = qg + diag_s - diag_q;
                return;
            }
        }
        ++index;
    }
    if (match && run > max_score) {
        max_score = run;
        max_offset = index - run / 2;
    }
    if (max_score > 0) {
        qg = max_offset;
        sg = max_offset + diag_s - diag_q;
    }
}

// The start point, dynprog.adjust_subject_range's window and both directions' searches of
// one HSP (a row of hsp.hsp_rows), with their edit scripts where `store` keeps the rows they
// need: script[0, SCRIPT_RUNS) right, script[SCRIPT_RUNS, 2 SCRIPT_RUNS) left. Out: the
// TAIL_FIELDS values of the search (gblastn.layouts' TAIL_* columns): the start point, the
// best distances to the right and left, the subject letters read [read_lo, read_hi), the
// best alignment's extents (query and subject letters to the right, then to the left), and
// the number of runs of each direction's edit script (right, left; -1: none made). False
// where the CPU must search: no stored start point, a band too wide, or letters read
// outside [exact_lo, exact_hi).
HD bool tail_search(const Letters& L, const i64* row, i64 q_base, i64 q_length, i64 s_len,
                    i64 exact_lo, i64 exact_hi, i64 xdrop, i64 match_cost, i64 mismatch_cost,
                    i64 max_subject_offset, i64 max_total_gaps, i64 max_dist, int* row_a,
                    int* row_b, i64* best, RowStore* store, unsigned* script, i64* out) {
    i64 qg = row[HSP_Q_GAPPED_START], sg = row[HSP_S_GAPPED_START];
    if (qg == 0 && sg == 0) return false;
    // the start point's runs read up to 12 letters around it, inside the box or near it
    if (row[HSP_S_START] - 16 < exact_lo || row[HSP_S_END] + 16 > exact_hi ||
        sg - 16 < exact_lo || sg + 16 > exact_hi) return false;
    start_point(L, q_base, s_len, row[HSP_Q_START], row[HSP_Q_END], row[HSP_S_START],
                row[HSP_S_END], qg, sg);
    i64 shift = 0, s_in = sg, window = s_len;
    if (s_len >= max_subject_offset) {
        i64 max_left = qg + max_total_gaps, max_right = q_length - qg + max_total_gaps;
        if (sg > max_left) {
            shift = sg - max_left;
            s_in = max_left;
        }
        window = (s_len < sg + max_right ? s_len : sg + max_right) - shift;
    }
    Direction right = {q_base + qg, q_length - qg, shift + s_in, window - s_in, false};
    store_reset(store);
    Reach rr = GREEDY_LINEAR(L, right, xdrop, match_cost, mismatch_cost, max_dist, row_a, row_b,
                             best, store);
    if (!rr.done) return false;
    const int runs_right = store ? walk_back(*store, rr, script) : -1;
    Direction left = {q_base + qg, qg, shift + s_in, s_in, true};
    store_reset(store);
    Reach rl = GREEDY_LINEAR(L, left, xdrop, match_cost, mismatch_cost, max_dist, row_a, row_b,
                             best, store);
    if (!rl.done) return false;
    const int runs_left = store ? walk_back(*store, rl, script + SCRIPT_RUNS) : -1;
    i64 read_lo = shift + s_in - rl.reach, read_hi = shift + s_in + rr.reach;
    if (read_lo < exact_lo || read_hi > exact_hi) return false;
    out[TAIL_START] = qg;
    out[TAIL_START + 1] = sg;
    out[TAIL_DISTANCES] = rr.dist;
    out[TAIL_DISTANCES + 1] = rl.dist;
    out[TAIL_READ] = read_lo;
    out[TAIL_READ + 1] = read_hi;
    out[TAIL_EXTENTS] = rr.seq1_len;
    out[TAIL_EXTENTS + 1] = rr.seq2_len;
    out[TAIL_EXTENTS + 2] = rl.seq1_len;
    out[TAIL_EXTENTS + 3] = rl.seq2_len;
    const bool both = runs_right >= 0 && runs_left >= 0;
    out[TAIL_RUNS] = both ? runs_right : -1;
    out[TAIL_RUNS + 1] = both ? runs_left : -1;
    return true;
}

#ifdef __CUDACC__
// One warp per item (all its lanes compute the item, and write the same values); each warp
// has its rows of diagonals and its best scores in shared memory.
#define WARP_ITEM(n)                                                                       \
    __shared__ int rows_of_warp[ITEM_WARPS][2][ROW_CELLS];                                 \
    __shared__ i64 best_of_warp[ITEM_WARPS][BEST_SLOTS];                                   \
    const int warp = threadIdx.x >> 5;                                                     \
    const int i = blockIdx.x * ITEM_WARPS + warp;                                          \
    if (i >= (n)) return;                                                                  \
    int* row_a = rows_of_warp[warp][0];                                                    \
    int* row_b = rows_of_warp[warp][1];                                                    \
    i64* best = best_of_warp[warp];

// HSPs: rows (hsp.hsp_rows, HSP_FIELDS values each) of subjects at device addresses
// subject_addr (packed), subject_len letters, whose letters [exact[2i], exact[2i + 1]) are all
// bases.
// out: TAIL_FIELDS values per HSP; done[i] is 0 where the CPU must search; scripts: each HSP's
// edit scripts (2 SCRIPT_RUNS words, tail_search's). The warps take HSPs in turn, each with
// its own STORE_WORDS of kept_rows for the rows it keeps (none kept, no scripts made, when
// kept_rows is null).
extern "C" __global__ void greedy_tails(
    int n, const i64* __restrict__ rows, const u64* __restrict__ subject_addr,
    const i64* __restrict__ subject_len, const i64* __restrict__ exact,
    const i64* __restrict__ ctx_offset, const i64* __restrict__ ctx_len,
    const unsigned char* __restrict__ q_bases, const unsigned char* __restrict__ q_ambig,
    i64 xdrop, i64 match_cost, i64 mismatch_cost, i64 max_subject_offset,
    i64 max_total_gaps, i64 max_dist, int* __restrict__ kept_rows,
    unsigned* __restrict__ scripts, i64* __restrict__ out, unsigned char* __restrict__ done) {
    __shared__ int rows_of_warp[ITEM_WARPS][2][ROW_CELLS];
    __shared__ i64 best_of_warp[ITEM_WARPS][BEST_SLOTS];
    const int warp = threadIdx.x >> 5;
    const int slot = blockIdx.x * ITEM_WARPS + warp;
    RowStore store = {kept_rows + (i64)slot * STORE_WORDS, 0, 0, false};
    RowStore* keep = kept_rows ? &store : nullptr;
    for (int i = slot; i < n; i += gridDim.x * ITEM_WARPS) {
        const i64* row = rows + (i64)i * HSP_FIELDS;
        i64 length = subject_len[i], ctx = row[HSP_CONTEXT];
        Letters L = {q_bases, q_ambig, (const unsigned char*)subject_addr[i], (length + 3) / 4};
        bool made = tail_search(L, row, ctx_offset[ctx], ctx_len[ctx], length, exact[2 * i],
                                exact[2 * i + 1], xdrop, match_cost, mismatch_cost,
                                max_subject_offset, max_total_gaps, max_dist,
                                rows_of_warp[warp][0], rows_of_warp[warp][1], best_of_warp[warp],
                                keep, scripts + (i64)i * 2 * SCRIPT_RUNS,
                                out + (i64)i * TAIL_FIELDS);
        if ((threadIdx.x & 31) == 0) done[i] = made;
        __syncwarp();
    }
}

// Initial hits: hit i has concatenated query start hit_q[i], chunk-relative subject start
// hit_s[i], length hit_len[i], in chunk hit_chunk[i] (chunk_byte / chunk_len) and context
// hit_ctx[i] (ctx_offset / ctx_len). found: GAPPED_FIELDS values per hit; done[i] is 0 where
// the host must extend the hit itself.
extern "C" __global__ void greedy_hits(
    int n, const int* __restrict__ hit_q, const int* __restrict__ hit_s,
    const int* __restrict__ hit_len, const int* __restrict__ hit_chunk,
    const int* __restrict__ hit_ctx, const i64* __restrict__ ctx_offset,
    const i64* __restrict__ ctx_len, const i64* __restrict__ chunk_byte,
    const i64* __restrict__ chunk_len, const unsigned char* __restrict__ q_bases,
    const unsigned char* __restrict__ q_ambig, const unsigned char* __restrict__ volume,
    i64 xdrop, i64 match_cost, i64 mismatch_cost, i64 reward, i64 penalty, i64 max_dist,
    i64* __restrict__ found, unsigned char* __restrict__ done) {
    WARP_ITEM(n)
    int c = hit_chunk[i], ctx = hit_ctx[i];
    i64 length = chunk_len[c];
    Letters L = {q_bases, q_ambig, volume + chunk_byte[c], (length + 3) / 4};
    i64 base = ctx_offset[ctx], half = hit_len[i] / 2;
    bool made = greedy_from_hit(L, base, ctx_len[ctx], length, hit_q[i] - base + half,
                                hit_s[i] + half, xdrop, match_cost, mismatch_cost, reward,
                                penalty, max_dist, row_a, row_b, best,
                                found + (i64)i * GAPPED_FIELDS);
    if ((threadIdx.x & 31) == 0) done[i] = made;
}
#endif
