"""shards.py and the merge of preliminary hit lists: the hash resets as the ungapped
stage walks them, the windows a shard searches, and merged lists equal to one search's."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.engine import (RankedSubjects, merged_hit_lists, prelim_hit_lists,
                            prelim_hitlist_size, rank_order)
from gblastn.options import make_options
from gblastn import ungapped
from gblastn.shards import HashResets, _hash_walk, contiguous_shards, shard_windows, shards_of
from gblastn.ungapped import HashChains


def walk_by_hand(chunk_subject, chunk_length, limit, window):
    """The ungapped stage's offset rule, chunk by chunk, in Python (_extend_into's loop: a
    fresh hash at the two-hit window, each chunk its length and the window further on)."""
    offset_at, replay_from, offset, fresh_subject, fresh = {}, {}, window, 0, True
    for s, length in zip(chunk_subject, chunk_length):
        if fresh:
            fresh_subject = s
        if s not in offset_at:
            offset_at[s], replay_from[s] = offset, fresh_subject
        fresh = offset >= limit
        offset = window if fresh else offset + length + window
    n = max(chunk_subject) + 1
    return [offset_at[s] for s in range(n)], [replay_from[s] for s in range(n)]


@settings(deadline=None)  # the first call loads the compiled walk
@given(st.lists(st.integers(1, 3), min_size=1, max_size=20),
       st.lists(st.integers(1, 50), min_size=60, max_size=60), st.integers(1, 120),
       st.sampled_from([0, 40]))
def test_hash_walk_follows_the_ungapped_stage(chunks_per_subject, lengths, limit, window):
    subject = np.repeat(np.arange(len(chunks_per_subject)), chunks_per_subject)
    length = np.array(lengths[:subject.size], dtype=np.int64)
    first = np.searchsorted(subject, np.arange(len(chunks_per_subject)))
    offset, replay_from = _hash_walk(subject.astype(np.int64), length, first, np.int64(limit),
                                     np.int64(window))
    assert (offset.tolist(), replay_from.tolist()) == walk_by_hand(
        subject.tolist(), length.tolist(), limit, window)


def test_hash_walk_follows_the_hosts_chunk_loop_with_a_window():
    """The walk's offsets are the ones HashChains.chunk_offsets gives the same chunks (the
    limit lowered so that short chunks reach it): a two-hit search's replay starts where one
    search's hash would be."""
    lengths = np.array([30, 5, 44, 12, 9, 31, 2, 50, 7, 19, 23, 8], dtype=np.int64)
    window, limit = 40, 150
    offset, _ = _hash_walk(np.arange(lengths.size, dtype=np.int64), lengths,
                           np.arange(lengths.size), np.int64(limit), np.int64(window))
    chains = HashChains(window)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ungapped, "HASH_OFFSET_LIMIT", limit)
        want, epochs, _ = chains.chunk_offsets(lengths.astype(np.int32))
    assert offset.tolist() == want.tolist() and epochs.max() > 0


def fake_db(lengths, volume_sizes):
    firsts = np.cumsum([0] + volume_sizes[:-1])
    volumes = [SimpleNamespace(first_ordinal=int(f), num_seqs=n) for f, n in
               zip(firsts, volume_sizes)]
    return SimpleNamespace(lengths=np.array(lengths), volumes=volumes,
                           num_seqs=len(lengths))


def test_windows_replay_from_each_stretch_start():
    db = fake_db([10] * 8, [5, 3])
    # the stretch of subject 7 starts inside subject 6, whose first chunk has offset 10
    resets = HashResets(offset=np.array([0, 10, 20, 0, 10, 0, 10, 5]),
                        replay_from=np.array([0, 0, 0, 2, 2, 5, 5, 6]))
    windows = shard_windows(db, np.array([1, 7]), True, resets)
    assert [(w.first, w.end, w.hash_offset) for w in windows] == [(0, 2, 0), (6, 8, 10)]
    assert [(v.first_ordinal, r) for v, r in windows[1].pieces] == [(5, range(1, 3))]
    # windows that meet run on through one hash, across volumes
    windows = shard_windows(db, np.array([1, 4, 6]), True, resets)
    assert [(w.first, w.end, w.hash_offset) for w in windows] == [(0, 7, 0)]
    assert [(v.first_ordinal, r) for v, r in windows[0].pieces] == [(0, range(0, 5)),
                                                                      (5, range(0, 2))]
    # without the hash, only the shard's own runs of subjects
    plain = shard_windows(db, np.array([1, 2, 4, 5]), False)
    assert [(w.first, w.end) for w in plain] == [(1, 3), (4, 6)]
    assert [(v.first_ordinal, r) for v, r in plain[1].pieces] == [(0, range(4, 5)),
                                                                    (5, range(0, 1))]


def test_contiguous_shards_cover_the_database_once():
    db = fake_db([5, 100, 7, 60, 3, 90, 40], [7])
    for count in (1, 2, 3, 7, 9):
        shards = contiguous_shards(db, count)
        assert np.concatenate([s.ordinals for s in shards]).tolist() == list(range(7))
        assert len(shards) == min(count, 7)
    assert [s.ordinals.tolist() for s in shards_of(np.array([2, 0, 2, 5]))] == \
        [[1], [0, 2], [3]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1e-200, 1e-10, 2e-10, 3.0]),
                          st.integers(20, 24)), min_size=1, max_size=40),
       st.integers(1, 4), st.integers(1, 12), st.randoms())
def test_merged_lists_are_one_searchs(keys, parts, max_target_seqs, rnd):
    """Subjects (with tied keys aplenty) split at random into parts: the merge of the
    parts' lists keeps exactly the subjects, in the order, that one list of them all does."""
    from gblastn.engine import PrelimHits
    from gblastn.hsp import Hsps

    options = make_options("megablast", max_target_seqs=max_target_seqs)
    whole, pieces = PrelimHits(), [PrelimHits() for _ in range(parts)]
    for ordinal, (evalue, score) in enumerate(keys):
        hsps = Hsps.empty()
        hsps.score, hsps.evalue = np.array([score]), np.array([evalue])
        whole.add(0, ordinal, hsps)
        pieces[rnd.randrange(parts)].add(0, ordinal, hsps)
    expected = prelim_hit_lists(whole, options)[0].ordinal
    merged = merged_hit_lists([prelim_hit_lists(p, options) for p in pieces], options)[0]
    assert merged.tolist() == expected.tolist()
    assert len(merged) == min(len(keys), prelim_hitlist_size(options))


def test_rank_order_breaks_ties_by_the_higher_ordinal():
    keys = RankedSubjects(np.array([3, 9, 5]), np.array([1e-5, 1e-5, 1e-5]),
                          np.array([40, 40, 40]))
    assert keys.ordinal[rank_order(keys)].tolist() == [9, 5, 3]


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.integers(0, 50), st.lists(st.tuples(
    st.integers(0, 10**6), st.sampled_from([0.0, 1e-200, 1e-10, 3.0]), st.integers(0, 99)),
    max_size=6), max_size=8))
def test_packed_hit_lists_unpack_to_the_lists_in_their_order(lists):
    """A shard's hit lists sent packed reach the tracebacks as they were: the same queries
    in the same order (the merge's), each list's keys and types; in a few buffers whatever
    the number of queries."""
    import pickle

    from gblastn.shards import PackedHitLists

    ranked = {q: RankedSubjects(np.array([o for o, _, _ in rows], dtype=np.int64),
                                np.array([e for _, e, _ in rows], dtype=np.float64),
                                np.array([s for _, _, s in rows], dtype=np.int64))
              for q, rows in lists.items()}
    buffers = []
    data = pickle.dumps(PackedHitLists.of(ranked), protocol=5, buffer_callback=buffers.append)
    unpacked = pickle.loads(data, buffers=buffers).unpacked()
    assert list(unpacked) == list(ranked)
    for q, keys in ranked.items():
        for name in ("ordinal", "evalue", "score"):
            got, expected = getattr(unpacked[q], name), getattr(keys, name)
            assert got.dtype == expected.dtype and got.tolist() == expected.tolist()
    assert len(buffers) <= 5
