"""-db_soft_mask's scan ranges: each chunk's unmasked stretches as BLAST's
s_GetNextSubjectChunk gives them, for subjects of one chunk and of several."""

import numpy as np

from gblastn.engine import MAX_DBSEQ_LEN, subject_chunks, soft_masked_chunks


def test_a_subject_of_one_chunk_keeps_its_unmasked_ranges_whole():
    chunks = soft_masked_chunks(subject_chunks(np.array([1000]), np.array([0])),
                                np.array([1000]), lambda local: [[0, 20], [990, 1000]])
    assert chunks.ranges.first.tolist() == [0, 3]
    assert chunks.ranges.left.tolist() == [0, 20, 1000]
    assert chunks.ranges.right.tolist() == [0, 990, 1000]


def test_the_chunks_of_a_long_subject_get_the_ranges_reaching_into_them():
    length = 12_000_000
    masks = [[100, 200], [4_999_000, 5_000_100], [9_990_000, 10_000_000]]
    chunks = soft_masked_chunks(subject_chunks(np.array([length]), np.array([0])),
                                np.array([length]), lambda local: masks)
    assert chunks.length[0] == MAX_DBSEQ_LEN
    second, third = int(chunks.start[1]), int(chunks.start[2])
    assert chunks.ranges.first.tolist() == [0, 2, 3, 4]
    assert chunks.ranges.left.tolist() == [0, 200, 5_000_100 - second, 10_000_000 - third]
    assert chunks.ranges.right.tolist() == [100, 4_999_000, 9_990_000 - second,
                                            length - third]


def test_a_chunk_without_unmasked_letters_is_not_searched():
    length = 11_000_000
    chunks = subject_chunks(np.array([length]), np.array([0]))
    second_end = int(chunks.start[1]) + MAX_DBSEQ_LEN
    masks = [[int(chunks.start[1]) - 10, second_end + 10]]
    kept = soft_masked_chunks(chunks, np.array([length]), lambda local: masks)
    assert kept.start.tolist() == [0, int(chunks.start[2])]
    taken = kept.take(np.array([1]))
    assert taken.ranges.first.tolist() == [0, 1]
    assert taken.ranges.left.tolist() == [second_end + 10 - int(chunks.start[2])]
    assert taken.ranges.right.tolist() == [int(kept.length[1])]
