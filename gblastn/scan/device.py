"""Which scan backend a search uses (``-device auto|gpu|cpu``, ``-gpu_id``)."""

import sys

from ..errors import GpuUnavailableError, OptionsError

AUTO_NOTICE = "gblastn: no GPU found, searching on the CPU"


def select(device: str, gpu_id: int = 0):
    """'cpu': the CPU backend; 'gpu': the GPU backend, or GpuUnavailableError; 'auto': the
    GPU when pycuda imports and a device is present, else the CPU with a notice on stderr."""
    device = (device or "auto").lower()
    if device == "cpu":
        from . import cpu
        return cpu
    if device not in ("gpu", "auto"):
        raise OptionsError(f"-device must be auto, gpu or cpu, not {device!r}")
    from ..timing import TIMES
    try:
        with TIMES.stage("gpu set-up"):
            from .gpu import backend_for
            return backend_for(int(gpu_id))
    except GpuUnavailableError:
        if device == "gpu":
            raise
    print(AUTO_NOTICE, file=sys.stderr)
    from . import cpu
    return cpu
