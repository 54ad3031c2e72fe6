"""nvcc compiles every seed-kernel variant the tasks reach (and the tuning alternatives), the
greedy kernels, the ungapped and the DP kernel for sm_90; no GPU needed, skipped without
nvcc."""

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

from types import SimpleNamespace

import pytest

from gblastn.layouts import EXTEND_BASEWISE, EXTEND_DIRECT, EXTEND_SMALL, EXTEND_SMALL_ONE_BYTE, \
    TABLE_MEGABLAST as MEGABLAST, TABLE_SMALL as SMALL, TABLE_STANDARD as STANDARD
from gblastn.lookup import template_arrays
from gblastn.options import make_options
from gblastn.scan.gpu import (FLUSH_MODE, FLUSH_SLOTS, GREEDY_ROW_CELLS, PROBES_PER_THREAD,
                              SCAN_THREADS, diagonals_defines, dp_defines, greedy_defines,
                              kernel_source, nvcc_options, template_defines)

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")


def variant(kind, width, word, extend, check, bts=5, templates=None, **tuning):
    defines = {"TABLE_KIND": kind, "WIDTH": width, "WORD_SIZE": word,
               "SCAN_STEP": word - width + 1, "PV_BTS": bts, "EXTEND_KIND": extend,
               "CHECK_MASKS": check, "SCAN_THREADS": SCAN_THREADS,
               "PROBES_PER_THREAD": PROBES_PER_THREAD, "FLUSH_MODE": FLUSH_MODE,
               "FLUSH_SLOTS": FLUSH_SLOTS}
    defines.update(template_defines(templates or SimpleNamespace()))
    defines.update(tuning)
    return defines


def discontiguous(word_size, length, kind, bts):
    """The variant of dc-megablast's table for a template: whole windows, no extension."""
    options = make_options("dc-megablast", word_size=word_size, template_length=length,
                           template_type=kind)
    shift, mask = template_arrays(options)
    table = SimpleNamespace(template_length=length, template_shift=shift, template_mask=mask)
    return variant(MEGABLAST, length, length, EXTEND_DIRECT, 0, bts=bts, templates=table)


# the variants the tasks reach (BlastChooseNaLookupTable x BlastChooseNaExtend), plus the
# tuning alternatives the benchmark compares
VARIANTS = [
    variant(SMALL, 8, 28, EXTEND_SMALL, 1),                 # megablast, short query
    variant(MEGABLAST, 11, 28, EXTEND_BASEWISE, 1, bts=7),  # megablast
    variant(MEGABLAST, 12, 28, EXTEND_BASEWISE, 0, bts=10),  # megablast, long query, no masks
    variant(SMALL, 8, 11, EXTEND_SMALL_ONE_BYTE, 1),        # blastn
    variant(MEGABLAST, 10, 11, EXTEND_BASEWISE, 1, bts=5),  # blastn
    variant(MEGABLAST, 11, 11, EXTEND_DIRECT, 0, bts=7),    # blastn, long query
    variant(SMALL, 7, 7, EXTEND_DIRECT, 0),                 # blastn-short
    variant(SMALL, 6, 7, EXTEND_SMALL, 1),                  # blastn-short, tiny query
    variant(STANDARD, 8, 8, EXTEND_DIRECT, 0),              # small table impossible
    variant(STANDARD, 8, 11, EXTEND_SMALL_ONE_BYTE, 1),
    variant(STANDARD, 7, 9, EXTEND_BASEWISE, 1),
    variant(SMALL, 8, 16, EXTEND_SMALL, 1),                 # W = 16
    variant(MEGABLAST, 12, 28, EXTEND_BASEWISE, 1, bts=9, FLUSH_MODE=0),
    variant(MEGABLAST, 12, 28, EXTEND_BASEWISE, 1, bts=9, FLUSH_MODE=1),
    variant(MEGABLAST, 12, 28, EXTEND_BASEWISE, 1, bts=9, FLUSH_MODE=0, FLUSH_SLOTS=4),
    variant(MEGABLAST, 12, 28, EXTEND_BASEWISE, 1, bts=9, PROBES_PER_THREAD=16,
            SCAN_THREADS=512, FLUSH_MODE=0),
    variant(MEGABLAST, 11, 28, EXTEND_BASEWISE, 1, bts=7, PROBES_PER_THREAD=8,
            SCAN_THREADS=256, FLUSH_MODE=2),
    discontiguous(11, 18, "coding", bts=6),                 # dc-megablast
    discontiguous(12, 21, "coding_and_optimal", bts=8),     # dc-megablast, two templates
    discontiguous(11, 16, "optimal", bts=7),
]


def compile_variant(defines, folder, source="seeds.cu"):
    name = source.split(".")[0] + "_" + "_".join(f"{v}" for _, v in sorted(defines.items()))
    src = folder / f"{name}.cu"
    src.write_text(kernel_source(source))
    cmd = ["nvcc", "-arch=sm_90", "-cubin", *nvcc_options(defines), "-o",
           str(folder / f"{name}.cubin"), str(src)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.parametrize("row_cells", [GREEDY_ROW_CELLS, 8])
def test_greedy_kernel_compiles(tmp_path, row_cells):
    result = compile_variant(greedy_defines(row_cells), tmp_path, "greedy.cu")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "error" not in result.stderr.lower()


@pytest.mark.parametrize("source, defines", [
    ("ungapped.cu", {}), ("dynprog.cu", dp_defines()), ("diagonals.cu", diagonals_defines())])
def test_extension_kernels_compile(tmp_path, source, defines):
    result = compile_variant(defines, tmp_path, source)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "error" not in result.stderr.lower()


def test_every_variant_compiles(tmp_path):
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda d: compile_variant(d, tmp_path), VARIANTS))
    failures = [(d, r.stderr[-2000:]) for d, r in zip(VARIANTS, results) if r.returncode]
    assert not failures, failures
    for r in results:
        assert "error" not in r.stderr.lower()
