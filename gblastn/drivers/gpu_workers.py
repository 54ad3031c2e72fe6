"""A Dask worker per GPU of this host, with Dask alone (no dask-cuda).

Each worker's nanny starts it with CUDA_VISIBLE_DEVICES naming the worker's own GPU first and
the cluster's other GPUs after it, in turn (dask-cuda's order): CUDA numbers the devices a
process sees in that order, so device 0 of every worker is a GPU of its own, the one its
GpuBackend takes with the default -gpu_id 0 (and -gpu_id k still gives each worker another
GPU). The GPUs are counted without CUDA in this process (nvidia-smi, else NVML): a CUDA
context here would hold memory of the first GPU beside its worker's, and cost a second
before the workers start.
"""

import ctypes
import os
import subprocess

SMI_SECONDS = 10                  # nvidia-smi answers in well under a second
UUID_PREFIXES = ("GPU-", "MIG-")  # CUDA_VISIBLE_DEVICES may name devices by UUID
LOOPBACK = "127.0.0.1"            # where LocalCluster puts its scheduler and workers


def physical_gpu_count() -> int:
    """The GPUs the NVIDIA driver shows, whatever CUDA_VISIBLE_DEVICES says; 0 without a
    driver."""
    listed = _nvidia_smi_count()
    return _nvml_count() if listed is None else listed


def _nvidia_smi_count() -> int | None:
    """The GPU lines of `nvidia-smi -L` (a GPU's MIG parts are listed under it); None where
    the tool is missing."""
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                              timeout=SMI_SECONDS)
    except OSError:
        return None
    except subprocess.TimeoutExpired:
        return 0
    if done.returncode != 0:  # installed, but no driver answers
        return 0
    return sum(line.startswith("GPU ") for line in done.stdout.splitlines())


def _nvml_count() -> int:
    """The device count of NVML, the driver's management library (it makes no CUDA
    context); 0 without it."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return 0
    if nvml.nvmlInit_v2() != 0:
        return 0
    try:
        count = ctypes.c_uint()
        return count.value if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0 else 0
    finally:
        nvml.nvmlShutdown()


def visible_gpus(environ=os.environ) -> list:
    """The GPUs this process may hand to workers, as CUDA_VISIBLE_DEVICES names them (numbers
    or UUIDs): its entries up to the first that names no GPU, where CUDA stops reading it;
    every GPU by number when it is not set."""
    count = physical_gpu_count()
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(k) for k in range(count)]
    gpus = []
    for entry in (part.strip() for part in listed.split(",")):
        named = entry.isdigit() and int(entry) < count or \
            entry.startswith(UUID_PREFIXES) and count > 0
        if not named:
            break
        gpus.append(entry)
    return gpus


def worker_environments(gpus: list) -> list:
    """A worker per GPU: the k-th worker's CUDA_VISIBLE_DEVICES names gpus[k] first, then the
    others in turn."""
    return [{"CUDA_VISIBLE_DEVICES": ",".join(gpus[k:] + gpus[:k])} for k in range(len(gpus))]


def gpu_worker_specs(distributed, gpus: list, env: dict, silence_logs) -> dict:
    """SpecCluster's workers for `gpus`: a nanny each, named gpu-K, one thread, `env` beside
    its CUDA_VISIBLE_DEVICES; as LocalCluster makes its workers, on the loopback interface
    and each allowed an equal share of the host's memory (the nanny restarts a worker
    beyond it)."""
    from distributed.system import MEMORY_LIMIT

    specs = {}
    for k, own in enumerate(worker_environments(gpus)):
        options = {"host": LOOPBACK, "nthreads": 1, "memory_limit": MEMORY_LIMIT // len(gpus),
                   "env": {**env, **own}, "silence_logs": silence_logs}
        specs[f"gpu-{k}"] = {"cls": distributed.Nanny, "options": options}
    return specs


def gpu_cluster(distributed, gpus: list, env: dict, silence_logs):
    """A scheduler and a worker per GPU of `gpus` on this host (gpu_worker_specs)."""
    scheduler = {"cls": distributed.Scheduler,
                 "options": {"host": LOOPBACK, "dashboard_address": ":0"}}
    return distributed.SpecCluster(workers=gpu_worker_specs(distributed, gpus, env, silence_logs),
                                   scheduler=scheduler, silence_logs=silence_logs)
