"""Lookup tables: BLAST's choice of table and width, and the contents of each layout."""

import numpy as np
import pytest

from gblastn.layouts import TABLE_MEGABLAST as MEGABLAST, TABLE_SMALL as SMALL, \
    TABLE_STANDARD as STANDARD
from gblastn.lookup import (PARALLEL_TABLE_WORDS, build_lookup, chain_head, choose_table,
                            dense_hashtable, estimate_entries, megablast_pv_shape, words_of)
from gblastn.numba_start import njit
from gblastn.options import make_options
from gblastn.query import Query, build_batch
from gblastn.pools import TaskPool


def make_batch(seqs, task="megablast", **kw):
    options = make_options(task, dust="no", **kw)
    queries = [Query(f"q{i}", f"q{i}", np.asarray(s, dtype=np.uint8), np.zeros(len(s), bool))
               for i, s in enumerate(seqs)]
    return build_batch(queries, options), options


@pytest.mark.parametrize("W,E,expected", [
    (4, 10, (SMALL, 4)), (6, 10 ** 6, (STANDARD, 6)),
    (7, 249, (SMALL, 6)), (7, 250, (SMALL, 7)),
    (8, 8499, (SMALL, 7)), (8, 8500, (SMALL, 8)),
    (9, 1249, (SMALL, 7)), (9, 20999, (SMALL, 8)), (9, 21000, (MEGABLAST, 9)),
    (10, 8499, (SMALL, 8)), (10, 17999, (MEGABLAST, 9)), (10, 18000, (MEGABLAST, 10)),
    (11, 11999, (SMALL, 8)), (11, 12000, (MEGABLAST, 10)), (11, 179999, (MEGABLAST, 10)),
    (11, 180000, (MEGABLAST, 11)),
    (12, 8499, (SMALL, 8)), (12, 59999, (MEGABLAST, 10)), (12, 899999, (MEGABLAST, 11)),
    (12, 900000, (MEGABLAST, 12)),
    (28, 8499, (SMALL, 8)), (28, 8500, (MEGABLAST, 11)), (28, 299999, (MEGABLAST, 11)),
    (28, 300000, (MEGABLAST, 12)), (16, 100, (SMALL, 8)),
])
def test_choice_by_entries(W, E, expected):
    assert choose_table(W, E, 100) == expected


def test_small_falls_back_to_standard_on_offsets():
    assert choose_table(8, 32766, 32767) == (SMALL, 8)
    assert choose_table(8, 32767, 100) == (STANDARD, 8)
    assert choose_table(8, 100, 32768) == (STANDARD, 7)


def test_estimate_uses_inclusive_ends():
    # our half-open [1, 101) is BLAST's [0, 99]: 99 entries, max_off 99
    assert estimate_entries(np.array([[1, 101], [102, 202]])) == (99 * 2, 200)


def test_strides():
    def step(task, n):
        rng = np.random.default_rng(n)
        batch, options = make_batch([rng.integers(0, 4, n)], task)
        table = build_lookup(batch, options)
        return table.width, table.scan_step
    assert step("megablast", 1000) == (8, 21)
    assert step("megablast", 10000) == (11, 18)
    assert step("blastn", 1000) == (8, 4)
    assert step("blastn", 20000) == (10, 2)


def test_megablast_pv_shape():
    assert megablast_pv_shape(11, 20000) == (32768, 7)
    assert megablast_pv_shape(11, 10000) == (16384, 8)
    assert megablast_pv_shape(12, 20000) == (32768, 9)
    assert megablast_pv_shape(12, 10 ** 6) == (16384, 10)
    assert megablast_pv_shape(10, 20000)[1] == 5
    assert megablast_pv_shape(9, 100)[1] == 6


def brute_words(batch, W, w):
    """{word: [offsets in increasing order]} from the lookup segments."""
    seq = batch.sequence
    out = {}
    for a, b in batch.lookup_segments:
        if b - a < W:
            continue
        for p in range(a, b - w + 1):
            letters = seq[p:p + w]
            if (letters >= 4).any():
                continue
            word = 0
            for c in letters:
                word = word * 4 + int(c)
            out.setdefault(word, []).append(p)
    return out


def check_contents(table, batch):
    expected = brute_words(batch, table.word_size, table.width)
    order = -1 if table.kind == MEGABLAST else 1
    seen = set()
    for word, offs in expected.items():
        assert list(words_of(table, word)) == offs[::order]
        seen.add(word)
    if table.kind == SMALL:
        assert int((table.backbone != -1).sum()) == len(seen)
    elif table.kind == MEGABLAST:
        assert int((dense_hashtable(table.heads, table.present) != 0).sum()) == len(seen) \
            == table.heads.size
        present = np.unpackbits(table.present.view(np.uint8), bitorder="little")
        assert set(np.flatnonzero(present).tolist()) == seen
        for word in seen:   # every present word has its presence bit
            assert table.pv[word >> table.pv_bts] >> (word & 31) & 1
    else:
        assert int((np.diff(table.cell_start) > 0).sum()) == len(seen)
    check_listed_words(table, expected)


def check_listed_words(table, expected):
    """listed_offsets, s_TypeOfWord's view of the table: a bit for every offset it lists,
    none for any other."""
    if not table.check_masks:
        assert table.listed_offsets.size == 0
        return
    listed = sorted(q for offs in expected.values() for q in offs)
    bits = np.unpackbits(table.listed_offsets, bitorder="little")
    assert table.listed_offsets.size == (table.sequence.size + 7) // 8
    assert list(np.flatnonzero(bits)) == listed


def with_ambiguity(rng, n):
    s = rng.integers(0, 4, n).astype(np.uint8)
    s[rng.integers(0, n, max(1, n // 200))] = 14
    return s


def test_small_table_contents():
    rng = np.random.default_rng(3)
    batch, options = make_batch([with_ambiguity(rng, 900), with_ambiguity(rng, 300)])
    table = build_lookup(batch, options)
    assert table.kind == SMALL and table.width == 8
    assert table.backbone.dtype == np.int16 and table.overflow.dtype == np.int16
    check_contents(table, batch)


def test_megablast_table_contents():
    rng = np.random.default_rng(4)
    batch, options = make_batch([with_ambiguity(rng, 6000)])
    table = build_lookup(batch, options)
    assert table.kind == MEGABLAST and table.width == 11 and table.scan_step == 18
    check_contents(table, batch)


def test_megablast_table_on_threads_is_the_one_thread_table():
    rng = np.random.default_rng(8)
    seqs = [with_ambiguity(rng, n) for n in (300_000, 5, 200_000, 40_000)]
    seqs[1][:] = 14
    tables = []
    batch, options = make_batch(seqs)
    for threads in (1, 3, 16):
        with TaskPool(threads) as pool:
            tables.append(build_lookup(batch, options, pool))
    assert tables[0].kind == MEGABLAST and tables[0].num_entries >= PARALLEL_TABLE_WORDS
    for table in tables[1:]:
        for name in ("heads", "present", "present_rank", "next_pos", "pv"):
            assert np.array_equal(getattr(table, name), getattr(tables[0], name))
    check_contents(tables[2], batch)


@njit(cache=True)
def heads_of(table_heads, present, present_rank, words):
    out = np.empty(words.size, dtype=np.int64)
    for i in range(words.size):
        out[i] = chain_head(table_heads, present, present_rank, words[i])
    return out


def test_the_compiled_chain_heads_are_blasts_hashtable():
    """chain_head, which the CPU scans read, against BLAST's 4^w array of heads for every
    word of a table: present, absent, first and last of their 32."""
    rng = np.random.default_rng(9)
    batch, options = make_batch([with_ambiguity(rng, 70_000)])
    table = build_lookup(batch, options)
    assert table.kind == MEGABLAST and table.width == 11
    words = np.arange(1 << (2 * table.width), dtype=np.int64)
    heads = heads_of(table.heads, table.present, table.present_rank, words)
    assert np.array_equal(heads, dense_hashtable(table.heads, table.present))
    assert (heads != 0).sum() == table.heads.size > 0


def test_standard_table_contents():
    rng = np.random.default_rng(5)
    batch, options = make_batch([with_ambiguity(rng, 17000)], "blastn", word_size=8)
    table = build_lookup(batch, options)
    assert table.kind == STANDARD and table.width == 8
    check_contents(table, batch)


def test_short_segments_are_skipped():
    rng = np.random.default_rng(6)
    q = rng.integers(0, 4, 200).astype(np.uint8)
    lower = np.zeros(200, bool)
    lower[20:23] = True  # masked: segment [0, 20) is shorter than W=28, though w=8 fits
    options = make_options("megablast", dust="no", lcase_masking=True)
    batch = build_batch([Query("q", "q", q, lower)], options)
    table = build_lookup(batch, options)
    indexed = [int(q_off) for word in range(4 ** 8) for q_off in words_of(table, word)]
    assert min(indexed) == 1 + 23 and 1 + 5 not in indexed
    check_contents(table, batch)


def test_mask_check_flag():
    rng = np.random.default_rng(7)
    q = rng.integers(0, 4, 500)
    batch, options = make_batch([q])
    assert build_lookup(batch, options).check_masks          # small, W > w
    batch, options = make_batch([q], soft_masking=False)
    assert build_lookup(batch, options).check_masks          # small: always
    q = rng.integers(0, 4, 6000)
    batch, options = make_batch([q])
    assert build_lookup(batch, options).check_masks          # megablast, mask at hash
    batch, options = make_batch([q], soft_masking=False)
    assert not build_lookup(batch, options).check_masks
