"""One search, stage by stage, as BLAST+ 2.12's engine runs it.

Call hierarchy (each stage its own module):

    search(queries, db, options)
      read_queries                       fasta.py       FASTA -> Query records
      query_batches                      (here)         BLAST's query batches (letters per batch)
      for each batch:
        build_batch                      query.py       contexts, DUST/lower-case masks, segments
        prepare_statistics               stats.py       Karlin blocks, search spaces, cutoffs, X-drops
        build_lookup                     lookup.py      small / megablast / standard table
        for each volume:
          subject_chunks                 (here)         subjects cut in 5,000,000-letter chunks
          find_seeds                     scan/          scan + lookup + mini-extension (CPU or GPU)
          extend_seeds                   ungapped.py    diagonal bookkeeping, ungapped X-drop
          extensions_ahead               (here)         on a GPU: every hit's score-only gapped
                                                        extension at once (cuda/greedy.cu,
                                                        cuda/dynprog.cu)
          extend_hits per chunk          gapped.py      score-only gapped extension
          subject_rows                   hsp.py         purge and sort per chunk, chunks of one
                                                        subject merged
          E-values, reap, split by query                per-query preliminary hit lists
        tails_ahead                      (here)         on a GPU: the traceback's greedy searches,
                                                        score-only, for where they may stop
        trace_group                      (here)         the (query, subject) tasks, in groups of
                                                        one volume, the most work first, on threads
          traceback_group                traceback.py   letters unpacked around the HSPs, alignment
                                                        on them, then E-values, max_hsps, order,
                                                        counts: one compiled call per group
        query_result                     (here)         subjects in order, max_target_seqs
"""

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .hsp import Hsps, QueryResult, SubjectHits, score_order
from .options import SearchOptions
from .pools import INLINE, runs_of
from .timing import TIMES

MAX_DBSEQ_LEN = 5_000_000      # BLAST searches longer subjects in chunks of this many letters
DBSEQ_CHUNK_OVERLAP = 100      # ... overlapping by this much
OVERLAP_DIAG_CLOSE = 10        # diagonals within which HSPs of successive chunks are merged


# ----------------------------------------------------------------------------------------------
# query batches


def query_batch_letters(options: SearchOptions) -> int:
    """Letters BLAST's command line reads into one batch (GetQueryBatchSize)."""
    return {"megablast": 5_000_000}.get(options.task, 100_000)


def query_batches(queries, options: SearchOptions, size=len):
    """Group queries as blastn's input reader does: add queries until the batch holds at least
    the batch size in letters (the query that crosses the limit stays in the batch). `queries`
    may be any iterable; `size` gives an item's letter count."""
    limit = query_batch_letters(options)
    batch, letters = [], 0
    for query in queries:
        batch.append(query)
        letters += size(query)
        if letters >= limit:
            yield batch
            batch, letters = [], 0
    if batch:
        yield batch


# ----------------------------------------------------------------------------------------------
# subject chunks


@dataclass
class SubjectChunks:
    """The pieces of a volume's subjects that are scanned and extended independently."""

    local_index: np.ndarray   # int32: subject index within the volume
    start: np.ndarray         # int64: first letter of the chunk within its subject
    byte_offset: np.ndarray   # int64: byte of the chunk's first letter in the volume buffer
    length: np.ndarray        # int32: letters

    def take(self, index) -> "SubjectChunks":
        return SubjectChunks(self.local_index[index], self.start[index], self.byte_offset[index],
                             self.length[index])


def subject_chunks(lengths: np.ndarray, byte_offset: np.ndarray) -> SubjectChunks:
    """Cut each subject as s_BlastSearchEngineCore does: chunks of MAX_DBSEQ_LEN letters, each
    starting DBSEQ_CHUNK_OVERLAP letters before the previous one ends."""
    lengths = np.asarray(lengths, dtype=np.int64)
    step = MAX_DBSEQ_LEN - DBSEQ_CHUNK_OVERLAP
    counts = np.maximum((lengths - DBSEQ_CHUNK_OVERLAP) // step + 1, 1)
    index = np.repeat(np.arange(lengths.size, dtype=np.int32), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    rank = np.arange(index.size) - first
    start = rank * step
    length = np.minimum(lengths[index] - start, MAX_DBSEQ_LEN)
    # the step is a multiple of 4, so every chunk starts on a byte boundary
    return SubjectChunks(index, start, byte_offset[index] + start // 4, length.astype(np.int32))


# ----------------------------------------------------------------------------------------------
# preliminary search of one batch against one volume


@dataclass
class PrelimHits:
    """Preliminary HSP lists per query: {query index: {ordinal: Hsps}}."""

    by_query: dict = field(default_factory=dict)

    def add(self, query_index: int, ordinal: int, hsps: Hsps) -> None:
        self.by_query.setdefault(query_index, {})[ordinal] = hsps


def prelim_search_volume(batch, table, stats, volume, options, prelim: PrelimHits, backend,
                         num_threads: int | None = None, subjects: range | None = None,
                         diag_hash=None, ungapped_turn=None, pool=INLINE,
                         shared_scans=None, scan_turn=None) -> None:
    """Scan one volume (or the `subjects` range of its sequences), extend the seeds, and file
    the subjects' preliminary HSPs per query. The chunks' gapped extensions run on `pool`.

    `diag_hash` is the batch's diagonal hash (see ungapped.py), which must see the chunks in
    database order: `ungapped_turn`, when given, is a context manager that waits for this
    job's turn around the ungapped stage. With `shared_scans` (a SharedScans), the whole
    volume is scanned once and each subject range takes its share of the seeds;
    `scan_turn`, likewise, waits for the volume's turn at the scan, so that the volumes are
    scanned in order and the first one's extension does not wait behind the others' scans."""
    gapped = volume_initial_hits(batch, table, stats, volume, options, backend, num_threads,
                                 subjects, diag_hash, ungapped_turn, pool, shared_scans,
                                 scan_turn)
    results = gapped.extend_later(pool)()
    gapped.file_subjects(gapped.subject_hits(results, pool)(), prelim)


def volume_initial_hits(batch, table, stats, volume, options, backend, num_threads=None,
                        subjects=None, diag_hash=None, ungapped_turn=None, pool=INLINE,
                        shared_scans=None, scan_turn=None) -> "VolumeGapped":
    """prelim_search_volume's scan and ungapped stages (in the calling thread); its gapped
    stage is returned, ready to run on `pool`."""
    from .gapped import hit_contexts
    from .ungapped import extend_seeds, uses_diag_hash

    with TIMES.stage("database load"):
        buffer, byte_offset = volume.concat_packed()
    every_chunk = subject_chunks(volume.lengths, byte_offset)
    chunks, first_chunk = every_chunk, 0
    if subjects is not None:
        picked = np.flatnonzero((every_chunk.local_index >= subjects.start) &
                                (every_chunk.local_index < subjects.stop))
        chunks, first_chunk = every_chunk.take(picked), int(picked[0]) if picked.size else 0
    threads = options.num_threads if num_threads is None else num_threads

    # the turns are taken once per volume: the scan's at the first slice's scan, the
    # ungapped stage's from the first slice's extension to the last's
    turns = TurnsOnce(scan_turn, ungapped_turn)

    def scan(part):
        with turns.first_scan(), TIMES.stage("scan"):
            return backend.find_seeds(table, buffer, part.byte_offset, part.length, threads)

    def extend(seeds, part):
        turns.enter_ungapped()
        with TIMES.stage("ungapped"):
            hits = extend_seeds(seeds, table, buffer, part.byte_offset, part.length,
                                stats.ungapped_xdrop, stats.ungapped_cutoff,
                                stats.reduced_cutoff, options.reward, options.penalty, threads,
                                diag_hash)
        hits.extensions = extensions_ahead(backend, hits, part, buffer, batch, stats, options)
        return hits

    def initial_hits(part):
        with turns:
            return sliced_initial_hits(part, scan, extend)

    last_chunk = first_chunk + len(chunks.length)
    if shared_scans is None:
        hits = initial_hits(chunks)
    elif uses_diag_hash(table):
        # the hash must see the database in order: the whole volume's seeds are extended
        # once, in the volume's turn, and each job takes its chunks' initial hits
        hits = shared_scans.initial_hits(
            volume, lambda: initial_hits(every_chunk)).of_chunks(first_chunk, last_chunk)
    else:
        seeds = shared_scans.seeds(volume, lambda: scan(every_chunk))
        with turns:
            hits = extend(seeds.of_chunks(first_chunk, last_chunk), chunks)
    bounds = np.searchsorted(hits.chunk, np.arange(len(chunks.length) + 1))
    contexts = hit_contexts(hits.q_start, batch) if pool.threads > 1 else None
    pieces = [(int(c), part) for c in np.flatnonzero(np.diff(bounds))
              for part in context_pieces(contexts, bounds[c], bounds[c + 1], pool.threads)]
    return VolumeGapped(batch, stats, options, volume, buffer, chunks, hits, bounds, contexts,
                        pieces, pool.spread)


class TurnsOnce:
    """A volume's turns at the scan and at the ungapped stage (context managers, or None),
    each taken once: the scan's around the first scan only, the ungapped stage's from the
    first extension until this object's `with` block ends."""

    def __init__(self, scan_turn, ungapped_turn):
        self.scan_turn = scan_turn
        self.ungapped_turn = ungapped_turn
        self.held = ExitStack()

    def first_scan(self):
        turn, self.scan_turn = self.scan_turn, None
        return turn or nullcontext()

    def enter_ungapped(self) -> None:
        if self.ungapped_turn is not None:
            turn, self.ungapped_turn = self.ungapped_turn, None
            self.held.enter_context(turn)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.held.__exit__(*exc)


# A volume's chunks are scanned and extended in slices, in order, each aimed at SLICE_SEEDS
# seeds (20 bytes each), so that the seeds of a whole volume are never held at once; the
# first slice has FIRST_SLICE_LETTERS letters, later ones as many as the seeds per letter
# so far give.
SLICE_SEEDS = 1 << 22
FIRST_SLICE_LETTERS = 1 << 22


def sliced_initial_hits(chunks: SubjectChunks, scan, extend):
    """The initial hits of `chunks`, as extend(scan(chunks), chunks) gives them, made slice
    after slice in chunk order (the hits are in chunk order, and the diagonal hash, which
    extend carries from one call to the next, sees the chunks in the same order). The next
    slice is scanned while this one is extended: the scan and the extension run on
    different devices, or on different threads."""
    from .ungapped import joined_initial_hits

    total = len(chunks.length)
    if total == 0:
        return extend(scan(chunks), chunks)
    parts = []
    letters_seen, seeds_seen = 0, 0
    scan = TIMES.as_caller(scan)
    with ThreadPoolExecutor(1, thread_name_prefix="gblastn-slice-scan") as ahead:
        first, last = 0, slice_end(chunks.length, 0, FIRST_SLICE_LETTERS)
        part = _slice(chunks, first, last)
        scanning = ahead.submit(scan, part)
        while first < total:
            seeds = scanning.result()
            letters_seen += int(np.sum(part.length, dtype=np.int64))
            seeds_seen += len(seeds)
            following = last
            if following < total:
                want = max(1, SLICE_SEEDS * letters_seen // max(1, seeds_seen))
                end = slice_end(chunks.length, following, want)
                next_part = _slice(chunks, following, end)
                scanning = ahead.submit(scan, next_part)
            parts.append((first, extend(seeds, part)))
            del seeds
            if following < total:
                first, last, part = following, end, next_part
            else:
                first = total
    return joined_initial_hits(parts)


def _slice(chunks: SubjectChunks, first: int, last: int) -> SubjectChunks:
    return chunks if (first, last) == (0, len(chunks.length)) else \
        chunks.take(np.arange(first, last))


def slice_end(lengths: np.ndarray, first: int, letters: int) -> int:
    """The end of the slice of chunks from `first` that holds about `letters` letters (at
    least one chunk)."""
    ends = np.cumsum(lengths[first:], dtype=np.int64)
    return min(int(lengths.size), first + int(np.searchsorted(ends, letters, side="left")) + 1)


def extensions_ahead(backend, hits, chunks: SubjectChunks, buffer, batch, stats, options):
    """The initial hits' score-only gapped extensions, made on the GPU before the gapped
    stage needs them (InitialHits.extensions), when the backend makes them: greedy ones
    (greedy.cu: linear gap costs only) or X-drop DP ones (dynprog.cu); None otherwise. Each
    is a function of its hit alone, so the GPU extends every hit at once, and the gapped
    stage's in-order pass only picks those it keeps instead of extending them one after the
    other (docs/perf/gpu-greedy.md, docs/perf/blastn-gpu-extensions.md)."""
    from .gapped import hit_contexts

    if not len(hits):
        return None
    if options.greedy:
        if not (options.gapopen == 0 and options.gapextend == 0 and
                hasattr(backend, "greedy_extensions")):
            return None
        with TIMES.stage("gapped"):
            return backend.greedy_extensions(
                buffer, chunks.byte_offset, chunks.length, hits.chunk, hits.q_start,
                hits.s_start, hits.length, hit_contexts(hits.q_start, batch), batch,
                int(stats.gap_xdrop), int(options.reward), int(options.penalty))
    if not hasattr(backend, "dp_extensions"):
        return None
    from .alphabet import score_matrix

    with TIMES.stage("gapped"):
        return backend.dp_extensions(
            buffer, chunks.byte_offset, chunks.length, hits, hit_contexts(hits.q_start, batch),
            batch, score_matrix(options.reward, options.penalty), int(options.gapopen),
            int(options.gapextend), int(stats.gap_xdrop))


@dataclass
class VolumeGapped:
    """A volume's gapped stage: its pieces (chunk, hit indices or None for all), extended
    on any thread (extend_later), then filed in chunk order."""

    batch: object
    stats: object
    options: SearchOptions
    volume: object
    buffer: np.ndarray
    chunks: "SubjectChunks"
    hits: object
    bounds: np.ndarray
    contexts: np.ndarray | None
    pieces: list
    spread: object

    def piece_hits(self) -> list:
        """The number of initial hits of each piece, the measure of its work: the pieces
        with most hits are those that take longest."""
        return [int(self.bounds[c + 1] - self.bounds[c]) if part is None else len(part)
                for c, part in self.pieces]

    def extend_later(self, pool):
        """Every piece extended on `pool`, the heaviest tasks first; returns a function that
        waits for them and gives each piece's (rows, origin), in piece order. With the
        greedy extensions made ahead, whole chunks go in runs, each one task and one compiled
        call (gapped.extend_chunks_given): a call per chunk would hold the GIL longer, in
        Python, than the compiled work it calls for."""
        hits = self.piece_hits()
        tasks = self._tasks(hits, pool.threads)
        if any(len(task) > 1 for task in tasks):
            self._run_arguments  # made once, here, rather than by the first tasks at once
        later = pool.map_later(self._extend_task, tasks, [sum(hits[i] for i in task)
                                                          for task in tasks])

        def results() -> list:
            by_piece = [None] * len(self.pieces)
            for task, found in zip(tasks, later()):
                for i, result in zip(task, found):
                    by_piece[i] = result
            return by_piece

        return results

    def _tasks(self, hits: list, threads: int) -> list:
        """The pieces' indices in tasks: a piece cut from a chunk alone; whole chunks, when
        their extensions were made ahead, in runs of about RUN_TASKS_PER_THREAD tasks per
        thread's share of the hits."""
        if self.hits.extensions is None or not self.options.greedy:
            return [[i] for i in range(len(self.pieces))]
        whole = [i for i, (_, part) in enumerate(self.pieces) if part is None]
        alone = [[i] for i, (_, part) in enumerate(self.pieces) if part is not None]
        target = max(1, sum(hits) // (RUN_TASKS_PER_THREAD * threads))
        return alone + runs_of(whole, [hits[i] for i in whole], target)

    def _extend_task(self, task: list) -> list:
        if len(task) == 1:
            return [self.extend_piece(self.pieces[task[0]])]
        from .gapped import extend_chunks_given

        chunks = np.array([self.pieces[i][0] for i in task], dtype=np.int64)
        with TIMES.stage("gapped"):
            rows, origin, counts = extend_chunks_given(chunks, self.bounds,
                                                       *self._run_arguments)
        ends = np.cumsum(counts)
        return [(rows[end - n:end], origin[end - n:end]) for n, end in zip(counts, ends)]

    @cached_property
    def _run_arguments(self) -> tuple:
        """extend_chunks_given's arguments after the chunks and their bounds: the volume's
        hits, as extend_hits converts a piece's."""
        hits, batch, stats, options = self.hits, self.batch, self.stats, self.options
        contexts = self.contexts
        if contexts is None:
            from .gapped import hit_contexts
            contexts = hit_contexts(hits.q_start, batch)

        def as64(values):
            return np.ascontiguousarray(values, dtype=np.int64)

        return (as64(hits.extensions), as64(hits.q_start), as64(hits.s_start),
                as64(hits.length), as64(hits.score), as64(contexts), as64(batch.context_offset),
                as64(batch.context_length), np.ascontiguousarray(batch.sequence, dtype=np.uint8),
                batch.query_words, self.buffer, as64(self.chunks.byte_offset),
                as64(self.chunks.length), as64(stats.gapped_cutoff), int(stats.gap_xdrop),
                int(options.reward), int(options.penalty), int(options.gapopen),
                int(options.gapextend), int(options.min_diag_separation))

    def extend_piece(self, piece) -> tuple:
        """The gapped rows of one piece, and the indices of the hits they came from."""
        from .gapped import extend_hits

        c, part = piece
        hits, chunks, bounds = self.hits, self.chunks, self.bounds
        picked = slice(bounds[c], bounds[c + 1]) if part is None else part + bounds[c]
        first = chunks.byte_offset[c]
        packed = self.buffer[first:first + (int(chunks.length[c]) + 3) // 4]
        with TIMES.stage("gapped"):
            rows, origin = extend_hits(
                hits.q_start[picked], hits.s_start[picked], hits.length[picked],
                hits.score[picked], self.batch, packed, int(chunks.length[c]), self.stats,
                self.options, hits.seed_q[picked], hits.seed_s[picked],
                None if self.contexts is None else self.contexts[picked], self.spread,
                None if hits.extensions is None else hits.extensions[picked])
        return rows, origin if part is None else part[origin]

    def subject_hits(self, results: list, pool):
        """Each subject's HSPs from the pieces' results, per query, worked out on `pool`
        (one task per subject: its chunks merged in order, E-values, the threshold). Returns
        a function that waits for them and gives [(ordinal, [(query index, Hsps)])] in
        subject order."""
        by_subject: dict = {}
        for c, found in _chunk_results(self.pieces, results):
            if found.shape[0]:
                by_subject.setdefault(int(self.chunks.local_index[c]), []).append((c, found))
        # ahead of the later volumes' pieces still queued: this volume's traceback searches
        # wait for them, and may then run on the GPU beside those pieces
        items = list(by_subject.items())
        return pool.map_later(self._subject_hits, items, [AHEAD_OF_PIECES] * len(items))

    def _subject_hits(self, item) -> tuple:
        from .hsp import hsps_from_rows, subject_rows

        subject, found_by_chunk = item
        with TIMES.stage("gapped"):
            # chunks in order, so the subject's chunks are merged in order
            parts = [found for _, found in found_by_chunk]
            bounds = np.cumsum([0] + [part.shape[0] for part in parts])
            starts = self.chunks.start[[c for c, _ in found_by_chunk]]
            rows = subject_rows(np.concatenate(parts), bounds, starts, DBSEQ_CHUNK_OVERLAP,
                                OVERLAP_DIAG_CLOSE)
        ordinal = self.volume.first_ordinal + subject
        return ordinal, subject_hsps_by_query(hsps_from_rows(rows), self.stats, self.options)

    @staticmethod
    def file_subjects(subject_hits: list, prelim: PrelimHits) -> None:
        """File subject_hits' result under the queries, in subject order."""
        for ordinal, by_query in subject_hits:
            for query_index, hsps in by_query:
                prelim.add(query_index, ordinal, hsps)


MIN_PIECE_HITS = 256  # a chunk with more initial hits is extended in pieces, by context
RUN_TASKS_PER_THREAD = 4  # runs of whole chunks per thread's share of a volume's hits
AHEAD_OF_PIECES = 1 << 62  # a task weight above any piece's (its hits)


def context_pieces(contexts, lo: int, hi: int, parts: int) -> list:
    """The initial hits [lo, hi) of one chunk in up to `parts` pieces for the gapped stage:
    index arrays (relative to lo, increasing), each holding whole contexts, with about equal
    hit counts; [None] (all in one) for a small chunk. A hit is only tested against the
    gapped HSPs of its own context, so the pieces give the rows one pass would: a chunk
    with repeats hit by many queries no longer holds up its job."""
    parts = min(parts, (hi - lo) // MIN_PIECE_HITS)
    if contexts is None or parts <= 1:
        return [None]
    of_hit = contexts[lo:hi]
    names, rank, counts = np.unique(of_hit, return_inverse=True, return_counts=True)
    if names.size == 1:
        return [None]
    # the most hit contexts first, each to the lightest piece so far
    piece_of = np.empty(names.size, dtype=np.int64)
    load = np.zeros(min(parts, names.size), dtype=np.int64)
    for k in np.argsort(-counts, kind="stable"):
        piece_of[k] = int(np.argmin(load))
        load[piece_of[k]] += counts[k]
    of_hit_piece = piece_of[rank]
    return [np.flatnonzero(of_hit_piece == p) for p in range(load.size)]


def _chunk_results(pieces: list, results: list):
    """(chunk, rows) per chunk, in chunk order, from the pieces' (rows, origin) results: the
    rows of a chunk's pieces put back in the order of the hits they came from."""
    k = 0
    while k < len(pieces):
        c = pieces[k][0]
        end = k
        while end < len(pieces) and pieces[end][0] == c:
            end += 1
        if end - k == 1:
            yield c, results[k][0]
        else:
            rows = np.concatenate([results[i][0] for i in range(k, end)])
            origin = np.concatenate([results[i][1] for i in range(k, end)])
            yield c, rows[np.argsort(origin, kind="stable")]
        k = end


def subject_hsps_by_query(hsps: Hsps, stats, options) -> list:
    """E-values for a subject's preliminary HSPs, drop those above the threshold, and split
    the rest by query (Blast_HSPResultsInsertHSPList): [(query index, Hsps)]."""
    from .stats import bit_scores, evalues

    hsps = hsps.take(score_order(hsps))
    hsps.evalue = evalues(hsps.score, hsps.context, stats)
    hsps.bitscore = bit_scores(hsps.score, hsps.context, stats)
    kept = np.flatnonzero(hsps.evalue <= options.evalue)
    # each query's HSPs in their score order: a stable sort by query, then a view each (a
    # mask per query would go over a subject's HSPs once for every query, and a copy per
    # query would hold the GIL once for every (query, subject) pair)
    hsps = hsps.take(kept[np.argsort(hsps.context[kept] // 2, kind="stable")])
    if not len(hsps):
        return []
    query_of = hsps.context // 2
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(query_of)) + 1, [len(hsps)]]).tolist()
    return [(q, hsps.span(a, b)) for q, a, b in
            zip(query_of[bounds[:-1]].tolist(), bounds[:-1], bounds[1:])]


def prelim_hitlist_size(options: SearchOptions) -> int:
    """GetPrelimHitlistSize for a gapped search."""
    n = options.max_target_seqs
    return max(min(2 * n, n + 50), 10)


def best_first(items: list) -> list:
    """Order (ordinal, hsps) pairs, none without HSPs, as s_EvalueCompareHSPLists: best
    E-value (tiny ones equal), then best score, then the higher ordinal first; ties keep
    their order. The keys are worked out for all pairs at once, not in Python for each
    of a query's thousands of subjects, under the GIL."""
    from .stats import EVALUE_EQUAL_BELOW

    if len(items) < 2:
        return list(items)
    sizes = np.array([len(hsps) for _, hsps in items], dtype=np.int64)
    if not sizes.all():
        raise ValueError("best_first: a subject without HSPs")
    starts = np.zeros(sizes.size, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    best = np.minimum.reduceat(np.concatenate([hsps.evalue for _, hsps in items]), starts)
    score = np.maximum.reduceat(
        np.concatenate([hsps.score for _, hsps in items]).astype(np.int64), starts)
    ordinal = np.array([ordinal for ordinal, _ in items], dtype=np.int64)
    order = np.lexsort((-ordinal, -score, np.where(best < EVALUE_EQUAL_BELOW, 0.0, best)))
    return [items[i] for i in order.tolist()]


# ----------------------------------------------------------------------------------------------
# traceback and final processing of one query


@dataclass
class TraceTask:
    """The traceback of one query against one subject: a piece of work for a thread."""

    query_index: int      # within its batch
    ordinal: int          # the subject
    hsps: Hsps            # its preliminary HSPs
    work: int             # an estimate of the work (trace_tasks)


TASK_FIXED_WORK = 1000  # a task's work beyond its HSPs' query letters


def trace_tasks(hits_by_query: dict, options: SearchOptions) -> list:
    """The TraceTasks of a batch: each query's best prelim_hitlist_size subjects, the most
    work first, so that long tracebacks start first rather than one started last deciding
    when the batch ends. A task's work is the query letters its HSPs align plus a share for
    the fixed costs, reckoned for all tasks at once."""
    limit = prelim_hitlist_size(options)
    picked = [(q, ordinal, hsps) for q, subjects in hits_by_query.items()
              for ordinal, hsps in best_first(list(subjects.items()))[:limit]]
    if not picked:
        return []
    sizes = np.array([len(hsps) for _, _, hsps in picked], dtype=np.int64)
    aligned = np.concatenate([hsps.q_end for _, _, hsps in picked]).astype(np.int64) - \
        np.concatenate([hsps.q_start for _, _, hsps in picked])
    work = np.add.reduceat(aligned, np.cumsum(sizes) - sizes) + TASK_FIXED_WORK
    works = work.tolist()
    return [TraceTask(*picked[i], works[i]) for i in np.argsort(-work, kind="stable").tolist()]


TRACE_GROUP_TASKS = 16  # traceback tasks in one compiled call, at most
GROUPS_PER_THREAD = 4  # traceback groups of a batch per thread: the threads finish together


@dataclass
class TraceGroup:
    """Traceback tasks of one volume, for one compiled call (traceback.traceback_group)."""

    volume: object
    tasks: list = field(default_factory=list)
    work: int = 0


def trace_groups(tasks: list, db, groups: int) -> list:
    """Traceback tasks (the most work first) in TraceGroups: a call per task spent most of
    the tracebacks' time in Python, one thread at a time under the GIL. A group takes at
    most TRACE_GROUP_TASKS tasks and about 1 / `groups` of the work (GROUPS_PER_THREAD per
    thread for a batch's tasks), so that the threads finish together; the groups come the
    most work first."""
    share = max(1, sum(task.work for task in tasks) // max(1, groups))
    volume_of = np.searchsorted([volume.first_ordinal for volume in db.volumes],
                                [task.ordinal for task in tasks], side="right") - 1
    made, open_groups = [], {}  # volume index -> its open group
    for task, v in zip(tasks, volume_of.tolist()):
        group = open_groups.get(v)
        if group is None or len(group.tasks) == TRACE_GROUP_TASKS or group.work >= share:
            group = open_groups[v] = TraceGroup(db.volumes[v])
            made.append(group)
        group.tasks.append(task)
        group.work += task.work
    return made


_SCRATCH = threading.local()  # each thread's buffer of subject letters for traceback


def _letter_scratch(length: int) -> np.ndarray:
    """The calling thread's buffer for a subject's letters, at least `length` long, reused
    by all its tracebacks: a subject-long array for each would map and unmap memory, which
    serialises the threads on the process's memory map. Pages never written are never
    faulted in, so a chromosome's buffer costs the letters around its HSPs."""
    from .db.reader import sparse_letters

    letters = getattr(_SCRATCH, "letters", None)
    if letters is None or letters.size < length:
        letters = _SCRATCH.letters = sparse_letters(length)
    return letters


def trace_group(group: TraceGroup, batch, stats, db, options: SearchOptions) -> list:
    """Traceback of a TraceGroup, then BLAST's final filtering and order of each task's HSPs
    (with the alignment counts the output needs). Returns (ordinal, final HSPs) for each
    task, in order.

    As BLAST's partial fetching, only the subject's letters around the HSPs are unpacked;
    when an alignment reads beyond them (BLAST's fence hit), the traceback is redone on
    every letter it may read."""
    from .traceback import traceback_group

    tasks, volume = group.tasks, group.volume
    scratch = _letter_scratch(int(max(db.lengths[task.ordinal] for task in tasks)))
    with TIMES.stage("traceback"):
        final, _ = traceback_group([task.hsps for task in tasks],
                                   [task.ordinal - volume.first_ordinal for task in tasks],
                                   [task.query_index for task in tasks],
                                   volume.packed_subjects(), batch, stats, options, scratch)
    return [(task.ordinal, hsps) for task, hsps in zip(tasks, final)]


def tails_ahead(by_query: dict, batch, stats, db, backend, options: SearchOptions) -> None:
    """The greedy traceback's searches of preliminary HSPs ({query: {ordinal: Hsps}}), made
    on the GPU before their tracebacks start (Hsps.ahead, Hsps.ahead_runs), when the backend
    makes them (greedy.cu: linear gap costs, subjects resident on the GPU, windows of bases
    only). With an alignment's edit runs, the CPU only joins and tidies them; without (a
    search too long to keep its rows), it searches again, knowing the best distances, and
    stops there: most of a search's time goes past the alignment's end, confirming that
    nothing better follows."""
    from .hsp import rows_by_score
    from .layouts import HSP_S_END, HSP_S_START
    from .traceback import FETCH_MARGIN

    pairs = [(ordinal, hsps) for subjects in by_query.values()
             for ordinal, hsps in subjects.items() if hsps.score.size]
    if not (options.greedy and options.gapopen == 0 and options.gapextend == 0 and pairs
            and hasattr(backend, "greedy_tails")):
        return
    with TIMES.stage("traceback"):
        lists = [hsps for _, hsps in pairs]
        rows = rows_by_score(lists)
        counts = np.array([hsps.score.size for hsps in lists], dtype=np.int64)
        ordinal = np.repeat(np.array([o for o, _ in pairs], dtype=np.int64), counts)
        length = db.lengths[ordinal]
        exact = np.stack([np.maximum(rows[:, HSP_S_START] - FETCH_MARGIN, 0),
                          np.minimum(rows[:, HSP_S_END] + FETCH_MARGIN, length)], axis=1)
        address = np.zeros(rows.shape[0], dtype=np.uint64)
        usable = np.zeros(rows.shape[0], dtype=bool)
        for volume in db.volumes:
            mine = (ordinal >= volume.first_ordinal) & \
                (ordinal < volume.first_ordinal + volume.num_seqs)
            if not mine.any():
                continue
            buffer, byte_offset = volume.concat_packed()
            base = backend.resident_address(buffer)
            if base is None:
                continue
            local = ordinal[mine] - volume.first_ordinal
            address[mine] = np.uint64(base) + byte_offset[local].astype(np.uint64)
            usable[mine] = volume.bases_only(local, exact[mine, 0], exact[mine, 1])
        exact[~usable] = 0  # a window of no letters: the GPU leaves the search to the CPU
        ahead, runs = backend.greedy_tails(rows, address, length, exact, batch,
                                           int(stats.gap_xdrop_final), int(options.reward),
                                           int(options.penalty))
        ends = np.cumsum(counts).tolist()
        for hsps, first, last in zip(lists, [0] + ends[:-1], ends):
            hsps.ahead, hsps.ahead_runs, hsps.score_rows = \
                ahead[first:last], runs[first:last], rows[first:last]


def query_result(query_index: int, query, traced: list, options: SearchOptions) -> QueryResult:
    """A query's result from its traced (ordinal, HSPs) pairs, in any order: the subjects
    with HSPs left, best first, max_target_seqs of them."""
    traced = best_first([(o, h) for o, h in traced if len(h)])[:options.max_target_seqs]
    return QueryResult(query_index, query.id, query.defline, len(query),
                       [SubjectHits(o, h) for o, h in traced])


# ----------------------------------------------------------------------------------------------
# the whole search


@dataclass
class BatchPlan:
    """What every volume's preliminary search of one query batch shares."""

    queries: list
    first_index: int
    batch: object          # QueryBatch
    stats: object = None   # SearchStatistics; None when nothing is left to search
    table: object = None   # LookupTable; None when every query is masked or too short
    diag_hash: object = None  # the batch's DiagonalHash, carried across all volumes
    scans: object = None   # SharedScans, when the backend scans whole volumes at once


class SharedScans:
    """Each volume's seeds, from one scan of the whole volume shared by the jobs that search
    parts of it: a GPU call has a fixed cost, and the jobs would queue for the device one
    after the other. With the diagonal hash, each volume's initial hits are shared
    instead: the hash must see the database in order, and jobs taking turns at it would
    each wait for the previous one and for the GIL, where one turn per volume does not."""

    def __init__(self):
        self.lock = threading.Lock()
        self.volumes: dict = {}   # id(volume) -> (lock, {"seeds" or "hits": ...})

    def _shared(self, volume, name: str, make):
        with self.lock:
            lock, held = self.volumes.setdefault(id(volume), (threading.Lock(), {}))
        with lock:
            if name not in held:
                held[name] = make()
            return held[name]

    def seeds(self, volume, scan):
        """The volume's seeds: scan() the first time, the same Seeds after."""
        return self._shared(volume, "seeds", scan)

    def initial_hits(self, volume, scan_and_extend):
        """The volume's initial hits: scan_and_extend() the first time, the same after."""
        return self._shared(volume, "hits", scan_and_extend)


def plan_batch(queries: list, first_index: int, db, options: SearchOptions,
               pool=INLINE) -> BatchPlan:
    """Contexts, masks, statistics and the lookup table of one batch of queries; the masks
    and the table are made on the threads of `pool`."""
    from .lookup import build_lookup
    from .query import build_batch
    from .stats import prepare_statistics

    with TIMES.stage("query setup"):
        batch = build_batch(queries, options, pool)
        plan = BatchPlan(queries, first_index, batch)
        if len(batch.lookup_segments):
            from .ungapped import DiagonalHash
            plan.scans = SharedScans()
            # the table is built in compiled code that lets go of the GIL, the statistics
            # mostly in Python: side by side, they take the time of the longer one
            with ThreadPoolExecutor(1, thread_name_prefix="gblastn-table") as builder:
                table = builder.submit(build_lookup, batch, options, pool)
                plan.stats = prepare_statistics(batch, db.stats_letters, db.stats_num_seqs,
                                                options)
                plan.table = table.result()
            # its buckets in parts that threads extend side by side, when there are threads
            plan.diag_hash = DiagonalHash() if options.num_threads > 1 else DiagonalHash(1)
    return plan


def empty_result(index: int, query) -> QueryResult:
    return QueryResult(index, query.id, query.defline, len(query))


# ----------------------------------------------------------------------------------------------
# loading the compiled stages ahead of a search


class _MadeUpSubject:
    """One subject held in memory, as a database of one volume (what the stages read of
    them): for warm_up."""

    def __init__(self, codes: np.ndarray):
        from .alphabet import pack_2bit

        packed = pack_2bit(codes)
        packed.flags.writeable = False
        self.lengths = np.array([codes.size], dtype=np.int64)
        self.num_seqs, self.total_letters, self.first_ordinal = 1, int(codes.size), 0
        self.stats_num_seqs, self.stats_letters = self.num_seqs, self.total_letters
        self.volumes = [self]
        self._concat = (packed, np.array([0, packed.size], dtype=np.int64))

    def concat_packed(self):
        return self._concat

    def packed_subjects(self):
        """As Volume.packed_subjects, no ambiguity codes; read-only where a volume's arrays
        are (LMDB's memory), so that the same compiled code serves both."""
        from .db.reader import PackedSubjects

        def read_only(array):
            array.flags.writeable = False
            return array

        none = read_only(np.zeros(0, dtype=np.int64))
        return PackedSubjects(*self._concat, self.lengths, read_only(np.zeros(2, np.int64)),
                              none, none, np.zeros(0, dtype=np.int64),
                              read_only(np.zeros(0, dtype=np.uint8)))


WARM_UP_LENGTHS = (8_000, 800)  # made-up queries: a large batch's stages and a small one's
WARM_UP_QUERY_START = 40_000  # where the made-up queries are cut from the made-up subject


def warm_up(options: SearchOptions, query_letters: int | None = None, backend=None,
            trace: bool = True) -> int:
    """Search made-up queries against a made-up subject, untimed. numba loads each stage's
    machine code from its cache at the stage's first call, and the loads wait for one
    another (its compiler lock); run in the background as a search starts, this takes them
    off the search's path while the GPU is set up. A
    batch of more than 8,000 letters takes the megablast table and the diagonal hash, a
    small one the small table and the diagonal array: the kind `query_letters` (the query
    set's size, when known) calls for is loaded first, and the other only when the set
    makes several batches. `backend` (or a Future of it) is the search's scan backend:
    with the GPU's, the stages that run beside it are loaded, not the CPU's scan and
    extensions, whose loading would hold the GIL beside the query setup.
    Without `trace`, the searches stop before the traceback (compile_ahead compiles it
    meanwhile). Returns how many HSPs it traced."""
    from .dynprog import MAX_SUBJECT_OFFSET
    from .db.reader import warm_up_bases_only
    from .lookup import warm_up_standard_table
    from .output.linewriter import warm_up as output_warm_up
    from .ungapped import DIAG_HASH_QUERY_LENGTH

    rng = np.random.default_rng(0)
    # long enough to be aligned in windows, as chromosomes are
    subject = rng.integers(0, 4, MAX_SUBJECT_OFFSET + 10_000).astype(np.uint8)
    db = _MadeUpSubject(subject)
    lengths = list(WARM_UP_LENGTHS)
    if query_letters is not None and 2 * query_letters <= DIAG_HASH_QUERY_LENGTH:
        lengths.reverse()
    if query_letters is not None and query_letters <= query_batch_letters(options):
        lengths = lengths[:1]  # one batch, of the kind loaded first

    def search(n: int) -> int:
        start = WARM_UP_QUERY_START
        return _made_up_search(db, subject[start:start + n].copy(), options, backend, trace)

    with TIMES.untimed():
        traced = search(lengths[0])
        output_warm_up()
        if not options.greedy:
            warm_up_standard_table()
        elif isinstance(_made_up_backend(backend), _MadeUpDevice):
            warm_up_bases_only()
        return traced + sum(search(n) for n in lengths[1:])


def _made_up_search(db, codes: np.ndarray, options: SearchOptions, backend=None,
                    trace: bool = True) -> int:
    """warm_up's search of one query cut from the made-up subject; returns HSPs traced."""
    from .query import Query

    codes[::97] = (codes[::97] + 1) % 4  # mismatches, for every kind of extension
    query = Query("warm-up", "warm-up", codes, np.zeros(codes.size, dtype=bool))
    plan = plan_batch([query], 0, db, options)
    if plan.table is None:
        return 0
    gapped = volume_initial_hits(plan.batch, plan.table, plan.stats, db, options,
                                 _made_up_backend(backend), num_threads=1,
                                 diag_hash=plan.diag_hash)
    if gapped.hits.extensions is not None and gapped.pieces:
        # beside the GPU, whole chunks go in runs and cut pieces alone
        chunk, _ = gapped.pieces[0]
        gapped._extend_task([0, 0])
        gapped.extend_piece((chunk, np.arange(int(gapped.bounds[chunk + 1] -
                                                  gapped.bounds[chunk]))))
    prelim = PrelimHits()
    gapped.file_subjects(gapped.subject_hits(gapped.extend_later(INLINE)(), INLINE)(), prelim)
    if not trace:
        return 0
    groups = trace_groups(trace_tasks(prelim.by_query, options), db, 1)
    return sum(len(hsps) for group in groups
               for _, hsps in trace_group(group, plan.batch, plan.stats, db, options))


def _made_up_backend(backend):
    """The made-up search's scan backend: the CPU's, or beside the GPU (`backend`, or the
    Future of its set-up, has greedy extensions) a _MadeUpDevice."""
    from .scan import cpu

    if isinstance(backend, Future):
        try:
            backend = backend.result()
        except Exception:  # noqa: BLE001 - no device: the search reports it, the CPU serves
            backend = None
    return _MadeUpDevice() if hasattr(backend, "greedy_extensions") else cpu


class _MadeUpDevice:
    """The GPU's stand-in in warm_up: its seeds are words of the made-up query where it lies
    in the made-up subject, and it makes no greedy extension ahead (the CPU makes them all,
    through the compiled calls it takes beside the GPU)."""

    def find_seeds(self, table, packed, chunk_byte_offset, chunk_length, num_threads=None):
        from .scan import Seeds

        query_length = int(table.context_length[0])
        at = np.arange(5, query_length - table.word_size, 97, dtype=np.int64)  # no mismatch
        subject_at = WARM_UP_QUERY_START + at
        chunk_start = (np.asarray(chunk_byte_offset, dtype=np.int64) -
                       int(chunk_byte_offset[0])) * 4
        chunk = np.searchsorted(chunk_start, subject_at, side="right") - 1
        inside = subject_at + table.word_size <= chunk_start[chunk] + chunk_length[chunk]
        chunk, at, subject_at = chunk[inside], at[inside], subject_at[inside]
        s_off = (subject_at - chunk_start[chunk]).astype(np.int32)
        return Seeds(chunk.astype(np.int32), (int(table.context_offset[0]) + at).astype(np.int32),
                     s_off, s_off.copy(), s_off.copy())

    def greedy_extensions(self, packed, chunk_byte_offset, chunk_length, hit_chunk, *args,
                          **kwargs) -> np.ndarray:
        from .layouts import GAPPED_FIELDS

        return np.zeros((len(hit_chunk), GAPPED_FIELDS + 1), dtype=np.int64)


def search_batch(queries: list, first_index: int, db, options: SearchOptions, backend,
                 pool=INLINE, device_done=None) -> list:
    """Search one batch of queries against every volume; results in query order. The stages'
    independent pieces run on `pool`. `backend` may be a Future (the GPU's set-up), waited
    for once the batch's queries are masked and indexed. `device_done`, when given, is
    called once the batch no longer needs the backend (before its tracebacks)."""
    plan = plan_batch(queries, first_index, db, options, pool)
    if plan.table is None:
        return [empty_result(first_index + i, q) for i, q in enumerate(queries)]
    if isinstance(backend, Future):
        backend = backend.result()
    # each volume's gapped pieces run on the pool while the next volume is scanned and its
    # seeds extended here; the volumes' HSPs are filed in database order
    started = []
    for volume in db.volumes:
        gapped = volume_initial_hits(plan.batch, plan.table, plan.stats, volume, options,
                                     backend, diag_hash=plan.diag_hash, pool=pool)
        started.append((gapped, gapped.extend_later(pool)))
    # a volume's subjects are merged and filtered on the pool as soon as its pieces are done,
    # and their traceback searches made on the GPU while the next volumes' pieces run
    prelim = PrelimHits()
    for gapped, results in started:
        volume_hits = PrelimHits()
        gapped.file_subjects(gapped.subject_hits(results(), pool)(), volume_hits)
        tails_ahead(volume_hits.by_query, plan.batch, plan.stats, db, backend, options)
        for q, subjects in volume_hits.by_query.items():
            prelim.by_query.setdefault(q, {}).update(subjects)
    if device_done is not None:
        device_done()
    traced = [[] for _ in queries]
    groups = trace_groups(trace_tasks(prelim.by_query, options), db,
                          GROUPS_PER_THREAD * pool.threads)
    for group, pairs in zip(groups, pool.map(
            lambda group: trace_group(group, plan.batch, plan.stats, db, options),
            groups)):
        for task, pair in zip(group.tasks, pairs):
            traced[task.query_index].append(pair)
    return [query_result(first_index + q, query, traced[q], options)
            for q, query in enumerate(queries)]


def search_queries(queries: list, db, options: SearchOptions, backend=None):
    """Yield one QueryResult per query, in input order."""
    if backend is None:
        from .scan import cpu as backend
    index = 0
    for batch_queries in query_batches(queries, options):
        yield from search_batch(batch_queries, index, db, options, backend)
        index += len(batch_queries)


@dataclass
class QueryHits:
    """The Python API's result for one query: its id, defline and length, and one dict per
    HSP keyed by tabular column name (see gblastn.output.tabular.hit_records)."""

    query_id: str
    defline: str
    length: int
    hits: list


def search(queries, db, columns: str = "std score sstrand qlen slen", backend=None,
           **options) -> list:
    """Python API: search queries (a FASTA path, FASTA text, or a list of sequence strings or
    Query records) against a database (a path or an open Database), with blastn's options as
    keyword arguments (task="megablast", evalue=1e-5, ...). Returns one QueryHits per query,
    in input order."""
    from .db.reader import open_db
    from .options import make_options
    from .output.tabular import hit_records
    from .query import read_queries

    settings = make_options(**options)
    own_db = not hasattr(db, "volumes")
    database = open_db(db) if own_db else db
    try:
        queries = read_queries(queries)
        return [QueryHits(q.id, q.defline, len(q), hit_records(q, r, database, columns))
                for q, r in zip(queries, search_queries(queries, database, settings, backend))]
    finally:
        if own_db:
            database.close()
