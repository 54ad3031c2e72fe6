"""GPU scan throughput (subject bases per second) on a synthetic >= 4 Gbp volume made on the
device, beside a device-to-device copy of the same buffer measured in the same run.

    python3 bench/gpu_scan.py [--gbases 4] [--repeats 10]

Part 1 times the scan kernel alone for several kernel variants (threads per block, probes
per thread, per-warp or per-block flush) on a 12-letter megablast table probed every 16 and
every 4 bases (the G-BLASTN reference points), and on the tables the tasks build. Part 2
times the whole find_seeds (scan, expand + mini-extension, sort, download) on the same
volume. Medians of CUDA-event timings after a warm-up.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gblastn.lookup import build_lookup  # noqa: E402
from gblastn.options import make_options  # noqa: E402
from gblastn.pools import on_threads  # noqa: E402
from gblastn.query import Query, build_batch  # noqa: E402
from gblastn.scan import gpu as G  # noqa: E402

FILL = r"""
extern "C" __global__ void fill_random(unsigned* out, unsigned long long n, unsigned seed) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        unsigned long long z = (i + seed) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        out[i] = (unsigned)(z ^ (z >> 31));
    }
}
"""


def table_for(task, qlen, seed=1, **kw):
    rng = np.random.default_rng(seed)
    options = make_options(task, dust="no", **kw)
    q = Query("q", "", rng.integers(0, 4, qlen).astype(np.uint8), np.zeros(qlen, bool))
    return build_lookup(build_batch([q], options), options)


def median_ms(drv, fn, repeats):
    fn()
    drv.Context.synchronize()
    times = []
    for _ in range(repeats):
        a, b = drv.Event(), drv.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(b.time_since(a))
    return float(np.median(times)), float(np.min(times)), float(np.max(times))


def many_short(backend, tables, count=100_000):
    """find_seeds on 100,000 sequences of 50-500 b: GPU against the CPU backend."""
    from gblastn.alphabet import pack_2bit
    from gblastn.engine import subject_chunks
    from gblastn.scan import cpu
    from gblastn.scan.backend import SubjectBuffer
    import os
    rng = np.random.default_rng(3)
    lengths = rng.integers(50, 501, count)
    padded = (lengths + 3) // 4 * 4
    packed = pack_2bit(rng.integers(0, 4, int(padded.sum())).astype(np.uint8))
    offset = np.zeros(count, dtype=np.int64)
    np.cumsum(padded[:-1] // 4, out=offset[1:])
    chunks = subject_chunks(lengths, offset)
    subjects = SubjectBuffer(packed, np.append(offset, packed.size))
    threads = os.cpu_count()
    print(f"\n{count} sequences, {lengths.sum() / 1e6:.1f} Mbases: find_seeds, GPU vs CPU "
          f"({threads} threads)")
    for name, table in tables.items():
        backend.find_seeds(table, subjects, chunks.byte_offset, chunks.length)
        t0 = time.perf_counter()
        got = backend.find_seeds(table, subjects, chunks.byte_offset, chunks.length)
        t_gpu = time.perf_counter() - t0
        cpu.find_seeds(table, packed[:1000], chunks.byte_offset[:1], chunks.length[:1])
        t0 = time.perf_counter()
        want = cpu.find_seeds(table, packed, chunks.byte_offset, chunks.length, threads,
                              on_threads(threads))
        t_cpu = time.perf_counter() - t0
        print(f"{name:34} gpu {t_gpu * 1e3:8.1f} ms  cpu {t_cpu * 1e3:8.1f} ms  "
              f"seeds {len(got):>9}  same {got.equals(want)}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gbases", type=float, default=4.0)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--skip-e2e", action="store_true")
    args = ap.parse_args()

    backend = G.backend_for(0)
    drv = backend.drv
    from pycuda.compiler import SourceModule
    rows = []
    with backend:
        bases = int(args.gbases * 1e9) // 16 * 16
        nbytes = bases // 4
        dev = drv.mem_alloc(nbytes + G.PADDING)
        drv.memset_d8(dev, 0, nbytes + G.PADDING)
        fill = SourceModule(FILL, no_extern_c=True).get_function("fill_random")
        fill(dev, np.uint64(nbytes // 4), np.uint32(12345), block=(256, 1, 1), grid=(4096, 1))
        copy_dst = drv.mem_alloc(nbytes)
        ms, lo, hi = median_ms(drv, lambda: drv.memcpy_dtod(copy_dst, dev, nbytes), args.repeats)
        print(f"device-to-device copy of {nbytes / 1e9:.2f} GB: {ms:.3f} ms "
              f"({2 * nbytes / ms / 1e9:.2f} TB/s read+write)", flush=True)
        copy_dst.free()

        # chunks of 5,000,000 letters, as BLAST cuts long subjects (no overlap needed here)
        chunk_letters = 5_000_000
        n_chunks = (bases + chunk_letters - 1) // chunk_letters
        length = np.full(n_chunks, chunk_letters, dtype=np.int32)
        length[-1] = bases - chunk_letters * (n_chunks - 1)
        byte_offset = np.arange(n_chunks, dtype=np.int64) * (chunk_letters // 4)
        d_offset = backend.upload(byte_offset)

        tables = {
            "mb w12 (megablast 160 kb query)": table_for("megablast", 160_000),
            "mb w11 (megablast 10 kb query)": table_for("megablast", 10_000),
            "small w8 (megablast 2 kb query)": table_for("megablast", 2_000),
            "small w8 (blastn 600 b query)": table_for("blastn", 600),
        }
        mb12 = tables["mb w12 (megablast 160 kb query)"]
        mb11 = tables["mb w11 (megablast 10 kb query)"]
        variants = []
        for step in (16, 4):
            # (threads, probes per thread, flush mode, block buffer slots)
            for threads, ppt, warp, slots in ((256, 8, 1, 2), (256, 8, 0, 2), (256, 4, 0, 2),
                                              (128, 4, 0, 4), (256, 4, 2, 2), (128, 4, 2, 2),
                                              (256, 8, 2, 2), (128, 8, 2, 2), (512, 2, 2, 2),
                                              (256, 2, 2, 2)):
                variants.append((f"mb w12 dense pv, step {step}", mb12, step, threads, ppt,
                                 warp, slots))
            variants.append((f"mb w11 sparse pv, step {step}", mb11, step, G.SCAN_THREADS,
                             G.PROBES_PER_THREAD, G.FLUSH_MODE, G.FLUSH_SLOTS))
        for name, table in tables.items():
            variants.append((name, table, table.scan_step, G.SCAN_THREADS,
                             G.PROBES_PER_THREAD, G.FLUSH_MODE, G.FLUSH_SLOTS))

        print(f"\nscan kernel alone, {bases / 1e9:.2f} Gbases in {n_chunks} chunks, "
              f"median of {args.repeats}", flush=True)
        header = (f"{'table':34} {'step':>4} {'thr':>4} {'ppt':>4} {'flush':>7} "
                  f"{'ms':>8} {'Tbases/s':>9} {'GB/s':>7} {'hits':>11}")
        print(header)
        for name, table, step, threads, ppt, warp, slots in variants:
            defines = G.variant_defines(table, SCAN_STEP=step, SCAN_THREADS=threads,
                                        PROBES_PER_THREAD=ppt, FLUSH_MODE=warp,
                                        FLUSH_SLOTS=slots)
            mod = backend.module(defines)
            tab = backend.resident_table(table)
            probes = G.probe_counts(length, table.width, step)
            start = np.zeros(n_chunks + 1, dtype=np.int64)
            np.cumsum(probes, out=start[1:])
            d_start = backend.upload(start)
            total = int(start[-1])
            kernel = mod.get_function("scan_probes")
            counter = backend.buffer("hit_count", 8)
            cap = 1 << 29
            hits = backend.buffer("hits", 8 * cap)
            grid = (total + threads * ppt - 1) // (threads * ppt)

            def run():
                drv.memset_d32(counter, 0, 2)
                kernel(dev, d_offset, d_start, np.int32(n_chunks), np.int64(total), tab["backbone"],
                       tab["pv"], hits, counter, np.uint64(cap), block=(threads, 1, 1),
                       grid=(grid, 1))

            ms, lo, hi = median_ms(drv, run, args.repeats)
            n = backend._read_count(counter)
            d_start.free()
            flush = {0: f"block/{slots}", 1: "warp", 2: "tile"}[warp]
            line = (f"{name:34} {step:>4} {threads:>4} {ppt:>4} {flush:>7} "
                    f"{ms:8.3f} {bases / ms / 1e9:9.3f} {nbytes / ms / 1e6:7.0f} {n:>11}")
            print(line, flush=True)
            rows.append(line)

        if not args.skip_e2e:
            # the whole find_seeds on the resident synthetic volume
            from gblastn.scan.backend import SubjectBuffer

            # never touched: stands for the volume, resident as `dev`
            host = SubjectBuffer(np.empty(nbytes, dtype=np.uint8), np.array([0, nbytes]))
            backend.volumes[host.key] = (dev, nbytes)
            print("\nfind_seeds end to end (scan, expand + mini-extension, sort, download)")
            print(f"{'table':34} {'s':>7} {'Gbases/s':>9} {'hits':>11} {'seeds':>10}")
            for name, table in tables.items():
                backend.find_seeds(table, host, byte_offset, length)
                t0 = time.perf_counter()
                seeds = backend.find_seeds(table, host, byte_offset, length)
                dt = time.perf_counter() - t0
                print(f"{name:34} {dt:7.3f} {bases / dt / 1e9:9.1f} {backend.stats['hits']:>11} "
                      f"{len(seeds):>10}", flush=True)
                # host sort of the same keys, for comparison with the GPU's radix sort
                keys = np.random.default_rng(0).permutation(len(seeds)).astype(np.uint64)
                t0 = time.perf_counter()
                np.argsort(keys)
                print(f"{'':34} host argsort of {len(seeds)} keys: "
                      f"{time.perf_counter() - t0:.3f} s")
            backend.volumes.pop(id(host))
        dev.free()
        many_short(backend, tables)


if __name__ == "__main__":
    main()
