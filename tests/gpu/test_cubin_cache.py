"""The compiled-kernel cache: nvcc runs once per variant and machine, later runs read the
cubin; a cache that cannot be written, or a compiler that fails, behave as a user expects."""

import os

import pytest

from gblastn import layouts
from gblastn.errors import GpuUnavailableError
from gblastn.scan.gpu import cached_cubin, cubin_cache_dir, nvcc_options


class FakeNvcc:
    def __init__(self):
        self.calls = []

    def __call__(self, source, options, arch):
        self.calls.append((source, tuple(options), arch))
        return f"cubin of {source} {options} {arch}".encode()


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_second_load_reads_the_cache(cache_home):
    nvcc = FakeNvcc()
    first = cached_cubin("kernel", ["-DA=1"], "sm_90", compile=nvcc)
    second = cached_cubin("kernel", ["-DA=1"], "sm_90", compile=nvcc)
    assert first == second == b"cubin of kernel ['-DA=1'] sm_90"
    assert len(nvcc.calls) == 1
    assert [name for name in os.listdir(cubin_cache_dir()) if name.endswith(".cubin")]
    assert not [name for name in os.listdir(cubin_cache_dir()) if name.endswith(".part")]


@pytest.mark.parametrize("change", [("kernel2", ["-DA=1"], "sm_90"),
                                    ("kernel", ["-DA=2"], "sm_90"),
                                    ("kernel", ["-DA=1"], "sm_80")])
def test_any_input_change_compiles_again(cache_home, change):
    nvcc = FakeNvcc()
    cached_cubin("kernel", ["-DA=1"], "sm_90", compile=nvcc)
    assert cached_cubin(*change, compile=nvcc) == FakeNvcc()(*change)
    assert len(nvcc.calls) == 2


def test_a_changed_layout_compiles_again(cache_home, monkeypatch):
    nvcc = FakeNvcc()
    cached_cubin("kernel", nvcc_options({"A": 1}), "sm_90", compile=nvcc)
    monkeypatch.setattr(layouts, "GAPPED_FIELDS", layouts.GAPPED_FIELDS + 1)
    cached_cubin("kernel", nvcc_options({"A": 1}), "sm_90", compile=nvcc)
    assert len(nvcc.calls) == 2


def test_refresh_compiles_and_rewrites(cache_home):
    nvcc = FakeNvcc()
    cached_cubin("kernel", [], "sm_90", compile=nvcc)
    (path,) = [os.path.join(cubin_cache_dir(), name) for name in os.listdir(cubin_cache_dir())]
    with open(path, "wb") as damaged:
        damaged.write(b"damaged")
    assert cached_cubin("kernel", [], "sm_90", compile=nvcc) == b"damaged"
    fresh = cached_cubin("kernel", [], "sm_90", compile=nvcc, refresh=True)
    assert fresh == FakeNvcc()("kernel", [], "sm_90") and len(nvcc.calls) == 2
    assert cached_cubin("kernel", [], "sm_90", compile=nvcc) == fresh


def test_unwritable_cache_still_loads(cache_home):
    (cache_home / "gblastn").write_text("a file where the folder would go")
    nvcc = FakeNvcc()
    assert cached_cubin("kernel", [], "sm_90", compile=nvcc) == FakeNvcc()("kernel", [], "sm_90")
    cached_cubin("kernel", [], "sm_90", compile=nvcc)
    assert len(nvcc.calls) == 2


def test_failing_compiler_is_one_line_gpu_error(cache_home):
    def broken(source, options, arch):
        raise OSError("nvcc: not found\nmore detail")

    with pytest.raises(GpuUnavailableError, match=r"could not be compiled \(nvcc: not found\)$"):
        cached_cubin("kernel", [], "sm_90", compile=broken)
    assert not os.path.exists(cubin_cache_dir()) or not os.listdir(cubin_cache_dir())
