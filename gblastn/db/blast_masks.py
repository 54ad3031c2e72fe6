"""The masking data of a BLAST+ database (makeblastdb -mask_data): the ranges of each
sequence that a masking program (dustmasker, windowmasker, ...) masked, for -db_soft_mask
and -db_hard_mask.

makeblastdb keeps them in a column beside each volume, NAME.naa (index) and NAME.nab (data),
read as SeqDB's CSeqDBColumn reads them. The index holds big-endian Int4s: format version
(1), column type (1), offset size (4), sequence count; an Int8 data length; the Int4 offsets
of its metadata and of its offset array; then the title ("BlastDb/MaskData") and the date as
strings of a varint length; the metadata, a varint count of key/value strings (key: an
algorithm id, value: 'program:options', or 'program:options:name:description' for
makeblastdb -mask_id), padded to 8 bytes; then count + 1 Int4 offsets into
the data. Sequence i's data [offset[i], offset[i + 1]) is an Int4 count of algorithms, then
per algorithm its Int4 id, an Int4 count of ranges and the ranges as Int4 pairs [start, end).
"""

from __future__ import annotations

import struct
import threading
from typing import NamedTuple

import numpy as np

from ..errors import DatabaseError, OptionsError
from .reader import PackedSubjects

INDEX_SUFFIX, DATA_SUFFIX = ".naa", ".nab"
MASK_COLUMN_TITLE = "BlastDb/MaskData"
# EBlast_filter_program: the program an algorithm id's metadata names
PROGRAM_NAMES = {10: "dust", 20: "seg", 30: "windowmasker", 40: "repeat", 100: "other"}
NAMED_PROGRAM = 100  # what makeblastdb -mask_id's algorithms are stored as
MASK_LETTER = 14  # what SeqDB writes at a hard-masked position (ncbi4na: B)


class MaskAlgorithm(NamedTuple):
    """An algorithm of a database's masking data: its id, program name and options."""

    algorithm_id: int
    program: str
    options: str

    def description(self) -> str:
        """As the pairwise report names it: "'dust', options: 'window=64; ...'"."""
        return f"'{self.program}'" + (f", options: '{self.options}'" if self.options else "")


class _Reader:
    """Reads a column index's fields in order; DatabaseError when it ends early."""

    def __init__(self, data: bytes, path: str):
        self.data, self.pos, self.path = data, 0, path

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise DatabaseError(f"{self.path}: damaged masking data (truncated)")
        self.pos += size
        return self.data[self.pos - size:self.pos]

    def int4(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def varint(self) -> int:
        """CBlastDbBlob's variable-length integer: 7 bits a byte while the high bit is set,
        then 6 bits and a sign bit in the last byte."""
        value = 0
        while True:
            byte = self.take(1)[0]
            if byte & 0x80:
                value = (value << 7) | (byte & 0x7F)
                continue
            value = (value << 6) | (byte & 0x3F)
            return -value if byte & 0x40 else value

    def string(self) -> str:
        return self.take(self.varint()).decode("latin-1")


class VolumeMasks:
    """One volume's masking data: its algorithms and the offsets of each sequence's data."""

    def __init__(self, volume_path: str, num_seqs: int):
        self.path = volume_path + INDEX_SUFFIX
        try:
            with open(self.path, "rb") as handle:
                index = handle.read()
            with open(volume_path + DATA_SUFFIX, "rb") as handle:
                self._data = handle.read()
        except FileNotFoundError:
            self.algorithms, self._offsets = {}, np.zeros(num_seqs + 1, dtype=np.int64)
            return
        except OSError as exc:
            raise DatabaseError(f"{self.path}: cannot read the masking data ({exc.strerror})") \
                from None
        self.algorithms, self._offsets = self._read_index(_Reader(index, self.path), num_seqs)

    def _read_index(self, fields: _Reader, num_seqs: int) -> tuple[dict, np.ndarray]:
        version, column_type, offset_size, count = (fields.int4() for _ in range(4))
        fields.take(8)  # the data's length
        metadata_at, offsets_at = fields.int4(), fields.int4()
        title = fields.string()
        fields.string()  # the date
        if (version, column_type, offset_size) != (1, 1, 4) or count != num_seqs \
                or title != MASK_COLUMN_TITLE or fields.pos != metadata_at:
            raise DatabaseError(f"{self.path}: not masking data of its volume")
        algorithms = {}
        for _ in range(fields.varint()):
            key, value = fields.string(), fields.string()
            program, _, options = value.partition(":")
            if not key.isdigit() or not program.isdigit():
                raise DatabaseError(f"{self.path}: damaged masking data (algorithm {key!r})")
            name = PROGRAM_NAMES.get(int(program), "other")
            named = options.split(":")
            if int(program) == NAMED_PROGRAM and len(named) == 3:
                # makeblastdb -mask_id: 'program:options:name:description', shown by its name
                options, name, _ = named
            algorithms[int(key)] = MaskAlgorithm(int(key), name, options)
        fields.pos = offsets_at
        offsets = np.frombuffer(fields.take(4 * (count + 1)), dtype=">i4").astype(np.int64)
        if np.any(np.diff(offsets) < 0) or offsets[-1] > len(self._data):
            raise DatabaseError(f"{self.path}: damaged masking data (offsets)")
        return algorithms, offsets

    def ranges(self, local: int, algorithm_id: int) -> np.ndarray:
        """The masked ranges [start, end) of local sequence `local` by that algorithm, in
        increasing order: int64 [k, 2]."""
        lo, hi = int(self._offsets[local]), int(self._offsets[local + 1])
        fields = _Reader(self._data[lo:hi], self.path)
        for _ in range(fields.int4() if hi > lo else 0):
            found, count = fields.int4(), fields.int4()
            pairs = np.frombuffer(fields.take(8 * count), dtype=">i4")
            if found == algorithm_id:
                return pairs.astype(np.int64).reshape(count, 2)
        return np.zeros((0, 2), dtype=np.int64)


class StoredMasks:
    """The masking data of a gblastn volume (makedb -mask_data), as VolumeMasks offers a
    BLAST+ volume's: read from the volume's own arrays."""

    def __init__(self, volume, algorithms: dict):
        self._masks = volume.masks
        self.algorithms = {algorithm_id: MaskAlgorithm(algorithm_id, name, options)
                           for algorithm_id, (name, options) in algorithms.items()}

    def ranges(self, local: int, algorithm_id: int) -> np.ndarray:
        starts, ranges = self._masks[algorithm_id]
        return ranges[starts[local]:starts[local + 1]].astype(np.int64)


def volume_masks(volume, db) -> VolumeMasks | StoredMasks:
    """The masking data of a volume of `db` (none when it has none)."""
    if getattr(volume, "masks", None) is not None:
        return StoredMasks(volume, db.mask_algorithms)
    return VolumeMasks(volume.path, volume.num_seqs)


def mask_algorithm(db, algorithm_id: int) -> MaskAlgorithm | None:
    """The algorithm of that id in every volume of `db`, or None when one lacks it."""
    found = [volume_masks(volume, db).algorithms.get(algorithm_id) for volume in db.volumes]
    return found[0] if found and all(found) else None



class MaskedDatabase:
    """A database searched under -db_soft_mask or -db_hard_mask (`hard`): masked_ranges(
    ordinal) gives the ranges of that sequence its algorithm masked; everything else is the
    database's own."""

    def __init__(self, db, algorithm: MaskAlgorithm, hard: bool):
        self._db = db
        self.mask_algorithm = algorithm
        self.hard_mask = hard
        self._volume_masks = {volume.index: volume_masks(volume, db) for volume in db.volumes}
        self._traced = {}
        self._traced_lock = threading.Lock()

    def volume_masked_ranges(self, volume, local: int) -> np.ndarray:
        return self._volume_masks[volume.index].ranges(local, self.mask_algorithm.algorithm_id)

    def masked_ranges(self, ordinal: int) -> np.ndarray:
        volume, local = self._db._locate(ordinal)
        return self.volume_masked_ranges(volume, local)

    def traced_subjects(self, volume) -> PackedSubjects:
        """The volume's subjects as the traceback reads them: under -db_hard_mask with every
        masked letter a B (SeqDB's mask letter, 14 in ncbi4na), built once."""
        if not self.hard_mask:
            return volume.packed_subjects()
        with self._traced_lock:
            if volume.index not in self._traced:
                self._traced[volume.index] = _masked_letters(
                    volume.packed_subjects(),
                    [self.volume_masked_ranges(volume, local) for local in range(volume.num_seqs)])
            return self._traced[volume.index]

    def __getattr__(self, name):
        return getattr(self._db, name)


def _masked_letters(subjects: PackedSubjects, masked: list) -> PackedSubjects:
    """`subjects` with each sequence's masked ranges (masked[i], int [k, 2]) as runs of
    MASK_LETTER over its ambiguity runs: the runs of every sequence cut at both kinds of
    ends, each piece the mask's letter where a mask covers it, else the run's."""
    offsets, lengths, codes, run_start = [], [], [], [0]
    for i, ranges in enumerate(masked):
        lo, hi = int(subjects.amb_start[i]), int(subjects.amb_start[i + 1])
        run_begin = np.asarray(subjects.amb_offset[lo:hi], dtype=np.int64)
        run_end = run_begin + np.asarray(subjects.amb_length[lo:hi], dtype=np.int64)
        ranges = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        cuts = np.unique(np.concatenate((run_begin, run_end, ranges.ravel())))
        begin, end = cuts[:-1], cuts[1:]
        in_mask = _covered(ranges[:, 0], ranges[:, 1], begin)
        in_run = _covered(run_begin, run_end, begin)
        kept = in_mask | in_run
        run_index = np.searchsorted(run_end, begin, side="right")
        run_codes = np.asarray(subjects.amb_code[lo:hi])[np.minimum(run_index, hi - lo - 1)] \
            if hi > lo else np.zeros(begin.size, dtype=np.uint8)
        offsets.append(begin[kept])
        lengths.append((end - begin)[kept])
        codes.append(np.where(in_mask, MASK_LETTER, run_codes)[kept].astype(np.uint8))
        run_start.append(run_start[-1] + int(kept.sum()))
    offset = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    length = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    return PackedSubjects(subjects.packed, subjects.byte_offset, subjects.lengths,
                          _read_only(np.asarray(run_start, dtype=np.int64)), _read_only(offset),
                          _read_only(length), offset + length,
                          _read_only(np.concatenate(codes) if codes else
                                     np.zeros(0, np.uint8)))


def _covered(begin: np.ndarray, end: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Whether each position of `at` lies in one of the sorted disjoint ranges."""
    k = np.searchsorted(begin, at, side="right") - 1
    return (k >= 0) & (at < end[np.maximum(k, 0)]) if begin.size else np.zeros(at.size, bool)


def _read_only(array: np.ndarray) -> np.ndarray:
    """As a volume's arrays are: the traceback is compiled for read-only arrays (but for
    the runs' ends, computed as these are)."""
    array.flags.writeable = False
    return array


class LowercaseSubjects(MaskedDatabase):
    """-subject's sequences under -lcase_masking: blastn masks their lower-case letters as
    a database's soft masks (no seeds there, shown in lower case), naming no algorithm."""

    def __init__(self, db):
        self._db = db
        self.mask_algorithm = SUBJECT_LOWER_CASE
        self.hard_mask = False

    def volume_masked_ranges(self, volume, local: int) -> np.ndarray:
        return self._db.lowercase[volume.first_ordinal + local]


class _LowerCase(NamedTuple):
    algorithm_id: int

    def description(self) -> None:  # the pairwise report names no algorithm
        return None


SUBJECT_LOWER_CASE = _LowerCase(-1)


def mask_database(db, options):
    """`db` as the search sees it under options.db_soft_mask or db_hard_mask, or -subject's
    sequences under -lcase_masking; OptionsError, in blastn's words, when the database has
    no masking data of that algorithm."""
    if options.lcase_masking and any(len(ranges) for ranges in getattr(db, "lowercase", ())):
        return LowercaseSubjects(db)
    algorithm_id = options.db_soft_mask if options.db_soft_mask is not None \
        else options.db_hard_mask
    if algorithm_id is None:
        return db
    algorithm = mask_algorithm(db, algorithm_id)
    if algorithm is None:
        raise OptionsError(f"Masking algorithm ID {algorithm_id} is not supported in "
                           f"nucleotide '{db.name}' BLAST database")
    return MaskedDatabase(db, algorithm, hard=options.db_soft_mask is None)
