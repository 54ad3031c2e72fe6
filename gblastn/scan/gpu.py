"""GPU scan backend (pycuda): the same Seeds as ``gblastn.scan.cpu``, from the kernels in
``cuda/seeds.cu``; and the preliminary stage's greedy extensions of the initial hits made
ahead (``cuda/greedy.cu``), the same as ``gblastn.gapped`` makes them.

Per (query batch, volume):

1. The volume's packed buffer goes to the GPU once (pinned staging, async copy) and stays
   there for every later batch; volumes are evicted oldest first when the next one would not
   fit in the memory budget.
2. ``scan_probes`` probes every chunk at the scan step and records the probes whose word the
   table lists; ``extend_hits`` expands each to its query offsets, mini-extends to W and runs
   s_TypeOfWord; survivors carry a 64-bit key (probe number, rank within the word's list), so
   a radix sort of the keys gives exactly the CPU backend's order (chunk, hit_s, table
   order). The probe number is global within one launch group of chunks; groups are
   contiguous, so their results concatenate in order.
3. Buffers that fill up are grown and the launch is run again (no hit is lost).

pycuda is imported lazily. Its contexts belong to a thread: the backend retains the device's
primary context and pushes it around each call, in whatever thread calls.
"""

import hashlib
import os
import re
import shutil
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..cache_files import write_cache_file
from ..cuda_context import close_device_files, page_locked_buffer, reset_primary_context, \
    retain_primary_context
from ..db.format import parse_size
from ..errors import GpuUnavailableError, OptionsError
from ..layouts import CHAIN_CELL_BYTES, GAPPED_AHEAD_FIELDS, GAPPED_FIELDS, HASH_BUCKETS, \
    HASH_LANES, HIT_CHUNK, HIT_FIELDS, HIT_LENGTH, HIT_Q_START, HIT_S_START, HIT_SCORE, \
    HSP_FIELDS, HSP_Q_END, HSP_Q_START, SCRIPT_RUNS, SEED_FIELDS, STORE_WORDS, TABLE_SMALL, \
    TAIL_FIELDS, TEMPLATES_MAX, TRACE_FIELDS, TRACE_MADE, TRACE_NO_ROOM, TRACE_NOT_MADE, \
    UNGAPPED_FIELDS, WALK_FIELDS, kernel_defines
from ..lookup import LookupTable, kept_letters
from ..timing import StageTimes
from ..ungapped import NOTHING_AHEAD, DiagonalPass, InitialHits, UngappedAhead, \
    UngappedRules, initial_hits_of_rows
from . import Seeds
from .backend import Backend, Capabilities, SubjectBuffer
from .cpu import choose_extend

SCAN_THREADS = 128         # the variants' timings: docs/perf/gpu-scan.md
PROBES_PER_THREAD = 4
FLUSH_MODE = 2
FLUSH_SLOTS = 2
EXTEND_THREADS = 256
GREEDY_ITEM_WARPS = 4      # items per block of greedy.cu's kernels (a warp each)
GREEDY_ROW_CELLS = 256     # diagonals per distance a greedy.cu warp keeps
# Distances a greedy search goes on the GPU before it is left to the CPU: a launch lasts as
# long as its longest warp (bench/gpu_greedy.py times the variants; docs/perf/gpu-greedy.md).
# The traceback's searches: past 1,000 the CPU saves little on a long alignment's search,
# and the few long searches would lengthen every launch. The preliminary extensions: none;
# with a warp for each hit the long ones no longer lengthen the launches, and a limit only
# leaves them to the CPU, one thread each.
TAIL_MAX_DISTANCE = 1000
HIT_MAX_DISTANCE = 1 << 62
UNGAPPED_THREADS = 128     # seeds per block of ungapped.cu's kernel (a thread each)
COMPACT_THREADS = 1024     # seeds per block of diagonals.cu's compaction of the kept seeds
RADIX_BITS = 8             # bits of the keys sorted by each pass of diagonals.cu's radix sort
# ungapped.sort_initial_hits' keys, the least significant first, and whether each descends
HIT_SORT_KEYS = ((HIT_Q_START, False), (HIT_LENGTH, True), (HIT_S_START, False),
                 (HIT_SCORE, True), (HIT_CHUNK, False))
CHAIN_THREADS = HASH_LANES  # threads of a block of diagonals.cu's walk_hash (one bucket)
CHAIN_SHARED_BYTES = 48 << 10  # a chain up to this size is walked in shared memory
# A launch group's seeds are sorted by 64-bit keys (group << index bits | seed index); with the
# diagonal array a group is a chunk's cell, so a launch group may have at most this many chunks
# per cell of the array (seed indices take at most 32 bits)
ARRAY_GROUP_SLOTS = 1 << 31
DP_THREADS = 128           # hits per block of dynprog.cu's kernel (a thread each)
DP_BAND_COLUMNS = 128      # columns of a DP extension's band on the GPU (a wider one: the CPU)
# Cells a DP extension computes on the GPU before it is left to the CPU: most long
# extensions start from hits inside an HSP that an earlier hit finds, which the CPU's
# in-order pass skips, while a launch lasts as long as its longest thread. 2^20 left the
# long alignments of diverged 100-kb queries to the CPU's in-order pass, one thread a piece
# (docs/perf/dc-megablast.md: dc-megablast 15.3 s against 9.6 s with 2^24).
DP_CELL_BUDGET = 1 << 24
# The DP tracebacks made ahead (dp_traceback.cu): threads a block, blocks per multiprocessor
# (a thread takes the next HSP when done, keeping its chains of cell blocks for it), the
# band's ring, the bytes of a cell block, and the most device memory the cells may take
TRACE_THREADS = 128
TRACE_BLOCKS_PER_SM = 2
TRACE_BAND_COLUMNS = 512
TRACE_BLOCK_BYTES = 8192
TRACE_POOL_BYTES = 16 << 30
TRACE_LAUNCHES = 4  # launches of the alignments left for want of memory, at most
# Cells a DP traceback computes on the GPU before it is left to the CPU: a thread's cells
# take about 100 times a CPU core's time, and a launch lasts as long as its longest
# alignment (docs/perf/dc-megablast.md)
TRACE_CELL_BUDGET = 1 << 19
CU_STREAM_NON_BLOCKING = 1  # a stream that does not wait for the default stream's work
DP_SCORE_ARGUMENT = 3  # the hits' ungapped scores among dp_hit_arrays'
# the traceback searches' warps at once, each keeping its rows in STORE_WORDS ints of device
# memory (9,216 ints, 36 kB; 8,192 warps hold 302 MB), about as many as the GPU keeps running
TAIL_WARPS = 8192
PADDING = 16               # zero bytes after each device copy of a volume
# a volume goes to the GPU through UPLOAD_THREADS lanes of two page-locked buffers of
# UPLOAD_STEP bytes: each step takes the GIL, which the query setup's Python holds meanwhile,
# so fewer or smaller buffers lose more to it (bench/gpu_upload.py; docs/perf/gpu-upload.md)
UPLOAD_STEP = 8 << 20      # bytes per host-to-device copy of a volume
UPLOAD_THREADS = 8         # threads filling page-locked buffers for those copies
STAGING_MIN_BYTES = 1 << 20  # the least page-locked memory a result comes back through
STAGING_KEPT = 4           # page-locked buffers kept for the next results (a call takes two)
MEMORY_CAP_VARIABLE = "GBLASTN_GPU_MEMORY"


def kernel_dir() -> Path:
    """The folder holding seeds.cu: the package's copy when installed, else the source
    tree's top-level cuda/."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "cuda", here.parent / "cuda"):
        if (candidate / "seeds.cu").is_file():
            return candidate
    raise GpuUnavailableError("-device gpu: no usable GPU (kernel sources cuda/seeds.cu not found)")


_INCLUDE = re.compile(r'^#include "([\w.]+\.cuh)"$', re.MULTILINE)


def kernel_source(name: str = "seeds.cu") -> str:
    """A kernel file of cuda/ with its headers inlined, so the compiler cache sees every
    line."""
    folder = kernel_dir()

    def header(match) -> str:
        return (folder / match.group(1)).read_text().replace("#pragma once", "")
    return _INCLUDE.sub(header, (folder / name).read_text())


def variant_defines(table: LookupTable, **tuning) -> dict:
    """The compile-time defines of seeds.cu's variant for this table."""
    defines = {
        "TABLE_KIND": table.kind,
        "WIDTH": table.width,
        "WORD_SIZE": table.word_size,
        "SCAN_STEP": table.scan_step,
        "PV_BTS": table.pv_bts if table.kind != TABLE_SMALL else 5,
        "EXTEND_KIND": choose_extend(table),
        "CHECK_MASKS": int(bool(table.check_masks)),
        **template_defines(table),
        "SCAN_THREADS": SCAN_THREADS,
        "PROBES_PER_THREAD": PROBES_PER_THREAD,
        "FLUSH_MODE": FLUSH_MODE,
        "FLUSH_SLOTS": FLUSH_SLOTS,
    }
    defines.update(tuning)
    return defines


def template_defines(table: LookupTable) -> dict:
    """The discontiguous variant's defines: TEMPLATE_LENGTH (0 for contiguous words), the
    templates read, and each one's kept letters (lookup.kept_letters; 0 where absent)."""
    length = int(getattr(table, "template_length", 0))
    kept = [0] * TEMPLATES_MAX
    count = table.template_shift.shape[0] if length else 0
    for t in range(count):
        kept[t] = kept_letters(table.template_shift[t], table.template_mask[t])
    return {"TEMPLATE_LENGTH": length, "TEMPLATE_COUNT": count,
            **{f"TEMPLATE_{t}": kept[t] for t in range(TEMPLATES_MAX)}}


def greedy_defines(row_cells: int = GREEDY_ROW_CELLS) -> dict:
    """The compile-time defines of greedy.cu's kernels."""
    return {"ROW_CELLS": row_cells, "ITEM_WARPS": GREEDY_ITEM_WARPS}


def diagonals_defines() -> dict:
    """The compile-time defines of diagonals.cu's kernels."""
    return {"COMPACT_THREADS": COMPACT_THREADS, "RADIX_BITS": RADIX_BITS}


def dp_defines(band_columns: int | None = None) -> dict:
    """The compile-time defines of dynprog.cu's kernel (the module's tuning by default)."""
    return {"BAND_COLUMNS": DP_BAND_COLUMNS if band_columns is None else band_columns}


def trace_defines(band_columns: int | None = None, block_bytes: int | None = None) -> dict:
    """The compile-time defines of dp_traceback.cu's kernel (the module's tuning by default)."""
    return {"TRACE_BAND_COLUMNS": band_columns or TRACE_BAND_COLUMNS,
            "TRACE_BLOCK_BYTES": block_bytes or TRACE_BLOCK_BYTES}


def nvcc_options(defines: dict) -> list:
    """nvcc's options for a kernel variant's `defines`: every kernel also gets the layouts
    it shares with the host (gblastn.layouts), so they are part of the cubin cache's key."""
    every = {**kernel_defines(), **defines}
    return ["-std=c++17"] + [f"-D{k}={int(v)}" for k, v in sorted(every.items())]


def cubin_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gblastn", "cubin")


def _nvcc_compile(source: str, options: list, arch: str) -> bytes:
    from pycuda.compiler import compile as nvcc_compile

    return nvcc_compile(source, options=list(options), no_extern_c=True, arch=arch,
                        cache_dir=False)


def cached_cubin(source: str, options: list, arch: str, compile=None,
                 refresh: bool = False) -> bytes:
    """The cubin of `source` built by nvcc with `options` for `arch`, from gblastn's cache
    when it holds one. pycuda's own cache runs `nvcc --version` in every process to make its
    key, and imports its compiler module, both on the first scan's path; this key names
    the nvcc found on PATH by its size and time instead. A cache that cannot be written
    only costs the next run a compilation; `refresh` compiles and rewrites it."""
    nvcc = shutil.which("nvcc")
    key = hashlib.sha256()
    for part in (source, "\0".join(options), arch, nvcc or "no nvcc"):
        key.update(part.encode() + b"\1")
    if nvcc:
        info = os.stat(nvcc)
        key.update(f"{info.st_size}:{info.st_mtime_ns}".encode())
    path = os.path.join(cubin_cache_dir(), key.hexdigest()[:32] + ".cubin")
    if not refresh:
        try:
            with open(path, "rb") as cached:
                return cached.read()
        except OSError:
            pass
    try:
        cubin = (compile or _nvcc_compile)(source, options, arch)
    except Exception as exc:  # nvcc missing or failing: pycuda raises several kinds
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise GpuUnavailableError(
            f"-device gpu: the CUDA kernels could not be compiled ({first_line})") from None
    write_cache_file(path, cubin)
    return cubin


def _import_pycuda():
    try:
        import pycuda.driver as drv
    except Exception as exc:  # ImportError, or a broken CUDA installation
        raise GpuUnavailableError(f"-device gpu: no usable GPU (pycuda: {exc})") from None
    return drv


def probe_counts(chunk_length: np.ndarray, width: int, step: int) -> np.ndarray:
    """Probes per chunk: offsets 0, step, ... <= length - width."""
    length = chunk_length.astype(np.int64)
    return np.where(length >= width, (length - width) // step + 1, 0)


def launch_groups(probes: np.ndarray, max_probes: int, max_chunks: int = 1 << 62) -> list:
    """Contiguous chunk ranges of at most max_probes probes and max_chunks chunks each (a
    single chunk always fits)."""
    groups, first, total = [], 0, 0
    for c, n in enumerate(probes.tolist()):
        if (total + n > max_probes or c - first >= max_chunks) and c > first:
            groups.append((first, c))
            first, total = c, 0
        total += n
    if probes.size:
        groups.append((first, int(probes.size)))
    return groups


class _TailRequest:
    """One greedy_tails call, waiting to be made with others."""

    def __init__(self, key: tuple, arrays: tuple):
        self.key = key
        self.arrays = arrays
        self.finished = False
        self.result = None
        self.error = None

    def finish(self, result=None, error=None) -> None:
        self.result, self.error, self.finished = result, error, True

    def outcome(self) -> tuple:
        if self.error is not None:
            raise self.error
        return self.result


def memory_cap() -> int | None:
    """GBLASTN_GPU_MEMORY (bytes, or e.g. 2GB), the device memory the volumes may take at
    most: a smaller GPU's budget; None unset."""
    text = os.environ.get(MEMORY_CAP_VARIABLE)
    if text is None:
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise OptionsError(f"{MEMORY_CAP_VARIABLE}: {exc}") from None


class GpuBackend(Backend):
    """``find_seeds`` on one GPU, the gapped extensions and traceback searches made ahead,
    and the volumes kept on the device. Capacities are initial buffer sizes (records); they
    grow when a launch overflows them. Its copies and kernel loads are counted in `times`."""

    name = "gpu"
    # one scan per volume (each call has a fixed cost); the volumes stay on the device
    capabilities = Capabilities(scans_whole_volumes=True, ungapped_ahead=True,
                                diagonals_on_device=True, greedy_ahead=True, dp_ahead=True,
                                tails_ahead=True, preloads=True, retires=True)

    def __init__(self, gpu_id: int = 0, hit_capacity: int = 1 << 20,
                 seed_capacity: int = 1 << 20, max_group_probes: int = 1 << 32,
                 memory_fraction: float = 0.6, times: StageTimes | None = None):
        drv = _import_pycuda()
        try:
            drv.init()
            count = drv.Device.count()
            if count == 0:
                raise GpuUnavailableError("-device gpu: no usable GPU (no CUDA device)")
            if not 0 <= gpu_id < count:
                raise GpuUnavailableError(
                    f"-device gpu: no usable GPU (-gpu_id {gpu_id}, {count} device(s))")
            self.device = drv.Device(gpu_id)
            release = retain_primary_context(gpu_id)
            try:
                self.context = self.device.retain_primary_context()
            finally:
                release()
        except GpuUnavailableError:
            raise
        except Exception as exc:
            raise GpuUnavailableError(f"-device gpu: no usable GPU ({exc})") from None
        self.drv = drv
        self.gpu_id = gpu_id
        self.times = times or StageTimes()
        self.hit_capacity = max(1, int(hit_capacity))
        self.seed_capacity = max(1, int(seed_capacity))
        self.max_group_probes = int(max_group_probes)
        self.memory_fraction = memory_fraction
        self.memory_cap = memory_cap()
        self.lock = threading.RLock()
        self.tails_lock = threading.Lock()
        self.tails_waiting = []  # greedy_tails calls waiting for the device
        self.modules = {}       # defines -> pycuda module
        self.volumes = {}       # SubjectBuffer.key -> (allocation, nbytes), oldest first
        self.table_key = None   # the resident query table
        self.table_arrays = {}
        self.words_key = None   # the batch whose packed query words are resident
        self.words_arrays = ()
        self.letters_key = None  # the batch whose query letters (blastna codes) are resident
        self.letters_array = None
        self.buffers = {}       # name -> (allocation, bytes)
        # ((threads, step), [(stream, two page-locked buffers)], their frees), made at
        # the first copy
        self.upload_lanes = None
        self.staging = []       # free page-locked buffers that results come back through
        self.staging_lock = threading.Lock()
        self.stats = {}         # last call's counts and grow events, for tests and benches
        self.retired = False    # the context is torn down (retire)
        # the DP's kernel runs on a stream of its own with the device let go (dp_extensions):
        # one DP at a time; its stream and events, made once (pycuda cannot drop an event
        # from a thread where its context is not current); the allocations freed meanwhile
        self.dp_lock = threading.Lock()
        self.dp_stream = None
        self.dp_events = ()
        self.dp_running = False
        self.freed_after_dp = []
        self.calls_done = None  # an event that marks the calls queued on the default stream

    # -- context ----------------------------------------------------------------------------

    def __enter__(self):
        self.lock.acquire()
        if self.retired:
            self.lock.release()
            raise GpuUnavailableError("the GPU was given back before the search ended")
        self.context.push()
        return self

    @contextmanager
    def synchronized(self, stage: str):
        """A stage of the device's calls whose time is its kernels': it waits for them at
        its end (the host would wait at its next copy anyway), not for a DP kernel running
        beside them on its own stream."""
        with self.times.stage(stage):
            yield
            if self.calls_done is None:
                self.calls_done = self.drv.Event()
            self.calls_done.record()
            self.calls_done.synchronize()

    def free(self, alloc) -> None:
        """Free a device allocation, once the DP kernel running on its own stream, if any,
        is done: freeing waits for every stream's work, and would hold the scans up behind
        it."""
        if self.dp_running:
            self.freed_after_dp.append(alloc)
        else:
            alloc.free()

    @contextmanager
    def held(self, stage: str):
        """The device for one call (as `with self`), the time it is held counted as `stage`:
        the calls run one at a time, so these stages are the device's share of the search."""
        with self, self.times.stage(stage):
            yield self

    def retire(self, for_good: bool = False) -> None:
        """Tear the device's context down now, in a thread, for a process that is done with
        the GPU and has CPU work left (tracebacks, output): left to the process's exit, the
        driver's teardown would come after the output was complete.
        The backend is unusable afterwards, and backend_for makes a new one, unless
        `for_good`: then the driver's files are closed too (cuda_context.close_device_files), and
        no device work is possible in this process again. The backend is kept, so that
        pycuda never frees again what the reset has freed; the process must leave with
        os._exit, as the command line does (at an interpreter's normal exit pycuda's
        clean-up of the retired objects fails and crashes)."""
        with _BACKENDS_LOCK:
            if _BACKENDS.get(self.gpu_id) is self:
                del _BACKENDS[self.gpu_id]
            _RETIRED.append(self)

        def tear_down():
            with self.lock:  # after any call still running
                self.retired = True
                reset_primary_context(self.gpu_id)
                if for_good:
                    close_device_files()

        threading.Thread(target=tear_down, name="gblastn-device-teardown", daemon=True).start()

    def __exit__(self, *exc):
        try:
            self.drv.Context.pop()
        finally:
            self.lock.release()

    # -- kernels ----------------------------------------------------------------------------

    def module(self, defines: dict, source: str = "seeds.cu"):
        key = (source,) + tuple(sorted(defines.items()))
        if key not in self.modules:
            with self.times.stage("gpu set-up"):
                self.modules[key] = self._load_module(defines, source)
        return self.modules[key]

    def _load_module(self, defines: dict, source: str):
        """The kernels of `source` compiled with `defines` (only the first run of a variant
        calls nvcc). A cached cubin the driver refuses (damaged, say) is compiled again."""
        major, minor = self.device.compute_capability()
        build = (kernel_source(source), nvcc_options(defines), f"sm_{major}{minor}")
        try:
            return self.drv.module_from_buffer(cached_cubin(*build))
        except self.drv.Error:
            pass
        try:
            return self.drv.module_from_buffer(cached_cubin(*build, refresh=True))
        except self.drv.Error as exc:
            raise GpuUnavailableError(
                f"-device gpu: the CUDA kernels could not be loaded ({exc})") from None

    # -- device memory ----------------------------------------------------------------------

    def buffer(self, name: str, nbytes: int):
        """A scratch allocation of at least nbytes, reused across calls."""
        held = self.buffers.get(name)
        if held is None or held[1] < nbytes:
            if held is not None:
                self.free(held[0])
            alloc = self.drv.mem_alloc(max(int(nbytes), 8))
            self.buffers[name] = held = (alloc, max(int(nbytes), 8))
        return held[0]

    def upload(self, array: np.ndarray):
        array = np.ascontiguousarray(array)
        alloc = self.drv.mem_alloc(max(array.nbytes, 8))
        if array.nbytes:
            self.drv.memcpy_htod(alloc, array)
        return alloc

    def resident_volume(self, subjects: SubjectBuffer):
        """The device copy of a volume's buffer, copied once and kept under its key."""
        held = self.volumes.get(subjects.key)
        if held is not None:
            return held[0]
        packed = np.ascontiguousarray(subjects.packed, dtype=np.uint8)
        nbytes = int(packed.nbytes)
        budget = self.volume_budget()
        if self.volumes and self._resident_bytes() + nbytes > budget:
            self._dp_settled()  # their memory is needed now: no kernel may still read them
        while self.volumes and self._resident_bytes() + nbytes > budget:
            oldest = next(iter(self.volumes))
            self.volumes.pop(oldest)[0].free()
        with self.times.stage("gpu copy"):
            alloc = self.drv.mem_alloc(nbytes + PADDING)
            self.drv.memset_d8(int(alloc) + nbytes, 0, PADDING)
            self._copy_in(alloc, packed.reshape(-1).view(np.uint8))
        self.volumes[subjects.key] = (alloc, nbytes)
        return alloc

    def _copy_in(self, alloc, data: np.ndarray) -> None:
        """Host to device in UPLOAD_THREADS shares, each through its lane's two page-locked
        buffers in turn on the lane's stream. Pinning the whole volume would cost more than
        the copy itself, and one thread filling the page-locked buffers is slower than the
        bus. Runs with
        the context pushed and the lock held, so the lanes serve one volume at a time."""
        steps = np.arange(-(-data.size // UPLOAD_STEP))
        shares = [share for share in np.array_split(steps, UPLOAD_THREADS) if share.size]
        lanes = self._upload_lanes()

        def copy_share(lane, share):
            self.context.push()
            try:
                self._copy_steps(alloc, data, share.tolist(), *lane)
            finally:
                self.drv.Context.pop()

        if len(shares) <= 1:
            for share in shares:
                self._copy_steps(alloc, data, share.tolist(), *lanes[0])
            return
        with ThreadPoolExecutor(len(shares), thread_name_prefix="gblastn-upload") as pool:
            list(pool.map(copy_share, lanes, shares))

    def _upload_lanes(self) -> list:
        """The copies' streams and page-locked buffers, made once (again only if
        UPLOAD_THREADS or UPLOAD_STEP change): made for each volume, page-locking the
        buffers would take longer than the copy. The driver locks the pages without the GIL
        where it can be called directly."""
        shape = (UPLOAD_THREADS, UPLOAD_STEP)
        if self.upload_lanes is None or self.upload_lanes[0] != shape:
            self._free_upload_lanes()
            lanes, frees = [], []
            for _ in range(UPLOAD_THREADS):
                staging = []
                for _ in range(2):
                    buffer, free = self._page_locked(UPLOAD_STEP)
                    staging.append(buffer)
                    frees.append(free)
                lanes.append((self.drv.Stream(), staging))
            self.upload_lanes = (shape, lanes, frees)
        return self.upload_lanes[1]

    def _page_locked(self, size: int) -> tuple:
        """A page-locked uint8 buffer and the call that frees it."""
        made = page_locked_buffer(size)
        if made is not None:
            return made
        buffer = self.drv.pagelocked_empty(size, np.uint8)
        return buffer, buffer.base.free

    def staged(self, shape: tuple, taken: list) -> np.ndarray:
        """An int32 array of `shape` in page-locked memory, for a result to come back into
        (pageable copies from the device run at a fraction of the bus's speed, while the
        device is held); its buffer goes on `taken`, to be given back (give_back_staging)
        once the result has been copied out, after the device is let go."""
        nbytes = 4 * int(np.prod(shape))
        with self.staging_lock:
            fits = [k for k, (buffer, _) in enumerate(self.staging) if buffer.size >= nbytes]
            held = self.staging.pop(min(fits, key=lambda k: self.staging[k][0].size)) \
                if fits else None
        if held is None:
            held = self._page_locked(max(nbytes, STAGING_MIN_BYTES))
        taken.append(held)
        return held[0][:nbytes].view(np.int32).reshape(shape)

    def give_back_staging(self, taken: list) -> None:
        """Return staging buffers to the pool, which keeps the STAGING_KEPT largest: more
        are out only while many calls copy their results out at once, and page-locked
        memory counts in full against the process."""
        with self.staging_lock:
            self.staging.extend(taken)
            self.staging.sort(key=lambda held: held[0].size)
            surplus = self.staging[:-STAGING_KEPT]
            del self.staging[:-STAGING_KEPT]
        taken.clear()
        for _, free in surplus:
            free()

    def _free_upload_lanes(self) -> None:
        for free in self.upload_lanes[2] if self.upload_lanes else ():
            free()
        self.upload_lanes = None

    def volume_budget(self) -> int:
        """The device memory volumes may take: a share of the device's, at most
        GBLASTN_GPU_MEMORY bytes where that is set."""
        with self:  # asked from any thread (a cluster's worker answers from its own)
            share = int(self.drv.mem_get_info()[1] * self.memory_fraction)
        return share if self.memory_cap is None else min(share, self.memory_cap)

    def _resident_bytes(self) -> int:
        return sum(held[1] for held in self.volumes.values())

    def _copy_steps(self, alloc, data: np.ndarray, steps: list, stream, staging: list) -> None:
        """The copies of `steps` (UPLOAD_STEP-byte pieces of data) through the two page-locked
        buffers `staging` in turn, on `stream`; returns when they have all arrived."""
        done = [None, None]
        for k, step in enumerate(steps):
            part = data[step * UPLOAD_STEP:(step + 1) * UPLOAD_STEP]
            slot = k % 2
            if done[slot] is not None:
                done[slot].synchronize()  # that buffer's previous copy has left
            staging[slot][:part.size] = part
            self.drv.memcpy_htod_async(int(alloc) + step * UPLOAD_STEP, staging[slot][:part.size],
                                       stream)
            done[slot] = self.drv.Event()
            done[slot].record(stream)
        stream.synchronize()

    def resident_address(self, subjects: SubjectBuffer) -> int | None:
        """The device address of a volume's buffer if it is resident (nothing is copied)."""
        held = self.volumes.get(subjects.key)
        return int(held[0]) if held is not None else None

    def preload(self, subjects: SubjectBuffer) -> bool:
        """Copy a volume to the GPU ahead of its first scan, if it fits beside the volumes
        already there (a preload never evicts one). Returns whether it is resident."""
        with self:
            if subjects.key not in self.volumes and \
                    self._resident_bytes() + subjects.packed.nbytes > self.volume_budget():
                return False
            self.resident_volume(subjects)
        return True

    def resident_table(self, table: LookupTable, kernels) -> dict:
        """The device copies of a table's arrays, kept until the next table's are made; a
        megablast table's 4^w heads (each template's) are made on the device (`kernels`:
        seeds.cu's module)."""
        if self.table_key is not None and self.table_key[0] is table:
            return self.table_arrays
        for alloc in self.table_arrays.values():
            self.free(alloc)
        self.table_arrays, self.table_key = {}, None
        arrays = {
            "backbone": np.ascontiguousarray(table.backbone, dtype=np.int16),
            "overflow": np.ascontiguousarray(table.overflow, dtype=np.int16),
            "next_pos": np.ascontiguousarray(table.next_pos, dtype=np.int32),
            "next_pos2": np.ascontiguousarray(table.next_pos2, dtype=np.int32),
            "cell_start": np.ascontiguousarray(table.cell_start, dtype=np.int32),
            "offsets": np.ascontiguousarray(table.offsets, dtype=np.int32),
            "pv": np.ascontiguousarray(table.pv, dtype=np.uint32),
            "sequence": np.ascontiguousarray(table.sequence, dtype=np.uint8),
            "context_offset": np.ascontiguousarray(table.context_offset, dtype=np.int32),
            "context_length": np.ascontiguousarray(table.context_length, dtype=np.int32),
        }
        self.table_arrays = {name: self.upload(a) for name, a in arrays.items()}
        self.table_arrays["hashtable"] = self._device_hashtable(
            table.heads, table.present, table.present_rank, kernels)
        self.table_arrays["hashtable2"] = self._device_hashtable(
            table.heads2, table.present2, table.present_rank2, kernels)
        self.table_key = (table,)
        return self.table_arrays

    def _device_hashtable(self, heads, present, present_rank, kernels):
        """BLAST's 4^w array of a megablast table's chain heads, spread on the device from
        the heads of the words present (a fifth of the copy for a large batch's table);
        empty for the other kinds, and for a discontiguous table's missing second template
        (gblastn.lookup's layouts)."""
        words = int(present_rank.size)
        if not words:
            return self.upload(np.zeros(0, dtype=np.int32))
        hashtable = self.drv.mem_alloc(4 * (words << 5))
        self.drv.memset_d32(hashtable, 0, words << 5)
        parts = [self.upload(np.ascontiguousarray(a))
                 for a in (heads, present, present_rank)]
        try:
            kernels.get_function("scatter_heads")(*parts, np.int64(words), hashtable,
                                                  block=(256, 1, 1),
                                                  grid=((words + 255) // 256, 1))
        finally:
            for part in parts:
                self.free(part)
        return hashtable

    def resident_query_words(self, batch) -> tuple:
        """The device copies of a batch's packed query words (bases, ambiguity bits), each
        with its WORD_PAD bytes on both sides."""
        if self.words_key is not None and self.words_key[0] is batch:
            return self.words_arrays
        for alloc in self.words_arrays:
            self.free(alloc)
        self.words_arrays = tuple(self.upload(words) for words in batch.query_words)
        self.words_key = (batch,)
        return self.words_arrays

    def resident_query_letters(self, batch):
        """The device copy of a batch's concatenated query letters (blastna codes)."""
        if self.letters_key is not None and self.letters_key[0] is batch:
            return self.letters_array
        if self.letters_array is not None:
            self.free(self.letters_array)
        self.letters_array = self.upload(np.ascontiguousarray(batch.sequence, dtype=np.uint8))
        self.letters_key = (batch,)
        return self.letters_array

    def release(self) -> None:
        """Free every device allocation this backend holds."""
        with self:
            for held in self.volumes.values():
                held[0].free()
            for alloc in (*self.table_arrays.values(), *self.words_arrays):
                alloc.free()
            if self.letters_array is not None:
                self.letters_array.free()
            for alloc, _ in self.buffers.values():
                alloc.free()
            self._free_upload_lanes()
            with self.staging_lock:
                for _, free in self.staging:
                    free()
                self.staging = []
            self.volumes, self.table_arrays, self.buffers, self.table_key = {}, {}, {}, None
            self.words_key, self.words_arrays = None, ()
            self.letters_key, self.letters_array = None, None

    # -- the contract -----------------------------------------------------------------------

    def find_seeds(self, table: LookupTable, subjects: SubjectBuffer,
                   chunk_byte_offset: np.ndarray, chunk_length: np.ndarray,
                   num_threads: int = 1, spread=None) -> Seeds:
        """Seeds identical to ``gblastn.scan.cpu.find_seeds`` (num_threads and spread are
        ignored)."""
        return self._seeds(table, subjects, chunk_byte_offset, chunk_length, None)[0]

    def extended_seeds(self, table: LookupTable, subjects: SubjectBuffer,
                       chunk_byte_offset: np.ndarray, chunk_length: np.ndarray,
                       rules: UngappedRules) -> tuple:
        """find_seeds' seeds, and every seed's ungapped extension (cuda/ungapped.cu) as
        ungapped.extend_chunks would make it under `rules`: (Seeds, UngappedAhead)."""
        return self._seeds(table, subjects, chunk_byte_offset, chunk_length, rules)

    def initial_hits(self, table: LookupTable, subjects: SubjectBuffer,
                     chunk_byte_offset: np.ndarray, chunk_length: np.ndarray,
                     rules: UngappedRules, walk: DiagonalPass) -> tuple:
        """The seeds extended as extended_seeds extends them, and put through the ungapped
        stage's in-order pass on the device (cuda/diagonals.cu): the initial hits
        ungapped.extend_seeds finds, in its order (sort_initial_hits, made on the device),
        and the number of seeds. `walk` carries the diagonal hash's chains from call to call;
        the calls of one batch must come in database order."""
        return self._seeds(table, subjects, chunk_byte_offset, chunk_length, rules, walk)

    def _seeds(self, table, subjects, chunk_byte_offset, chunk_length, rules,
               walk=None) -> tuple:
        chunk_byte_offset = np.ascontiguousarray(chunk_byte_offset, dtype=np.int64)
        chunk_length = np.ascontiguousarray(chunk_length, dtype=np.int32)
        probes = probe_counts(chunk_length, table.width, table.scan_step)
        self.stats = {"hits": 0, "seeds": 0, "hit_grows": 0, "seed_grows": 0}
        if int(probes.sum()) == 0:
            if walk is not None:
                return initial_hits_of_rows(np.zeros((HIT_FIELDS, 0), dtype=np.int32)), 0
            return Seeds.empty(), UngappedAhead(NOTHING_AHEAD)
        # a rank counts the query offsets of all the templates' chains
        templates = max(1, table.template_shift.shape[0])
        rank_bits = max(1, int(templates * table.sequence.size).bit_length())
        max_probes = min(self.max_group_probes, (1 << (63 - rank_bits)) - 1)
        max_chunks = ARRAY_GROUP_SLOTS // walk.diag_len \
            if walk is not None and walk.chains is None else 1 << 62
        groups = launch_groups(probes, max_probes, max_chunks)
        taken = []
        try:
            parts = self._scan_groups(table, subjects, chunk_byte_offset, chunk_length, probes,
                                      rank_bits, groups, rules, walk, taken)
            # the parts are views of page-locked staging buffers, given back below for the
            # next call's results: joining them copies them out (one part too)
            if walk is not None:
                hits = np.concatenate(parts, axis=1)
                return initial_hits_of_rows(hits), self.stats["seeds"]
            seeds = Seeds(*(np.concatenate([p[0][i] for p in parts]) for i in range(SEED_FIELDS)))
            ahead = np.concatenate([p[1] for p in parts], axis=1)
        finally:
            self.give_back_staging(taken)
        return seeds, UngappedAhead(ahead)

    def _scan_groups(self, table, subjects, chunk_byte_offset, chunk_length, probes, rank_bits,
                     groups, rules, walk, taken) -> list:
        """Each launch group's seed rows and their extensions' rows, or its initial hits'
        rows when `walk` is given (staged on `taken`)."""
        with self.held("gpu scan"):
            mod = self.module(variant_defines(table))
            dev_packed = self.resident_volume(subjects)
            tab = self.resident_table(table, mod)
            inputs = [] if rules is None else \
                [self.upload(a.ravel()) for a in (rules.xdrop, rules.reduced_cutoff,
                                                  rules.matrix, rules.score_table)]
            try:
                extend = None if rules is None else \
                    self._ungapped_launch(table, tab, dev_packed, subjects.packed.size, inputs)
                passed = None if walk is None else \
                    lambda rows_dev, ahead_dev, n, first, last: self._diagonal_pass(
                        mod, table, tab, walk, rows_dev, ahead_dev, n, first,
                        chunk_length[first:last], taken)
                return [self._group(mod, table, tab, dev_packed, subjects.packed.size,
                                    chunk_byte_offset[first:last], chunk_length[first:last],
                                    probes[first:last], first, rank_bits, extend, passed, taken)
                        for first, last in groups]
            finally:
                for alloc in inputs:
                    self.free(alloc)

    def _ungapped_launch(self, table, tab, dev_packed, packed_size, rules: list):
        """A function of (device seed rows, their count, the group's first chunk, its chunk
        offsets and lengths on the device) that extends every seed: UNGAPPED_FIELDS int32
        rows on the device. `rules`: UngappedRules' arrays on the device, in its order."""
        kernel = self.module({}, "ungapped.cu").get_function("ungapped_seeds")
        per_context, scoring = rules[:2], rules[2:]

        def extend(rows_dev, n: int, chunk_base: int, d_offset, d_length):
            self.times.count("gpu ungapped extensions", n)
            with self.synchronized("gpu ungapped"):
                out_dev = self.buffer("ungapped_rows", 4 * UNGAPPED_FIELDS * n)
                kernel(rows_dev, np.int64(n), np.int32(chunk_base), d_offset, d_length,
                       dev_packed, np.int64(packed_size), tab["sequence"],
                       np.int64(table.sequence.size), tab["context_offset"],
                       np.int32(table.context_offset.size), *per_context,
                       np.int32(table.word_size), *scoring, out_dev,
                       block=(UNGAPPED_THREADS, 1, 1),
                       grid=((n + UNGAPPED_THREADS - 1) // UNGAPPED_THREADS, 1))
                return out_dev
        return extend

    def _diagonal_pass(self, mod, table, tab, walk: DiagonalPass, rows_dev, ahead_dev, n: int,
                       chunk_base: int, chunk_length: np.ndarray, taken: list) -> np.ndarray:
        """HIT_FIELDS int32 rows (staged on `taken`): the initial hits of a launch group's n
        seeds (rows_dev) given their extensions (ahead_dev), in sort_initial_hits' order
        (cuda/diagonals.cu). The seeds are sorted by their state's group (a counting or
        radix sort) and each group walked by a thread."""
        self.times.count("gpu in-order seeds", n)
        index_bits = max(1, (n - 1).bit_length())
        kernels = self.module(diagonals_defines(), "diagonals.cu")
        with self.synchronized("gpu diagonal sort"):
            if walk.chains is None:
                keys = self._cell_keys(kernels, rows_dev, n, chunk_base, walk.diag_len,
                                       index_bits)
            else:
                keys = self._bucket_keys(kernels, rows_dev, n, index_bits)
        with self.synchronized("gpu diagonal walk"):
            records = self.buffer("walk", 4 * WALK_FIELDS * n)
            cutoff = self.upload(walk.cutoff)
            try:
                kernels.get_function("walk_records")(
                    keys, np.int64(n), np.int32(index_bits), rows_dev, ahead_dev,
                    np.int32(chunk_base), tab["context_offset"],
                    np.int32(table.context_offset.size), cutoff, np.int32(walk.word_size),
                    records, block=(256, 1, 1), grid=((n + 255) // 256, 1))
            finally:
                self.free(cutoff)
            kept = self.buffer("kept", n)
            if walk.chains is None:
                self.drv.memset_d8(kept, 0, n)
                kernels.get_function("walk_array")(
                    keys, np.int64(n), np.int32(index_bits), records, np.int32(walk.window),
                    kept, block=(256, 1, 1), grid=((n + 255) // 256, 1))
            else:
                self._walk_hash(kernels, keys, n, index_bits, records, walk, chunk_length,
                                kept)
        return self._kept_hits(kernels, kept, n, rows_dev, ahead_dev, taken)

    def _cell_keys(self, kernels, rows_dev, n: int, chunk_base: int, diag_len: int,
                   index_bits: int):
        """The seeds' keys (chunk and cell of the diagonal array, seed index) sorted: many
        groups (fewer than ARRAY_GROUP_SLOTS), so a radix sort of the groups' bits (the keys
        come in seed order)."""
        keys = self.buffer("keys", 8 * n)
        order = self.buffer("order", 4 * n)
        kernels.get_function("diagonal_keys")(
            rows_dev, np.int64(n), np.int32(chunk_base), np.int32(0), np.int64(diag_len),
            np.int32(index_bits), keys, order, block=(256, 1, 1),
            grid=((n + 255) // 256, 1))
        group_bits = (ARRAY_GROUP_SLOTS - 1).bit_length()
        self.radix_sort(kernels, keys, order, n, index_bits, index_bits + group_bits)
        return keys

    def radix_sort(self, kernels, keys, values, n: int, low_bit: int, high_bit: int) -> None:
        """n (uint64 key, uint32 value) pairs on the device sorted in place, stably by bits
        [low_bit, high_bit) of their keys (diagonals.cu's digit_counts and digit_scatter,
        RADIX_BITS a pass)."""
        given = keys, values
        blocks = (n + COMPACT_THREADS - 1) // COMPACT_THREADS
        entries = (1 << RADIX_BITS) * blocks
        counts = self.buffer("radix_counts", 8 * (entries + 1))
        spare_keys, spare_values = self.buffer("radix_keys", 8 * n), \
            self.buffer("radix_values", 4 * n)
        launch = {"block": (COMPACT_THREADS, 1, 1), "grid": (blocks, 1)}
        for shift in range(low_bit, high_bit, RADIX_BITS):
            digit = (np.int32(shift), np.int32(min(RADIX_BITS, high_bit - shift)))
            kernels.get_function("digit_counts")(keys, np.int64(n), np.int64(blocks), *digit,
                                                 counts, **launch)
            self._counts_to_starts(kernels, counts, entries)
            kernels.get_function("digit_scatter")(
                keys, values, np.int64(n), np.int64(blocks), *digit, counts, spare_keys,
                spare_values, **launch)
            keys, spare_keys = spare_keys, keys
            values, spare_values = spare_values, values
        if keys is not given[0]:  # an odd number of passes
            self.drv.memcpy_dtod(given[0], keys, 8 * n)
            self.drv.memcpy_dtod(given[1], values, 4 * n)

    def _bucket_keys(self, kernels, rows_dev, n: int, index_bits: int):
        """The seeds' keys (bucket of the diagonal hash, seed index) sorted: HASH_BUCKETS
        groups, so a counting sort."""
        blocks = (n + COMPACT_THREADS - 1) // COMPACT_THREADS
        entries = HASH_BUCKETS * blocks
        counts = self.buffer("bucket_counts", 8 * (entries + 1))
        keys = self.buffer("keys", 8 * n)
        launch = {"block": (COMPACT_THREADS, 1, 1), "grid": (blocks, 1)}
        kernels.get_function("bucket_counts")(rows_dev, np.int64(n), np.int64(blocks), counts,
                                              **launch)
        self._counts_to_starts(kernels, counts, entries)
        kernels.get_function("bucket_scatter")(rows_dev, np.int64(n), np.int64(blocks),
                                               np.int32(index_bits), counts, keys, **launch)
        return keys

    def _counts_to_starts(self, kernels, counts, entries: int) -> None:
        """counts[:entries] (int64 on the device) into their exclusive sums, and their sum
        into counts[entries]: segments of COMPACT_THREADS scanned side by side, then their
        totals in one block."""
        segments = (entries + COMPACT_THREADS - 1) // COMPACT_THREADS
        totals = self.buffer("scan_totals", 8 * (segments + 1))
        kernels.get_function("scan_segments")(counts, np.int64(entries), totals,
                                              block=(COMPACT_THREADS, 1, 1),
                                              grid=(segments, 1))
        kernels.get_function("count_starts")(totals, np.int64(segments),
                                             block=(COMPACT_THREADS, 1, 1), grid=(1, 1))
        kernels.get_function("add_segment_starts")(counts, np.int64(entries), totals,
                                                   block=(256, 1, 1),
                                                   grid=((entries + 255) // 256, 1))

    def _walk_hash(self, kernels, keys, n: int, index_bits: int, records, walk: DiagonalPass,
                   chunk_length: np.ndarray, kept) -> None:
        """walk_hash over the seeds with the batch's chains, which come back updated; a
        chain that outgrows its room has the walk run again with room for more."""
        chains = walk.chains
        offsets, epochs, after = chains.chunk_offsets(chunk_length)
        arrays = [self.upload(offsets), self.upload(epochs)]
        overflow = self.buffer("chain_overflow", 4)
        try:
            while True:
                state = [self.upload(a) for a in (chains.diag, chains.level, chains.saved,
                                                  chains.count, chains.epoch)]
                arrays += state
                self.drv.memset_d8(kept, 0, n)
                self.drv.memset_d32(overflow, 0, 1)
                shared = chains.lanes * chains.capacity * CHAIN_CELL_BYTES
                in_shared = shared <= CHAIN_SHARED_BYTES
                kernels.get_function("walk_hash")(
                    keys, np.int64(n), np.int32(index_bits), records, *arrays[:2],
                    np.int32(walk.window), np.int32(walk.word_size), *state,
                    np.int32(chains.capacity), np.int32(chains.lanes), np.int32(in_shared),
                    overflow, kept, block=(CHAIN_THREADS, 1, 1), grid=(HASH_BUCKETS, 1),
                    shared=shared if in_shared else 0)
                full = np.zeros(1, dtype=np.int32)
                self.drv.memcpy_dtoh(full, overflow)
                if not full[0]:
                    break
                chains.grow()
            for host, device in zip((chains.diag, chains.level, chains.saved, chains.count,
                                     chains.epoch), state):
                self.drv.memcpy_dtoh(host, device)
            chains.offset, chains.resets = after
        finally:
            for alloc in arrays:
                self.free(alloc)

    def _kept_hits(self, kernels, kept, n: int, rows_dev, ahead_dev, taken: list) -> np.ndarray:
        """The kept seeds' hits as HIT_FIELDS int32 rows in sort_initial_hits' order, staged
        on `taken`."""
        blocks = (n + COMPACT_THREADS - 1) // COMPACT_THREADS
        counts = self.buffer("kept_counts", 8 * (blocks + 1))
        kernels.get_function("count_kept")(kept, np.int64(n), counts,
                                           block=(COMPACT_THREADS, 1, 1), grid=(blocks, 1))
        self._counts_to_starts(kernels, counts, blocks)
        total = np.zeros(1, dtype=np.int64)
        self.drv.memcpy_dtoh(total, int(counts) + 8 * blocks)
        found = int(total[0])
        if found == 0:
            return np.zeros((HIT_FIELDS, 0), dtype=np.int32)
        hits_dev = self.buffer("hit_rows", 4 * HIT_FIELDS * found)
        kernels.get_function("write_hits")(kept, np.int64(n), counts, rows_dev, ahead_dev,
                                           hits_dev, np.int64(found),
                                           block=(COMPACT_THREADS, 1, 1), grid=(blocks, 1))
        hits_dev = self._sorted_hits(kernels, hits_dev, found)
        out = self.staged((HIT_FIELDS, found), taken)
        with self.times.stage("gpu hits back"):
            self.drv.memcpy_dtoh(out, hits_dev)
        return out

    def _descending_order(self, values, n: int, largest: int):
        """The order of n non-negative int32 values on the device (none above `largest`),
        the largest first, equal ones in index order: dynprog.cu's threads take the hits
        with the highest ungapped scores first, the likeliest to extend longest, so that the
        threads of a warp take about as long. A uint32 buffer of the device."""
        kernels = self.module(diagonals_defines(), "diagonals.cu")
        # its own buffers: the order is read by the DP kernel while the scans go on
        keys, order = self.buffer("dp_keys", 8 * n), self.buffer("dp_order", 4 * n)
        launch = {"block": (256, 1, 1), "grid": ((n + 255) // 256, 1)}
        bits = max(1, largest.bit_length())
        kernels.get_function("identity_order")(order, np.int64(n), **launch)
        kernels.get_function("hit_sort_keys")(values, np.int64(n), np.int32(0), np.int32(1),
                                              np.int32(bits), order, keys, **launch)
        self.radix_sort(kernels, keys, order, n, 0, bits)
        return order

    def _sorted_hits(self, kernels, hits_dev, n: int):
        """The n hits' HIT_FIELDS int32 rows (in seed order) in ungapped.sort_initial_hits'
        order: stable radix sorts by its keys, the least significant first (equal hits keep
        seed order, as the host's sort keeps it), each by as many bits as the key's largest
        value needs. Returns the sorted rows' buffer."""
        maxima = self.buffer("hit_maxima", 4 * HIT_FIELDS)
        self.drv.memset_d32(maxima, 0, HIT_FIELDS)
        launch = {"block": (256, 1, 1), "grid": ((n + 255) // 256, 1)}
        kernels.get_function("hit_maxima")(hits_dev, np.int64(n), maxima, **launch)
        largest = np.zeros(HIT_FIELDS, dtype=np.int32)
        self.drv.memcpy_dtoh(largest, maxima)
        keys, order = self.buffer("hit_keys", 8 * n), self.buffer("hit_order", 4 * n)
        kernels.get_function("identity_order")(order, np.int64(n), **launch)
        for field, descending in HIT_SORT_KEYS:
            bits = max(1, int(largest[field]).bit_length())
            kernels.get_function("hit_sort_keys")(hits_dev, np.int64(n), np.int32(field),
                                                  np.int32(descending), np.int32(bits), order,
                                                  keys, **launch)
            self.radix_sort(kernels, keys, order, n, 0, bits)
        sorted_dev = self.buffer("hit_rows_sorted", 4 * HIT_FIELDS * n)
        kernels.get_function("gather_hits")(hits_dev, np.int64(n), order, sorted_dev, **launch)
        return sorted_dev

    def greedy_extensions(self, subjects: SubjectBuffer, chunk_byte_offset, chunk_length,
                          hit_chunk, hit_q_start, hit_s_start, hit_length, hit_context, batch,
                          xdrop: int, reward: int, penalty: int,
                          row_cells: int = GREEDY_ROW_CELLS,
                          max_distance: int = HIT_MAX_DISTANCE) -> np.ndarray:
        """The score-only greedy extensions (linear gap costs) of initial hits in a volume's
        chunks, each as gapped._greedy_from_hit makes it: int64 [n, GAPPED_FIELDS + 1], the
        last column 0 where the hit's band of diagonals outgrew `row_cells` or the search
        `max_distance` (the CPU extends those). xdrop: the raw preliminary X-drop."""
        arrays = [np.ascontiguousarray(a, dtype=np.int32)
                  for a in (hit_q_start, hit_s_start, hit_length, hit_chunk, hit_context)]
        arrays += [np.ascontiguousarray(a, dtype=np.int64)
                   for a in (batch.context_offset, batch.context_length, chunk_byte_offset,
                             chunk_length)]
        if arrays[0].size == 0:
            return np.zeros((0, GAPPED_FIELDS + 1), dtype=np.int64)
        with self.held("gpu greedy"):
            volume = self.resident_volume(subjects)
            scalars = [volume, *_doubled_costs(xdrop, reward, penalty), np.int64(reward),
                       np.int64(penalty), np.int64(max_distance)]
            return self._greedy_launch("greedy_hits", batch, arrays, scalars, GAPPED_FIELDS,
                                       row_cells)

    def dp_extensions(self, subjects: SubjectBuffer, chunk_byte_offset, chunk_length, hits,
                      contexts, batch, matrix: np.ndarray, gap_open: int, gap_extend: int,
                      xdrop: int, budget: int = DP_CELL_BUDGET) -> np.ndarray:
        """The score-only DP extensions (blastn, blastn-short) of a volume's initial hits
        (an InitialHits with their chunks, seeds and `contexts`), each as
        dynprog.prelim_dp_extend makes it: int64 [n, GAPPED_AHEAD_FIELDS], GAPPED_MADE 0
        where the extension's band outgrew dynprog.cu's ring or it took more than `budget`
        cells (the CPU extends those). xdrop: the raw preliminary gapped X-drop. The kernel
        writes the rows as they are returned, so that the host only copies them back."""
        arrays = dp_hit_arrays(hits, contexts, batch, chunk_byte_offset, chunk_length)
        n = int(arrays[0].size)
        if n == 0:
            return np.zeros((0, GAPPED_AHEAD_FIELDS), dtype=np.int64)
        with self.dp_lock:
            inputs = []
            try:
                with self.held("gpu dp"):
                    volume = self.resident_volume(subjects)
                    letters = self.resident_query_letters(batch)
                    kernel = self.module(dp_defines(), "dynprog.cu").get_function("dp_hits")
                    matrix, *costs = dp_costs(matrix, gap_open, gap_extend, xdrop, budget)
                    inputs = [self.upload(a) for a in (*arrays, matrix)]
                    order = self._descending_order(inputs[DP_SCORE_ARGUMENT], n,
                                                   int(arrays[DP_SCORE_ARGUMENT].max()))
                    found = self.buffer("dp_hits_found", 8 * GAPPED_AHEAD_FIELDS * n)
                    cells_dev = self.buffer("dp_hits_cells", 8 * n)
                    stream, queued, ran = self._dp_stream()
                    queued.record()  # after the uploads and the order, on the default stream
                    stream.wait_for_event(queued)
                    kernel(np.int32(n), order, *inputs[:-1], letters, volume, inputs[-1],
                           *costs, found, cells_dev, block=(DP_THREADS, 1, 1),
                           grid=((n + DP_THREADS - 1) // DP_THREADS, 1), stream=stream)
                    ran.record(stream)
                    self.dp_running = True
                self._wait_for(ran)  # the device let go: the next scans run beside the kernel
                with self.held("gpu dp"):
                    out = np.empty((n, GAPPED_AHEAD_FIELDS), dtype=np.int64)
                    self.drv.memcpy_dtoh(out, found)
                    cells = np.empty(n, dtype=np.int64)
                    self.drv.memcpy_dtoh(cells, cells_dev)
                    kernel_seconds = ran.time_since(queued) / 1000
            finally:
                self._dp_ended(inputs)
        self.times.add("gpu dp kernel", kernel_seconds)
        self.times.count("gpu dp extensions", n)
        self.times.count("gpu dp cells", int(cells.sum()))
        return out

    def _dp_stream(self) -> tuple:
        """The DP kernel's stream (it runs beside the default stream's calls, and they
        beside it) and two events (its inputs queued, its kernel run), made once."""
        if self.dp_stream is None:
            self.dp_stream = self.drv.Stream(flags=CU_STREAM_NON_BLOCKING)
            self.dp_events = (self.drv.Event(), self.drv.Event())
        return (self.dp_stream, *self.dp_events)

    def _wait_for(self, event) -> None:
        """Wait for `event` without holding the device (the wait lets go of the GIL)."""
        self.context.push()
        try:
            event.synchronize()
        finally:
            self.drv.Context.pop()

    def _dp_settled(self) -> None:
        """With the device held: wait for a DP kernel running on its own stream, and free
        what waited for it."""
        if not self.dp_running:
            return
        self.dp_events[1].synchronize()
        freed, self.freed_after_dp = self.freed_after_dp, []
        for alloc in freed:
            alloc.free()

    def _dp_ended(self, inputs: list) -> None:
        """The DP's inputs and what was freed while its kernel ran, freed now."""
        with self.lock:
            self.dp_running = False
            if self.retired:
                return
            freed, self.freed_after_dp = [*inputs, *self.freed_after_dp], []
            self.context.push()
            try:
                for alloc in freed:
                    alloc.free()
            finally:
                self.drv.Context.pop()

    def _copied_back(self, found, done, n: int, width: int) -> np.ndarray:
        """A launch's `width` int64 values per item (`found`) and its done flags (`done`,
        uint8), copied back: int64 [n, width + 1]."""
        fields = np.empty((n, width), dtype=np.int64)
        flags = np.empty(n, dtype=np.uint8)
        self.drv.memcpy_dtoh(fields, found)
        self.drv.memcpy_dtoh(flags, done)
        out = np.empty((n, width + 1), dtype=np.int64)
        out[:, :width] = fields
        out[:, width] = flags
        return out

    def greedy_tails(self, rows: np.ndarray, subject_address: np.ndarray,
                     subject_length: np.ndarray, exact: np.ndarray, batch, xdrop: int,
                     reward: int, penalty: int, row_cells: int = GREEDY_ROW_CELLS,
                     max_distance: int = TAIL_MAX_DISTANCE, edit_runs: bool = True) -> tuple:
        """The greedy traceback's searches (linear gap costs) of HSPs (rows of hsp.hsp_rows)
        in resident subjects (device addresses of their packed letters; their letters
        exact[i, 0]:exact[i, 1] are all bases), with their edit scripts. Returns int64
        [n, TAIL_FIELDS + 1], the start point, the best distances right and left, the letters
        read, the extents, the scripts' runs, and 1 where the search was made (0: the CPU
        searches; as greedy_extensions'); and uint32 [n, 2 * SCRIPT_RUNS], the scripts
        (greedy.cu's tail_search; none made without edit_runs). xdrop: the raw final
        X-drop.

        Calls that wait for the device while another runs are made together, in one launch
        when it is free: a launch takes about as long as its longest search, whatever the
        number of searches, so launches one after the other for each job would queue."""
        key = (id(batch), xdrop, reward, penalty, row_cells, max_distance, edit_runs)
        request = _TailRequest(key, (rows, subject_address, subject_length, exact))
        with self.tails_lock:
            self.tails_waiting.append(request)
        with self.held("gpu tails"):
            if not request.finished:
                with self.tails_lock:
                    mine = [r for r in self.tails_waiting if r.key == key]
                    self.tails_waiting = [r for r in self.tails_waiting if r.key != key]
                try:
                    parts = [np.concatenate(columns) for columns in
                             zip(*(r.arrays for r in mine))]
                    ahead, scripts = self._greedy_tails(*parts, batch, xdrop, reward, penalty,
                                                        row_cells, max_distance, edit_runs)
                except BaseException as exc:
                    for r in mine:
                        r.finish(error=exc)
                    raise
                first = 0
                for r in mine:
                    last = first + len(r.arrays[0])
                    r.finish((ahead[first:last], scripts[first:last]))
                    first = last
        return request.outcome()

    def dp_tails(self, rows: np.ndarray, subject_address: np.ndarray,
                 subject_length: np.ndarray, exact: np.ndarray, batch, matrix: np.ndarray,
                 gap_open: int, gap_extend: int, xdrop: int,
                 budget: int = TRACE_CELL_BUDGET) -> tuple:
        """The X-drop DP tracebacks (dynprog.traceback_dp from gapped_start_nucl's start
        point) of HSPs (rows of hsp.hsp_rows) in resident subjects (device addresses of their
        packed letters; their letters exact[i, 0]:exact[i, 1] are all bases). Returns int64
        [n, TRACE_FIELDS + 1], each alignment's start point, score, letters read, extents
        and edit runs, and 1 where it was made (0: the CPU aligns it); and the edit runs,
        uint32 (count << RUN_COUNT_SHIFT | op). xdrop: the raw final X-drop. An alignment
        of more than `budget` cells, or one its HSP's length says will be, is left to the
        CPU (trace_cells)."""
        from ..dynprog import MAX_SUBJECT_OFFSET, MAX_TOTAL_GAPS
        from ..traceback import trace_cells

        exact = np.where((trace_cells(rows, xdrop, gap_extend) > budget)[:, None], 0, exact)
        arrays = dp_trace_arrays(rows, subject_address, subject_length, exact, batch)
        n = int(arrays[1].shape[0])
        if n == 0:
            return np.zeros((0, TRACE_FIELDS + 1), dtype=np.int64), np.zeros(0, dtype=np.uint32)
        runs_size = trace_runs_size(arrays[1])
        with self.dp_lock:
            inputs = []
            try:
                with self.held("gpu tails"):
                    inputs += [self.upload(a) for a in arrays[1:]]
                    inputs.append(self.upload(np.ascontiguousarray(matrix, dtype=np.int32)))
                    letters = self.resident_query_letters(batch)
                    pool_bytes = min(TRACE_POOL_BYTES, self.drv.mem_get_info()[0] // 4)
                    buffers = TraceBuffers(self.buffer("dp_traces_pool", pool_bytes), pool_bytes,
                                           self.buffer("dp_traces_counters", 24),
                                           self.buffer("dp_traces_runs", 4 * runs_size),
                                           runs_size,
                                           self.buffer("dp_traces_found", 8 * TRACE_FIELDS * n),
                                           self.buffer("dp_traces_done", n), n)
                    self.drv.memset_d32(buffers.counters, 0, 6)
                    self.drv.memset_d8(buffers.done, 0, n)
                arguments = (*inputs[:6], letters, inputs[6], np.int32(gap_open),
                             np.int32(gap_extend), np.int32(xdrop),
                             np.int64(MAX_SUBJECT_OFFSET), np.int64(MAX_TOTAL_GAPS),
                             np.int64(budget))
                made = launched_until_made(
                    lambda pending: self._trace_launch(pending, arguments, buffers, inputs),
                    arrays[0])
                with self.held("gpu tails"):
                    out, runs_back = self._traces_back(buffers, n, made)
            finally:
                self._dp_ended(inputs)
        self.times.count("gpu dp tracebacks", n)
        self.times.count("gpu dp tracebacks made", int(out[:, TRACE_FIELDS].sum()))
        return out, runs_back

    def _trace_launch(self, pending: np.ndarray, arguments: tuple, buffers: "TraceBuffers",
                      inputs: list) -> np.ndarray:
        """One launch of dp_traceback.cu's kernel over the HSPs `pending`, with an empty pool,
        on the DP's stream: the device is let go while it runs, so that the next batch's
        scans go on beside it. Returns the done flags of all HSPs."""
        b = buffers
        with self.held("gpu tails"):
            kernel = self.module(trace_defines(), "dp_traceback.cu").get_function("dp_traces")
            blocks = self.device.get_attribute(
                self.drv.device_attribute.MULTIPROCESSOR_COUNT) * TRACE_BLOCKS_PER_SM
            order = self.upload(pending)
            inputs.append(order)  # freed once no launch may read it (_dp_ended)
            self.drv.memset_d32(b.counters, 0, 2)  # an empty pool
            self.drv.memset_d32(int(b.counters) + 16, 0, 2)  # from the first HSP
            stream, queued, ran = self._dp_stream()
            queued.record()  # after the uploads and the counters, on the default stream
            stream.wait_for_event(queued)
            kernel(np.int32(pending.size), order, *arguments, b.pool, np.uint64(b.pool_bytes),
                   b.counters, b.runs, np.uint64(b.runs_size), np.uintp(int(b.counters) + 8),
                   np.uintp(int(b.counters) + 16), b.found, b.done,
                   block=(TRACE_THREADS, 1, 1),
                   grid=(min(blocks, -(-pending.size // TRACE_THREADS)), 1), stream=stream)
            ran.record(stream)
            self.dp_running = True
        self._wait_for(ran)
        with self.held("gpu tails"):
            flags = np.empty(b.hsps, dtype=np.uint8)
            self.drv.memcpy_dtoh(flags, b.done)
            self.times.add("gpu tails kernel", ran.time_since(queued) / 1000)
        return flags

    def _traces_back(self, b: "TraceBuffers", n: int, made: np.ndarray) -> tuple:
        """The launches' alignments (made: their done flags) and edit runs, copied back."""
        out = np.empty((n, TRACE_FIELDS + 1), dtype=np.int64)
        fields = np.empty((n, TRACE_FIELDS), dtype=np.int64)
        self.drv.memcpy_dtoh(fields, b.found)
        out[:, :TRACE_FIELDS] = fields
        out[:, TRACE_FIELDS] = made
        used = np.zeros(3, dtype=np.uint64)
        self.drv.memcpy_dtoh(used, b.counters)
        runs = np.empty(min(int(used[1]), b.runs_size), dtype=np.uint32)
        if runs.size:
            self.drv.memcpy_dtoh(runs, b.runs)
        return out, runs

    def _greedy_tails(self, rows, subject_address, subject_length, exact, batch, xdrop,
                      reward, penalty, row_cells, max_distance, edit_runs) -> tuple:
        """greedy_tails' launch, the device held."""
        from ..dynprog import MAX_SUBJECT_OFFSET, MAX_TOTAL_GAPS

        arrays = [np.ascontiguousarray(rows, dtype=np.int64).reshape(-1, HSP_FIELDS),
                  np.ascontiguousarray(subject_address, dtype=np.uint64),
                  np.ascontiguousarray(subject_length, dtype=np.int64),
                  np.ascontiguousarray(exact, dtype=np.int64).reshape(-1, 2),
                  np.ascontiguousarray(batch.context_offset, dtype=np.int64),
                  np.ascontiguousarray(batch.context_length, dtype=np.int64)]
        n = int(arrays[0].shape[0])
        scripts = np.zeros((n, 2 * SCRIPT_RUNS), dtype=np.uint32)
        if n == 0:
            return np.zeros((0, TAIL_FIELDS + 1), dtype=np.int64), scripts
        blocks = min(-(-n // GREEDY_ITEM_WARPS), TAIL_WARPS // GREEDY_ITEM_WARPS)
        kept_rows = self.buffer("greedy_tails_rows", 4 * STORE_WORDS * blocks * GREEDY_ITEM_WARPS) \
            if edit_runs else np.uintp(0)
        device_scripts = self.buffer("greedy_tails_scripts", scripts.nbytes)
        if edit_runs:
            self.drv.memset_d32(device_scripts, 0, scripts.size)  # words past each script
        scalars = [*_doubled_costs(xdrop, reward, penalty), np.int64(MAX_SUBJECT_OFFSET),
                   np.int64(MAX_TOTAL_GAPS), np.int64(max_distance), kept_rows, device_scripts]
        ahead = self._greedy_launch("greedy_tails", batch, arrays, scalars, TAIL_FIELDS,
                                    row_cells, blocks)
        if edit_runs:
            self.drv.memcpy_dtoh(scripts, device_scripts)
        return ahead, scripts

    def _greedy_launch(self, name: str, batch, arrays: list, scalars: list, width: int,
                       row_cells: int, blocks: int | None = None) -> np.ndarray:
        """One launch of greedy.cu's kernel `name` over the items of `arrays` (a warp each,
        or `blocks` blocks of warps taking them in turn), with the context held: the arrays
        uploaded, then the batch's query words and `scalars` as its arguments. Returns int64
        [n, width + 1]: the kernel's `width` values per item and its done flag."""
        from ..wordrun import WORD_PAD

        n = int(arrays[0].shape[0])
        if n == 0:
            return np.zeros((0, width + 1), dtype=np.int64)
        kernel = self.module(greedy_defines(row_cells), "greedy.cu").get_function(name)
        bases, ambig = self.resident_query_words(batch)
        inputs = [self.upload(a) for a in arrays]
        try:
            found = self.buffer(f"{name}_found", 8 * width * n)
            done = self.buffer(f"{name}_done", n)
            kernel(np.int32(n), *inputs, np.uintp(int(bases) + WORD_PAD),
                   np.uintp(int(ambig) + WORD_PAD), *scalars, found, done,
                   block=(32 * GREEDY_ITEM_WARPS, 1, 1),
                   grid=(blocks or (n + GREEDY_ITEM_WARPS - 1) // GREEDY_ITEM_WARPS, 1))
            return self._copied_back(found, done, n, width)
        finally:
            for alloc in inputs:
                self.free(alloc)

    def _group(self, mod, table, tab, dev_packed, packed_size, byte_offset, length, probes,
               chunk_base, rank_bits, extend, passed, taken):
        """One launch group's seeds as int32 rows, and their ungapped extensions' rows when
        `extend` (_ungapped_launch's function) is given (else none), staged on `taken`; or,
        when `passed` (the in-order pass of the seeds and their extensions) is given, its
        initial hits' rows."""
        none = (np.zeros((SEED_FIELDS, 0), dtype=np.int32), NOTHING_AHEAD)
        if passed is not None:
            none = np.zeros((HIT_FIELDS, 0), dtype=np.int32)
        probe_start = np.zeros(probes.size + 1, dtype=np.int64)
        np.cumsum(probes, out=probe_start[1:])
        total = int(probe_start[-1])
        if total == 0:
            return none
        d_offset = self.upload(byte_offset)
        d_length = self.upload(length)
        d_start = self.upload(probe_start)
        try:
            num_hits = self._scan(mod, tab, dev_packed, d_offset, d_start, probes.size, total)
            if num_hits == 0:
                return none
            num_seeds = self._extend(mod, table, tab, dev_packed, packed_size, d_offset,
                                     d_length, d_start, chunk_base, rank_bits, num_hits)
            if num_seeds == 0:
                return none
            with self.synchronized("gpu seed sort"):
                rows_dev = self._sorted_rows(mod, num_seeds, total, rank_bits)
            if extend is None:
                return self._rows_back(rows_dev, SEED_FIELDS, num_seeds, taken), NOTHING_AHEAD
            ahead_dev = extend(rows_dev, num_seeds, chunk_base, d_offset, d_length)
            if passed is not None:
                return passed(rows_dev, ahead_dev, num_seeds, chunk_base,
                              chunk_base + probes.size)
            return (self._rows_back(rows_dev, SEED_FIELDS, num_seeds, taken),
                    self._rows_back(ahead_dev, UNGAPPED_FIELDS, num_seeds, taken))
        finally:
            for alloc in (d_offset, d_length, d_start):
                self.free(alloc)

    def _scan(self, mod, tab, dev_packed, d_offset, d_start, num_chunks, total) -> int:
        drv = self.drv
        kernel = mod.get_function("scan_probes")
        tile = SCAN_THREADS * PROBES_PER_THREAD
        grid = (total + tile - 1) // tile
        counter = self.buffer("hit_count", 8)
        while True:
            hits = self.buffer("hits", 8 * self.hit_capacity)
            drv.memset_d32(counter, 0, 2)
            kernel(dev_packed, d_offset, d_start, np.int32(num_chunks), np.int64(total),
                   tab["backbone"], tab["pv"], hits, counter, np.uint64(self.hit_capacity),
                   block=(SCAN_THREADS, 1, 1), grid=(grid, 1))
            n = self._read_count(counter)
            if n <= self.hit_capacity:
                self.stats["hits"] += n
                return n
            self.hit_capacity = int(n * 1.25) + 1024
            self.stats["hit_grows"] += 1

    def _extend(self, mod, table, tab, dev_packed, packed_size, d_offset, d_length, d_start,
                chunk_base, rank_bits, num_hits) -> int:
        drv = self.drv
        kernel = mod.get_function("extend_hits")
        counter = self.buffer("seed_count", 8)
        grid = (num_hits + EXTEND_THREADS - 1) // EXTEND_THREADS
        while True:
            cap = self.seed_capacity
            keys = self.buffer("keys", 8 * cap)
            fields = [self.buffer(f"seed_{name}", 4 * cap)
                      for name in ("q", "s", "first", "chunk", "hit")]
            drv.memset_d32(counter, 0, 2)
            kernel(self.buffers["hits"][0], np.uint64(num_hits), dev_packed, np.int64(packed_size),
                   d_offset, d_length, d_start, np.int32(chunk_base),
                   tab["backbone"], tab["overflow"], tab["hashtable"], tab["next_pos"],
                   tab["cell_start"], tab["offsets"], tab["hashtable2"], tab["next_pos2"],
                   tab["pv"], tab["sequence"],
                   np.int32(table.sequence.size), tab["context_offset"], tab["context_length"],
                   np.int32(table.context_offset.size), np.int32(rank_bits),
                   keys, *fields, counter, np.uint64(cap),
                   block=(EXTEND_THREADS, 1, 1), grid=(grid, 1))
            n = self._read_count(counter)
            if n <= cap:
                self.stats["seeds"] += n
                return n
            self.seed_capacity = int(n * 1.25) + 1024
            self.stats["seed_grows"] += 1

    def _read_count(self, counter) -> int:
        out = np.zeros(1, dtype=np.uint64)
        self.drv.memcpy_dtoh(out, counter)
        return int(out[0])

    def _sorted_rows(self, mod, n: int, probes: int, rank_bits: int):
        """Survivors in key order (probe, then rank in the word's list) as int32 rows
        (chunk, q_off, s_off, s_first, hit_s) on the device. A probe's survivors are written
        by one thread in rank order (seeds.cu's extend_hits), so a stable sort by the probe
        number alone puts them in key order."""
        keys = self.buffers["keys"][0]
        order = self.buffer("order", 4 * n)
        mod.get_function("init_order")(order, np.uint64(n), block=(256, 1, 1),
                                       grid=((n + 255) // 256, 1))
        kernels = self.module(diagonals_defines(), "diagonals.cu")
        probe_bits = max(1, (probes - 1).bit_length())
        self.radix_sort(kernels, keys, order, n, rank_bits, rank_bits + probe_bits)
        rows_dev = self.buffer("rows", 4 * SEED_FIELDS * n)
        fields = [self.buffers[f"seed_{name}"][0] for name in ("q", "s", "first", "chunk", "hit")]
        mod.get_function("gather_seeds")(order, np.uint64(n), *fields, rows_dev,
                                         block=(256, 1, 1), grid=((n + 255) // 256, 1))
        return rows_dev

    def _rows_back(self, rows_dev, fields: int, n: int, taken: list) -> np.ndarray:
        """int32 rows [fields, n] of the device, staged on `taken`."""
        rows = self.staged((fields, n), taken)
        with self.times.stage("gpu seeds back"):
            self.drv.memcpy_dtoh(rows, rows_dev)
        return rows


def dp_hit_arrays(hits, contexts, batch, chunk_byte_offset, chunk_length) -> list:
    """dynprog.cu's arrays of the hits, the contexts and the chunks, in its arguments'
    order (the scores at DP_SCORE_ARGUMENT)."""
    arrays = [np.ascontiguousarray(a, dtype=np.int32)
              for a in (hits.q_start, hits.s_start, hits.length, hits.score, hits.seed_q,
                        hits.seed_s, hits.chunk, contexts)]
    return arrays + [np.ascontiguousarray(a, dtype=np.int64)
                     for a in (batch.context_offset, batch.context_length, chunk_byte_offset,
                               chunk_length)]


def dp_trace_arrays(rows, subject_address, subject_length, exact, batch) -> list:
    """dp_traceback.cu's arrays of the HSPs in its arguments' order: the order it takes them
    in (the longest first: a launch lasts as long as its longest alignment, and the threads
    that end early take the short ones), the HSP rows, their subjects, the letters known to
    be bases, the contexts."""
    rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1, HSP_FIELDS)
    order = np.argsort(rows[:, HSP_Q_START] - rows[:, HSP_Q_END], kind="stable")
    return [order.astype(np.int32), rows,
            np.ascontiguousarray(subject_address, dtype=np.uint64),
            np.ascontiguousarray(subject_length, dtype=np.int64),
            np.ascontiguousarray(exact, dtype=np.int64).reshape(-1, 2),
            np.ascontiguousarray(batch.context_offset, dtype=np.int64),
            np.ascontiguousarray(batch.context_length, dtype=np.int64)]


@dataclass(frozen=True)
class TraceBuffers:
    """dp_traceback.cu's device buffers for one call of dp_tails: the cells' pool, the
    counters (the pool's bytes taken, the runs taken, the next HSP), the runs, and a row of
    found values and a done flag for each of its HSPs."""

    pool: object
    pool_bytes: int
    counters: object
    runs: object
    runs_size: int
    found: object
    done: object
    hsps: int


def launched_until_made(launch, order: np.ndarray, launches: int = TRACE_LAUNCHES) -> np.ndarray:
    """The done flags of dp_traceback.cu's HSPs (TRACE_MADE or TRACE_NOT_MADE): `launch(pending)`
    runs the kernel over the HSPs `pending` (int32 indices, the longest first) with an
    empty pool, and returns the flags of all. The first launch's threads each keep the cells
    of one of the longest alignments at once, which can spend the pool: those left for
    want of memory go again, fewer at a time, while launches make some, then fall to the
    CPU."""
    pending = order
    for _ in range(launches):
        flags = launch(pending).copy()
        left = pending[flags[pending] == TRACE_NO_ROOM]
        if not left.size or not (flags[pending] == TRACE_MADE).any():
            break
        pending = left
    flags[flags == TRACE_NO_ROOM] = TRACE_NOT_MADE
    return flags


def trace_runs_size(rows: np.ndarray) -> int:
    """Room for the tracebacks' edit runs: a run per query letter of each preliminary HSP and
    a few more (an alignment whose runs find no room is left to the CPU)."""
    return int((rows[:, HSP_Q_END] - rows[:, HSP_Q_START]).sum()) + 64 * rows.shape[0] + (1 << 16)


def dp_costs(matrix: np.ndarray, gap_open: int, gap_extend: int, xdrop: int,
             budget: int) -> tuple:
    """dynprog.cu's scoring arguments: the 16 x 16 blastna matrix, the gap costs, the raw
    X-drop and the cell budget."""
    return (np.ascontiguousarray(matrix, dtype=np.int32), np.int32(gap_open),
            np.int32(gap_extend), np.int32(xdrop), np.int64(budget))


def _doubled_costs(xdrop: int, reward: int, penalty: int) -> list:
    """The greedy kernels' X-drop, match and mismatch costs: greedy_one_way's, doubled for an
    odd reward."""
    factor = 2 if reward % 2 == 1 else 1
    return [np.int64(factor * xdrop), np.int64(factor * reward), np.int64(-factor * penalty)]


_BACKENDS = {}
_BACKENDS_LOCK = threading.Lock()
_RETIRED = []  # retired backends, never freed (see GpuBackend.retire)


def backend_for(gpu_id: int = 0, times: StageTimes | None = None) -> GpuBackend:
    """One backend per device per process (it owns the resident volumes); the one made
    first counts its work in `times`."""
    with _BACKENDS_LOCK:
        if gpu_id not in _BACKENDS:
            _BACKENDS[gpu_id] = GpuBackend(gpu_id, times=times)
        return _BACKENDS[gpu_id]
