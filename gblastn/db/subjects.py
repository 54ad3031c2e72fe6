"""-subject: the sequences of a FASTA file searched without a database, as blastn searches
them: like a database of those sequences (its letters and sequence count give the E-values'
search space; ambiguous bases get makeblastdb's substitutes), ids as the first token of each
defline, and no titles (blastn prints N/A)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import NamedTuple

from .reader import Database


class SubjectFile(NamedTuple):
    """A FASTA file given as -subject, for open_db."""

    path: str

    @property
    def label(self) -> str:
        """What outfmt 7 prints as the database."""
        return f"User specified sequence set (Input: {self.path})"


class SubjectDatabase(Database):
    """The subjects stored as a gblastn database in a temporary folder, removed on close."""

    def __init__(self, subjects: SubjectFile):
        from .writer import make_db

        self._folder = tempfile.mkdtemp(prefix="gblastn-subjects-")
        try:
            built = make_db([subjects.path], os.path.join(self._folder, "subjects"),
                            progress=False, warn=lambda message: None)
            super().__init__(built)
        except BaseException:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise
        self.name = subjects.label

    def _describe_uncached(self, ordinal: int) -> tuple[str, str, str]:
        seq_id, accession, _ = super()._describe_uncached(ordinal)
        return seq_id, accession, ""

    def taxids_of(self, ordinal: int) -> list[int]:
        """None: blastn's subjects have no Blast-def-line to carry one."""
        return []

    def close(self) -> None:
        super().close()
        shutil.rmtree(self._folder, ignore_errors=True)

    def abandon(self) -> None:
        """The temporary folder goes (its files stay mapped until the process ends)."""
        shutil.rmtree(self._folder, ignore_errors=True)
