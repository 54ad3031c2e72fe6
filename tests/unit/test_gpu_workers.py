"""A worker per GPU without dask-cuda (drivers/gpu_workers.py), on a host without one: the
GPUs counted from nvidia-smi (a fake one here) or NVML, CUDA_VISIBLE_DEVICES respected as
CUDA reads it, each worker started with its own GPU first, and the cluster a search or
`gblastn serve` makes from them; also the device memory cap and the cluster's mode choice."""

import os
import stat

import pytest

distributed = pytest.importorskip("distributed")

from gblastn.drivers import gpu_workers  # noqa: E402
from gblastn.drivers.cluster import ClusterSpec, choose_mode, local_cluster  # noqa: E402
from gblastn.drivers.gpu_workers import (gpu_worker_specs, physical_gpu_count,  # noqa: E402
                                         visible_gpus, worker_environments)
from gblastn.errors import OptionsError  # noqa: E402

H100 = "GPU {k}: NVIDIA H100 80GB HBM3 (UUID: GPU-{k}0000000-1111-2222-3333-444444444444)"
MIG = "  MIG 1g.10gb     Device  0: (UUID: MIG-5f7a0c2e-0000-1111-2222-333333333333)"


@pytest.fixture
def nvidia_smi(tmp_path, monkeypatch):
    """Put a fake nvidia-smi first on PATH: install(lines, status) makes it print `lines`
    and exit with `status`. Dask's own GPU diagnostics (NVML) are turned off: on a host with
    real GPUs they would look for the made-up ones and fail the cluster's start. In this
    process too, where an earlier cluster may have started them (Dask reads its setting
    once a process)."""
    import dask
    from distributed.diagnostics import nvml

    monkeypatch.setattr(nvml, "NVML_STATE", nvml.NVMLState.DISABLED_CONFIG)

    def install(lines, status=0):
        tool = tmp_path / "nvidia-smi"
        text = "".join(f"echo '{line}'\n" for line in lines)
        tool.write_text(f"#!/bin/sh\n{text}exit {status}\n")
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("DASK_DISTRIBUTED__DIAGNOSTICS__NVML", "False")
    with dask.config.set({"distributed.diagnostics.nvml": False}):
        yield install


def gpus(count: int) -> list:
    return [H100.format(k=k) for k in range(count)]


def test_each_worker_sees_its_own_gpu_first():
    assert worker_environments(["0", "1", "2"]) == [
        {"CUDA_VISIBLE_DEVICES": "0,1,2"}, {"CUDA_VISIBLE_DEVICES": "1,2,0"},
        {"CUDA_VISIBLE_DEVICES": "2,0,1"}]
    assert worker_environments(["3"]) == [{"CUDA_VISIBLE_DEVICES": "3"}]
    assert worker_environments([]) == []


def test_gpus_counted_from_nvidia_smi(nvidia_smi):
    nvidia_smi(gpus(2) + [MIG])  # a MIG part is listed under its GPU
    assert physical_gpu_count() == 2
    assert visible_gpus({}) == ["0", "1"]


def test_nvidia_smi_without_a_driver_shows_no_gpu(nvidia_smi):
    nvidia_smi(["NVIDIA-SMI has failed because it couldn't communicate with the driver"], 9)
    assert physical_gpu_count() == 0
    assert visible_gpus({}) == []


@pytest.mark.parametrize("listed, seen", [
    ("1", ["1"]),
    ("1,0", ["1", "0"]),
    (" 0 , 2 ", ["0", "2"]),
    ("", []),
    ("-1", []),
    ("0,7,1", ["0"]),                    # CUDA stops at the first device that is not there
    ("GPU-20000000-1111,1", ["GPU-20000000-1111", "1"]),
])
def test_cuda_visible_devices_read_as_cuda_reads_it(nvidia_smi, listed, seen):
    nvidia_smi(gpus(3))
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": listed}) == seen


def test_without_nvidia_smi_nvml_counts(tmp_path, monkeypatch):
    class FakeNvml:
        def nvmlInit_v2(self):
            return 0

        def nvmlDeviceGetCount_v2(self, count):
            count._obj.value = 4
            return 0

        def nvmlShutdown(self):
            return 0

    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi there
    monkeypatch.setattr(gpu_workers.ctypes, "CDLL", lambda name: FakeNvml())
    assert physical_gpu_count() == 4

    def missing(name):
        raise OSError(name)

    monkeypatch.setattr(gpu_workers.ctypes, "CDLL", missing)
    assert physical_gpu_count() == 0


def test_gpu_worker_specs_for_n_gpus():
    from distributed.system import MEMORY_LIMIT

    specs = gpu_worker_specs(distributed, ["2", "0", "1"], {"OMP_NUM_THREADS": "4"}, 40)
    assert list(specs) == ["gpu-0", "gpu-1", "gpu-2"]
    for spec, visible in zip(specs.values(), ("2,0,1", "0,1,2", "1,2,0")):
        assert spec["cls"] is distributed.Nanny
        assert spec["options"] == {"host": "127.0.0.1", "nthreads": 1,
                                   "memory_limit": MEMORY_LIMIT // 3, "silence_logs": 40,
                                   "env": {"OMP_NUM_THREADS": "4",
                                           "CUDA_VISIBLE_DEVICES": visible}}


def worker_variables(cluster) -> dict:
    """{worker name: (CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS)} as each worker process has them."""
    with distributed.Client(cluster, set_as_default=False) as client:
        client.wait_for_workers(len(cluster.worker_spec), timeout=60)
        names = {address: worker["name"] for address, worker in
                 client.scheduler_info(n_workers=-1)["workers"].items()}
        visible = client.run(os.getenv, "CUDA_VISIBLE_DEVICES")
        threads = client.run(os.getenv, "OMP_NUM_THREADS")
    return {names[address]: (visible[address], threads[address]) for address in names}


def test_local_cluster_starts_a_worker_per_gpu(nvidia_smi, monkeypatch):
    """-local_workers 3 on a host of two GPUs, CUDA_VISIBLE_DEVICES listing them backwards:
    two worker processes, each with its own GPU first."""
    nvidia_smi(gpus(2))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    with local_cluster(3, "auto", threads=2) as cluster:
        assert worker_variables(cluster) == {"gpu-0": ("1,0", "2"), "gpu-1": ("0,1", "2")}


def test_fewer_workers_than_gpus_and_cpu_workers(nvidia_smi, monkeypatch):
    """-local_workers 1 on two GPUs: one worker, which sees its GPU alone; -device cpu: CPU
    worker processes, whatever the host's GPUs."""
    nvidia_smi(gpus(2))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cluster = local_cluster(1, "auto")
    assert [spec["options"]["env"]["CUDA_VISIBLE_DEVICES"]
            for spec in cluster.worker_spec.values()] == ["0"]
    cluster.close()
    with local_cluster(2, "cpu") as cluster:
        assert isinstance(cluster, distributed.LocalCluster)
        assert len(cluster.worker_spec) == 2


def test_device_gpu_without_gpus_fails(nvidia_smi):
    from gblastn.errors import GpuUnavailableError

    nvidia_smi([], 9)
    with pytest.raises(GpuUnavailableError, match="no GPU found"):
        local_cluster(2, "gpu")


def test_serve_gives_a_gpu_to_at_most_the_gpus_shown():
    from gblastn.drivers.serve import ServeSpec
    from gblastn.errors import GpuUnavailableError

    assert ServeSpec("db", "s.json", gpus="all").gpu_workers(2) == 2
    assert ServeSpec("db", "s.json", gpus="1").gpu_workers(2) == 1
    assert ServeSpec("db", "s.json", gpus="all", device="cpu").gpu_workers(2) == 0
    with pytest.raises(GpuUnavailableError, match="shows 2 GPUs"):
        ServeSpec("db", "s.json", gpus="3").gpu_workers(2)


@pytest.mark.parametrize("asked, told, workers, threads", [
    ("all", None, 4, 16),     # a worker per GPU, the 64 cores shared
    ("2", None, 2, 16),       # 32 cores each, capped
    ("all", 8, 4, 8),         # -num_threads stands
])
def test_serve_shares_the_hosts_cores_among_its_workers(nvidia_smi, monkeypatch, tmp_path,
                                                        asked, told, workers, threads):
    from gblastn import pools
    from gblastn.drivers import serve as serve_module
    from gblastn.drivers.serve import ServeSpec

    nvidia_smi(gpus(4))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(pools, "available_cores", lambda: 64)
    started = {}
    monkeypatch.setattr(serve_module, "_start",
                        lambda distributed, spec, name, gpus, ready: started.update(
                            spec=spec, gpus=gpus))
    monkeypatch.setattr(serve_module, "_live_scheduler", lambda distributed, file: None)
    db = _tiny_database(tmp_path)
    serve_module.serve(ServeSpec(db, str(tmp_path / "s.json"), gpus=asked, num_threads=told),
                       ready=print)
    assert len(started["gpus"]) == workers
    assert started["spec"].num_threads == threads


def test_serve_on_cpu_workers_shares_the_cores_too(monkeypatch, tmp_path):
    from gblastn import pools
    from gblastn.drivers import serve as serve_module
    from gblastn.drivers.serve import ServeSpec

    monkeypatch.setattr(pools, "available_cores", lambda: 3)
    started = {}
    monkeypatch.setattr(serve_module, "_start",
                        lambda distributed, spec, name, gpus, ready: started.update(spec=spec))
    monkeypatch.setattr(serve_module, "_live_scheduler", lambda distributed, file: None)
    db = _tiny_database(tmp_path)
    serve_module.serve(ServeSpec(db, str(tmp_path / "s.json"), workers=2, device="cpu"),
                       ready=print)
    assert started["spec"].num_threads == 1  # 3 cores over 2 workers, never 0


def _tiny_database(tmp_path) -> str:
    from gblastn.db.writer import make_db

    fasta = tmp_path / "db.fa"
    fasta.write_text(">s1\nACGTACGTACGTACGTAAACCCGGGTTT\n")
    make_db([str(fasta)], str(tmp_path / "db"), progress=False)
    return str(tmp_path / "db")


def test_device_memory_cap(monkeypatch):
    from gblastn.scan.gpu import memory_cap

    monkeypatch.delenv("GBLASTN_GPU_MEMORY", raising=False)
    assert memory_cap() is None
    monkeypatch.setenv("GBLASTN_GPU_MEMORY", "1500MB")
    assert memory_cap() == 1_500_000_000
    monkeypatch.setenv("GBLASTN_GPU_MEMORY", "lots")
    with pytest.raises(OptionsError, match="GBLASTN_GPU_MEMORY"):
        memory_cap()


def test_auto_mode_replicates_what_each_device_holds_and_shards_the_rest():
    """Several workers search whole batches at once (forecast ones) where each device holds
    the whole database, and split it where one does not; CPU workers (no device memory)
    replicate; -shards and -cluster_mode decide alone."""
    spec = ClusterSpec(local_workers=2)
    two = ["tcp://a", "tcp://b"]
    assert choose_mode(spec, two, None, 2_000_000_000) == "replicate"
    assert choose_mode(spec, two, 3_000_000_000, 2_000_000_000) == "replicate"
    assert choose_mode(spec, two, 1_500_000_000, 2_000_000_000) == "shard"
    assert choose_mode(spec, ["tcp://a"], 1_500_000_000, 2_000_000_000) == "replicate"
    assert choose_mode(ClusterSpec(local_workers=2, mode="replicate"), two, 1, 2) \
        == "replicate"
    assert choose_mode(ClusterSpec(local_workers=2, shards=2), two, None, 2) == "shard"