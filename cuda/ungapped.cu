// Ungapped X-drop extension of seeds, one thread per seed, made ahead of the ungapped stage's
// in-order pass. An extension depends only on its seed (and its context's X-drop and reduced
// cutoff), never on the diagonal array or hash: those only decide which seeds BLAST extends.
// So every seed is extended here, and gblastn/ungapped.py's extend_chunks, given the rows,
// keeps its diagonal bookkeeping and looks the extensions up instead of making them.
//
// Each function matches its numba twin in gblastn/ungapped.py (extend_exact, extend_approx,
// _query_byte) line for line in effect, and reads the subject as gblastn/scan/cpu.py does
// (a byte outside the volume's buffer reads 0); keep them in step.
//
// The same code compiles as plain C++ (ungapped_seeds_host), so that a machine without a GPU
// can test it against ungapped.py.

typedef long long i64;

// the records exchanged with the host and the score matrix's side, from gblastn/layouts.py
#if !defined(SEED_CHUNK) || !defined(SEED_Q_OFF) || !defined(SEED_S_OFF) || \
    !defined(UNGAPPED_Q_START) || !defined(UNGAPPED_S_START) || !defined(UNGAPPED_LENGTH) || \
    !defined(UNGAPPED_SCORE) || !defined(BLASTNA_LETTERS)
#error "gblastn.layouts' defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif

#include "device_host.cuh"
#include "query_contexts.cuh"

struct Volume {
    const unsigned char* packed;
    i64 size;      // bytes of the host's buffer: reads past it count as 0
    i64 byte_off;  // the chunk's first byte
};

HD int subject_byte(const Volume& v, i64 k) {
    const i64 i = v.byte_off + k;
    return (i < 0 || i >= v.size) ? 0 : LOAD(v.packed + i);
}

HD int subject_base(const Volume& v, i64 s) {
    return (subject_byte(v, s >> 2) >> (2 * (3 - (s & 3)))) & 3;
}

// BLAST's packing of four blastna letters, keeping the low 8 bits (ambiguity codes and
// sentinels spill into their neighbours' bits).
HD int query_byte(const unsigned char* q, i64 i) {
    return (((int)LOAD(q + i) << 6) | ((int)LOAD(q + i + 1) << 4) | ((int)LOAD(q + i + 2) << 2)
            | (int)LOAD(q + i + 3)) & 0xFF;
}

struct Extension {
    i64 q_start;
    i64 s_start;
    i64 length;
    i64 score;
};

struct Query {
    const unsigned char* letters;  // blastna, concatenated with sentinels
    i64 size;
};

// s_NuclUngappedExtendExact. x_drop > 0.
HD Extension extend_exact(const Query& q, const int* matrix, const Volume& v, i64 s_len,
                          i64 q_off, i64 s_off, int x_drop) {
    const i64 neg_x = -x_drop;
    i64 steps = q_off - 1 < s_off ? q_off - 1 : s_off;
    i64 total = 0, run = 0, q_beg = q_off;
    for (i64 k = 1; k <= steps; ++k) {
        run += matrix[LOAD(q.letters + q_off - k) * BLASTNA_LETTERS + subject_base(v, s_off - k)];
        if (run > 0) {
            q_beg = q_off - k;
            total += run;
            run = 0;
        } else if (run < neg_x) {
            break;
        }
    }
    const i64 s_beg = s_off - (q_off - q_beg);
    const i64 q_avail = q.size - 1 - q_off, s_avail = s_len - s_off;
    steps = q_avail < s_avail ? q_avail : s_avail;
    run = 0;
    i64 q_end = q_off, x_now = neg_x;
    for (i64 k = 0; k < steps; ++k) {
        run += matrix[LOAD(q.letters + q_off + k) * BLASTNA_LETTERS + subject_base(v, s_off + k)];
        if (run > 0) {
            q_end = q_off + k + 1;
            total += run;
            x_now = -total > neg_x ? -total : neg_x;
            run = 0;
        } else if (run < x_now) {
            break;
        }
    }
    return Extension{q_beg, s_beg, q_end - q_beg, total};
}

// s_NuclUngappedExtend: 4 letters at a time from the first byte boundary after s_off, redone
// exactly when the approximate score reaches reduced_cutoff.
HD Extension extend_approx(const Query& q, const int* matrix, const int* score_table,
                           const Volume& v, i64 s_len, i64 q_off, i64 s_off, i64 s_match_end,
                           int x_drop, int reduced_cutoff) {
    const i64 neg_x = -x_drop;
    const i64 pad = (4 - (s_off & 3)) & 3;
    const i64 q_ext = q_off + pad, s_ext = s_off + pad;
    i64 n = (q_ext - 1 < s_ext ? q_ext - 1 : s_ext) / 4;
    i64 total = 0, run = 0, new_q = q_ext, qi = q_ext, si = s_ext;
    for (i64 k = 0; k < n; ++k) {
        run += score_table[query_byte(q.letters, qi - 4) ^ subject_byte(v, (si >> 2) - 1)];
        if (run > 0) {
            new_q = qi - 4;
            total += run;
            run = 0;
        }
        if (run < neg_x) break;
        qi -= 4;
        si -= 4;
    }
    const i64 q_start = new_q;
    const i64 s_start = s_ext - (q_ext - q_start);
    const i64 q_room = q.size - 1 - q_ext, s_room = s_len - s_ext;
    n = (q_room < s_room ? q_room : s_room) / 4;
    run = 0;
    new_q = q_ext;
    qi = q_ext;
    si = s_ext;
    for (i64 k = 0; k < n; ++k) {
        run += score_table[query_byte(q.letters, qi) ^ subject_byte(v, si >> 2)];
        if (run > 0) {
            new_q = qi + 3;
            total += run;
            run = 0;
        }
        if (run < neg_x) break;
        qi += 4;
        si += 4;
    }
    if (total >= reduced_cutoff)
        return extend_exact(q, matrix, v, s_len, q_off, s_off, x_drop);
    const i64 by_match = s_match_end - s_start, by_query = new_q - q_start + 1;
    return Extension{q_start, s_start, by_match > by_query ? by_match : by_query, total};
}

// The seeds of a scan, as int32 rows [SEED_FIELDS][n] (gblastn.scan.Seeds); a seed's chunk
// minus chunk_base indexes the chunk arrays.
struct SeedRows {
    const int* rows;
    i64 n;
    int chunk_base;
    const i64* chunk_byte_offset;
    const int* chunk_length;
};

struct Rules {
    const int* context_offset;
    int num_contexts;
    const int* xdrop;           // raw, per context
    const int* reduced_cutoff;  // per context
    int word_size;
};

HD void extend_seed(const SeedRows& s, i64 i, const Query& q, const unsigned char* packed,
                    i64 packed_size, const Rules& r, const int* matrix, const int* score_table,
                    int* out) {
    const i64 q_off = LOAD(s.rows + SEED_Q_OFF * s.n + i);
    const i64 s_off = LOAD(s.rows + SEED_S_OFF * s.n + i);
    const int c = LOAD(s.rows + SEED_CHUNK * s.n + i) - s.chunk_base;
    const Volume v = {packed, packed_size, LOAD(s.chunk_byte_offset + c)};
    const i64 s_len = LOAD(s.chunk_length + c);
    const int ctx = context_of(r.context_offset, r.num_contexts, q_off);
    const Extension e = r.word_size < 11
        ? extend_exact(q, matrix, v, s_len, q_off, s_off, LOAD(r.xdrop + ctx))
        : extend_approx(q, matrix, score_table, v, s_len, q_off, s_off, s_off + r.word_size,
                        LOAD(r.xdrop + ctx), LOAD(r.reduced_cutoff + ctx));
    out[UNGAPPED_Q_START * s.n + i] = (int)e.q_start;
    out[UNGAPPED_S_START * s.n + i] = (int)e.s_start;
    out[UNGAPPED_LENGTH * s.n + i] = (int)e.length;
    out[UNGAPPED_SCORE * s.n + i] = (int)e.score;
}

// out: int32 rows [UNGAPPED_FIELDS][n], the extension of every seed.
#ifdef __CUDACC__

extern "C" __global__ void ungapped_seeds(
        const int* rows, i64 n, int chunk_base, const i64* chunk_byte_offset,
        const int* chunk_length, const unsigned char* packed, i64 packed_size,
        const unsigned char* letters, i64 letters_size, const int* context_offset,
        int num_contexts, const int* xdrop, const int* reduced_cutoff, int word_size,
        const int* matrix, const int* score_table, int* out) {
    __shared__ int shared_matrix[BLASTNA_LETTERS * BLASTNA_LETTERS];
    __shared__ int shared_table[256];
    for (int k = threadIdx.x; k < BLASTNA_LETTERS * BLASTNA_LETTERS; k += blockDim.x)
        shared_matrix[k] = matrix[k];
    for (int k = threadIdx.x; k < 256; k += blockDim.x)
        shared_table[k] = score_table[k];
    __syncthreads();
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const SeedRows s = {rows, n, chunk_base, chunk_byte_offset, chunk_length};
    const Rules r = {context_offset, num_contexts, xdrop, reduced_cutoff, word_size};
    extend_seed(s, i, Query{letters, letters_size}, packed, packed_size, r, shared_matrix,
                shared_table, out);
}

#else

extern "C" void ungapped_seeds_host(
        const int* rows, i64 n, int chunk_base, const i64* chunk_byte_offset,
        const int* chunk_length, const unsigned char* packed, i64 packed_size,
        const unsigned char* letters, i64 letters_size, const int* context_offset,
        int num_contexts, const int* xdrop, const int* reduced_cutoff, int word_size,
        const int* matrix, const int* score_table, int* out) {
    const SeedRows s = {rows, n, chunk_base, chunk_byte_offset, chunk_length};
    const Rules r = {context_offset, num_contexts, xdrop, reduced_cutoff, word_size};
    for (i64 i = 0; i < n; ++i)
        extend_seed(s, i, Query{letters, letters_size}, packed, packed_size, r, matrix,
                    score_table, out);
}

#endif
