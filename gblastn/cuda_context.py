"""The CUDA driver library called directly (ctypes), for the slow steps where pycuda would
hold the GIL: making a device's primary context, tearing it down, and page-locking host
memory (docs/perf/gpu-context.md). ctypes lets go of the GIL during each call, so the
search's other threads run meanwhile. Every function here does nothing (or returns None)
where the driver library cannot be loaded or called."""

import ctypes
import threading
import weakref

_EARLY = {}  # gpu_id -> the thread making its primary context at start-up
CLUSTER_FLAGS = {"-scheduler", "-scheduler_file", "-local_workers"}


def _driver():
    """The driver library, initialised; None without one (no GPU, no driver)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        return cuda if cuda.cuInit(0) == 0 else None
    except (OSError, AttributeError):
        return None


def _device(cuda, gpu_id: int):
    device = ctypes.c_int()
    return device if cuda.cuDeviceGet(ctypes.byref(device), int(gpu_id)) == 0 else None


def retain_primary_context(gpu_id: int):
    """Make (or find made) the device's primary context and take a reference to it. Returns
    the call that drops that reference: pycuda, retaining the context after this, finds it
    made."""
    cuda = _driver()
    device = None if cuda is None else _device(cuda, gpu_id)
    context = ctypes.c_void_p()
    if device is None or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device) != 0:
        return lambda: None
    release = getattr(cuda, "cuDevicePrimaryCtxRelease_v2", None) or \
        cuda.cuDevicePrimaryCtxRelease
    return lambda: release(device)


def reset_primary_context(gpu_id: int) -> None:
    """Destroy the device's primary context and everything in it (cuDevicePrimaryCtxReset)."""
    cuda = _driver()
    device = None if cuda is None else _device(cuda, gpu_id)
    if device is not None:
        reset = getattr(cuda, "cuDevicePrimaryCtxReset_v2", None) or \
            cuda.cuDevicePrimaryCtxReset
        reset(device)


def close_device_files() -> None:
    """Close the process's files of the NVIDIA driver (/dev/nvidia*), for a process done with
    the GPU for good, once its contexts are reset: left to the process's exit, closing them
    would delay the exit after the output was complete.
    The driver's later calls in this process fail with an error code; none is made, as the
    device was given back. Linux only (the files are found in /proc/self/fd)."""
    import os

    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return
    for name in names:
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("/dev/nvidia"):
                os.close(int(name))
        except (OSError, ValueError):
            continue


def page_locked_buffer(size: int):
    """`size` bytes of page-locked host memory for the current context (cuMemHostAlloc), as
    a writable uint8 array, and the call that frees them (once; it runs by itself when the
    array is dropped); None where the driver does not give them. pycuda's pagelocked_empty
    holds the GIL while the driver locks the pages, during the query setup."""
    import numpy as np

    cuda = _driver()
    pointer = ctypes.c_void_p()
    if cuda is None or cuda.cuMemHostAlloc(ctypes.byref(pointer), ctypes.c_size_t(size),
                                           ctypes.c_uint(0)) != 0:
        return None
    buffer = np.frombuffer((ctypes.c_uint8 * size).from_address(pointer.value), dtype=np.uint8)
    return buffer, weakref.finalize(buffer, cuda.cuMemFreeHost, pointer)


def make_context_early(gpu_id: int) -> None:
    """Start making the device's primary context in a thread, first thing in a search's
    process: its imports (numpy, numba, pycuda) then run beside the driver's work, and the
    GPU backend's set-up finds the context made. The thread's reference lasts as long as
    the process."""
    if gpu_id not in _EARLY:
        thread = threading.Thread(target=retain_primary_context, args=(gpu_id,),
                                  name="gblastn-context", daemon=True)
        _EARLY[gpu_id] = thread
        thread.start()


def start_context_for(argv: list) -> None:
    """A search that may use the GPU starts making the device's context first thing, before
    the command line's own imports (typer, numpy, numba, pycuda): begun after them, the
    context is the last thing the first volume's copy to the GPU waits for. A search sent
    to a cluster leaves the GPUs to its workers."""
    if len(argv) < 2 or argv[1] != "search":
        return
    flags = dict(zip(argv[2:], argv[3:]))
    if flags.get("-device", "auto").lower() == "cpu" or CLUSTER_FLAGS.intersection(flags):
        return
    try:
        gpu_id = int(flags.get("-gpu_id", 0))
    except ValueError:
        return  # the option's own check reports it
    make_context_early(gpu_id)
