// The ungapped stage's in-order pass on the device: given every seed's extension made ahead
// (ungapped.cu), which seeds BLAST's diagonal array or diagonal hash lets it extend, and which
// of those become initial hits, as gblastn/ungapped.py's _extend_into decides it seed by seed.
// Only the initial hits go back to the host.
//
// The pass depends on seed order only within a group of seeds that share state:
//   * the diagonal array: one cell of one chunk (BLAST's offset trick makes the array fresh
//     for every chunk, so chunks never share a cell's state);
//   * the diagonal hash: one bucket's chain, across chunks, slices and volumes (a cell is
//     reused only within its chain); the host carries the chains between calls (HashChains).
//     With a two-hit window of at least the word size, one lane of a bucket's diagonals
//     (ungapped.device_hash_lanes: a reused cell is stale, and a stale cell decides nothing).
// So the seeds are sorted by (group, seed index) and each group is walked by one thread in
// seed order (a bucket's lanes by a warp's threads). The hits are then written in seed order
// (the order the host's pass finds them in, which breaks ties of the initial hits' sort).
//
// The same code compiles as plain C++ (diagonal_pass_host), so that a machine without a GPU
// can test it against ungapped.py.

typedef long long i64;
typedef unsigned long long u64;

// The kernels' tuning (gblastn.scan.gpu.diagonals_defines): COMPACT_THREADS threads a block
// of the compaction and the counting sorts; RADIX_BITS bits of a key sorted by each pass of
// the radix sort.
#if !defined(COMPACT_THREADS) || !defined(RADIX_BITS)
#error "the pass's defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif
// the records exchanged with the host, from gblastn/layouts.py
#if !defined(SEED_CHUNK) || !defined(SEED_Q_OFF) || !defined(SEED_S_OFF) || \
    !defined(SEED_S_FIRST) || !defined(UNGAPPED_Q_START) || !defined(UNGAPPED_S_START) || \
    !defined(UNGAPPED_LENGTH) || !defined(UNGAPPED_SCORE) || !defined(HASH_BUCKETS) || \
    !defined(HASH_LANES) || \
    !defined(WALK_DIAG) || !defined(WALK_S_FIRST) || !defined(WALK_WORD_END) || \
    !defined(WALK_HIT_END) || !defined(WALK_CHUNK) || !defined(WALK_SEED) || \
    !defined(WALK_FIELDS) || !defined(HIT_CHUNK) || !defined(HIT_Q_START) || \
    !defined(HIT_S_START) || !defined(HIT_LENGTH) || !defined(HIT_SCORE) || \
    !defined(HIT_SEED_Q) || !defined(HIT_SEED_S) || !defined(HIT_FIELDS)
#error "gblastn.layouts' defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif

#include "device_host.cuh"
#include "query_contexts.cuh"

// A seed's group: its bucket (hash), or its chunk and cell (array).
HD u64 seed_group(const int* rows, i64 n, i64 i, int chunk_base, int use_hash, i64 diag_len) {
    const i64 q = rows[SEED_Q_OFF * n + i], s = rows[SEED_S_OFF * n + i];
    if (use_hash) return (u64)((s - q) & (HASH_BUCKETS - 1));
    const u64 chunk = (u64)(rows[SEED_CHUNK * n + i] - chunk_base);
    return (chunk * (u64)diag_len) | (u64)((s + diag_len - q) & (diag_len - 1));
}

// The walk's record of the seed at sorted position p (seed i): WALK_FIELDS int32 rows.
HD void walk_record(const int* rows, const int* ahead, i64 n, i64 i, i64 p, int chunk_base,
                    const int* context_offset, int num_contexts, const int* cutoff,
                    int word_size, int* walk) {
    const i64 q = rows[SEED_Q_OFF * n + i], s = rows[SEED_S_OFF * n + i];
    const int ctx = context_of(context_offset, num_contexts, q);
    const int score = ahead[UNGAPPED_SCORE * n + i];
    walk[WALK_DIAG * n + p] = (int)(s - q);
    walk[WALK_S_FIRST * n + p] = rows[SEED_S_FIRST * n + i];
    walk[WALK_WORD_END * n + p] = (int)(s + word_size);
    walk[WALK_HIT_END * n + p] = score >= LOAD(cutoff + ctx)
        ? ahead[UNGAPPED_S_START * n + i] + ahead[UNGAPPED_LENGTH * n + i] : -1;
    walk[WALK_CHUNK * n + p] = rows[SEED_CHUNK * n + i] - chunk_base;
    walk[WALK_SEED * n + p] = (int)i;
}

// What one seed does to its diagonal's state (level, saved), BLAST's rules: dropped when its
// unslid start lies before the level; else extended (two-hit: only as the second hit within
// the window of an unsaved first one), an initial hit when the extension reaches the
// context's cutoff. Returns whether the seed wrote the state (dropped seeds do not), with the
// new level and flag in *level, *saved, and marks kept[seed].
HD bool step_seed(const int* walk, i64 n, i64 p, i64 offset, int window, i64* level,
                  int* saved, unsigned char* kept) {
    const i64 s_first_pos = walk[WALK_S_FIRST * n + p] + offset;
    if (s_first_pos < *level) return false;
    i64 s_end_pos = walk[WALK_WORD_END * n + p] + offset;
    const int hit_end = walk[WALK_HIT_END * n + p];
    int ready = 0;
    if (window == 0 || (*saved == 0 && s_end_pos <= *level + window)) ready = hit_end >= 0;
    if (ready) {
        kept[walk[WALK_SEED * n + p]] = 1;
        s_end_pos = hit_end + offset;
    }
    *level = s_end_pos;
    *saved = ready;
    return true;
}

// One cell's seeds, sorted positions [lo, hi) of one chunk (the array: fresh per chunk, its
// offset the two-hit window as BLAST starts it).
HD void walk_array_cell(const int* walk, i64 n, i64 lo, i64 hi, int window,
                        unsigned char* kept) {
    i64 level = 0;
    int saved = 0;
    for (i64 p = lo; p < hi; ++p) step_seed(walk, n, p, window, window, &level, &saved, kept);
}

// One bucket's chain: its cells [0, *count) in the order they were added (the chain's head
// last), each with its diagonal, level and flag, room for `capacity`; *epoch is the hash's
// reset count when the chain was last written.
struct Chain {
    int* diag;
    i64* level;
    int* saved;
    int* count;
    int* epoch;
    int capacity;
};

// The chain, of a bucket's `lanes`, that diagonal d belongs to (ungapped.device_hash_lanes:
// with one lane a bucket's one chain, BLAST's).
HD int hash_lane(int d, int lanes) {
    return (int)(((unsigned)d / HASH_BUCKETS) & (unsigned)(lanes - 1));
}

// Seed p (sorted position) through its chain, whose count and epoch are *count, *epoch
// (s_BlastDiagHashRetrieve, then s_BlastDiagHashInsert: the diagonal's own cell, else the
// first stale one, else a new one). Returns false when the chain would outgrow its capacity.
HD bool hash_step(const int* walk, i64 n, i64 p, Chain h, int* count, int* epoch,
                  const i64* chunk_offset, const int* chunk_epoch, int window,
                  i64 stale_window, unsigned char* kept) {
    const int c = walk[WALK_CHUNK * n + p];
    if (LOAD(chunk_epoch + c) != *epoch) {  // the hash was emptied since
        *epoch = LOAD(chunk_epoch + c);
        *count = 0;
    }
    const i64 offset = LOAD(chunk_offset + c);
    const int d = walk[WALK_DIAG * n + p];
    i64 level = 0;
    int saved = 0;
    for (int k = *count - 1; k >= 0; --k)
        if (h.diag[k] == d) {
            level = h.level[k];
            saved = h.saved[k];
            break;
        }
    if (!step_seed(walk, n, p, offset, window, &level, &saved, kept)) return true;
    const i64 s_first_pos = walk[WALK_S_FIRST * n + p] + offset;
    int at = *count;
    for (int k = *count - 1; k >= 0; --k)
        if (h.diag[k] == d || s_first_pos - h.level[k] > stale_window) {
            at = k;
            break;
        }
    if (at == *count) {
        if (*count == h.capacity) return false;
        ++*count;
    }
    h.diag[at] = d;
    h.level[at] = level;
    h.saved[at] = saved;
    return true;
}

HD i64 hash_stale_window(int window, int word_size) {
    return window + (window - word_size < 0 ? window - word_size : 0) + 1;
}

// One bucket's seeds, sorted positions [lo, hi), in seed order: those of chain `lane` of its
// `lanes` through that chain. Returns false when the chain would outgrow its capacity.
HD bool walk_hash_bucket(const int* walk, i64 n, i64 lo, i64 hi, Chain h, int lane, int lanes,
                         const i64* chunk_offset, const int* chunk_epoch, int window,
                         int word_size, unsigned char* kept) {
    const i64 stale_window = hash_stale_window(window, word_size);
    int count = *h.count, epoch = *h.epoch;
    for (i64 p = lo; p < hi; ++p) {
        if (lanes > 1 && hash_lane(walk[WALK_DIAG * n + p], lanes) != lane) continue;
        if (!hash_step(walk, n, p, h, &count, &epoch, chunk_offset, chunk_epoch, window,
                       stale_window, kept))
            return false;
    }
    *h.count = count;
    *h.epoch = epoch;
    return true;
}

// Bucket b's chain in the arrays of all chains, `capacity` cells a bucket.
HD Chain bucket_chain(int* diag, i64* level, int* saved, int* count, int* epoch, int capacity,
                      int b) {
    const i64 at = (i64)b * capacity;
    return Chain{diag + at, level + at, saved + at, count + b, epoch + b, capacity};
}

// The hit of seed i as HIT_FIELDS int32 rows (ungapped.InitialHits' fields) at column j.
HD void write_hit(const int* rows, const int* ahead, i64 n, i64 i, int* hits, i64 capacity,
                  i64 j) {
    hits[HIT_CHUNK * capacity + j] = rows[SEED_CHUNK * n + i];
    hits[HIT_Q_START * capacity + j] = ahead[UNGAPPED_Q_START * n + i];
    hits[HIT_S_START * capacity + j] = ahead[UNGAPPED_S_START * n + i];
    hits[HIT_LENGTH * capacity + j] = ahead[UNGAPPED_LENGTH * n + i];
    hits[HIT_SCORE * capacity + j] = ahead[UNGAPPED_SCORE * n + i];
    hits[HIT_SEED_Q * capacity + j] = rows[SEED_Q_OFF * n + i];
    hits[HIT_SEED_S * capacity + j] = rows[SEED_S_OFF * n + i];
}

#ifdef __CUDACC__

// keys[i] = group << index_bits | i and order[i] = i for the n seeds.
extern "C" __global__ void diagonal_keys(const int* __restrict__ rows, i64 n, int chunk_base,
                                         int use_hash, i64 diag_len, int index_bits,
                                         u64* __restrict__ keys, unsigned* __restrict__ order) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    order[i] = (unsigned)i;
    keys[i] = (seed_group(rows, n, i, chunk_base, use_hash, diag_len) << index_bits) | (u64)i;
}

// The hash's keys without a comparison sort: a stable counting sort by bucket, in blocks of
// COMPACT_THREADS seeds. bucket_counts counts each block's seeds of each bucket into
// counts[bucket * blocks + block]; the scan below turns them into where each goes; and
// bucket_scatter writes each seed's key there, a block's warps one after the other so that
// equal buckets keep their seeds' order.
extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
bucket_counts(const int* __restrict__ rows, i64 n, i64 blocks, i64* __restrict__ counts) {
    __shared__ int own[HASH_BUCKETS];
    for (int b = threadIdx.x; b < HASH_BUCKETS; b += COMPACT_THREADS) own[b] = 0;
    __syncthreads();
    const i64 i = (i64)blockIdx.x * COMPACT_THREADS + threadIdx.x;
    if (i < n) atomicAdd(own + seed_group(rows, n, i, 0, 1, 0), 1);
    __syncthreads();
    for (int b = threadIdx.x; b < HASH_BUCKETS; b += COMPACT_THREADS)
        counts[b * blocks + blockIdx.x] = own[b];
}

extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
bucket_scatter(const int* __restrict__ rows, i64 n, i64 blocks, int index_bits,
               const i64* __restrict__ starts, u64* __restrict__ keys) {
    __shared__ i64 next[HASH_BUCKETS];
    for (int b = threadIdx.x; b < HASH_BUCKETS; b += COMPACT_THREADS)
        next[b] = starts[b * blocks + blockIdx.x];
    __syncthreads();
    const i64 i = (i64)blockIdx.x * COMPACT_THREADS + threadIdx.x;
    const int bucket = i < n ? (int)seed_group(rows, n, i, 0, 1, 0) : -1;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (unsigned w = 0; w < COMPACT_THREADS / 32; ++w) {
        if (warp == w) {
            const unsigned peers = __match_any_sync(0xffffffffu, bucket);
            if (bucket >= 0) {
                const i64 at = next[bucket] + __popc(peers & ((1u << lane) - 1));
                keys[at] = ((u64)bucket << index_bits) | (u64)i;
                __syncwarp(peers);
                if (lane == __ffs(peers) - 1) next[bucket] += __popc(peers);
            }
        }
        __syncthreads();
    }
}

// A stable radix sort of (key, value) pairs by a range of the keys' bits, the lowest
// RADIX_BITS first (the last pass's `bits` may be fewer; gblastn.scan.gpu's radix_sort), each
// pass a counting sort as the hash's above: digit_counts counts each block's keys of each
// digit, the scan below turns the counts into where each goes, and digit_scatter moves the
// pairs there, a block's warps one after the other so that equal digits keep their order.
#define RADIX_DIGITS (1 << RADIX_BITS)

extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
digit_counts(const u64* __restrict__ keys, i64 n, i64 blocks, int shift, int bits,
             i64* __restrict__ counts) {
    __shared__ int own[RADIX_DIGITS];
    for (int d = threadIdx.x; d < RADIX_DIGITS; d += COMPACT_THREADS) own[d] = 0;
    __syncthreads();
    const i64 i = (i64)blockIdx.x * COMPACT_THREADS + threadIdx.x;
    if (i < n) atomicAdd(own + (int)((keys[i] >> shift) & ((1u << bits) - 1)), 1);
    __syncthreads();
    for (int d = threadIdx.x; d < RADIX_DIGITS; d += COMPACT_THREADS)
        counts[d * blocks + blockIdx.x] = own[d];
}

extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
digit_scatter(const u64* __restrict__ keys, const unsigned* __restrict__ values, i64 n,
              i64 blocks, int shift, int bits, const i64* __restrict__ starts,
              u64* __restrict__ keys_out,
              unsigned* __restrict__ values_out) {
    __shared__ i64 next[RADIX_DIGITS];
    for (int d = threadIdx.x; d < RADIX_DIGITS; d += COMPACT_THREADS)
        next[d] = starts[d * blocks + blockIdx.x];
    __syncthreads();
    const i64 i = (i64)blockIdx.x * COMPACT_THREADS + threadIdx.x;
    const u64 key = i < n ? keys[i] : 0;
    const int digit = i < n ? (int)((key >> shift) & ((1u << bits) - 1)) : -1;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (unsigned w = 0; w < COMPACT_THREADS / 32; ++w) {
        if (warp == w) {
            const unsigned peers = __match_any_sync(0xffffffffu, digit);
            if (digit >= 0) {
                const i64 at = next[digit] + __popc(peers & ((1u << lane) - 1));
                keys_out[at] = key;
                values_out[at] = values[i];
                __syncwarp(peers);
                if (lane == __ffs(peers) - 1) next[digit] += __popc(peers);
            }
        }
        __syncthreads();
    }
}

// The initial hits (HIT_FIELDS int32 rows of n, in seed order) into the host's order
// (ungapped.sort_initial_hits) by radix sorts of one field at a time (gblastn.scan.gpu's
// _sorted_hits): hit_maxima gives each field's largest value (how many bits its sort needs),
// hit_sort_keys each hit's key for one field in the order so far (descending keys reversed
// within the field's bits), and gather_hits the rows in the final order.
extern "C" __global__ void hit_maxima(const int* __restrict__ hits, i64 n,
                                      int* __restrict__ maxima) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x & 31;
    for (int f = 0; f < HIT_FIELDS; ++f) {
        int value = i < n ? hits[f * n + i] : 0;
        for (int step = 16; step > 0; step >>= 1)
            value = max(value, __shfl_down_sync(0xffffffffu, value, step));
        if (lane == 0) atomicMax(maxima + f, value);
    }
}

extern "C" __global__ void identity_order(unsigned* __restrict__ order, i64 n) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) order[i] = (unsigned)i;
}

extern "C" __global__ void hit_sort_keys(const int* __restrict__ hits, i64 n, int field,
                                         int descending, int bits,
                                         const unsigned* __restrict__ order,
                                         u64* __restrict__ keys) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const u64 value = (u64)hits[field * n + order[i]];
    keys[i] = descending ? ((1ull << bits) - 1) - value : value;
}

extern "C" __global__ void gather_hits(const int* __restrict__ hits, i64 n,
                                       const unsigned* __restrict__ order,
                                       int* __restrict__ sorted) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const i64 from = order[i];
    for (int f = 0; f < HIT_FIELDS; ++f) sorted[f * n + i] = hits[f * n + from];
}

extern "C" __global__ void walk_records(const u64* __restrict__ keys, i64 n, int index_bits,
                                        const int* __restrict__ rows,
                                        const int* __restrict__ ahead, int chunk_base,
                                        const int* __restrict__ context_offset,
                                        int num_contexts, const int* __restrict__ cutoff,
                                        int word_size, int* __restrict__ walk) {
    const i64 p = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const i64 i = (i64)(keys[p] & ((1ull << index_bits) - 1));
    walk_record(rows, ahead, n, i, p, chunk_base, context_offset, num_contexts, cutoff,
                word_size, walk);
}

// A thread per sorted position; the first of each cell's run walks it.
extern "C" __global__ void walk_array(const u64* __restrict__ keys, i64 n, int index_bits,
                                      const int* __restrict__ walk, int window,
                                      unsigned char* __restrict__ kept) {
    const i64 lo = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (lo >= n) return;
    const u64 group = keys[lo] >> index_bits;
    if (lo > 0 && keys[lo - 1] >> index_bits == group) return;
    i64 hi = lo + 1;
    while (hi < n && keys[hi] >> index_bits == group) ++hi;
    walk_array_cell(walk, n, lo, hi, window, kept);
}

__device__ i64 first_of_group(const u64* keys, i64 n, int index_bits, u64 group) {
    i64 lo = 0, hi = n;
    while (lo < hi) {
        const i64 mid = (lo + hi) >> 1;
        if (keys[mid] >> index_bits < group) lo = mid + 1; else hi = mid;
    }
    return lo;
}

#define FULL_WARP 0xffffffffu

// walk_hash_bucket for a warp, lane k walking chain k of HASH_LANES: the bucket's seeds are
// taken 32 at a time, and each lane steps through those of its chain in order. The lanes'
// chains never meet, so their dependent steps overlap.
__device__ bool walk_hash_lanes(const int* walk, i64 n, i64 lo, i64 hi, Chain h,
                                const i64* chunk_offset, const int* chunk_epoch, int window,
                                int word_size, unsigned char* kept) {
    const int lane = threadIdx.x;
    const i64 stale_window = hash_stale_window(window, word_size);
    int count = *h.count, epoch = *h.epoch;
    bool room = true;
    for (i64 base = lo; base < hi; base += 32) {
        const i64 p = base + lane;
        const int of = p < hi ? hash_lane(walk[WALK_DIAG * n + p], HASH_LANES) : -1;
        unsigned mine = 0;
        for (int k = 0; k < HASH_LANES; ++k) {
            const unsigned these = __ballot_sync(FULL_WARP, of == k);
            if (lane == k) mine = these;
        }
        while (mine && room) {
            const int j = __ffs(mine) - 1;
            mine &= mine - 1;
            room = hash_step(walk, n, base + j, h, &count, &epoch, chunk_offset, chunk_epoch,
                             window, stale_window, kept);
        }
    }
    *h.count = count;
    *h.epoch = epoch;
    return room;
}

// A block of HASH_LANES threads per bucket. With one lane its chain is walked by one thread:
// the walk is a chain of dependent steps, which other threads of a warp would only hold back;
// with HASH_LANES, each thread walks one of the bucket's chains (walk_hash_lanes). When
// `in_shared`, the chains are copied into shared memory (CHAIN_CELL_BYTES a cell; the launch
// gives it lanes x `capacity` cells) for the walk, else walked where they are. *overflow is
// set when a chain outgrew its capacity (the host then runs the pass again from the chains
// it sent, with room for more).
extern "C" __global__ void walk_hash(const u64* __restrict__ keys, i64 n, int index_bits,
                                     const int* __restrict__ walk,
                                     const i64* __restrict__ chunk_offset,
                                     const int* __restrict__ chunk_epoch, int window,
                                     int word_size, int* diag, i64* level, int* saved,
                                     int* count, int* epoch, int capacity, int lanes,
                                     int in_shared, int* __restrict__ overflow,
                                     unsigned char* __restrict__ kept) {
    extern __shared__ i64 cells[];
    __shared__ int own_count[HASH_LANES], own_epoch[HASH_LANES];
    const int lane = threadIdx.x;
    const bool walks = lane < lanes;
    const int chain = blockIdx.x * lanes + (walks ? lane : 0);
    const Chain global = bucket_chain(diag, level, saved, count, epoch, capacity, chain);
    Chain own = global;
    if (in_shared) {
        const i64 room = (i64)lanes * capacity;
        own = Chain{(int*)(cells + room) + lane * capacity, cells + lane * capacity,
                    (int*)(cells + room) + room + lane * capacity, own_count + lane,
                    own_epoch + lane, capacity};
        if (walks) {
            for (int k = 0; k < *global.count; ++k) {
                own.level[k] = global.level[k];
                own.diag[k] = global.diag[k];
                own.saved[k] = global.saved[k];
            }
            own_count[lane] = *global.count;
            own_epoch[lane] = *global.epoch;
        }
    }
    const i64 lo = first_of_group(keys, n, index_bits, (u64)blockIdx.x);
    const i64 hi = first_of_group(keys, n, index_bits, (u64)blockIdx.x + 1);
    bool room = true;
    if (lanes > 1)
        room = walk_hash_lanes(walk, n, lo, hi, own, chunk_offset, chunk_epoch, window,
                               word_size, kept);
    else if (lane == 0)
        room = walk_hash_bucket(walk, n, lo, hi, own, 0, 1, chunk_offset, chunk_epoch, window,
                                word_size, kept);
    if (!room) atomicExch(overflow, 1);
    if (!in_shared || !walks) return;
    for (int k = 0; k < *own.count; ++k) {
        global.level[k] = own.level[k];
        global.diag[k] = own.diag[k];
        global.saved[k] = own.saved[k];
    }
    *global.count = *own.count;
    *global.epoch = *own.epoch;
}

// The kept seeds in seed order: each block of COMPACT_THREADS seeds counts its own, the
// counts become starts (the scan below; the total at counts[blocks]), and each block writes
// its hits from its start.
extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
count_kept(const unsigned char* __restrict__ kept, i64 n, i64* __restrict__ counts) {
    const i64 i = (i64)blockIdx.x * COMPACT_THREADS + threadIdx.x;
    const int found = __syncthreads_count(i < n && kept[i]);
    if (threadIdx.x == 0) counts[blockIdx.x] = found;
}

// The inclusive sum of `own` over the block's threads up to this one; sums: shared scratch.
__device__ i64 block_inclusive_sum(i64* sums, i64 own) {
    sums[threadIdx.x] = own;
    __syncthreads();
    for (int step = 1; step < COMPACT_THREADS; step <<= 1) {
        const i64 add = threadIdx.x >= step ? sums[threadIdx.x - step] : 0;
        __syncthreads();
        sums[threadIdx.x] += add;
        __syncthreads();
    }
    return sums[threadIdx.x];
}

// Counts into starts (exclusive sums) in three launches: scan_segments turns each segment of
// COMPACT_THREADS counts into starts within it and its total into totals[segment];
// count_starts, in one block, the totals into the segments' starts (and the sum of all at
// totals[segments]); add_segment_starts adds those, and writes the sum at counts[entries].
extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
scan_segments(i64* counts, i64 entries, i64* __restrict__ totals) {
    __shared__ i64 sums[COMPACT_THREADS];
    const i64 i = (i64)blockIdx.x * COMPACT_THREADS + threadIdx.x;
    const i64 own = i < entries ? counts[i] : 0;
    const i64 through = block_inclusive_sum(sums, own);
    if (i < entries) counts[i] = through - own;
    if (threadIdx.x == COMPACT_THREADS - 1) totals[blockIdx.x] = through;
}

extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
count_starts(i64* counts, i64 blocks) {
    __shared__ i64 sums[COMPACT_THREADS];
    i64 carried = 0;
    for (i64 base = 0; base < blocks; base += COMPACT_THREADS) {
        const i64 b = base + threadIdx.x;
        const i64 own = b < blocks ? counts[b] : 0;
        const i64 through = block_inclusive_sum(sums, own);
        if (b < blocks) counts[b] = carried + through - own;
        carried += sums[COMPACT_THREADS - 1];
        __syncthreads();
    }
    if (threadIdx.x == 0) counts[blocks] = carried;
}

extern "C" __global__ void add_segment_starts(i64* counts, i64 entries,
                                              const i64* __restrict__ totals) {
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < entries) counts[i] += totals[i / COMPACT_THREADS];
    if (i == 0) counts[entries] = totals[(entries + COMPACT_THREADS - 1) / COMPACT_THREADS];
}

extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
write_hits(const unsigned char* __restrict__ kept, i64 n, const i64* __restrict__ starts,
           const int* __restrict__ rows, const int* __restrict__ ahead,
           int* __restrict__ hits, i64 capacity) {
    __shared__ int warp_start[COMPACT_THREADS / 32];
    const i64 i = (i64)blockIdx.x * COMPACT_THREADS + threadIdx.x;
    const bool mine = i < n && kept[i];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) warp_start[warp] = __popc(ballot);
    __syncthreads();
    if (threadIdx.x == 0) {
        int at = 0;
        for (int w = 0; w < COMPACT_THREADS / 32; ++w) {
            const int own = warp_start[w];
            warp_start[w] = at;
            at += own;
        }
    }
    __syncthreads();
    if (!mine) return;
    const i64 j = starts[blockIdx.x] + warp_start[warp] + __popc(ballot & ((1u << lane) - 1));
    write_hit(rows, ahead, n, i, hits, capacity, j);
}

#else

#include <algorithm>
#include <vector>

// The whole pass for one launch group's seeds, one after the other: the chains are read and
// written in place. Returns the number of hits written to hits (capacity n), or -1 when a
// chain outgrew its capacity.
extern "C" i64 diagonal_pass_host(
        const int* rows, const int* ahead, i64 n, int chunk_base, int use_hash, i64 diag_len,
        const int* context_offset, int num_contexts, const int* cutoff, int word_size,
        int window, const i64* chunk_offset, const int* chunk_epoch, int* diag, i64* level,
        int* saved, int* count, int* epoch, int capacity, int lanes, int* hits) {
    std::vector<u64> keys(n);
    int index_bits = 1;
    while (((i64)1 << index_bits) < n) ++index_bits;
    for (i64 i = 0; i < n; ++i)
        keys[i] = (seed_group(rows, n, i, chunk_base, use_hash, diag_len) << index_bits) | i;
    std::sort(keys.begin(), keys.end());
    std::vector<int> walk((size_t)WALK_FIELDS * n);
    for (i64 p = 0; p < n; ++p)
        walk_record(rows, ahead, n, (i64)(keys[p] & ((1ull << index_bits) - 1)), p, chunk_base,
                    context_offset, num_contexts, cutoff, word_size, walk.data());
    std::vector<unsigned char> kept(n, 0);
    for (i64 lo = 0; lo < n;) {
        const u64 group = keys[lo] >> index_bits;
        i64 hi = lo + 1;
        while (hi < n && keys[hi] >> index_bits == group) ++hi;
        if (!use_hash)
            walk_array_cell(walk.data(), n, lo, hi, window, kept.data());
        else
            for (int lane = 0; lane < lanes; ++lane)
                if (!walk_hash_bucket(walk.data(), n, lo, hi,
                                      bucket_chain(diag, level, saved, count, epoch, capacity,
                                                   (int)group * lanes + lane),
                                      lane, lanes, chunk_offset, chunk_epoch, window,
                                      word_size, kept.data()))
                    return -1;
        lo = hi;
    }
    i64 j = 0;
    for (i64 i = 0; i < n; ++i)
        if (kept[i]) write_hit(rows, ahead, n, i, hits, n, j++);
    return j;
}

#endif
