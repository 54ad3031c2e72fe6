// Score-only X-drop DP gapped extension of initial hits (the preliminary gapped stage of
// -task blastn and blastn-short), one thread per hit. Each thread computes what
// gblastn/dynprog.py's prelim_dp_extend computes on the CPU (s_BlastDynProgNtGappedAlignment:
// the start moved +3 and rounded to the packed subject's 4-base boundary, then
// Blast_SemiGappedAlign left and right); the two must stay in step.
//
// The band of live columns is kept in a ring of BAND_COLUMNS columns: a row reads and writes
// only columns first_b..b_size, so a column's cell can reuse the slot of one BAND_COLUMNS to
// its left once the band has moved past it. An extension whose band grows wider than the
// ring, or that computes more than the host's cell budget (a launch lasts as long as its
// longest thread, and most long extensions start from hits that an HSP found before them
// contains), is marked undone, and the host extends it on the CPU.
//
// The same code compiles as plain C++ (dp_extend_hits_host), so that a machine without a GPU
// can test it against dynprog.py.

typedef long long i64;

// The kernel's tuning (gblastn.scan.gpu.dp_defines): BAND_COLUMNS columns in the band's ring
// (a power of two).
#if !defined(BAND_COLUMNS)
#error "the DP kernel's defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif
// the records exchanged with the host and the constants of dynprog.py, from gblastn/layouts.py
#if !defined(GAPPED_SCORE) || !defined(GAPPED_Q_START) || !defined(GAPPED_Q_END) || \
    !defined(GAPPED_S_START) || !defined(GAPPED_S_END) || !defined(GAPPED_Q_GAPPED_START) || \
    !defined(GAPPED_S_GAPPED_START) || !defined(GAPPED_MADE) || \
    !defined(GAPPED_AHEAD_FIELDS) || !defined(MININT) || !defined(PACK_RATIO) || \
    !defined(BLASTNA_LETTERS)
#error "gblastn.layouts' defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif

#define BAND_MASK (BAND_COLUMNS - 1)

#include "device_host.cuh"

HD int packed_base(const unsigned char* bases, i64 pos) {
    return (LOAD(bases + (pos >> 2)) >> (2 * (3 - (pos & 3)))) & 3;
}

struct Extent {
    int score;
    i64 rows;     // subject letters used
    i64 columns;  // query letters used
};

// dynprog.py's xdrop_score_in in one direction: rows are packed subject bases, letter k
// (1..m) at base row_origin + row_step * k; columns are the query's blastna codes, letter k
// (1..n) at cols[col_origin + col_step * k]. False when the band outgrew the ring or the
// cells counted in *budget ran out.
HD bool xdrop_extent(const unsigned char* subject, i64 row_origin, int row_step, i64 m,
                     const unsigned char* cols, i64 col_origin, int col_step, i64 n,
                     const int* matrix, int gap_open, int gap_extend, int x_dropoff,
                     i64* budget, Extent* out) {
    int band[2 * BAND_COLUMNS];  // [2b]: best score of column b; [2b + 1]: best ending in a gap down it
    const int gap_open_extend = gap_open + gap_extend;
    if (x_dropoff < gap_open_extend) x_dropoff = gap_open_extend;
    out->score = 0;
    out->rows = 0;
    out->columns = 0;
    if (n <= 0 || m <= 0) return true;

    // row 0: only gaps, until they fail the X-drop test
    int score = -gap_open_extend;
    band[0] = 0;
    band[1] = -gap_open_extend;
    i64 b_size = 1;
    while (b_size <= n && score >= -x_dropoff) {
        if (b_size >= BAND_COLUMNS) return false;
        band[2 * b_size] = score;
        band[2 * b_size + 1] = score - gap_open_extend;
        score -= gap_extend;
        ++b_size;
    }

    int best_score = 0;
    i64 best_a = 0, best_b = 0, first_b = 0;
    for (i64 a = 1; a <= m; ++a) {
        const int* matrix_row = matrix + BLASTNA_LETTERS * packed_base(subject, row_origin + row_step * a);
        int cell = MININT;
        int score_gap_row = MININT;
        i64 last_b = first_b;
        int floor = best_score - x_dropoff;
        // a cell reads the next column's letter for the diagonal of the cell to its right;
        // column n has none, so its pass reads letter 1 and never uses it
        i64 col = col_origin + col_step * first_b;
        int step = col_step;
        i64 start = first_b;
        i64 stop = b_size < n ? b_size : n;
        *budget -= b_size - first_b;
        if (*budget < 0) return false;
        for (int part = 0; part < 2; ++part) {
            for (i64 b = start; b < stop; ++b) {
                const int u = 2 * (int)(b & BAND_MASK);
                col += step;
                int score_gap_col = band[u + 1];
                const int next_score = band[u] + matrix_row[LOAD(cols + col)];
                if (cell < score_gap_col) cell = score_gap_col;
                if (cell < score_gap_row) cell = score_gap_row;
                if (cell < floor) {
                    if (b == first_b) ++first_b;  // a dead first cell moves the band's left edge
                    else band[u] = MININT;
                } else {
                    last_b = b;
                    if (cell > best_score) {
                        best_score = cell;
                        best_a = a;
                        best_b = b;
                        floor = cell - x_dropoff;
                    }
                    const int open_gap = cell - gap_open_extend;
                    score_gap_col -= gap_extend;
                    band[u + 1] = open_gap > score_gap_col ? open_gap : score_gap_col;
                    score_gap_row -= gap_extend;
                    if (score_gap_row < open_gap) score_gap_row = open_gap;
                    band[u] = cell;
                }
                cell = next_score;
            }
            if (stop == b_size) break;
            col = col_origin + col_step;
            step = 0;
            start = stop;
            stop = b_size;
        }
        if (first_b == b_size) break;
        if (last_b < b_size - 1) {
            b_size = last_b + 1;
        } else {
            // the row ended alive: open the band to the right while the row gap survives
            while (score_gap_row >= best_score - x_dropoff && b_size <= n) {
                if (b_size - first_b >= BAND_COLUMNS - 1) return false;
                const int u = 2 * (int)(b_size & BAND_MASK);
                band[u] = score_gap_row;
                band[u + 1] = score_gap_row - gap_open_extend;
                score_gap_row -= gap_extend;
                ++b_size;
            }
        }
        if (b_size <= n) {
            if (b_size - first_b >= BAND_COLUMNS - 1) return false;
            const int u = 2 * (int)(b_size & BAND_MASK);
            band[u] = MININT;
            band[u + 1] = MININT;
            ++b_size;
        }
    }
    out->score = best_score;
    out->rows = best_a;
    out->columns = best_b;
    return true;
}

// dynprog.py's prelim_dp_extend_in for one hit, into its row of found. query: the hit's
// context (blastna codes); seed_q context-relative; subject: the chunk's packed bases.
HD bool dp_extend(const unsigned char* query, i64 query_length, const unsigned char* subject,
                  i64 subject_length, i64 seed_q, i64 seed_s, i64 ungapped_s_start,
                  i64 ungapped_length, i64 ungapped_score, const int* matrix, int gap_open,
                  int gap_extend, int gap_x_dropoff, i64* budget, i64* found) {
    int x_dropoff = gap_x_dropoff;
    if (ungapped_score < x_dropoff) x_dropoff = (int)ungapped_score;
    // start inside the first full byte of a presumably exact 8-letter stretch
    if (ungapped_s_start + ungapped_length >= seed_s + 8) {
        seed_s += 3;
        seed_q += 3;
    }
    // the packed subject is read from a byte boundary: shift the start 1..4 letters right
    const i64 shift = PACK_RATIO - seed_s % PACK_RATIO;
    i64 q_length = seed_q + shift;  // letters [0, q_length) lie left of the split
    i64 s_length = seed_s + shift;
    if (q_length > query_length || s_length > subject_length) {
        q_length -= PACK_RATIO;
        s_length -= PACK_RATIO;
    }
    Extent left, right;
    if (!xdrop_extent(subject, s_length, -1, s_length, query, q_length, -1, q_length, matrix,
                      gap_open, gap_extend, x_dropoff, budget, &left))
        return false;
    right.score = 0;
    right.rows = 0;
    right.columns = 0;
    if (q_length < query_length && s_length < subject_length &&
        !xdrop_extent(subject, s_length - 1, 1, subject_length - s_length, query, q_length - 1,
                      1, query_length - q_length, matrix, gap_open, gap_extend, x_dropoff,
                      budget, &right))
        return false;
    found[GAPPED_SCORE] = (i64)left.score + right.score;
    found[GAPPED_Q_START] = q_length - left.columns;
    found[GAPPED_Q_END] = q_length + right.columns;
    found[GAPPED_S_START] = s_length - left.rows;
    found[GAPPED_S_END] = s_length + right.rows;
    found[GAPPED_Q_GAPPED_START] = seed_q;
    found[GAPPED_S_GAPPED_START] = seed_s;
    return true;
}

// The hits of a volume's chunks: hit i lies in chunk hit_chunk[i] (its packed bytes at
// chunk_byte_offset in `volume`), in context hit_context[i] of the concatenated query;
// q_start and seed_q are concatenated offsets, s_start and seed_s chunk-relative.
struct Hits {
    const int* q_start;
    const int* s_start;
    const int* length;
    const int* score;
    const int* seed_q;
    const int* seed_s;
    const int* chunk;
    const int* context;
    const i64* context_offset;
    const i64* context_length;
    const i64* chunk_byte_offset;
    const i64* chunk_length;
    const unsigned char* query;
    const unsigned char* volume;
};

// Hit i's extension into row i of found (GAPPED_AHEAD_FIELDS values, GAPPED_MADE 1 where it
// was made), the cells it computed into cells[i] (all of them, or those until its band or
// budget gave out).
HD void dp_extend_hit(const Hits& h, int i, const int* matrix, int gap_open, int gap_extend,
                      int gap_x_dropoff, i64 budget, i64* found, i64* cells) {
    const int ctx = LOAD(h.context + i);
    const int c = LOAD(h.chunk + i);
    const i64 base = LOAD(h.context_offset + ctx);
    i64 left = budget;
    i64* row = found + (i64)GAPPED_AHEAD_FIELDS * i;
    const bool made = dp_extend(
        h.query + base, LOAD(h.context_length + ctx), h.volume + LOAD(h.chunk_byte_offset + c),
        LOAD(h.chunk_length + c), LOAD(h.seed_q + i) - base, LOAD(h.seed_s + i),
        LOAD(h.s_start + i), LOAD(h.length + i), LOAD(h.score + i), matrix, gap_open,
        gap_extend, gap_x_dropoff, &left, row);
    row[GAPPED_MADE] = made ? 1 : 0;
    cells[i] = budget - left;
}

#ifdef __CUDACC__

// Thread t extends hit order[t]: the hits by descending ungapped score, the likeliest to extend
// longest first, so that a warp's threads finish together (a warp lasts as long as its
// longest extension).
// found: int64 [n, GAPPED_AHEAD_FIELDS], as engine.ExtensionsAhead holds them; cells[i] the DP
// cells hit i's extension computed.
extern "C" __global__ void dp_hits(
        int n, const int* order, const int* q_start, const int* s_start, const int* length, const int* score,
        const int* seed_q, const int* seed_s, const int* chunk, const int* context,
        const i64* context_offset, const i64* context_length, const i64* chunk_byte_offset,
        const i64* chunk_length, const unsigned char* query, const unsigned char* volume,
        const int* matrix, int gap_open, int gap_extend, int gap_x_dropoff, i64 budget,
        i64* found, i64* cells) {
    __shared__ int shared_matrix[BLASTNA_LETTERS * BLASTNA_LETTERS];
    for (int k = threadIdx.x; k < BLASTNA_LETTERS * BLASTNA_LETTERS; k += blockDim.x)
        shared_matrix[k] = matrix[k];
    __syncthreads();
    const Hits h = {q_start, s_start, length, score, seed_q, seed_s, chunk, context,
                    context_offset, context_length, chunk_byte_offset, chunk_length, query,
                    volume};
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    dp_extend_hit(h, order[t], shared_matrix, gap_open, gap_extend, gap_x_dropoff, budget,
                  found, cells);
}

#else

extern "C" void dp_hits_host(
        int n, const int* order, const int* q_start, const int* s_start, const int* length, const int* score,
        const int* seed_q, const int* seed_s, const int* chunk, const int* context,
        const i64* context_offset, const i64* context_length, const i64* chunk_byte_offset,
        const i64* chunk_length, const unsigned char* query, const unsigned char* volume,
        const int* matrix, int gap_open, int gap_extend, int gap_x_dropoff, i64 budget,
        i64* found, i64* cells) {
    const Hits h = {q_start, s_start, length, score, seed_q, seed_s, chunk, context,
                    context_offset, context_length, chunk_byte_offset, chunk_length, query,
                    volume};
    for (int t = 0; t < n; ++t)
        dp_extend_hit(h, order[t], matrix, gap_open, gap_extend, gap_x_dropoff, budget, found,
                      cells);
}

#endif
