"""-subject: the sequences of a FASTA file searched without a database, as blastn searches
them: like a database of those sequences (its letters and sequence count give the E-values'
search space; ambiguous bases get makeblastdb's substitutes), ids as the first token of each
defline, and no titles (blastn prints N/A). With -subject_loc, the part of each subject it
names is searched, and the reports place the HSPs on the whole subject."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from functools import cached_property
from typing import NamedTuple

import numpy as np

from ..errors import InputError
from .reader import Database
from .seqid import describe_set


class SubjectFile(NamedTuple):
    """A FASTA file given as -subject, for open_db; `location`: -subject_loc's 0-based
    first and last letters (): whole subjects."""

    path: str
    location: tuple = ()

    @property
    def label(self) -> str:
        """What outfmt 7 prints as the database."""
        return f"User specified sequence set (Input: {self.path})"


class SubjectDatabase(Database):
    """The subjects stored as a gblastn database in a temporary folder, removed on close.
    With a location, `location_starts` and `whole_lengths` give each subject's letters
    before the part searched and its whole length."""

    subject_set = True

    def __init__(self, subjects: SubjectFile):
        from .writer import make_db

        self._folder = tempfile.mkdtemp(prefix="gblastn-subjects-")
        try:
            fasta = subjects.path
            if subjects.location:
                fasta, self.location_starts, self.whole_lengths = _cut_subjects(
                    subjects.path, subjects.location, self._folder)
            # titled after the file given, which a part's temporary file stands in for
            built = make_db([fasta], os.path.join(self._folder, "subjects"),
                            title=subjects.path, progress=False, deflines_as_read=True,
                            warn=lambda message: None, blast_input=True, allow_empty=True)
            super().__init__(built)
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        self.name = subjects.label
        self._fasta = fasta
        self.record_numbers = _numbers_with_letters(fasta)
        if self.record_numbers[-1] == 0:  # blastn: "Empty CBlastQueryVector"
            self.close()
            raise InputError(f"{subjects.path}: no sequences found (empty input?)")
        # a record without letters is searched by blastn (it counts in the statistics);
        # records none of which has a letter, as one subject (BLAST_GapAlignSetUp)
        self.stats_num_seqs += int(self.record_numbers[-1]) - self.num_seqs
        if self.stats_letters == 0:
            self.stats_num_seqs = 1

    @cached_property
    def lowercase(self) -> list:
        """Each subject's lower-case letters as half-open ranges (-lcase_masking masks
        them), read when first asked for."""
        return _lowercase_ranges(self._fasta)

    def defline(self, ordinal: int) -> str:
        """The defline's bytes as they came, those that are not UTF-8 kept (as blastn
        copies them to its reports)."""
        volume, local = self._locate(ordinal)
        return volume.defline_bytes(local).decode("utf-8", "surrogateescape")

    def defline_texts(self, ordinal: int) -> list[str]:
        """One defline a subject, a ^A in it kept (blastn reads -subject's deflines whole)."""
        return [self.defline(ordinal)]

    def _describe_uncached(self, ordinal: int) -> tuple[str, str, str]:
        """The first token of the defline, or Subject_N (N the record's place in the file)
        for a subject without one; no title."""
        seq_id, accession, _ = describe_set(self.defline_texts(ordinal), False)
        if not seq_id:  # a subject without a defline: blastn numbers it
            seq_id = accession = subject_number(self, ordinal)
        return seq_id, accession, ""

    def shown_defline(self, ordinal: int) -> str:
        """The defline as blastn's pairwise and XML reports of subjects show it: the id,
        then the title with its runs of spaces made one (blastn reads them apart); empty
        for a subject without one."""
        from ..query import blast_defline

        return " ".join(word for word in blast_defline(self.defline(ordinal)).split(" ") if word)

    def taxids_of(self, ordinal: int) -> list[int]:
        """None: blastn's subjects have no Blast-def-line to carry one."""
        return []

    def close(self) -> None:
        super().close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def abandon(self) -> None:
        """The temporary folder goes (its files stay mapped until the process ends)."""
        shutil.rmtree(self._folder, ignore_errors=True)


def _cut_subjects(path: str, location: tuple, folder: str) -> tuple:
    """A FASTA file in `folder` of the part of each subject `location` (0-based first and
    last letters) names, cut at the subject's end as blastn cuts it; with each subject's
    letters before that part and its whole length (of those it leaves letters). A subject
    the part starts just past the end of is left without letters (searched all the same,
    as blastn does); one it starts further after is refused, in blastn's words."""
    from ..fasta import iter_records, reader_warning

    first, last = location
    cut_path = os.path.join(folder, "located.fa")
    starts, lengths = [], []
    with open(cut_path, "wb") as out:
        for record in iter_records(path, headerless_ok=True, header_errors="surrogateescape",
                                   report_dropped=reader_warning, blast_input=True):
            if first > record.letters.size:
                raise InputError("Invalid from coordinate (greater than sequence length)")
            # a part starting just past the end is a subject without letters, as in blastn
            out.write(b">" + record.defline.encode("utf-8", "surrogateescape") + b"\n")
            out.write(record.letters[first:last + 1].tobytes() + b"\n")
            if first < record.letters.size:
                starts.append(first)
                lengths.append(record.letters.size)
    return cut_path, np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)


def _lowercase_ranges(path: str) -> list:
    """Each subject's lower-case letters (of those with letters, in order) as half-open
    ranges: with -lcase_masking blastn masks them as a database's soft masks."""
    from ..fasta import iter_records
    from ..query import true_ranges

    return [true_ranges((record.letters >= ord("a")) & (record.letters <= ord("z")))
            for record in iter_records(path, headerless_ok=True, blast_input=True,
                                       report_dropped=lambda text: None)
            if record.letters.size]


def _numbers_with_letters(path: str) -> np.ndarray:
    """The place in the file (from 1) of each record with letters, then the number of
    records; each record without letters is warned about in blastn's words."""
    from ..fasta import Header, iter_fasta

    numbers, count, header, has_letters = [], 0, None, False

    def end_record():
        if has_letters:
            numbers.append(count)
        elif header is not None:
            label = " ".join(filter(None, (f"Subject_{count}",
                                           header.defline.decode("utf-8", "replace"))))
            print(f"Warning: [blastn] {label}: Subject sequence contains no data",
                  file=sys.stderr)

    for item in iter_fasta(path, headerless_ok=True, report_dropped=lambda text: None,
                           blast_input=True):
        if isinstance(item, Header):
            end_record()
            header, has_letters, count = item, False, count + 1
        else:
            has_letters = True
    end_record()
    return np.array(numbers + [count], dtype=np.int64)


def is_subject_set(db) -> bool:
    """Whether `db` holds -subject's sequences (whose reports name no database), itself or
    behind a view of it (LowercaseSubjects)."""
    return getattr(db, "subject_set", False)


def shown_num_seqs(db) -> int:
    """The sequences the pairwise report says the database holds: for -subject's, every
    record of the file, those without letters included, as blastn counts them."""
    return int(db.record_numbers[-1]) if is_subject_set(db) else int(db.num_seqs)


def subject_number(db, ordinal: int) -> str:
    """What blastn calls a subject where it has no id of its own: Subject_N, its place in
    the file (records without letters counted)."""
    return f"Subject_{db.record_numbers[ordinal]}"


def letters_before(db, ordinals) -> np.ndarray:
    """The letters of each subject (at `ordinals`) before the part searched: what its
    shown coordinates add (-subject_loc; none for a database)."""
    starts = getattr(db, "location_starts", None)
    return np.zeros(np.shape(ordinals), dtype=np.int64) if starts is None else starts[ordinals]


def whole_length(db, ordinal: int) -> int:
    """The subject's length as the reports give it: the whole subject's, where -subject_loc
    searched a part of it."""
    lengths = getattr(db, "whole_lengths", None)
    return int((db.lengths if lengths is None else lengths)[ordinal])
