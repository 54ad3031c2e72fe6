"""Which scan backend a search uses (``-device auto|gpu|cpu``, ``-gpu_id``)."""

from ..errors import GpuUnavailableError, OptionsError
from .backend import CpuBackend

AUTO_NOTICE = "gblastn: no GPU found, searching on the CPU"


class _CpuInPlaceOfGpu(CpuBackend):
    """The CPU's backend where -device auto found no GPU: the search says so on stderr once
    it starts (drivers.Search), not while the command line still checks its inputs, whose
    errors stay one line."""

    notice = AUTO_NOTICE


CPU_IN_PLACE_OF_GPU = _CpuInPlaceOfGpu()


def select(device: str, gpu_id: int = 0, times=None):
    """'cpu': the CPU backend; 'gpu': the GPU backend, or GpuUnavailableError; 'auto': the
    GPU when pycuda imports and a device is present, else CPU_IN_PLACE_OF_GPU.
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
    return CPU_IN_PLACE_OF_GPU
