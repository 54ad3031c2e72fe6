// Seed kernels for one volume and one query batch (see gblastn/scan/gpu.py for the host side).
//
//   scan_probes   each thread probes PROBES_PER_THREAD subject offsets, interleaved across the
//                 block so that a warp reads neighbouring offsets; a probe whose word the table
//                 lists is recorded as (chunk, subject offset) in a shared-memory buffer that
//                 goes to global memory with one atomicAdd per flush.
//   extend_hits   one thread per recorded probe: every query offset the table lists for the
//                 word, the mini-extension to W, s_TypeOfWord; a survivor is written with its
//                 sort key (probe number << rank_bits | rank of the offset in the table's list).
//                 One thread writes a probe's survivors, in rank order (its atomicAdds on one
//                 counter return increasing slots), which the host's stable sort by probe keeps.
//   init_order    the survivors' indices, which the host sorts by their keys (a radix sort,
//                 diagonals.cu) so that they come out in the CPU backend's order.
//   gather_seeds  survivors in key order, as SEED_FIELDS int32 rows.
//
// Probe numbering: the probes of chunk c are probe_start[c] .. probe_start[c + 1] - 1, probe
// k of a chunk at subject offset k * SCAN_STEP; chunks shorter than WIDTH have none. A w-mer
// therefore never spans two chunks. Capacities are checked: counters keep counting past a
// full buffer, and the host grows it and runs the launch again.

#include "seed_common.cuh"

// The scan's tuning (gblastn.scan.gpu.variant_defines): SCAN_THREADS threads a block, each
// probing PROBES_PER_THREAD offsets; where the scan collects hits before they go to global
// memory (FLUSH_MODE):
//   0 one block buffer of FLUSH_SLOTS * SCAN_THREADS records, flushed whenever it cannot
//     take another round (half full with two slots)
//   1 one buffer per warp, flushed when half full (no block barriers)
//   2 one block buffer holding the whole tile, flushed once at the end (no barrier in the loop)
#if !defined(SCAN_THREADS) || !defined(PROBES_PER_THREAD) || !defined(FLUSH_MODE) || \
    !defined(FLUSH_SLOTS)
#error "the scan's tuning defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif
// the seeds' rows, from gblastn/layouts.py
#if !defined(SEED_CHUNK) || !defined(SEED_Q_OFF) || !defined(SEED_S_OFF) || \
    !defined(SEED_S_FIRST) || !defined(SEED_HIT_S)
#error "gblastn.layouts' defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif

#define FULL_MASK 0xffffffffu
#define WARPS (SCAN_THREADS / 32)

// Largest c with probe_start[c] <= g among [lo, hi).
__device__ __forceinline__ int chunk_of_probe(const i64* __restrict__ probe_start, int lo,
                                              int hi, i64 g) {
    while (lo < hi - 1) {
        int mid = (lo + hi) >> 1;
        if (__ldg(&probe_start[mid]) > g) hi = mid; else lo = mid;
    }
    return lo;
}

// The WIDTH bases at chunk offset s from aligned 32-bit loads, two for a contiguous word,
// three for a discontiguous window (the device buffer is padded, and the word lies inside
// the chunk).
__device__ __forceinline__ word_t probe_word(const unsigned char* __restrict__ packed,
                                             i64 byte_off, int s) {
    i64 p = byte_off + (s >> 2);
    const unsigned* a = reinterpret_cast<const unsigned*>(packed + (p & ~3LL));
    unsigned hi = __byte_perm(__ldg(a), 0, 0x0123);
    unsigned lo = __byte_perm(__ldg(a + 1), 0, 0x0123);
    u64 v = ((u64)hi << 32) | lo;
    int off = 8 * (int)(p & 3) + 2 * (s & 3);
#if TEMPLATE_LENGTH
    // off + 2 * WIDTH may pass 64 bits: the third word's leading bits follow
    unsigned next = __byte_perm(__ldg(a + 2), 0, 0x0123);
    u64 head = off ? (v << off) | ((u64)next >> (32 - off)) : v;  // off <= 30
    return head >> (64 - 2 * WIDTH);
#else
    return (unsigned)(v >> (64 - off - 2 * WIDTH)) & WORD_MASK;
#endif
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
scan_probes(const unsigned char* __restrict__ packed,
            const i64* __restrict__ chunk_byte_offset,
            const i64* __restrict__ probe_start, int num_chunks, i64 total_probes,
            const short* __restrict__ backbone, const unsigned* __restrict__ pv,
            int2* __restrict__ hits, u64* __restrict__ hit_count, u64 capacity) {
    QueryTable t;
    t.backbone = backbone;
    t.pv = pv;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const i64 tile = (i64)blockIdx.x * (SCAN_THREADS * PROBES_PER_THREAD);

    // probe the thread's offsets; loads first so that several are in flight
    word_t word[PROBES_PER_THREAD];
    int chunk[PROBES_PER_THREAD];
    int s_off[PROBES_PER_THREAD];
    bool valid[PROBES_PER_THREAD];
    int c = chunk_of_probe(probe_start, 0, num_chunks, min(tile + tid, total_probes - 1));
    i64 c_first = probe_start[c], c_next = probe_start[c + 1];
    i64 byte_off = chunk_byte_offset[c];
#pragma unroll
    for (int k = 0; k < PROBES_PER_THREAD; ++k) {
        i64 g = tile + (i64)k * SCAN_THREADS + tid;
        valid[k] = g < total_probes;
        if (valid[k] && g >= c_next) {
            c = chunk_of_probe(probe_start, c + 1, num_chunks, g);
            c_first = probe_start[c];
            c_next = probe_start[c + 1];
            byte_off = chunk_byte_offset[c];
        }
        chunk[k] = c;
        s_off[k] = (int)(g - c_first) * SCAN_STEP;
        word[k] = valid[k] ? probe_word(packed, byte_off, s_off[k]) : 0;
    }
    bool hit[PROBES_PER_THREAD];
#pragma unroll
    for (int k = 0; k < PROBES_PER_THREAD; ++k)
        hit[k] = valid[k] && word_present(t, word[k]);

    const unsigned lanes_below = (1u << lane) - 1u;
#if FLUSH_MODE == 1
    // one buffer per warp: no block barrier; flushed when half full
    __shared__ int2 buffer[WARPS][64];
    int2* mine = buffer[tid >> 5];
    int count = 0;  // the same in every lane
#pragma unroll
    for (int k = 0; k < PROBES_PER_THREAD; ++k) {
        unsigned m = __ballot_sync(FULL_MASK, hit[k]);
        if (hit[k]) mine[count + __popc(m & lanes_below)] = make_int2(chunk[k], s_off[k]);
        count += __popc(m);
        if (count >= 32 || (k == PROBES_PER_THREAD - 1 && count > 0)) {
            __syncwarp();
            u64 base = 0;
            if (lane == 0) base = atomicAdd(hit_count, (u64)count);
            base = __shfl_sync(FULL_MASK, base, 0);
            for (int i = lane; i < count; i += 32)
                if (base + i < capacity) hits[base + i] = mine[i];
            count = 0;
            __syncwarp();
        }
    }
#elif FLUSH_MODE == 2
    // the whole tile's hits fit: warps append without barriers, one flush at the end
    __shared__ int2 buffer[PROBES_PER_THREAD * SCAN_THREADS];
    __shared__ int count;
    __shared__ u64 base;
    if (tid == 0) count = 0;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < PROBES_PER_THREAD; ++k) {
        unsigned m = __ballot_sync(FULL_MASK, hit[k]);
        int at = 0;
        if (lane == 0 && m) at = atomicAdd(&count, __popc(m));
        at = __shfl_sync(FULL_MASK, at, 0);
        if (hit[k]) buffer[at + __popc(m & lanes_below)] = make_int2(chunk[k], s_off[k]);
    }
    __syncthreads();
    const int n = count;
    if (n == 0) return;
    if (tid == 0) base = atomicAdd(hit_count, (u64)n);
    __syncthreads();
    for (int i = tid; i < n; i += SCAN_THREADS)
        if (base + i < capacity) hits[base + i] = buffer[i];
#else
    // one buffer per block, flushed with one atomicAdd once it cannot take another round
    // (half full with the default two slots)
    __shared__ int2 buffer[FLUSH_SLOTS * SCAN_THREADS];
    __shared__ int count;
    __shared__ u64 base;
    if (tid == 0) count = 0;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < PROBES_PER_THREAD; ++k) {
        unsigned m = __ballot_sync(FULL_MASK, hit[k]);
        int at = 0;
        if (lane == 0 && m) at = atomicAdd(&count, __popc(m));
        at = __shfl_sync(FULL_MASK, at, 0);
        if (hit[k]) buffer[at + __popc(m & lanes_below)] = make_int2(chunk[k], s_off[k]);
        __syncthreads();
        int n = count;
        __syncthreads();
        if (n >= (FLUSH_SLOTS - 1) * SCAN_THREADS || (k == PROBES_PER_THREAD - 1 && n > 0)) {
            if (tid == 0) {
                base = atomicAdd(hit_count, (u64)n);
                count = 0;
            }
            __syncthreads();
            for (int i = tid; i < n; i += SCAN_THREADS)
                if (base + i < capacity) hits[base + i] = buffer[i];
            __syncthreads();
        }
    }
#endif
}

extern "C" __global__ void __launch_bounds__(256)
extend_hits(const int2* __restrict__ hits, u64 num_hits,
            const unsigned char* __restrict__ packed, i64 packed_size,
            const i64* __restrict__ chunk_byte_offset, const int* __restrict__ chunk_length,
            const i64* __restrict__ probe_start, int chunk_base,
            const short* __restrict__ backbone, const short* __restrict__ overflow,
            const int* __restrict__ hashtable, const int* __restrict__ next_pos,
            const int* __restrict__ cell_start, const int* __restrict__ offsets,
            const int* __restrict__ hashtable2, const int* __restrict__ next_pos2,
            const unsigned* __restrict__ pv, const unsigned char* __restrict__ sequence,
            int sequence_length, const int* __restrict__ context_offset,
            const int* __restrict__ context_length, int num_contexts, int rank_bits,
            u64* __restrict__ keys, int* __restrict__ seed_q, int* __restrict__ seed_s,
            int* __restrict__ seed_first, int* __restrict__ seed_chunk,
            int* __restrict__ seed_hit, u64* __restrict__ seed_count, u64 capacity) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= num_hits) return;
    QueryTable t;
    t.backbone = backbone;
    t.overflow = overflow;
    t.hashtable = hashtable;
    t.next_pos = next_pos;
    t.cell_start = cell_start;
    t.offsets = offsets;
    t.pv = pv;
    t.sequence = sequence;
    t.context_offset = context_offset;
    t.context_length = context_length;
    t.sequence_length = sequence_length;
    t.num_contexts = num_contexts;

    const int2 h = hits[i];
    const int c = h.x;
    const i64 s_hit = h.y;
    const i64 byte_off = chunk_byte_offset[c];
    const i64 s_range = chunk_length[c];
    const u64 probe = (u64)(probe_start[c] + s_hit / SCAN_STEP);
    const word_t word = subject_word(packed, packed_size, byte_off, s_hit);

    // one query offset of the word, in the table's order
    auto consider = [&](i64 q_hit, u64 rank) {
        i64 q_seed, s_seed;
        if (!mini_extend(t, packed, packed_size, byte_off, s_range, q_hit, s_hit, q_seed, s_seed))
            return;
        i64 q_fin = q_seed, s_fin = s_seed;
        if (!type_of_word(t, packed, packed_size, byte_off, s_range, q_fin, s_fin)) return;
        u64 at = atomicAdd(seed_count, 1ull);
        if (at >= capacity) return;
        keys[at] = (probe << rank_bits) | rank;
        seed_q[at] = (int)q_fin;
        seed_s[at] = (int)s_fin;
        seed_first[at] = (int)s_seed;
        seed_chunk[at] = c + chunk_base;
        seed_hit[at] = (int)s_hit;
    };

#if TEMPLATE_LENGTH
    // the first template's chain, then the second's, as s_MB_DiscWordScanSubject_* emits
    // them (a word without its presence bit has an empty chain)
    u64 rank = 0;
    for (int p = hashtable[template_index(word, 0)]; p != 0; p = next_pos[p]) consider(p, rank++);
#if TEMPLATE_COUNT > 1
    for (int p = hashtable2[template_index(word, 1)]; p != 0; p = next_pos2[p])
        consider(p, rank++);
#endif
#elif TABLE_KIND == TABLE_SMALL
    int v = backbone[word];
    if (v >= 0) {
        consider(v, 0);
    } else if (v < -1) {
        u64 rank = 0;
        for (int k = -v; overflow[k] >= 0; ++k) consider(overflow[k], rank++);
    }
#elif TABLE_KIND == TABLE_MEGABLAST
    u64 rank = 0;
    for (int p = hashtable[word]; p != 0; p = next_pos[p]) consider(p, rank++);
#else
    const int first = cell_start[word], last = cell_start[word + 1];
    for (int j = first; j < last; ++j) consider(offsets[j], (u64)(j - first));
#endif
}

// A contiguous megablast table's heads as BLAST's 4^w array (gblastn.lookup's layouts):
// thread i writes the heads of the words present[i] lists, the first of them
// heads[present_rank[i]]; hashtable is zero beforehand.
extern "C" __global__ void scatter_heads(const int* __restrict__ heads,
                                         const unsigned* __restrict__ present,
                                         const int* __restrict__ present_rank, i64 present_words,
                                         int* __restrict__ hashtable) {
    i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= present_words) return;
    unsigned bits = present[i];
    int head = present_rank[i];
    while (bits) {
        hashtable[(i << 5) + __ffs(bits) - 1] = heads[head++];
        bits &= bits - 1u;
    }
}

// order[i] = i: the survivors' places before the host's radix sort of their keys.
extern "C" __global__ void init_order(unsigned* __restrict__ order, u64 n) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) order[i] = (unsigned)i;
}

// rows[f * n + i] = field f of survivor order[i] (gblastn.layouts' SEED_* rows).
extern "C" __global__ void gather_seeds(const unsigned* __restrict__ order, u64 n,
                                        const int* __restrict__ seed_q,
                                        const int* __restrict__ seed_s,
                                        const int* __restrict__ seed_first,
                                        const int* __restrict__ seed_chunk,
                                        const int* __restrict__ seed_hit,
                                        int* __restrict__ rows) {
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned o = order[i];
    rows[SEED_CHUNK * n + i] = seed_chunk[o];
    rows[SEED_Q_OFF * n + i] = seed_q[o];
    rows[SEED_S_OFF * n + i] = seed_s[o];
    rows[SEED_S_FIRST * n + i] = seed_first[o];
    rows[SEED_HIT_S * n + i] = seed_hit[o];
}
