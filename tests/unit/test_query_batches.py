"""blastn's query batches: their sizes (blast_app_util's CBatchSizeMixer, as blastn 2.12 sizes
them for every task) and the grouping of queries into them. The sizes after a batch are those
blastn chose, read from its CBatchSizeMixer::GetBatchSize under a debugger, with the
extensions counted there (docs/perf/dc-megablast.md); gblastn's searches count the same. The
batches formed ahead of their counts (ForecastBatches, for a cluster's workers) are the same
batches."""

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.engine import ForecastBatches, QueryBatchSizes, query_batches

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


RATES = [0.0, 0.001, 0.05, 0.3, 2.0]  # extensions per letter a batch may keep


def extensions_of(batch: list) -> int:
    """A batch's extensions, fixed by its queries: some runs of batches keep their size, some
    change it."""
    return int(sum(length for _, length in batch) * RATES[batch[0][0] % len(RATES)])


def blastns_batches(queries: list, task: str, db_letters: int) -> list:
    sizes = QueryBatchSizes(task, db_letters)
    batches = []
    for batch in query_batches(queries, lambda: sizes.letters, size=lambda query: query[1]):
        batches.append(batch)
        sizes.searched(extensions_of(batch))
    return batches


def forecast_batches(queries: list, task: str, db_letters: int, depth: int,
                     guess_second: bool = False, lasts: list | None = None) -> tuple:
    """The batches a cluster keeps, forming up to `depth` ahead and counting them in order as
    cluster.py does: (the batches kept with their first query's index, the forecasts
    dropped); `lasts` is told, for each batch kept, whether no query was left after it when
    it was formed."""
    batches = ForecastBatches(iter(queries), QueryBatchSizes(task, db_letters),
                              size=lambda query: query[1], guess_second=guess_second)
    formed, kept, dropped = deque(), [], 0
    lasts = [] if lasts is None else lasts
    while True:
        while len(formed) < depth:
            batch = batches.next_batch()
            if batch is None:
                break
            formed.append((*batch, not batches.queries_left()))
        if not formed:
            return kept, dropped
        first, batch, last = formed.popleft()
        kept.append((first, batch))
        lasts.append(last)
        for _ in range(batches.counted(extensions_of(batch))):
            formed.pop()
            dropped += 1


@settings(max_examples=300, deadline=None)
@given(lengths=st.lists(st.integers(1, 3_000_000), max_size=40),
       task=st.sampled_from(["megablast", "blastn"]),
       db_letters=st.sampled_from([16_816_000, 8_000_000_000]),
       depth=st.integers(1, 6), guess_second=st.booleans())
def test_batches_formed_ahead_are_blastns(lengths, task, db_letters, depth, guess_second):
    queries = list(enumerate(lengths))
    expected = blastns_batches(queries, task, db_letters)
    lasts = []
    kept, _ = forecast_batches(queries, task, db_letters, depth, guess_second, lasts)
    assert [batch for _, batch in kept] == expected
    assert lasts == [False] * (len(kept) - 1) + [True] * bool(kept)
    assert [first for first, _ in kept] == [batch[0][0] for batch in expected]


def test_a_run_of_largest_batches_is_forecast_and_a_change_of_size_drops_the_forecasts():
    # rate 0.001 (ids 1 mod 5) keeps blastn's batches at the largest size, 999,000 letters;
    # rate 2.0 (id 4) makes the next batch 500,000 letters, then 714,081 as the rates mix
    queries = [(1, 5_000), (6, 999_000), (11, 999_000), (4, 999_000)] + \
        [(n, 300_000) for n in (21, 26, 31, 36, 41, 46)]
    kept, dropped = forecast_batches(queries, "blastn", 16_816_000, depth=3)
    assert [[n for n, _ in batch] for _, batch in kept] == \
        [[1], [6], [11], [4], [21, 26], [31, 36, 41], [46]]
    assert [first for first, _ in kept] == [0, 1, 2, 3, 4, 6, 9]
    # the two formed at 999,000 letters after id 4, then the two formed at 500,000
    assert dropped == 4


def test_no_forecast_before_the_first_count():
    batches = ForecastBatches([("a", 6_000), ("b", 10)], QueryBatchSizes("blastn", 0),
                              size=lambda query: query[1])
    assert batches.next_batch() == (0, [("a", 6_000)])  # 5,000 letters
    assert batches.next_batch() is None
    assert batches.counted(0) == 0
    assert batches.next_batch() == (1, [("b", 10)])
    assert batches.next_batch() is None  # the queries are spent


def test_queries_that_find_nothing_alternate_batch_sizes_and_no_forecast_is_dropped():
    """Without extensions blastn's batches alternate between the largest (4,999,000 letters)
    and the smallest (100: the next size overflows a 32-bit int): the forecasts run the rule
    on and foresee each jump. (Taking the last size, every forecast was dropped.)"""
    queries = [(0, 5_000)]  # ids 0 mod 5: no extensions (extensions_of)
    for n in range(1, 7):   # a batch of 100 letters takes one of 150, one of 4,999,000 two
        queries += [(15 * n, 150), (15 * n + 5, 2_500_000), (15 * n + 10, 2_500_000)]
    kept, dropped = forecast_batches(queries, "megablast", KLEB_LETTERS, depth=4)
    assert [sum(length for _, length in batch) for _, batch in kept] == \
        [5_000] + [150, 5_000_000] * 6
    assert dropped == 0


def test_the_second_batch_is_guessed_at_the_largest_size_before_the_first_count():
    queries = [("a", 6_000), ("b", 3_000_000), ("c", 3_000_000), ("d", 10)]
    batches = ForecastBatches(queries, QueryBatchSizes("megablast", KLEB_LETTERS),
                              size=lambda query: query[1], guess_second=True)
    assert batches.next_batch() == (0, [("a", 6_000)])  # 5,000 letters
    assert batches.next_batch() == (1, [("b", 3_000_000), ("c", 3_000_000)])  # 4,999,000
    assert batches.next_batch() is None  # nothing more before the first count
    assert batches.counted(106) == 0     # few extensions: the largest, as guessed
    assert batches.next_batch() == (3, [("d", 10)])


def test_a_wrong_guess_at_the_second_batch_is_dropped_and_formed_again():
    queries = [("a", 6_000), ("b", 150), ("c", 3_000_000)]
    batches = ForecastBatches(queries, QueryBatchSizes("megablast", KLEB_LETTERS),
                              size=lambda query: query[1], guess_second=True)
    batches.next_batch()
    assert batches.next_batch() == (1, [("b", 150), ("c", 3_000_000)])
    assert batches.counted(0) == 1       # no extensions: the smallest batch, 100 letters
    assert batches.next_batch() == (1, [("b", 150)])
