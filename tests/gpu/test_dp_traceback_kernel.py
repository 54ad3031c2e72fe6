"""cuda/dp_traceback.cu's DP tracebacks, compiled for the host (no GPU needed), equal
dynprog.py's gapped_start_nucl and traceback_dp field by field and run by run; an alignment
that reads a letter the host does not vouch for, whose band outgrows the ring, or that finds no
memory for its cells or runs is left to the CPU. tests/gpu/test_gpu_backend.py runs the same
kernel on a GPU."""

import ctypes
from pathlib import Path

import numpy as np
import pytest

import gblastn
from gblastn.alphabet import encode_blastna, pack_2bit, score_matrix
from gblastn.dynprog import MAX_SUBJECT_OFFSET, MAX_TOTAL_GAPS, gapped_start_nucl, traceback_dp
from gblastn.layouts import HSP_FIELDS, RUN_COUNT_SHIFT, RUN_OP_MASK, TRACE_EXTENTS, \
    TRACE_FIELDS, TRACE_READ, TRACE_RUNS, TRACE_SCORE, TRACE_START
from gblastn.options import make_options
from gblastn.query import Query, build_batch
from gblastn.scan.gpu import dp_trace_arrays, launched_until_made, trace_defines, \
    trace_runs_size
from test_ungapped_kernel import host_library

KERNEL = Path(gblastn.__file__).parent / "cuda" / "dp_traceback.cu"
# (reward, penalty, gap open, gap extend, raw final X-drop): the DP tasks' scorings
SCORINGS = [(2, -3, 5, 2, 110), (1, -2, 5, 2, 100), (1, -1, 5, 2, 60), (4, -5, 12, 8, 220),
            (1, -3, 2, 1, 50)]


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    """dp_traces_host built for a ring of `columns` and blocks of `block` bytes."""
    built = {}

    def build(columns: int = 512, block: int = 8192):
        if (columns, block) not in built:
            library = host_library(tmp_path_factory.mktemp(f"trace{columns}_{block}"), KERNEL,
                                   trace_defines(columns, block))
            built[columns, block] = library.dp_traces_host
        return built[columns, block]
    return build


def trace_case(seed: int, subject_extra: int = 0, n: int = 120):
    """A 3 kb query, mutated copies of its pieces (60 letters to 2 kb, of both strands) in a
    subject between random letters, and HSP boxes inside the copies with start points on or
    near their diagonals, one at the sequences' starts. `subject_extra` random letters first
    make the subject long enough to be cut to AdjustSubjectRange's window."""
    from golden import mutate, random_dna

    rng = np.random.default_rng(seed)
    query = random_dna(rng, 3000)
    minus = np.frombuffer(query.tobytes().decode()[::-1].translate(
        str.maketrans("ACGT", "TGCA")).encode(), dtype=query.dtype)
    options = make_options("dc-megablast", dust="no")
    batch = build_batch([Query("q", "q", encode_blastna(query.tobytes().decode()),
                               np.zeros(query.size, bool))], options)
    parts, copies, at = [random_dna(rng, 200 + subject_extra)], [], 200 + subject_extra
    for ctx, q_from, length in ((0, 0, 2000), (1, 100, 1500), (0, 2100, 600), (1, 1800, 400),
                                (0, 1000, 150), (1, 2500, 80), (0, 2800, 60)):
        strand = query if ctx == 0 else minus
        parts += [mutate(rng, strand[q_from:q_from + length], 0.15, 0.01), random_dna(rng, 300)]
        copies.append((ctx, q_from, at, length))
        at += parts[-2].size + 300
    rows = np.zeros((n, HSP_FIELDS), dtype=np.int64)
    for i in range(n):
        ctx, q_from, s_from, length = copies[i % len(copies)]
        qs = q_from + int(rng.integers(0, length // 2))
        qe = int(min(q_from + length - 10, qs + rng.integers(20, 900)))
        qg = int(rng.integers(qs, qe))
        drift = s_from - q_from + int(rng.integers(-4, 5))
        rows[i] = (ctx, qs, qe, qs + drift, qe + drift, 0, qg, qg + drift)
    rows[0, 1:] = (0, 40, 200 + subject_extra, 240 + subject_extra, 0, 0, 200 + subject_extra)
    return rows, encode_blastna(np.concatenate(parts).tobytes().decode()), batch


def host_traces(kernel, rows, subject_codes, exact, batch, scoring,
                pool_bytes: int = 1 << 26, runs_size: int | None = None,
                budget: int = 1 << 40) -> tuple:
    """The kernel's tracebacks of HSP rows in one subject, as GpuBackend.dp_tails returns
    them (its launches too)."""
    packed = pack_2bit(subject_codes)
    n = rows.shape[0]
    address = np.full(n, packed.ctypes.data, dtype=np.uint64)
    length = np.full(n, subject_codes.size, dtype=np.int64)
    arrays = dp_trace_arrays(rows, address, length, exact, batch)
    return launch_host(kernel, arrays, batch, scoring, score_matrix(*scoring[:2]), pool_bytes,
                       runs_size, budget)


def on_cpu(rows, subject_codes, batch, scoring) -> list:
    """Each HSP's start point and traceback_dp, as dynprog.py makes them."""
    reward, penalty, gap_open, gap_extend, xdrop = scoring
    matrix = score_matrix(reward, penalty).astype(np.int64)
    out = []
    for row in rows:
        ctx, qs, qe, ss, se, _, qg, sg = (int(v) for v in row)
        base = int(batch.context_offset[ctx])
        letters = batch.sequence[base:base + int(batch.context_length[ctx])]
        qg, sg = gapped_start_nucl(letters, subject_codes, qs, qe, ss, se, qg, sg)
        out.append(((qg, sg), traceback_dp(letters, qg, subject_codes, sg, matrix, gap_open,
                                           gap_extend, xdrop)))
    return out


def assert_made_equal(found, runs, want) -> int:
    """Every alignment the kernel made equals the CPU's; returns how many it made."""
    made = 0
    for row, ((qg, sg), (score, q0, q1, s0, s1, ops, lens, read_start, read_end)) in \
            zip(found, want):
        if row[TRACE_FIELDS] == 0:
            continue
        made += 1
        assert (row[TRACE_START], row[TRACE_START + 1]) == (qg, sg)
        assert row[TRACE_SCORE] == score
        assert tuple(row[TRACE_EXTENTS:TRACE_EXTENTS + 4]) == (q0, q1, s0, s1)
        assert (row[TRACE_READ], row[TRACE_READ + 1]) == (read_start, read_end)
        first, count = row[TRACE_RUNS], row[TRACE_RUNS + 1]
        mine = runs[first:first + count]
        assert np.array_equal(mine & RUN_OP_MASK, ops)
        assert np.array_equal(mine >> RUN_COUNT_SHIFT, lens)
    return made


def every_letter(rows, subject_codes) -> np.ndarray:
    return np.tile([0, subject_codes.size], (rows.shape[0], 1)).astype(np.int64)


@pytest.mark.parametrize("scoring", SCORINGS)
@pytest.mark.parametrize("seed", [1, 2])
def test_kernel_tracebacks_are_dynprogs(host_kernel, scoring, seed):
    rows, subject_codes, batch = trace_case(seed)
    found, runs = host_traces(host_kernel(), rows, subject_codes,
                              every_letter(rows, subject_codes), batch, scoring)
    assert assert_made_equal(found, runs, on_cpu(rows, subject_codes, batch, scoring)) == \
        rows.shape[0]


def test_a_long_subject_is_aligned_in_its_window(host_kernel):
    scoring = SCORINGS[0]
    rows, subject_codes, batch = trace_case(3, subject_extra=MAX_SUBJECT_OFFSET, n=40)
    assert subject_codes.size >= MAX_SUBJECT_OFFSET
    found, runs = host_traces(host_kernel(), rows, subject_codes,
                              every_letter(rows, subject_codes), batch, scoring)
    assert assert_made_equal(found, runs, on_cpu(rows, subject_codes, batch, scoring)) == 40


def test_letters_not_vouched_for_leave_the_alignment_to_the_cpu(host_kernel):
    scoring = SCORINGS[0]
    rows, subject_codes, batch = trace_case(4)
    want = on_cpu(rows, subject_codes, batch, scoring)
    exact = every_letter(rows, subject_codes)
    exact[1::3] = np.stack([rows[1::3, 3] - 30, rows[1::3, 4] + 30], axis=1)  # tight
    exact[::7] = 0  # none at all
    found, runs = host_traces(host_kernel(), rows, subject_codes, exact, batch, scoring)
    made = assert_made_equal(found, runs, want)
    assert 0 < made < rows.shape[0]
    assert not found[::7, TRACE_FIELDS].any() and not found[1::3, TRACE_FIELDS].all()
    for row, (_, result) in zip(found, want):
        if row[TRACE_FIELDS]:
            read_start, read_end = result[7], result[8]
            assert read_start >= row[TRACE_READ] and read_end <= row[TRACE_READ + 1]


@pytest.mark.parametrize("columns, pool_bytes, runs_size, budget, some_made", [
    (64, 1 << 26, None, 1 << 40, False),    # a ring narrower than the X-drop's bands
    (512, 2 * 8192, None, 1 << 40, False),  # a block for each direction, none to grow into
    (512, 1 << 26, 300, 1 << 40, True),     # room for the first few scripts
    (512, 1 << 26, None, 40_000, True),     # cells for the shorter alignments only
])
def test_what_does_not_fit_is_left_to_the_cpu(host_kernel, columns, pool_bytes, runs_size,
                                              budget, some_made):
    scoring = SCORINGS[0]
    rows, subject_codes, batch = trace_case(5)
    found, runs = host_traces(host_kernel(columns), rows, subject_codes,
                              every_letter(rows, subject_codes), batch, scoring, pool_bytes,
                              runs_size, budget)
    made = assert_made_equal(found, runs, on_cpu(rows, subject_codes, batch, scoring))
    assert made < rows.shape[0] and (made > 0) == some_made


def test_an_hsp_without_a_stored_start_is_left_to_the_cpu(host_kernel):
    rows, subject_codes, batch = trace_case(6, n=10)
    rows[3, 6:8] = 0
    found, runs = host_traces(host_kernel(), rows, subject_codes,
                              every_letter(rows, subject_codes), batch, SCORINGS[0])
    assert found[3, TRACE_FIELDS] == 0 and found[:3, TRACE_FIELDS].all()


def test_alignments_left_for_want_of_memory_go_again_while_launches_make_some():
    """launched_until_made: each launch here has memory for three alignments; the others go
    again, fewer at a time, up to the launches allowed, then fall to the CPU. A launch that
    makes none ends the tries."""
    from gblastn.layouts import TRACE_MADE, TRACE_NO_ROOM, TRACE_NOT_MADE

    calls = []
    flags = np.zeros(20, dtype=np.uint8)
    flags[[4, 9]] = TRACE_NOT_MADE

    def launch(pending, room=3):
        calls.append(pending.tolist())
        for i in pending:
            if flags[i] == TRACE_NOT_MADE and i in (4, 9):
                continue
            flags[i] = TRACE_MADE if room > 0 else TRACE_NO_ROOM
            room -= flags[i] == TRACE_MADE
        return flags

    order = np.arange(20, dtype=np.int32)[::-1].copy()
    made = launched_until_made(launch, order, launches=4)
    assert len(calls) == 4 and calls[1] == [i for i in calls[0][3:] if i not in (4, 9)]
    assert len(calls[3]) == len(calls[2]) - 3
    assert (made == TRACE_MADE).sum() == 12 and not (made == TRACE_NO_ROOM).any()
    calls.clear()
    flags[:] = 0
    made = launched_until_made(lambda pending: launch(pending, room=0), order)
    assert len(calls) == 1 and (made == TRACE_NOT_MADE).all()


class HostTails:
    """The CPU's backend, with its DP tracebacks made ahead by the host-compiled kernel, as
    the GPU makes them (its subjects' packed letters read where the host keeps them)."""

    def __init__(self, kernel):
        from gblastn.scan.backend import Capabilities, CpuBackend

        outer = self

        class Backend(CpuBackend):
            capabilities = Capabilities(stops_scans=True, tails_ahead=True)

            def resident_address(self, subjects):
                outer.held.append(subjects.packed)
                return subjects.packed.ctypes.data

            def dp_tails(self, rows, address, length, exact, batch, matrix, gap_open,
                         gap_extend, xdrop):
                outer.calls += 1
                return outer.traces(rows, address, length, exact, batch,
                                    (0, 0, gap_open, gap_extend, xdrop), matrix)

        self.kernel, self.held, self.calls, self.backend = kernel, [], 0, Backend()

    def traces(self, rows, address, length, exact, batch, scoring, matrix):
        arrays = dp_trace_arrays(rows, address, length, exact, batch)
        return launch_host(self.kernel, arrays, batch, scoring, matrix)


def launch_host(kernel, arrays, batch, scoring, matrix, pool_bytes=1 << 26, runs_size=None,
                budget=1 << 40):
    """dp_traces_host over dp_trace_arrays' `arrays`, launched as GpuBackend.dp_tails
    launches it: (alignments with done flags, runs)."""
    _, _, gap_open, gap_extend, xdrop = scoring
    n = arrays[1].shape[0]
    letters = np.ascontiguousarray(batch.sequence, dtype=np.uint8)
    matrix = np.ascontiguousarray(matrix, dtype=np.int32)
    runs_size = trace_runs_size(arrays[1]) if runs_size is None else runs_size
    pool = np.zeros(pool_bytes, dtype=np.uint8)
    runs = np.zeros(runs_size, dtype=np.uint32)
    counters = np.zeros(3, dtype=np.uint64)
    found = np.full((n, TRACE_FIELDS), -1, dtype=np.int64)
    done = np.zeros(n, dtype=np.uint8)
    pointer = ctypes.c_void_p

    def launch(pending):
        counters[0] = counters[2] = 0  # an empty pool, from the first HSP
        kernel(ctypes.c_int(pending.size), pointer(pending.ctypes.data),
               *(pointer(a.ctypes.data) for a in arrays[1:]),
               pointer(letters.ctypes.data), pointer(matrix.ctypes.data),
               *(ctypes.c_int(int(c)) for c in (gap_open, gap_extend, xdrop)),
               ctypes.c_longlong(MAX_SUBJECT_OFFSET), ctypes.c_longlong(MAX_TOTAL_GAPS),
               ctypes.c_longlong(budget), pointer(pool.ctypes.data),
               ctypes.c_ulonglong(pool_bytes),
               pointer(counters.ctypes.data), pointer(runs.ctypes.data),
               ctypes.c_ulonglong(runs_size), pointer(counters[1:].ctypes.data),
               pointer(counters[2:].ctypes.data), pointer(found.ctypes.data),
               pointer(done.ctypes.data))
        return done

    made = launched_until_made(launch, arrays[0])
    out = np.concatenate([found, made[:, None].astype(np.int64)], axis=1)
    return out, runs[:min(int(counters[1]), runs_size)]


@pytest.mark.parametrize("task", ["dc-megablast", "blastn"])
def test_a_search_taking_the_kernels_tracebacks_writes_the_cpus_output(host_kernel, tmp_path,
                                                                       monkeypatch, task):
    """A whole search (several subjects and queries, both strands, the traceback in groups)
    whose DP tracebacks the kernel made ahead writes the CPU's output byte for byte; a batch
    with fewer cells to align than TAILS_MIN_CELLS_PER_THREAD asks for none."""
    import gblastn.engine as engine
    from golden import mutate, random_dna, write_fasta

    from gblastn.db.writer import make_db
    from gblastn.drivers.run import OutputSpec, run_search

    rng = np.random.default_rng(8)
    queries = [random_dna(rng, n) for n in (2500, 1200, 700)]
    subjects = []
    for i in range(30):
        q = queries[i % 3]
        a = int(rng.integers(0, q.size - 300))
        piece = mutate(rng, q[a:a + int(rng.integers(200, q.size - a + 1))], 0.12, 0.01)
        if i % 2:
            piece = np.frombuffer(piece.tobytes().decode()[::-1].translate(
                str.maketrans("ACGT", "TGCA")).encode(), dtype=piece.dtype)
        subjects.append(np.concatenate([random_dna(rng, 400), piece, random_dna(rng, 300)]))
    write_fasta(tmp_path / "db.fa", [(f"s{i}", s.tobytes().decode())
                                     for i, s in enumerate(subjects)])
    write_fasta(tmp_path / "q.fa", [(f"q{i}", q.tobytes().decode())
                                    for i, q in enumerate(queries)])
    db = make_db([str(tmp_path / "db.fa")], str(tmp_path / "db"), progress=False)
    options = make_options(task)

    def searched(backend=None) -> str:
        out = tmp_path / "out.tsv"
        run_search([str(tmp_path / "q.fa")], db, options, OutputSpec("6", str(out), None, db),
                   backend)
        return out.read_text()

    plain = searched()
    assert plain.count("\n") >= 30
    tails = HostTails(host_kernel())
    assert searched(tails.backend) == plain and tails.calls == 0
    monkeypatch.setattr(engine, "TAILS_MIN_CELLS_PER_THREAD", 0)
    assert searched(tails.backend) == plain and tails.calls >= 1
