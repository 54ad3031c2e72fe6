"""Which scan backend a search uses (``-device auto|gpu|cpu``, ``-gpu_id``)."""

import sys

from ..errors import GpuUnavailableError, OptionsError

AUTO_NOTICE = "gblastn: no GPU found, searching on the CPU"


def select(device: str, gpu_id: int = 0, times=None):
    """'cpu': the CPU backend; 'gpu': the GPU backend, or GpuUnavailableError; 'auto': the
    GPU when pycuda imports and a device is present, else the CPU with a notice on stderr.
    The GPU's set-up, copies and kernel loads are counted in `times` (a StageTimes)."""
    from .backend import CPU

    device = (device or "auto").lower()
    if device == "cpu":
        return CPU
    if device not in ("gpu", "auto"):
        raise OptionsError(f"-device must be auto, gpu or cpu, not {device!r}")
    from ..timing import StageTimes

    times = times or StageTimes()
    try:
        with times.stage("gpu set-up"):
            from .gpu import backend_for
            return backend_for(int(gpu_id), times)
    except GpuUnavailableError:
        if device == "gpu":
            raise
    print(AUTO_NOTICE, file=sys.stderr)
    return CPU
