"""The kernels and the host agree on their shared layouts (gblastn.layouts): the loader gives
the kernels every name they take from outside, the kernels keep no copy of their own, and a
kernel compiled with the loader's options sees the Python values (nvcc only, no GPU)."""

import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from gblastn.layouts import TABLE_MEGABLAST, kernel_defines
from gblastn.scan.gpu import diagonals_defines, dp_defines, greedy_defines, kernel_dir, \
    kernel_source, nvcc_options, trace_defines, variant_defines

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")

MEGABLAST_TABLE = SimpleNamespace(kind=TABLE_MEGABLAST, width=11, word_size=28, scan_step=18,
                                  pv_bts=7, check_masks=True)
# each kernel source with the defines its loader call gives it (besides gblastn.layouts')
LOADER_DEFINES = {"seeds.cu": variant_defines(MEGABLAST_TABLE), "greedy.cu": greedy_defines(),
                  "dynprog.cu": dp_defines(), "ungapped.cu": {},
                  "diagonals.cu": diagonals_defines(), "dp_traceback.cu": trace_defines()}


def compile_kernel(source_text: str, options: list, folder) -> subprocess.CompletedProcess:
    """nvcc as the loader runs it (pycuda.compiler.compile: a cubin for the GPU's arch)."""
    source = folder / "kernel.cu"
    source.write_text(source_text)
    return subprocess.run(["nvcc", "--cubin", "-arch", "sm_90", *options, "-o",
                           str(folder / "kernel.cubin"), str(source)],
                          capture_output=True, text=True)


def layout_asserts() -> str:
    """A static_assert of each gblastn.layouts value, as the kernel code sees it."""
    return "\n".join(f'static_assert(({name}) == ({value}), "{name} differs from gblastn.layouts");'
                     for name, value in sorted(kernel_defines().items()))


def names_in(source_text: str) -> tuple:
    """The upper-case names a kernel source's code uses (comments and strings left out, and
    the names its guards test), the names it defines itself, and the names its guards
    (`#if !defined(NAME) ...`) require."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source_text, flags=re.S)
    code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
    guarded = set(re.findall(r"defined\(\s*(\w+)\s*\)", code))
    code = re.sub(r"defined\(\s*\w+\s*\)", " ", code)
    used = set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", code))
    local = set(re.findall(r"#\s*define\s+(\w+)", code))
    return used, local, guarded


def test_every_kernel_is_checked():
    assert {path.name for path in kernel_dir().glob("*.cu")} == set(LOADER_DEFINES)


@pytest.mark.parametrize("source", sorted(LOADER_DEFINES))
def test_loader_gives_every_name_the_kernel_takes(source):
    used, local, guarded = names_in(kernel_source(source))
    given = set(kernel_defines()) | set(LOADER_DEFINES[source])
    taken = used - local
    assert taken <= given, f"{source} uses names the loader does not give: {taken - given}"
    assert taken == guarded, (f"{source}'s guards miss {taken - guarded}, "
                              f"or name what it does not use: {guarded - taken}")
    assert not local & given, f"{source} defines its own copy of {local & given}"


@needs_nvcc
@pytest.mark.parametrize("source", sorted(LOADER_DEFINES))
def test_kernel_sees_the_python_layouts(tmp_path, source):
    result = compile_kernel(kernel_source(source) + "\n" + layout_asserts() + "\n",
                            nvcc_options(LOADER_DEFINES[source]), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


@needs_nvcc
def test_a_layout_the_kernel_sees_differently_fails_to_compile(tmp_path):
    wrong = {**greedy_defines(), "GAPPED_FIELDS": kernel_defines()["GAPPED_FIELDS"] + 1}
    result = compile_kernel(kernel_source("greedy.cu") + "\n" + layout_asserts() + "\n",
                            nvcc_options(wrong), tmp_path)
    assert result.returncode != 0
    assert "GAPPED_FIELDS differs from gblastn.layouts" in result.stderr


@needs_nvcc
@pytest.mark.parametrize("source", sorted(LOADER_DEFINES))
def test_kernel_without_the_layouts_refuses_to_compile(tmp_path, source):
    result = compile_kernel(kernel_source(source),
                            ["-std=c++17"] + [f"-D{k}={v}" for k, v in
                                              LOADER_DEFINES[source].items()], tmp_path)
    assert result.returncode != 0
    assert "gblastn.layouts' defines are missing" in result.stderr
