"""The search's memory: large blocks given back (heap.py), a batch's word index let go."""

import sys

import numpy as np
import pytest

from gblastn.heap import return_large_blocks
from gblastn.lookup import build_lookup
from gblastn.options import make_options
from gblastn.query import Query, build_batch
from gblastn.alphabet import encode_blastna


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_mmap_threshold_is_fixed_on_glibc():
    assert return_large_blocks()


def test_a_table_without_its_words_keeps_the_query():
    options = make_options("blastn", dust="no")
    letters = "ACGTTGCAAGGCTTACGATCGATCGGATCCATGCA" * 20
    batch = build_batch([Query("q", "q", encode_blastna(letters), np.zeros(len(letters), bool))],
                        options)
    table = build_lookup(batch, options)
    sequence, offsets = table.sequence.copy(), table.context_offset.copy()
    assert table.heads.size + table.backbone.size + table.cell_start.size > 0
    table.drop_words()
    assert table.next_pos.size == table.backbone.size == 0
    assert table.heads.size == table.present.size == table.present_rank.size == 0
    assert table.cell_start.size == table.offsets.size == table.pv.size == 0
    assert (table.sequence == sequence).all() and (table.context_offset == offsets).all()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_c_library_is_found_without_running_a_program(monkeypatch):
    """By name, finding the C library runs `ldconfig -p` (a worker's every task made a
    search): mallopt is found among the symbols already loaded."""
    import ctypes.util
    import subprocess

    def refused(*args, **kwargs):
        raise AssertionError("a program was run")

    return_large_blocks.cache_clear()
    monkeypatch.setattr(ctypes.util, "find_library", refused)
    monkeypatch.setattr(subprocess, "Popen", refused)
    try:
        assert return_large_blocks()
    finally:
        return_large_blocks.cache_clear()
