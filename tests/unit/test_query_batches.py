"""blastn's query batches: their sizes (blast_app_util's CBatchSizeMixer, as blastn 2.12 sizes
them for every task) and the grouping of queries into them. The sizes after a batch are those
blastn chose, read from its CBatchSizeMixer::GetBatchSize under a debugger, with the
extensions counted there (docs/perf/dc-megablast.md); gblastn's searches count the same."""

import pytest

from gblastn.engine import QueryBatchSizes, query_batches

KLEB_LETTERS = 16_816_000  # under 3 Gbp: the smallest target


@pytest.mark.parametrize("extensions, letters", [
    (106, 4_999_000),   # few: the largest batch
    (1333, 3_748_125),  # 1e6 / (1334 / 5000), truncated
    (0, 100),           # none: 5e9 overflows a 32-bit int, so the smallest
])
def test_the_batch_after_the_first_is_blastns(extensions, letters):
    sizes = QueryBatchSizes("dc-megablast", KLEB_LETTERS)
    assert sizes.letters == 5_000
    sizes.searched(extensions)
    assert sizes.letters == letters


def test_the_target_grows_with_the_database_above_3_gbp():
    assert QueryBatchSizes("megablast", 8_000_000_000).letters == 13_333
    assert QueryBatchSizes("megablast", 0).letters == 5_000


def test_blastn_tasks_take_smaller_batches_than_megablasts():
    for task, largest in [("megablast", 4_999_000), ("dc-megablast", 4_999_000),
                          ("blastn", 999_000), ("blastn-short", 999_000)]:
        sizes = QueryBatchSizes(task, KLEB_LETTERS)
        sizes.searched(0)
        sizes.searched(0)  # 1e6 x 100 / 1 fits 32 bits: the largest, and the mixing restarts
        assert sizes.letters == largest and sizes.ratio < 0, task


def test_extensions_per_letter_are_mixed_until_a_bound_is_reached():
    # a database of 2,000 copies of a repeat, queried with copies of it
    sizes = QueryBatchSizes("dc-megablast", 700_000)
    sizes.searched(33_852)
    assert sizes.letters == 147_697
    sizes.searched(976_291)  # 0.3 of this batch's extensions per letter, 0.7 of the first's
    assert sizes.letters == 148_755
    sizes.searched(0)        # none: the earlier batches' rate still keeps the next one small
    assert sizes.letters == 212_507


def test_a_batch_holds_the_query_that_crosses_its_size_and_sizes_are_asked_as_it_starts():
    limits = iter([5, 3, 100])
    asked = []

    def limit():
        asked.append(len(asked))
        return next(limits)

    batches = query_batches(["aa", "bbbb", "c", "dd", "eee", "f"], limit)
    assert next(batches) == ["aa", "bbbb"]
    assert asked == [0]  # the next size is not asked before the next batch starts
    assert list(batches) == [["c", "dd"], ["eee", "f"]]
    assert asked == [0, 1, 2]
