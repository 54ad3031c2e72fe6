"""The layouts and codes that gblastn's Python and numba code shares with its CUDA kernels
(cuda/*.cu, cuda/*.cuh): record widths and what their columns hold, edit-script codes,
lookup-table and mini-extension kinds, and the sizes the host allocates for the kernels.

They are defined here only. Python modules import them from here; the kernels get every one
of them (kernel_defines) as an nvcc -D flag from the loader (gblastn.scan.gpu.nvcc_options),
refuse to compile without them (#error), and keep no copy of their own.
"""

# -- lookup tables (gblastn.lookup; seeds.cu's TABLE_KIND) -----------------------------------
TABLE_SMALL = 0       # backbone/overflow int16
TABLE_STANDARD = 1    # CSR (cell_start/offsets) and presence vector
TABLE_MEGABLAST = 2   # next_pos chains from the heads of the words present
# discontiguous words (gblastn.lookup.TEMPLATES; seeds.cu's TEMPLATE_LENGTH variant): the
# templates a table reads at once (coding_and_optimal)
TEMPLATES_MAX = 2

# -- mini-extension routines (BlastChooseNaExtend; seeds.cu's EXTEND_KIND) -------------------
EXTEND_DIRECT = 0          # w == W: s_BlastNaExtendDirect
EXTEND_BASEWISE = 1        # s_BlastNaExtend / s_BlastNaExtendAligned (same result)
EXTEND_SMALL_ONE_BYTE = 2  # s_BlastSmallNaExtendAlignedOneByte
EXTEND_SMALL = 3           # s_BlastSmallNaExtend

# -- seeds (gblastn.scan.Seeds): SEED_FIELDS int32 rows, one column per seed -----------------
SEED_CHUNK = 0    # chunk index
SEED_Q_OFF = 1    # concatenated query offset of the seed start
SEED_S_OFF = 2    # chunk-relative subject offset of the seed start
SEED_S_FIRST = 3  # seed start before s_TypeOfWord slid it right
SEED_HIT_S = 4    # subject offset of the w-mer hit that produced the seed
SEED_FIELDS = 5

# -- each seed's ungapped extension made ahead (ungapped.cu's ungapped_seeds;
# gblastn.ungapped.UngappedAhead): UNGAPPED_FIELDS int32 rows, one column per seed ----------
UNGAPPED_Q_START = 0  # concatenated query offset of the ungapped alignment's start
UNGAPPED_S_START = 1  # chunk-relative subject start
UNGAPPED_LENGTH = 2
UNGAPPED_SCORE = 3    # raw ungapped score
UNGAPPED_FIELDS = 4

# -- the ungapped stage's in-order pass on the device (diagonals.cu; gblastn.ungapped) -------
HASH_BUCKETS = 512    # BLAST's DIAGHASH_NUM_BUCKETS: the diagonal hash's chains
# chains of each bucket on the device where the two-hit window lets the bucket be split by
# diagonal (ungapped.device_hash_lanes): one thread of a bucket's warp walks each
HASH_LANES = 32
CHAIN_CELL_BYTES = 16  # a chain's cell: level (int64), diagonal and flag (int32)
# a seed's record in the pass's order: WALK_FIELDS int32 rows, one column per seed
WALK_DIAG = 0         # s_off - q_off
WALK_S_FIRST = 1      # the seed's unslid start (SEED_S_FIRST)
WALK_WORD_END = 2     # s_off + the word size
WALK_HIT_END = 3      # the extension's subject end when it reaches the cutoff, else -1
WALK_CHUNK = 4        # the chunk, numbered within the launch
WALK_SEED = 5         # the seed's index
WALK_FIELDS = 6
# the initial hits the pass sends back: HIT_FIELDS int32 rows, ungapped.InitialHits' fields
HIT_CHUNK = 0
HIT_Q_START = 1
HIT_S_START = 2
HIT_LENGTH = 3
HIT_SCORE = 4
HIT_SEED_Q = 5
HIT_SEED_S = 6
HIT_FIELDS = 7

# -- HSP rows (gblastn.hsp.hsp_rows; greedy.cu's greedy_tails reads them): int64 [n, 8] ------
HSP_CONTEXT = 0
HSP_Q_START = 1         # context-relative
HSP_Q_END = 2           # exclusive
HSP_S_START = 3
HSP_S_END = 4           # exclusive
HSP_SCORE = 5           # raw score
HSP_Q_GAPPED_START = 6  # the start point of the gapped extension (0, 0: none stored)
HSP_S_GAPPED_START = 7
HSP_FIELDS = 8

# -- a preliminary greedy extension of an initial hit (gblastn.gapped._greedy_from_hit;
# greedy.cu's greedy_hits): GAPPED_FIELDS int64, then the host's done flag ------------------
GAPPED_SCORE = 0
GAPPED_Q_START = 1        # context-relative
GAPPED_Q_END = 2
GAPPED_S_START = 3        # chunk-relative
GAPPED_S_END = 4
GAPPED_Q_GAPPED_START = 5  # the start point _best_start_point picked
GAPPED_S_GAPPED_START = 6
GAPPED_FIELDS = 7
# a score-only extension made ahead on the GPU (engine.ExtensionsAhead): its GAPPED_FIELDS
# values, then 1 where it was made there, 0 where the CPU must make it
GAPPED_MADE = GAPPED_FIELDS
GAPPED_AHEAD_FIELDS = GAPPED_FIELDS + 1

# -- edit scripts: runs of one operation -----------------------------------------------------
OP_SUB = 0  # aligned pair (match or mismatch): one query letter, one subject letter
OP_DEL = 1  # gap in the query: one subject letter against '-'   (BLAST eGapAlignDel)
OP_INS = 2  # gap in the subject: one query letter against '-'   (BLAST eGapAlignIns)
# a run as greedy.cu's walk_back writes it: count << RUN_COUNT_SHIFT | op
RUN_COUNT_SHIFT = 2
RUN_OP_MASK = (1 << RUN_COUNT_SHIFT) - 1

# -- a traceback's greedy search made ahead (greedy.cu's tail_search; gblastn.traceback):
# TAIL_FIELDS int64, then the host's done flag. Each name is its values' first column --
TAIL_START = 0       # the start point: query, subject
TAIL_DISTANCES = 2   # the best distances: right, left
TAIL_READ = 4        # the subject letters read: [start, end)
TAIL_EXTENTS = 6     # the best alignment's extents: query right, subject right, query left,
                     # subject left (four columns)
TAIL_RUNS = 10       # the runs of each direction's edit script: right, left (-1: none made)
TAIL_FIELDS = 12
SCRIPT_RUNS = 64     # edit runs per direction of a search made ahead (a run ends at a gap)

# -- a traceback's X-drop DP alignment made ahead (dp_traceback.cu's dp_traces;
# gblastn.traceback): TRACE_FIELDS int64, then the host's done flag. The letters read and the
# done flag lie where a greedy search's do (letter_spans reads either) ---------------------
TRACE_START = 0      # the start point: query, subject
TRACE_SCORE = 2      # the alignment's score (and a spare column)
TRACE_READ = TAIL_READ  # the subject letters read: [start, end)
TRACE_EXTENTS = 6    # the alignment: query start, query end, subject start, subject end
TRACE_RUNS = 10      # its edit script: the first run's index in the runs, the count of runs
TRACE_FIELDS = TAIL_FIELDS
# the kernel's done flags: the CPU aligns it, made, or left for want of memory (a later launch
# with fewer alignments may make it; the host turns those left into TRACE_NOT_MADE)
TRACE_NOT_MADE = 0
TRACE_MADE = 1
TRACE_NO_ROOM = 2
# the device memory a warp keeps a search's rows in, for its walk back (greedy.cu's
# RowStore): STORE_CELLS cells, then STORE_ROWS row starts and STORE_ROWS lowest diagonals
STORE_CELLS = 8192
STORE_ROWS = 512
STORE_WORDS = STORE_CELLS + 2 * STORE_ROWS  # ints

# -- greedy alignment, on both sides -------------------------------------------------------
INVALID_OFFSET = -2  # a diagonal's cell that cannot reach this distance
PACKED_STEP = 28     # bases taken from one packed word (at least 29 are valid after a shift)

# -- X-drop DP (gblastn.dynprog; dynprog.cu's dp_hits, whose found rows are GAPPED_FIELDS
# int64 in the GAPPED_* columns, the start point the seed moved as prelim_dp_extend moves it)
# a traceback cell of ALIGN_EX (dynprog.align_ex, dp_traceback.cu): the OP_* its best path
# ends with, and whether the gap ending there continues one from the left or from above
CELL_OP_MASK = 0x0F
CELL_EXTEND_GAP_IN_QUERY = 0x10    # the query gap (OP_DEL) ending here continues one from the left
CELL_EXTEND_GAP_IN_SUBJECT = 0x40  # the subject gap (OP_INS) ending here continues one from above
MININT = -(1 << 30)   # a score below any reachable one; halved so adding a matrix entry cannot overflow
PACK_RATIO = 4        # letters per byte of a packed subject
BLASTNA_LETTERS = 16  # the score matrix's side: blastna codes


def kernel_defines() -> dict:
    """Every constant above by name: the defines the kernels are compiled with."""
    return {name: value for name, value in globals().items()
            if name.isupper() and type(value) is int}
