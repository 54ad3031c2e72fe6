"""Host-to-device copy of database volumes, measured alone and beside a thread running Python
(as the search's query setup and warm-up do while the volumes are copied):

* the backend's copy as configured (`GpuBackend.resident_volume`);
* copies through page-locked staging buffers (lanes of two UPLOAD_STEP buffers, one thread
  and one stream per lane; Python runs between the steps) for several lane counts and steps;
* plain driver copies from the volume's pageable memory, one call per thread (ctypes lets
  go of the GIL for the whole call);
* one copy from page-locked memory (the bus's speed; page-locking a volume costs more).

    python3 bench/gpu_upload.py [--volume-mb 680] [--volumes 3] [--repeats 3]

Each variant copies `--volumes` volumes of `--volume-mb` MB (synth 8G's volumes are about
680 MB) one after the other, as a search does. Reports the first volume's time (which pays
for any set-up), the others' median, its GB/s, and the others' median beside busy Python.
"""

import argparse
import ctypes
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gblastn.scan import gpu as G  # noqa: E402
from gblastn.scan.backend import SubjectBuffer  # noqa: E402

STAGED = [(lanes, step_mb) for lanes in (4, 8) for step_mb in (4, 8)]
DIRECT_THREADS = (1, 2, 4, 8)


def fresh_volume(nbytes: int, fill_threads: int = 8) -> np.ndarray:
    """A volume-sized buffer in fresh memory, filled in parallel as the database load does."""
    volume = np.empty(nbytes, dtype=np.uint8)
    cuts = [nbytes * k // fill_threads for k in range(fill_threads + 1)]

    def fill(k):
        volume[cuts[k]:cuts[k + 1]] = k + 1

    with ThreadPoolExecutor(fill_threads) as pool:
        list(pool.map(fill, range(fill_threads)))
    return volume


class BusyPython:
    """A thread that runs Python until stopped (it takes the GIL whenever it may)."""

    def __enter__(self):
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()
        return self

    def _spin(self):
        while not self.stop.is_set():
            sum(range(1000))

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def backend_copies(volumes: list, busy: bool, staged=None) -> list:
    """Copies by a fresh backend's resident_volume; `staged` = (lanes, step MB) sets the
    backend's UPLOAD_THREADS and UPLOAD_STEP for the run."""
    saved = (G.UPLOAD_THREADS, G.UPLOAD_STEP)
    if staged is not None:
        G.UPLOAD_THREADS, G.UPLOAD_STEP = staged[0], staged[1] << 20
    backend = G.GpuBackend()
    times = []
    try:
        for volume in volumes:
            subjects = SubjectBuffer(volume, np.array([0, volume.size], dtype=np.int64))
            with backend, (BusyPython() if busy else _Nothing()):
                start = time.perf_counter()
                backend.resident_volume(subjects)
                times.append(time.perf_counter() - start)
    finally:
        backend.release()
        G.UPLOAD_THREADS, G.UPLOAD_STEP = saved
    return times


def direct_copies(backend, volumes: list, threads: int, busy: bool) -> list:
    """cuMemcpyHtoD from each volume's own memory, one call per thread share."""
    copy = ctypes.CDLL("libcuda.so.1").cuMemcpyHtoD_v2
    copy.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    copy.restype = ctypes.c_int
    with backend:
        return [_direct_copy(backend, copy, volume, threads, busy) for volume in volumes]


def _direct_copy(backend, copy, volume: np.ndarray, threads: int, busy: bool) -> float:
    drv = backend.drv
    cuts = [volume.size * k // threads for k in range(threads + 1)]
    target = drv.mem_alloc(volume.size)

    def share(k):
        backend.context.push()
        try:
            status = copy(int(target) + cuts[k], volume.ctypes.data + cuts[k],
                          cuts[k + 1] - cuts[k])
        finally:
            drv.Context.pop()
        if status != 0:
            raise RuntimeError(f"cuMemcpyHtoD failed ({status})")

    with BusyPython() if busy else _Nothing(), ThreadPoolExecutor(threads) as pool:
        start = time.perf_counter()
        list(pool.map(share, range(threads)))
        seconds = time.perf_counter() - start
    target.free()
    return seconds


def page_locked_copies(drv, volumes: list, busy: bool) -> list:
    times = []
    for volume in volumes:
        source = drv.pagelocked_empty(volume.size, np.uint8)
        source[:] = volume
        target = drv.mem_alloc(volume.size)
        with BusyPython() if busy else _Nothing():
            start = time.perf_counter()
            drv.memcpy_htod(target, source)
            times.append(time.perf_counter() - start)
        target.free()
        source.base.free()
    return times


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def best(runs: list) -> list:
    return min(runs, key=sum)


def report(name: str, quiet: list, busy: list, nbytes: int) -> None:
    median = float(np.median(quiet[1:] or quiet))
    busy_median = float(np.median(busy[1:] or busy))
    print(f"| {name} | {quiet[0] * 1e3:.0f} | {median * 1e3:.0f} | {nbytes / median / 1e9:.1f} "
          f"| {busy_median * 1e3:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--volume-mb", type=int, default=680)
    parser.add_argument("--volumes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sys.setswitchinterval(0.001)  # as the search sets it
    nbytes = args.volume_mb << 20
    volumes = [fresh_volume(nbytes) for _ in range(args.volumes)]
    repeats = range(args.repeats)

    def measure(copies):
        return best([copies(False) for _ in repeats]), best([copies(True) for _ in repeats])

    backend = G.GpuBackend()  # the context, for the plain copies
    print(f"{args.volumes} volumes of {args.volume_mb} MB, best of {args.repeats} runs; the "
          f"backend: {G.UPLOAD_THREADS} lanes of {G.UPLOAD_STEP >> 20} MB steps")
    print("| copy | first volume (ms) | next volumes, median (ms) | GB/s "
          "| next volumes beside busy Python (ms) |")
    print("|---|---|---|---|---|")
    report("the backend as configured", *measure(lambda busy: backend_copies(volumes, busy)),
           nbytes)
    for lanes, step_mb in STAGED:
        report(f"staged, {lanes} lanes, {step_mb} MB steps",
               *measure(lambda busy: backend_copies(volumes, busy, (lanes, step_mb))), nbytes)
    for threads in DIRECT_THREADS:
        report(f"direct from pageable memory, {threads} threads",
               *measure(lambda busy: direct_copies(backend, volumes, threads, busy)), nbytes)
    with backend:
        report("one copy from page-locked memory",
               *measure(lambda busy: page_locked_copies(backend.drv, volumes, busy)), nbytes)


if __name__ == "__main__":
    main()
