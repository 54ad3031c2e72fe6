"""The backend contract: a search resolves its backend's declared capabilities once, with
the options, into a BackendPlan; each volume has one SubjectBuffer for a whole search, kept by
a device under the volume."""

import numpy as np
import pytest

from gblastn.engine import SubjectBuffers
from gblastn.options import make_options
from gblastn.scan.backend import CPU, Backend, BackendPlan, Capabilities, SubjectBuffer
from gblastn.timing import StageTimes


class Device(Backend):
    name = "gpu"
    capabilities = Capabilities(scans_whole_volumes=True, ungapped_ahead=True, greedy_ahead=True,
                                tails_ahead=True)


@pytest.mark.parametrize("backend, task, gaps, greedy, tails", [
    (CPU, "megablast", {}, False, False),
    (Device(), "megablast", {}, True, True),
    (Device(), "megablast", {"gapopen": 5, "gapextend": 2}, False, False),  # affine: the CPU's
    (Device(), "blastn", {}, False, True),          # DP, not greedy: its tracebacks ahead
    (Device(), "dc-megablast", {}, False, True),
])
def test_the_plan_is_what_the_backend_declares_and_the_options_allow(backend, task, gaps,
                                                                    greedy, tails):
    plan = BackendPlan.resolve(backend, make_options(task, **gaps))
    assert plan.backend is backend
    assert plan.scans_whole_volumes == backend.capabilities.scans_whole_volumes
    assert plan.ungapped_ahead == backend.capabilities.ungapped_ahead  # every task's
    assert (plan.greedy_ahead, plan.tails_ahead) == (greedy, tails)


def test_a_backend_without_a_capability_is_never_asked_for_it():
    assert CPU.resident_address(SubjectBuffer(np.zeros(4, np.uint8), np.zeros(2))) is None
    assert CPU.preload(SubjectBuffer(np.zeros(4, np.uint8), np.zeros(2))) is False
    with pytest.raises(NotImplementedError):
        CPU.greedy_extensions(None, None, None, None, None, None, None, None, None, 0, 1, -2)


def test_one_subject_buffer_per_volume_keyed_by_the_volume():
    from gblastn.db.memory import MemoryVolume

    volume = MemoryVolume([np.arange(10, dtype=np.uint8) % 4, np.ones(7, dtype=np.uint8)])
    buffers = SubjectBuffers(StageTimes())
    first = buffers.of(volume)
    assert buffers.of(volume) is first and first.key is volume
    assert first.byte_offset.tolist() == [0, 3, 5] and first.packed.size == 5
    # another search's record of the same volume is kept under the same key
    assert SubjectBuffers(StageTimes()).of(volume).key is volume
    alone = SubjectBuffer(first.packed, first.byte_offset)
    assert alone.key is alone


def test_results_come_back_through_reused_page_locked_buffers():
    """GpuBackend.staged hands out the smallest free buffer that fits (several may be out at
    once) and makes one only when none fits; given back, they serve the next calls."""
    import threading

    from gblastn.scan.gpu import GpuBackend

    made = []
    backend = object.__new__(GpuBackend)  # no device: only the staging pool is used
    backend.staging, backend.staging_lock = [], threading.Lock()
    freed = []

    def page_locked(size):
        made.append(size)
        return np.zeros(size, np.uint8), lambda: freed.append(size)

    backend._page_locked = page_locked
    taken = []
    first = backend.staged((5, 1000), taken)
    second = backend.staged((4, 300_000), taken)
    assert first.shape == (5, 1000) and first.dtype == np.int32 and second.shape == (4, 300_000)
    assert len(made) == 2 and not np.shares_memory(first, second)
    backend.give_back_staging(taken)
    assert taken == [] and len(backend.staging) == 2
    large = backend.staged((4, 300_000), taken)  # the second, taken from behind the first
    again = backend.staged((5, 2000), taken)  # the smaller buffer fits: no new one
    assert len(made) == 2 and np.shares_memory(again, first) and np.shares_memory(large, second)
    backend.staged((4, 300_000), taken)  # both out: a third is made
    assert len(made) == 3
    for _ in range(3):
        backend.staged((7, 100_000), taken)
    backend.give_back_staging(taken)  # six back: the pool keeps the four largest
    assert len(backend.staging) == 4 and sorted(freed) == [1 << 20, 2_800_000]
