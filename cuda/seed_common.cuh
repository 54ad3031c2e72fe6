// Shared pieces of the seed kernels: subject reads, table membership, the mini-extension
// routines and BLAST's s_TypeOfWord check. Each one matches its numba twin in
// gblastn/scan/cpu.py line for line in effect; keep the two in step.
//
// Compile-time variant (set by the loader with -D, gblastn.scan.gpu.variant_defines):
//   TABLE_KIND   TABLE_SMALL (backbone/overflow int16), TABLE_STANDARD (CSR + pv),
//                TABLE_MEGABLAST (hashtable/next_pos chains + pv)
//   WIDTH        w, letters per table word
//   WORD_SIZE    W
//   SCAN_STEP    distance between probed subject offsets (W - w + 1)
//   PV_BTS       log2 of the table words one presence-vector bit stands for (pv kinds)
//   EXTEND_KIND  EXTEND_DIRECT, EXTEND_BASEWISE, EXTEND_SMALL_ONE_BYTE, EXTEND_SMALL
//                (BlastChooseNaExtend)
//   CHECK_MASKS  1 when s_TypeOfWord verifies the seed against the table
//   TEMPLATE_LENGTH  0 for contiguous words; else discontiguous words (TABLE_MEGABLAST, WIDTH
//                = WORD_SIZE = TEMPLATE_LENGTH, SCAN_STEP 1, EXTEND_DIRECT): a table word is
//                the window of WIDTH letters read through TEMPLATE_COUNT templates,
//                TEMPLATE_0 and TEMPLATE_1, each the bits of the letters it keeps (the
//                window's last letter bit 0; 0: none)
//
// Subject: packed 2-bit bytes, first base in the two most significant bits. The device copy
// of a volume is padded with zero bytes, and every read past the host buffer's end counts
// as 0, as on the CPU.

#pragma once

#if !defined(TABLE_KIND) || !defined(WIDTH) || !defined(WORD_SIZE) || !defined(SCAN_STEP) || \
    !defined(PV_BTS) || !defined(EXTEND_KIND) || !defined(CHECK_MASKS)
#error "the variant's defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif
// the table and extension kinds, from gblastn/layouts.py
#if !defined(TABLE_SMALL) || !defined(TABLE_STANDARD) || !defined(TABLE_MEGABLAST) || \
    !defined(EXTEND_DIRECT) || !defined(EXTEND_BASEWISE) || !defined(EXTEND_SMALL_ONE_BYTE) || \
    !defined(EXTEND_SMALL)
#error "gblastn.layouts' defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif
#if TABLE_KIND != TABLE_SMALL && TABLE_KIND != TABLE_STANDARD && TABLE_KIND != TABLE_MEGABLAST
#error "TABLE_KIND is none of the table kinds"
#endif
#if EXTEND_KIND != EXTEND_DIRECT && EXTEND_KIND != EXTEND_BASEWISE && \
    EXTEND_KIND != EXTEND_SMALL_ONE_BYTE && EXTEND_KIND != EXTEND_SMALL
#error "EXTEND_KIND is none of the extension kinds"
#endif

typedef unsigned long long u64;
typedef long long i64;

#if !defined(TEMPLATE_LENGTH) || !defined(TEMPLATE_COUNT) || !defined(TEMPLATE_0) || \
    !defined(TEMPLATE_1) || !defined(TEMPLATES_MAX)
#error "the variant's template defines are missing: compile with gblastn.scan.gpu.nvcc_options"
#endif
#if TEMPLATE_LENGTH
#if TABLE_KIND != TABLE_MEGABLAST || WIDTH != TEMPLATE_LENGTH || WORD_SIZE != WIDTH || \
    SCAN_STEP != 1 || EXTEND_KIND != EXTEND_DIRECT || TEMPLATE_COUNT > TEMPLATES_MAX
#error "a discontiguous variant reads whole windows from a megablast table"
#endif
typedef u64 word_t;  // a window of up to 21 letters, read through the templates
#define WORD_MASK ((1ull << (2 * WIDTH)) - 1ull)
#else
typedef unsigned word_t;
#define WORD_MASK ((1u << (2 * WIDTH)) - 1u)
#endif

// The lookup table and the query, as the extension kernels read them.
struct QueryTable {
    const short* __restrict__ backbone;       // small
    const short* __restrict__ overflow;       // small
    const int* __restrict__ hashtable;        // megablast
    const int* __restrict__ next_pos;         // megablast
    const int* __restrict__ cell_start;       // standard
    const int* __restrict__ offsets;          // standard
    const unsigned* __restrict__ pv;          // megablast, standard
    const unsigned char* __restrict__ sequence;  // blastna, concatenated with sentinels
    const int* __restrict__ context_offset;
    const int* __restrict__ context_length;
    int sequence_length;
    int num_contexts;
};

// ---------------------------------------------------------------------------------------
// subject reads

__device__ __forceinline__ int subject_byte(const unsigned char* __restrict__ packed,
                                            i64 packed_size, i64 byte_off, i64 k) {
    i64 i = byte_off + k;
    if (i < 0 || i >= packed_size) return 0;
    return packed[i];
}

__device__ __forceinline__ int subject_base(const unsigned char* __restrict__ packed,
                                            i64 packed_size, i64 byte_off, i64 s) {
    return (subject_byte(packed, packed_size, byte_off, s >> 2) >> (2 * (3 - (s & 3)))) & 3;
}

// The WIDTH bases at chunk offset s, packed as a table word is (bounds-checked reads): from
// four bytes for a contiguous word, from eight for a discontiguous window.
__device__ __forceinline__ word_t subject_word(const unsigned char* __restrict__ packed,
                                               i64 packed_size, i64 byte_off, i64 s) {
    constexpr int kBytes = sizeof(word_t);
    i64 k = s >> 2;
    word_t v = 0;
#pragma unroll
    for (int b = 0; b < kBytes; ++b)
        v = (v << 8) | (word_t)subject_byte(packed, packed_size, byte_off, k + b);
    int shift = 2 * (4 * kBytes - (int)(s & 3) - WIDTH);
    return (v >> shift) & WORD_MASK;
}

#if TEMPLATE_LENGTH
// The table index of a window read through a template whose kept letters are the set bits
// of Kept (the window's last letter bit 0): those letters packed in order, first most
// significant (gblastn.lookup.template_index). Kept is a compile-time constant, so the loop
// unrolls into a handful of shifts and masks.
template <unsigned Kept>
__device__ __forceinline__ unsigned kept_letters(u64 window) {
    unsigned index = 0;
#pragma unroll
    for (int k = WIDTH - 1; k >= 0; --k)
        if ((Kept >> k) & 1u) index = (index << 2) | (unsigned)((window >> (2 * k)) & 3u);
    return index;
}

__device__ __forceinline__ unsigned template_index(u64 window, int t) {
#if TEMPLATE_COUNT > 1
    if (t == 1) return kept_letters<TEMPLATE_1>(window);
#endif
    return kept_letters<TEMPLATE_0>(window);
}
#endif

// ---------------------------------------------------------------------------------------
// query reads

// BLAST's compressed query byte at (our) offset i: letters i..i+3, each code & 3; letters
// outside the concatenation's inner part count as 0.
__device__ __forceinline__ int query_quad(const QueryTable& t, i64 i) {
    int v = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        i64 p = i + k;
        int c = 0;
        if (p >= 1 && p <= t.sequence_length - 2) c = t.sequence[p] & 3;
        v = (v << 2) | c;
    }
    return v;
}

// The last context starting at or before q.
__device__ __forceinline__ int context_of(const QueryTable& t, i64 q) {
    int lo = 0, hi = t.num_contexts;
    while (lo < hi - 1) {
        int mid = (lo + hi) >> 1;
        if (t.context_offset[mid] > q) hi = mid; else lo = mid;
    }
    return lo;
}

// Matching 2-bit groups of an XOR byte counted from its low end (left extension) and from
// its high end (right extension), at most 4.
__device__ __forceinline__ int match_left(int x) {
    return x == 0 ? 4 : (__ffs(x) - 1) >> 1;
}
__device__ __forceinline__ int match_right(int x) {
    return x == 0 ? 4 : (__clz(x) - 24) >> 1;
}

// ---------------------------------------------------------------------------------------
// table membership

// Whether the table lists this word at all (the scan's probe); a discontiguous window,
// whether either template's word has its presence bit.
__device__ __forceinline__ bool word_present(const QueryTable& t, word_t word) {
#if TEMPLATE_LENGTH
    bool present = false;
    for (int k = 0; k < TEMPLATE_COUNT; ++k) {
        unsigned index = template_index(word, k);
        present |= (__ldg(&t.pv[index >> PV_BTS]) >> (index & 31)) & 1u;
    }
    return present;
#elif TABLE_KIND == TABLE_SMALL
    return __ldg(&t.backbone[word]) != -1;
#else
    return (__ldg(&t.pv[word >> PV_BTS]) >> (word & 31)) & 1u;
#endif
}

// Whether the table lists query offset q for this word (s_SmallNaLookup, s_MBLookup,
// s_NaLookup).
__device__ bool word_has_offset(const QueryTable& t, unsigned word, i64 q) {
#if TABLE_KIND == TABLE_SMALL
    int v = t.backbone[word];
    if (v == q) return true;
    if (v >= -1) return false;
    for (int k = -v; t.overflow[k] >= 0; ++k)
        if (t.overflow[k] == q) return true;
    return false;
#else
    if (((t.pv[word >> PV_BTS] >> (word & 31)) & 1u) == 0) return false;
#if TABLE_KIND == TABLE_MEGABLAST
    for (int p = t.hashtable[word]; p != 0; p = t.next_pos[p])
        if (p == q) return true;
    return false;
#else
    for (int j = t.cell_start[word]; j < t.cell_start[word + 1]; ++j)
        if (t.offsets[j] == q) return true;
    return false;
#endif
#endif
}

// ---------------------------------------------------------------------------------------
// mini-extension (BlastChooseNaExtend's routine); returns false when rejected

__device__ bool mini_extend(const QueryTable& t, const unsigned char* __restrict__ packed,
                            i64 packed_size, i64 byte_off, i64 s_range, i64 q_hit, i64 s_hit,
                            i64& q_seed, i64& s_seed) {
#if EXTEND_KIND == EXTEND_DIRECT
    q_seed = q_hit;
    s_seed = s_hit;
    return true;
#elif EXTEND_KIND == EXTEND_BASEWISE
    const i64 ext_to = WORD_SIZE - WIDTH;
    i64 left = 0;
    i64 limit = min(ext_to, s_hit);
    while (left < limit) {
        if (subject_base(packed, packed_size, byte_off, s_hit - left - 1)
            != t.sequence[q_hit - left - 1]) break;
        ++left;
    }
    if (left < ext_to) {
        i64 s_next = s_hit + WIDTH;
        if (s_next + ext_to - left > s_range) return false;
        i64 right = 0;
        while (right < ext_to - left) {
            if (subject_base(packed, packed_size, byte_off, s_next + right)
                != t.sequence[q_hit + WIDTH + right]) break;
            ++right;
        }
        if (left + right < ext_to) return false;
    }
    q_seed = q_hit - left;
    s_seed = s_hit - left;
    return true;
#else
    int ctx = context_of(t, q_hit);
    i64 q_start = t.context_offset[ctx];
    i64 q_range = q_start + t.context_length[ctx];
#if EXTEND_KIND == EXTEND_SMALL_ONE_BYTE
    const i64 ext_to = WORD_SIZE - WIDTH;
    i64 left = 0;
    // BLAST tests s_offset > 0 && q_offset > 0, its q_offset being ours - 1
    if (s_hit > 0 && q_hit > 1) {
        int x = query_quad(t, q_hit - 4)
              ^ subject_byte(packed, packed_size, byte_off, (s_hit >> 2) - 1);
        left = min(min((i64)match_left(x), ext_to), q_hit - q_start);
    }
    // BLAST tests q_offset + w < query->length
    if (left < ext_to && q_hit + WIDTH < t.sequence_length - 1) {
        int x = query_quad(t, q_hit + WIDTH)
              ^ subject_byte(packed, packed_size, byte_off, (s_hit + WIDTH) >> 2);
        i64 right = min(min((i64)match_right(x), s_range - (s_hit + WIDTH)),
                        q_range - (q_hit + WIDTH));
        if (left + right < ext_to) return false;
    }
    q_seed = q_hit - left;
    s_seed = s_hit - left;
    return true;
#else  // EXTEND_SMALL: whole bytes from the first byte boundary right of the hit start
    i64 ext_max = min(min((i64)(WORD_SIZE - WIDTH), s_hit), q_hit - q_start);
    i64 rsdl = 4 - (s_hit & 3);
    i64 s0 = s_hit + rsdl;
    i64 q0 = q_hit + rsdl;
    ext_max += rsdl;
    i64 left = 0;
    i64 s_pos = s0, q_pos = q0;
    while (left < ext_max) {
        int x = query_quad(t, q_pos - 4)
              ^ subject_byte(packed, packed_size, byte_off, (s_pos >> 2) - 1);
        int bases = match_left(x);
        left += bases;
        if (bases < 4) break;
        q_pos -= 4;
        s_pos -= 4;
    }
    left = min(left, ext_max);
    ext_max = min(min((i64)WORD_SIZE - left, s_range - s0), q_range - q0);
    i64 right = 0;
    s_pos = s0;
    q_pos = q0;
    while (right < ext_max) {
        int x = query_quad(t, q_pos) ^ subject_byte(packed, packed_size, byte_off, s_pos >> 2);
        int bases = match_right(x);
        right += bases;
        if (bases < 4) break;
        q_pos += 4;
        s_pos += 4;
    }
    right = min(right, ext_max);
    if (left + right < WORD_SIZE) return false;
    q_seed = q0 - left;
    s_seed = s0 - left;
    return true;
#endif
#endif
}

// ---------------------------------------------------------------------------------------
// BLAST's s_TypeOfWord (one-hit): the left end slides right to the first w-mer listed at
// that exact query offset; returns false when rejected.

__device__ bool type_of_word(const QueryTable& t, const unsigned char* __restrict__ packed,
                             i64 packed_size, i64 byte_off, i64 s_range, i64& q_off,
                             i64& s_off) {
#if WORD_SIZE == WIDTH
    return true;
#else
    i64 q_end = q_off + WORD_SIZE;
    i64 s_end = s_off + WORD_SIZE;
    int ctx = context_of(t, q_end);
    i64 q_range = (i64)t.context_offset[ctx] + t.context_length[ctx];
#if CHECK_MASKS
    if (!word_has_offset(t, subject_word(packed, packed_size, byte_off, s_end - WIDTH),
                         q_end - WIDTH))
        return false;
    while (!word_has_offset(t, subject_word(packed, packed_size, byte_off, s_off), q_off)) {
        ++s_off;
        ++q_off;
    }
#endif
    i64 ext_to = WORD_SIZE - (q_end - q_off);
    i64 ext_max = min(q_range - q_end, s_range - s_end);
    if (ext_to > 0 || CHECK_MASKS) {
        if (ext_to > ext_max) return false;
        q_end += ext_to;
        s_end += ext_to;
        i64 s_pos = s_end - WIDTH;
        i64 q_pos = q_end - WIDTH;
        while (s_pos > s_off) {
            if (!word_has_offset(t, subject_word(packed, packed_size, byte_off, s_pos), q_pos))
                return false;
            s_pos -= WIDTH;
            q_pos -= WIDTH;
        }
    }
    return true;
#endif
}
