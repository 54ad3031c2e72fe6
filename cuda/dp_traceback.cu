// The X-drop DP traceback of preliminary HSPs (-task blastn, blastn-short, dc-megablast),
// made on the GPU ahead of the CPU's traceback, a thread per HSP. Each thread computes what
// gblastn/dynprog.py's gapped_start_nucl and traceback_dp compute on the CPU (the start point,
// AdjustSubjectRange's window, ALIGN_EX left and right with the final X-drop, the edit script
// joined and its end gaps dropped); the two must stay in step. The CPU's traceback takes the
// result where its own start point is the same (gblastn.traceback); an HSP the device could not
// align (its letters not all bases, its band wider than the ring, the memory for its cells
// spent) is aligned there, and so is one of more cells than the host's budget: a thread steps
// through its cells far slower than a CPU core does, and a launch lasts as long as its
// longest alignment.
//
// ALIGN_EX keeps a byte per cell of every row it computes, for the walk back from the best
// cell. Here a row's bytes lie in a chain of blocks taken from one pool (a thread reuses its
// chain for its next HSP), each row after a header naming its first column, its width and
// the row before it, so that the walk back goes up the rows without an index of them.
//
// The same code compiles as plain C++ (dp_traces_host), so that a machine without a GPU can
// test it against dynprog.py.

typedef long long i64;
typedef unsigned int u32;
typedef unsigned long long u64;

// The kernel's tuning (gblastn.scan.gpu.trace_defines): TRACE_BAND_COLUMNS columns in the
// band's ring (a power of two), TRACE_BLOCK_BYTES bytes per block of a thread's cells.
#if !defined(TRACE_BAND_COLUMNS) || !defined(TRACE_BLOCK_BYTES)
#error "the traceback kernel's defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif
// the records exchanged with the host and the constants of dynprog.py, from gblastn/layouts.py
#if !defined(HSP_CONTEXT) || !defined(HSP_Q_START) || !defined(HSP_Q_END) || \
    !defined(HSP_S_START) || !defined(HSP_S_END) || !defined(HSP_Q_GAPPED_START) || \
    !defined(HSP_S_GAPPED_START) || !defined(HSP_FIELDS) || !defined(TRACE_START) || \
    !defined(TRACE_SCORE) || !defined(TRACE_READ) || !defined(TRACE_EXTENTS) || \
    !defined(TRACE_RUNS) || !defined(TRACE_FIELDS) || !defined(OP_SUB) || !defined(OP_DEL) || \
    !defined(OP_INS) || !defined(RUN_COUNT_SHIFT) || !defined(CELL_OP_MASK) || \
    !defined(CELL_EXTEND_GAP_IN_QUERY) || !defined(CELL_EXTEND_GAP_IN_SUBJECT) || \
    !defined(MININT) || !defined(BLASTNA_LETTERS) || !defined(TRACE_NOT_MADE) || \
    !defined(TRACE_MADE) || !defined(TRACE_NO_ROOM)
#error "gblastn.layouts' defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif

#define BAND_MASK (TRACE_BAND_COLUMNS - 1)
#define ROW_HEADER 16  // a row's header: the row before it (i64), its first column, its width
#define NO_BLOCK (-1)

#include "device_host.cuh"

// Shared counters, taken from by all the threads on the device, by one on the host.
#ifdef __CUDACC__
__device__ __forceinline__ u64 pool_take(u64* used, u64 bytes) {
    return atomicAdd((unsigned long long*)used, (unsigned long long)bytes);
}
__device__ __forceinline__ int next_hsp(int* next) { return atomicAdd(next, 1); }
#else
static inline u64 pool_take(u64* used, u64 bytes) {
    const u64 at = *used;
    *used += bytes;
    return at;
}
static inline int next_hsp(int* next) { return (*next)++; }
#endif

HD int packed_base(const unsigned char* bases, i64 pos) {
    return (LOAD(bases + (pos >> 2)) >> (2 * (3 - (pos & 3)))) & 3;
}

// A subject's letters as the thread reads them: its packed bases, and the letters [lo, hi)
// the host vouches are bases; a read outside them spoils the result.
struct Subject {
    const unsigned char* bases;
    i64 length;
    i64 lo, hi;
    bool spoiled;
};

HD int subject_letter(Subject& s, i64 pos) {
    if (pos < s.lo || pos >= s.hi) s.spoiled = true;
    return packed_base(s.bases, pos);
}

// The pool of cell memory: blocks of TRACE_BLOCK_BYTES, the first 8 bytes of each naming the
// thread's next block (NO_BLOCK: none yet).
struct Pool {
    unsigned char* bytes;
    u64 size;
    u64* used;
};

// A thread's chain of blocks and where the next row goes in it.
struct Chain {
    i64 first;  // its first block (NO_BLOCK: the pool had none left)
    i64 block;  // the block being filled
    i64 at;     // the next free byte in it
};

HD i64& next_block(const Pool& pool, i64 block) { return *(i64*)(pool.bytes + block); }

HD i64 new_block(const Pool& pool) {
    const u64 at = pool_take(pool.used, TRACE_BLOCK_BYTES);
    if (at + TRACE_BLOCK_BYTES > pool.size) return NO_BLOCK;
    next_block(pool, (i64)at) = NO_BLOCK;
    return (i64)at;
}

// A thread's chain, its first block taken before its first HSP (so that an alignment
// that spends the pool leaves every other thread a block to align in).
HD Chain new_chain(const Pool& pool) {
    const Chain chain = {new_block(pool), NO_BLOCK, 0};
    return chain;
}

// Start filling the chain from its first block again.
HD bool chain_rewind(Chain& chain) {
    chain.block = chain.first;
    chain.at = 8;
    return chain.first != NO_BLOCK;
}

// Room for a row of up to `cells` cells: its header's offset in the pool, NO_BLOCK when
// the pool is spent or the row is wider than a block.
HD i64 chain_row(const Pool& pool, Chain& chain, i64 cells) {
    const i64 bytes = (ROW_HEADER + cells + 7) & ~(i64)7;
    if (bytes > TRACE_BLOCK_BYTES - 8) return NO_BLOCK;
    if (chain.at + bytes > TRACE_BLOCK_BYTES) {
        i64 next = next_block(pool, chain.block);
        if (next == NO_BLOCK) {
            next = new_block(pool);
            if (next == NO_BLOCK) return NO_BLOCK;
            next_block(pool, chain.block) = next;
        }
        chain.block = next;
        chain.at = 8;
    }
    const i64 row = chain.block + chain.at;
    chain.at += bytes;
    return row;
}

struct RowHeader {
    i64 previous;  // the row above's header (NO_BLOCK: row 0, kept in no block)
    int first;     // the column of the row's first cell
    int width;     // its cells
};

// One direction's ALIGN_EX: rows are the query's letters, row letter k (1..m) at
// query[row_origin + row_step * k]; columns the subject's, letter k (1..n) at
// subject position col_origin + col_step * k.
struct Direction {
    const unsigned char* query;
    i64 row_origin;
    int row_step;
    i64 m;
    i64 col_origin;
    int col_step;
    i64 n;
};

struct Aligned {
    int score;
    i64 rows;          // best_a
    i64 columns;       // best_b
    i64 columns_read;
    i64 best_row;      // the best cell's row header (NO_BLOCK: row 0)
    i64 row0_columns;  // row 0's b_size: its cells 1.. b_size - 1 are gaps
};

// dynprog.py's align_ex up to the walk back: the cells into the chain. TRACE_MADE, or
// TRACE_NOT_MADE when the band outgrew the ring or a block, or the cells counted down in
// *budget ran out, TRACE_NO_ROOM when the pool gave out.
HD int align_cells(const Direction& d, Subject& s, const int* matrix, int gap_open,
                   int gap_extend, int x_dropoff, const Pool& pool, Chain& chain, i64* budget,
                   Aligned* out) {
    int band[2 * TRACE_BAND_COLUMNS];
    const int gap_open_extend = gap_open + gap_extend;
    if (x_dropoff < gap_open_extend) x_dropoff = gap_open_extend;
    out->score = 0;
    out->rows = 0;
    out->columns = 0;
    out->columns_read = 0;
    out->best_row = NO_BLOCK;
    out->row0_columns = 0;
    if (d.n <= 0 || d.m <= 0) return TRACE_MADE;
    const i64 extra = gap_extend > 0 ? x_dropoff / gap_extend + 3 : d.n + 3;

    // row 0: only gaps, until they fail the X-drop test
    int score = -gap_open_extend;
    band[0] = 0;
    band[1] = -gap_open_extend;
    i64 b_size = 1;
    while (b_size <= d.n && score >= -x_dropoff) {
        if (b_size >= TRACE_BAND_COLUMNS - 1) return TRACE_NOT_MADE;
        band[2 * b_size] = score;
        band[2 * b_size + 1] = score - gap_open_extend;
        score -= gap_extend;
        ++b_size;
    }
    out->row0_columns = b_size;

    int best_score = 0;
    i64 best_a = 0, best_b = 0, first_b = 0, columns_read = 0, best_row = NO_BLOCK;
    i64 previous = NO_BLOCK;
    for (i64 a = 1; a <= d.m; ++a) {
        *budget -= b_size - first_b;
        if (*budget < 0) return TRACE_NOT_MADE;
        const i64 room = (b_size - first_b) + extra + 2;
        if (ROW_HEADER + room + 15 > TRACE_BLOCK_BYTES) return TRACE_NOT_MADE;
        const i64 row = chain_row(pool, chain, room);
        if (row == NO_BLOCK) return TRACE_NO_ROOM;
        unsigned char* cells = pool.bytes + row + ROW_HEADER;
        const i64 orig_first = first_b;
        const int* matrix_row =
            matrix + BLASTNA_LETTERS * LOAD(d.query + d.row_origin + d.row_step * a);
        int cell = MININT;
        int score_gap_row = MININT;
        i64 last_b = first_b;
        int floor = best_score - x_dropoff;
        // a cell reads the next column's letter for the diagonal of the cell to its right;
        // column n has none, so its pass reads letter 1 and never uses it
        i64 col = d.col_origin + d.col_step * first_b;
        int step = d.col_step;
        i64 start = first_b;
        i64 stop = b_size < d.n ? b_size : d.n;
        if (stop > columns_read) columns_read = stop;
        for (int part = 0; part < 2; ++part) {
            for (i64 b = start; b < stop; ++b) {
                const int u = 2 * (int)(b & BAND_MASK);
                col += step;
                int score_gap_col = band[u + 1];
                const int next_score = band[u] + matrix_row[subject_letter(s, col)];
                int script = OP_SUB;
                if (cell < score_gap_col) {
                    script = OP_INS;
                    cell = score_gap_col;
                }
                if (cell < score_gap_row) {
                    script = OP_DEL;
                    cell = score_gap_row;
                }
                if (cell < floor) {
                    if (b == first_b) ++first_b;  // a dead first cell moves the band's left edge
                    else band[u] = MININT;
                } else {
                    last_b = b;
                    if (cell > best_score) {
                        best_score = cell;
                        best_a = a;
                        best_b = b;
                        best_row = row;
                        floor = cell - x_dropoff;
                    }
                    const int open_gap = cell - gap_open_extend;
                    score_gap_row -= gap_extend;
                    score_gap_col -= gap_extend;
                    if (score_gap_col < open_gap) {
                        band[u + 1] = open_gap;
                    } else {
                        band[u + 1] = score_gap_col;
                        script += CELL_EXTEND_GAP_IN_SUBJECT;
                    }
                    if (score_gap_row < open_gap) score_gap_row = open_gap;
                    else script += CELL_EXTEND_GAP_IN_QUERY;
                    band[u] = cell;
                }
                cell = next_score;
                cells[b - orig_first] = (unsigned char)script;
            }
            if (stop == b_size) break;
            col = d.col_origin + d.col_step;
            step = 0;
            start = stop;
            stop = b_size;
        }
        const i64 loop_end = b_size;
        if (first_b == b_size) {
            // the row died: its cells are written, the walk back never starts below it
            RowHeader* header = (RowHeader*)(pool.bytes + row);
            header->previous = previous;
            header->first = (int)orig_first;
            header->width = (int)(loop_end - orig_first);
            break;
        }
        if (last_b < b_size - 1) {
            b_size = last_b + 1;
        } else {
            // the row ended alive: open the band to the right while the row gap survives
            while (score_gap_row >= best_score - x_dropoff && b_size <= d.n) {
                if (b_size - first_b >= TRACE_BAND_COLUMNS - 1) return TRACE_NOT_MADE;
                const int u = 2 * (int)(b_size & BAND_MASK);
                band[u] = score_gap_row;
                band[u + 1] = score_gap_row - gap_open_extend;
                score_gap_row -= gap_extend;
                cells[b_size - orig_first] = OP_DEL;
                ++b_size;
            }
        }
        RowHeader* header = (RowHeader*)(pool.bytes + row);
        header->previous = previous;
        header->first = (int)orig_first;
        header->width = (int)((loop_end > b_size ? loop_end : b_size) - orig_first);
        previous = row;
        if (b_size <= d.n) {
            if (b_size - first_b >= TRACE_BAND_COLUMNS - 1) return TRACE_NOT_MADE;
            const int u = 2 * (int)(b_size & BAND_MASK);
            band[u] = MININT;
            band[u + 1] = MININT;
            ++b_size;
        }
    }
    out->score = best_score;
    out->rows = best_a;
    out->columns = best_b;
    out->columns_read = columns_read;
    out->best_row = best_row;
    return TRACE_MADE;
}

// align_ex's walk back from the best cell, following gap-extension flags while in a gap:
// the edit script's runs (count << RUN_COUNT_SHIFT | op) from the best cell to the origin,
// run k into runs[first + step * k] (only counted without runs). Returns the count of runs
// (-1: the walk left the cells written), and the op of the last run.
HD i64 walk_back(const Pool& pool, const Aligned& al, u32* runs, i64 first, int step,
                 int* last_op) {
    i64 a = al.rows, b = al.columns, row = al.best_row, count = 0, length = 0;
    int script = OP_SUB, op = -1;
    while (a > 0 || b > 0) {
        int cell;
        if (a == 0) {
            if (b >= al.row0_columns) return -1;
            cell = OP_DEL;
        } else {
            const RowHeader* header = (const RowHeader*)(pool.bytes + row);
            const i64 k = b - header->first;
            if (k < 0 || k >= header->width) return -1;
            cell = pool.bytes[row + ROW_HEADER + k];
        }
        if (script == OP_DEL) {
            script = cell & CELL_OP_MASK;
            if (cell & CELL_EXTEND_GAP_IN_QUERY) script = OP_DEL;
        } else if (script == OP_INS) {
            script = cell & CELL_OP_MASK;
            if (cell & CELL_EXTEND_GAP_IN_SUBJECT) script = OP_INS;
        } else {
            script = cell & CELL_OP_MASK;
        }
        if (script != OP_DEL) {
            --a;
            if (a > 0) row = ((const RowHeader*)(pool.bytes + row))->previous;
        }
        if (script != OP_INS) --b;
        if (script == op) {
            ++length;
            continue;
        }
        if (op >= 0 && runs)
            runs[first + step * (count - 1)] = (u32)(length << RUN_COUNT_SHIFT | op);
        op = script;
        length = 1;
        ++count;
    }
    if (op >= 0 && runs)
        runs[first + step * (count - 1)] = (u32)(length << RUN_COUNT_SHIFT | op);
    *last_op = op;
    return count;
}

// dynprog.py's gapped_start_nucl: the traceback's start point (q, s) of an HSP's box.
HD void start_point(const unsigned char* query, Subject& s, i64 q_start, i64 q_end,
                    i64 s_start, i64 s_end, i64* q_gapped, i64* s_gapped) {
    int max_run = 10;
    int score = -1;
    i64 q = *q_gapped, p = *s_gapped;
    while (q < q_end) {
        const bool same = p < s.length && LOAD(query + q) == subject_letter(s, p);
        ++q;
        ++p;
        if (!same) break;
        if (++score > max_run) return;
    }
    q = *q_gapped;
    p = *s_gapped;
    while (q >= 0) {
        const bool same = p >= 0 && p < s.length && LOAD(query + q) == subject_letter(s, p);
        --q;
        --p;
        if (!same) break;
        if (++score > max_run) return;
    }

    max_run = 15;  // moving the point demands a longer run
    const i64 back = (*s_gapped - s_start) < (*q_gapped - q_start) ? *s_gapped - s_start
                                                                   : *q_gapped - q_start;
    const i64 diag_q = *q_gapped - back, diag_s = *s_gapped - back;
    const i64 length = (s_end - diag_s) < (q_end - diag_q) ? s_end - diag_s : q_end - diag_q;
    int max_score = 0;
    i64 max_offset = diag_q, index = diag_q;
    score = 0;
    bool match = false, prev_match = false;
    for (; index < diag_q + length; ++index) {
        match = LOAD(query + index) == subject_letter(s, index + diag_s - diag_q);
        if (match != prev_match) {
            prev_match = match;
            if (match) {
                score = 1;
            } else if (score > max_score) {
                max_score = score;
                max_offset = index - score / 2;
            }
        } else if (match) {
            ++score;
            if (score > max_run) {
                max_offset = index - max_run / 2;
                *q_gapped = max_offset;
                *s_gapped = max_offset + diag_s - diag_q;
                return;
            }
        }
    }
    if (match && score > max_score) {
        max_score = score;
        max_offset = index - score / 2;
    }
    if (max_score > 0) {
        *q_gapped = max_offset;
        *s_gapped = max_offset + diag_s - diag_q;
    }
}

struct Scoring {
    const int* matrix;
    int gap_open, gap_extend, x_dropoff;
    i64 max_subject_offset, max_total_gaps;
    i64 cell_budget;  // the cells an alignment may compute on the device (a thread is slow)
};

struct Runs {
    u32* runs;
    u64 size;
    u64* used;
};

// HSP i's traceback into row i of found (TRACE_FIELDS values) and its runs: TRACE_MADE, or
// TRACE_NOT_MADE where the CPU must make it, TRACE_NO_ROOM where the memory ran out (a later
// launch with fewer alignments may make it).
HD int trace_hsp(const i64* hsp, const unsigned char* volume_query, const i64* context_offset,
                  const i64* context_length, const unsigned char* subject_bases,
                  i64 subject_length, i64 exact_lo, i64 exact_hi, const Scoring& sc,
                  const Pool& pool, Chain& left_chain, Chain& right_chain, const Runs& out,
                  i64* found) {
    const i64 ctx = hsp[HSP_CONTEXT];
    i64 q_gapped = hsp[HSP_Q_GAPPED_START], s_gapped = hsp[HSP_S_GAPPED_START];
    if ((q_gapped == 0 && s_gapped == 0) || exact_hi <= exact_lo) return TRACE_NOT_MADE;
    const unsigned char* query = volume_query + LOAD(context_offset + ctx);
    const i64 q_length = LOAD(context_length + ctx);
    Subject s = {subject_bases, subject_length, exact_lo, exact_hi, false};
    start_point(query, s, hsp[HSP_Q_START], hsp[HSP_Q_END], hsp[HSP_S_START], hsp[HSP_S_END],
                &q_gapped, &s_gapped);
    if (s.spoiled) return TRACE_NOT_MADE;

    // AdjustSubjectRange: a long subject is aligned in a window around the start point
    i64 shift = 0, s_off = s_gapped, s_window = subject_length;
    if (subject_length >= sc.max_subject_offset) {
        const i64 max_left = q_gapped + sc.max_total_gaps;
        const i64 max_right = q_length - q_gapped + sc.max_total_gaps;
        if (s_gapped > max_left) {
            shift = s_gapped - max_left;
            s_off = max_left;
        }
        const i64 end = s_gapped + max_right;
        s_window = (subject_length < end ? subject_length : end) - shift;
    }

    if (!chain_rewind(left_chain) || !chain_rewind(right_chain)) return TRACE_NO_ROOM;
    const Direction left_d = {query, q_gapped + 1, -1, q_gapped + 1, shift + s_off + 1, -1,
                              s_off + 1};
    Aligned left, right;
    i64 budget = sc.cell_budget;
    int status = align_cells(left_d, s, sc.matrix, sc.gap_open, sc.gap_extend, sc.x_dropoff,
                             pool, left_chain, &budget, &left);
    if (status != TRACE_MADE) return status;
    i64 q_start = q_gapped - left.rows + 1, s_start = s_off - left.columns + 1, q_end, s_end;
    const bool rightward = q_gapped < q_length && s_off < s_window;
    if (rightward) {
        const Direction right_d = {query, q_gapped, 1, q_length - q_gapped - 1, shift + s_off, 1,
                                   s_window - s_off - 1};
        status = align_cells(right_d, s, sc.matrix, sc.gap_open, sc.gap_extend, sc.x_dropoff,
                             pool, right_chain, &budget, &right);
        if (status != TRACE_MADE) return status;
        q_end = q_gapped + right.rows + 1;
        s_end = s_off + right.columns + 1;
    } else {
        right.score = 0;
        right.rows = right.columns = right.columns_read = 0;
        right.best_row = NO_BLOCK;
        right.row0_columns = 0;
        q_end = q_gapped - 1;
        s_end = s_off - 1;
    }
    if (s.spoiled) return TRACE_NOT_MADE;

    // the left script reads forward as walked; the right one backward. They are joined,
    // the two runs meeting at the start point merged when of one kind.
    int left_last = -1, right_last = -1;
    const i64 n_left = walk_back(pool, left, nullptr, 0, 1, &left_last);
    const i64 n_right = walk_back(pool, right, nullptr, 0, 1, &right_last);
    if (n_left < 0 || n_right < 0) return TRACE_NOT_MADE;
    const int merged = n_left > 0 && n_right > 0 && left_last == right_last;
    const i64 total = n_left + n_right - merged;
    const u64 first = pool_take(out.used, (u64)total);
    if (first + total > out.size) return TRACE_NO_ROOM;
    u32* runs = out.runs + first;
    walk_back(pool, left, runs, 0, 1, &left_last);
    if (n_right > 0) {
        // the right script's last run (at the start point) goes first; when merged, onto
        // the left's last
        const u32 joint = merged ? runs[n_left - 1] : 0;
        walk_back(pool, right, runs, total - 1, -1, &right_last);
        if (merged) runs[n_left - 1] += joint & ~(u32)((1 << RUN_COUNT_SHIFT) - 1);
    }

    // drop leading and trailing gaps, refunding their cost
    int score_left = left.score, score_right = right.score;
    i64 head = 0, tail = total;
    while (head < tail && (int)(runs[head] & ((1 << RUN_COUNT_SHIFT) - 1)) != OP_SUB) {
        const i64 length = runs[head] >> RUN_COUNT_SHIFT;
        score_left += sc.gap_open + (int)length * sc.gap_extend;
        if ((int)(runs[head] & ((1 << RUN_COUNT_SHIFT) - 1)) == OP_DEL) s_start += length;
        else q_start += length;
        ++head;
    }
    while (tail > head && (int)(runs[tail - 1] & ((1 << RUN_COUNT_SHIFT) - 1)) != OP_SUB) {
        const i64 length = runs[tail - 1] >> RUN_COUNT_SHIFT;
        score_right += sc.gap_open + (int)length * sc.gap_extend;
        if ((int)(runs[tail - 1] & ((1 << RUN_COUNT_SHIFT) - 1)) == OP_DEL) s_end -= length;
        else q_end -= length;
        --tail;
    }
    // the left search read letters s_off down, the right one from s_off + 1 up
    const i64 read_end = s_off + 1 + right.columns_read;
    const i64 read_start = s_off + 1 - left.columns_read;
    found[TRACE_START] = q_gapped;
    found[TRACE_START + 1] = s_gapped;
    found[TRACE_SCORE] = (i64)score_left + score_right;
    found[TRACE_SCORE + 1] = 0;
    found[TRACE_READ] = (read_start < read_end ? read_start : read_end) + shift;
    found[TRACE_READ + 1] = read_end + shift;
    found[TRACE_EXTENTS] = q_start;
    found[TRACE_EXTENTS + 1] = q_end;
    found[TRACE_EXTENTS + 2] = s_start + shift;
    found[TRACE_EXTENTS + 3] = s_end + shift;
    found[TRACE_RUNS] = (i64)first + head;
    found[TRACE_RUNS + 1] = tail - head;
    return TRACE_MADE;
}

// The HSPs' tracebacks: HSP order[k] is taken k-th (the host orders them longest first, so
// that the last to end are short); a thread takes the next one when it is done.
struct Traces {
    int n;
    const int* order;
    const i64* rows;              // [n, HSP_FIELDS], whole-subject coordinates
    const u64* subject_address;   // each HSP's subject's packed bases
    const i64* subject_length;
    const i64* exact;             // [n, 2]: letters known to be bases
    const i64* context_offset;
    const i64* context_length;
    const unsigned char* query;   // the batch's blastna letters
};

HD void trace_next(const Traces& t, int k, const Scoring& sc, const Pool& pool,
                   Chain& left_chain, Chain& right_chain, const Runs& out, i64* found,
                   unsigned char* done) {
    const int i = LOAD(t.order + k);
    done[i] = (unsigned char)trace_hsp(
        t.rows + (i64)HSP_FIELDS * i, t.query, t.context_offset, t.context_length,
        (const unsigned char*)LOAD(t.subject_address + i), LOAD(t.subject_length + i),
        LOAD(t.exact + 2 * (i64)i), LOAD(t.exact + 2 * (i64)i + 1), sc, pool, left_chain,
        right_chain, out, found + (i64)TRACE_FIELDS * i);
}

// Every HSP's traceback (the HSPs order[0..n) into their rows of found and done), the HSPs
// taken in turn by the threads that run this; `matrix` as each thread reads it.
#define TRACE_ARGUMENTS \
        int n, const int* order, const i64* rows, const u64* subject_address, \
        const i64* subject_length, const i64* exact, const i64* context_offset, \
        const i64* context_length, const unsigned char* query, const int* matrix, int gap_open, \
        int gap_extend, int x_dropoff, i64 max_subject_offset, i64 max_total_gaps, \
        i64 cell_budget, unsigned char* pool_bytes, u64 pool_size, u64* pool_used, u32* runs, \
        u64 runs_size, u64* runs_used, int* next, i64* found, unsigned char* done

HD void trace_hsps(TRACE_ARGUMENTS) {
    const Traces t = {n, order, rows, subject_address, subject_length, exact, context_offset,
                      context_length, query};
    const Scoring sc = {matrix, gap_open, gap_extend, x_dropoff, max_subject_offset,
                        max_total_gaps, cell_budget};
    const Pool pool = {pool_bytes, pool_size, pool_used};
    const Runs out = {runs, runs_size, runs_used};
    Chain left_chain = new_chain(pool), right_chain = new_chain(pool);
    for (int k = next_hsp(next); k < n; k = next_hsp(next))
        trace_next(t, k, sc, pool, left_chain, right_chain, out, found, done);
}

#ifdef __CUDACC__

extern "C" __global__ void dp_traces(TRACE_ARGUMENTS) {
    __shared__ int shared_matrix[BLASTNA_LETTERS * BLASTNA_LETTERS];
    for (int k = threadIdx.x; k < BLASTNA_LETTERS * BLASTNA_LETTERS; k += blockDim.x)
        shared_matrix[k] = matrix[k];
    __syncthreads();
    trace_hsps(n, order, rows, subject_address, subject_length, exact, context_offset,
               context_length, query, shared_matrix, gap_open, gap_extend, x_dropoff,
               max_subject_offset, max_total_gaps, cell_budget, pool_bytes, pool_size,
               pool_used, runs, runs_size, runs_used, next, found, done);
}

#else

extern "C" void dp_traces_host(TRACE_ARGUMENTS) {
    trace_hsps(n, order, rows, subject_address, subject_length, exact, context_offset,
               context_length, query, matrix, gap_open, gap_extend, x_dropoff,
               max_subject_offset, max_total_gaps, cell_budget, pool_bytes, pool_size,
               pool_used, runs, runs_size, runs_used, next, found, done);
}

#endif
