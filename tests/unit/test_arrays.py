"""Arrays in compiled code: a borrowed view is the array itself, minus its reference count;
a prefetch changes nothing, whatever its index. Recycled buffers come back only once let
go, views included. Distinct values are numpy's unique ones, without numpy.ma."""

import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from numba import njit, types
from numba.extending import intrinsic

from gblastn.arrays import RecycledBuffers, distinct_sorted, grown
from gblastn.refcounts import borrowed, prefetch


@intrinsic
def _counted(typingctx, array):
    """Whether the array carries a reference count (a meminfo)."""
    def codegen(context, builder, signature, args):
        view = context.make_array(array)(context, builder, value=args[0])
        return builder.icmp_unsigned("!=", view.meminfo, view.meminfo.type(None))

    return types.boolean(array), codegen


@njit
def _counted_plain_and_borrowed(values):
    return _counted(values), _counted(borrowed(values))


@njit
def _at(values, i):
    return values[i]


@njit
def _sum_and_mark(values, marks):
    """Sums `values` through a borrowed view in a loop calling a helper, and marks each
    position through a borrowed view of `marks`."""
    values, view = borrowed(values), borrowed(marks)
    total = 0
    for i in range(values.size):
        total += _at(values, i)
        view[i] = 1
    return total


def test_borrowed_reads_and_writes_the_array():
    values = np.arange(1000, dtype=np.int64)
    marks = np.zeros(1000, dtype=np.uint8)
    assert _sum_and_mark(values, marks) == int(values.sum())
    assert marks.all()  # the writes reached the caller's array


def test_borrowed_view_carries_no_reference_count():
    assert _counted_plain_and_borrowed(np.zeros(3)) == (True, False)


@njit
def _sum_prefetching(values, distance):
    total = 0
    for i in range(values.size):
        prefetch(values, i + distance)  # past either end too: a hint never faults
        total += values[i]
    return total


def test_prefetch_is_only_a_hint():
    values = np.arange(1 << 16, dtype=np.int64)
    before = values.copy()
    for distance in (-(1 << 40), -8, 0, 8, 1 << 40):
        assert _sum_prefetching(values, distance) == int(before.sum())
    assert np.array_equal(values, before)


def test_grown_keeps_the_rows():
    a = np.arange(6, dtype=np.int32).reshape(3, 2)
    b = grown(a, 5)
    assert b.shape == (6, 2) and np.array_equal(b[:3], a)
    assert grown(a, 3) is a


def test_a_recycled_buffer_comes_back_only_once_nothing_holds_it():
    buffers = RecycledBuffers((5, 2048), np.int32, kept=2)
    first = buffers.free()
    assert first.shape == (5, 2048) and first.dtype == np.int32
    view = first[2, :10]
    del first
    second = buffers.free()  # the first is still held through its view
    assert not np.shares_memory(second, view)
    view[:] = 7
    del view
    again = buffers.free()  # the first, let go: its pages and contents as they were
    assert np.all(again[2, :10] == 7)
    # both kept buffers held: a third is made, and not kept
    third = buffers.free()
    assert not np.shares_memory(third, again) and not np.shares_memory(third, second)
    del third
    assert not np.shares_memory(buffers.free(), second)  # the two kept are still held
    address = second.__array_interface__["data"][0]
    del second
    assert buffers.free().__array_interface__["data"][0] == address


@given(st.lists(st.integers(-5, 5), max_size=40))
def test_distinct_sorted_is_numpys_unique(values):
    array = np.array(values, dtype=np.int64)
    got = distinct_sorted(array)
    assert got.dtype == np.int64 and np.array_equal(got, np.unique(array))


def test_distinct_sorted_leaves_numpys_masked_arrays_unimported():
    code = ("import sys, numpy as np; from gblastn.arrays import distinct_sorted; "
            "distinct_sorted(np.array([3, 1, 3])); assert 'numpy.ma' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
