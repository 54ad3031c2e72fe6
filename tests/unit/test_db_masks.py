"""-db_soft_mask's scan ranges and -db_hard_mask's chunks, as BLAST's s_GetNextSubjectChunk
gives them, for subjects of one chunk and of several, and the letters a hard-masked
traceback reads."""

import numpy as np

from gblastn.db.blast_masks import MASK_LETTER, _masked_letters
from gblastn.db.reader import PackedSubjects
from gblastn.engine import MAX_DBSEQ_LEN, hard_masked_chunks, soft_masked_chunks, \
    subject_chunks


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


def test_hard_masked_subjects_are_cut_at_their_masks_from_byte_boundaries():
    lengths = np.array([100, 40])
    chunks = hard_masked_chunks(lengths, np.array([0, 25]),
                                lambda local: [[10, 30], [31, 33], [90, 100]] if local == 0
                                else [])
    # the unmasked [0, 10), [30, 31) from its byte boundary 28, [33, 90) from 32; the empty
    # [100, 100) none; the second subject whole
    assert chunks.local_index.tolist() == [0, 0, 0, 1]
    assert chunks.start.tolist() == [0, 28, 32, 0]
    assert chunks.length.tolist() == [10, 3, 58, 40]
    assert chunks.ranges.left.tolist() == [0, 2, 1, 0]
    assert chunks.byte_offset.tolist() == [0, 7, 8, 25]


def test_hard_masked_letters_are_runs_of_the_mask_letter_over_the_ambiguities():
    subjects = PackedSubjects(np.zeros(8, np.uint8), np.array([0, 3]), np.array([10, 10]),
                              np.array([0, 2, 2]), np.array([1, 8]), np.array([2, 2]),
                              np.array([3, 10]), np.array([15, 2], np.uint8))
    masked = _masked_letters(subjects, [np.array([[2, 5]]), np.array([[0, 3]])])
    assert masked.amb_start.tolist() == [0, 4, 5]
    assert masked.amb_offset.tolist() == [1, 2, 3, 8, 0]
    assert masked.amb_end.tolist() == [2, 3, 5, 10, 3]
    assert masked.amb_code.tolist() == [15, MASK_LETTER, MASK_LETTER, 2, MASK_LETTER]
