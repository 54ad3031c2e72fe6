"""Taxonomy: each sequence's taxids, and -taxids, -negative_taxids, -taxidlist and
-negative_taxidlist restricting a search to (or clearing it of) some of them, as BLAST's
SeqDB restricts a version 5 database's ordinals before the search.

A BLAST+ database of version 5 keeps the taxids of each sequence (one per defline, 0 for a
defline without) in NAME.not beside its LMDB file NAME.ndb: an Int8 count of ordinals, the
Int8 end of each ordinal's list (in Int4 units), then the Int4 taxids; the .ndb's volname
and volinfo tables name the volumes it covers and their sequence counts. gblastn's own
databases keep one taxid a sequence (reader.py). A positive list keeps the sequences with
a listed taxid, a negative one drops those whose taxids are all listed; the deflines shown
for a kept sequence are those of its listed (or, for a negative list, unlisted) taxids.
The statistics count the kept sequences as -seqidlist's do (subset.DatabaseSubset).

Without NCBI's taxonomy name database (taxdb.bti/.btd) blastn prints N/A for the names, one
per taxid where the column lists several: so does gblastn, which never reads it.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

import lmdb
import numpy as np

from ..errors import DatabaseError, InputError
from .subset import DatabaseSubset

NOT_FOUND = ("Taxonomy ID(s) not found. This could be because the ID(s) provided are not at "
             "or below the species level. Please use get_species_taxids.sh to get taxids for "
             "nodes higher than species (see https://www.ncbi.nlm.nih.gov/books/NBK546209/).")
INVALID_LIST = "Invalid taxidlist file"
TAXIDS_SUFFIX = ".not"          # beside NAME.ndb: the taxids of each ordinal
INT4_RANGE = (-2**31, 2**31 - 1)
NAMES_WARNING = ("Warning: [blastn] Taxonomy name lookup from taxid requires installation of "
                 "taxdb database with ftp://ftp.ncbi.nlm.nih.gov/blast/db/taxdb.tar.gz")


class TaxidIndex(NamedTuple):
    """The taxids of every sequence of a database: sequence i's are taxids[start[i]:
    start[i + 1]]."""

    start: np.ndarray   # int64 [num_seqs + 1]
    taxids: np.ndarray  # int32


class TaxidFilter(NamedTuple):
    taxids: frozenset
    negative: bool

    def shows(self, taxid: int) -> bool:
        """Whether a defline of this taxid is shown for a sequence the filter keeps."""
        return (taxid in self.taxids) != self.negative


# ----------------------------------------------------------------------------------------------
# The lists


def _taxid(text: str) -> int:
    """A taxid as blastn reads one: a 32-bit decimal integer, signed or not."""
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii():
        raise InputError(INVALID_LIST)
    number = int(text)
    if not INT4_RANGE[0] <= number <= INT4_RANGE[1]:
        raise InputError(INVALID_LIST)
    return number


def parse_taxids(text: str) -> list[int]:
    """-taxids' value: taxids separated by commas, blanks around them and empty items
    ignored."""
    return [_taxid(item.strip()) for item in text.split(",") if item.strip()]


def read_taxid_list(path: str) -> list[int]:
    """A -taxidlist file: one taxid a line, blank lines ignored."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("latin-1")
    except OSError as exc:
        raise InputError(f"cannot read the taxidlist {path} ({exc.strerror})") from None
    return [_taxid(line.strip()) for line in text.splitlines() if line.strip()]


def taxid_filter(options) -> TaxidFilter | None:
    """The filter the options ask for; None without one, or when its list is empty (blastn
    then searches the whole database)."""
    for name, negative, read in (("taxids", False, parse_taxids),
                                 ("negative_taxids", True, parse_taxids),
                                 ("taxidlist", False, read_taxid_list),
                                 ("negative_taxidlist", True, read_taxid_list)):
        value = getattr(options, name)
        if value is not None:
            taxids = read(value)
            return TaxidFilter(frozenset(taxids), negative) if taxids else None
    return None


# ----------------------------------------------------------------------------------------------
# A BLAST+ database's taxid files


def _volume_counts(lmdb_path: str) -> dict[str, tuple[int, int]]:
    """{volume name: (its first ordinal in the LMDB file's numbering, its count)}, from the
    .ndb's volname and volinfo tables."""
    try:
        env = lmdb.open(lmdb_path, subdir=False, readonly=True, lock=False, max_dbs=4)
    except lmdb.Error as exc:
        raise DatabaseError(f"{lmdb_path}: cannot read the database's LMDB file ({exc})") from None
    try:
        with env.begin() as txn:
            names = env.open_db(b"volname", txn=txn, create=False, integerkey=True)
            counts = env.open_db(b"volinfo", txn=txn, create=False, integerkey=True)
            listed = [(bytes(name).decode("utf-8", "replace"), struct.unpack("<i", count)[0])
                      for (_, name), (_, count) in zip(txn.cursor(names), txn.cursor(counts))]
    except (lmdb.Error, struct.error) as exc:
        raise DatabaseError(f"{lmdb_path}: damaged LMDB file ({exc})") from None
    finally:
        env.close()
    placed, first = {}, 0
    for name, count in listed:
        placed[name] = (first, count)
        first += count
    return placed


def _read_taxid_file(path: str) -> TaxidIndex:
    """A .not file: the taxids of each ordinal of its LMDB file."""
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError:
        raise DatabaseError(f"{path}: missing (the database has no taxonomy info)") from None
    try:
        count = int(data[:8].view("<u8")[0])
        ends = data[8:8 + 8 * count].view("<u8").astype(np.int64)
        taxids = data[8 + 8 * count:].view("<i4")
    except (IndexError, ValueError):
        raise DatabaseError(f"{path}: damaged taxonomy file") from None
    if ends.size != count or (count and (np.any(np.diff(ends) < 0) or ends[-1] > taxids.size)):
        raise DatabaseError(f"{path}: damaged taxonomy file")
    return TaxidIndex(np.concatenate(([0], ends)), taxids)


def blast_taxid_index(db) -> TaxidIndex:
    """The taxids of every sequence of a BLAST+ database (its volumes' LMDB files')."""
    if db.format_version == 4:
        raise DatabaseError("Taxonomy filtering is not supported in v4 BLAST dbs")
    files: dict[str, tuple] = {}
    starts, parts = [np.zeros(1, dtype=np.int64)], []
    total = 0
    for volume in db.volumes:
        lmdb_path = os.path.join(os.path.dirname(volume.path), volume.lmdb_name)
        if lmdb_path not in files:
            files[lmdb_path] = (_volume_counts(lmdb_path),
                                _read_taxid_file(lmdb_path[:-len(".ndb")] + TAXIDS_SUFFIX))
        placed, index = files[lmdb_path]
        first, count = placed.get(os.path.basename(volume.path), (None, None))
        if count != volume.num_seqs or first + count + 1 > index.start.size:
            raise DatabaseError(f"{volume.path}: the volume is not in its LMDB file "
                                f"{lmdb_path} as its index is")
        ends = index.start[first + 1:first + count + 1]
        lo = int(index.start[first])
        starts.append(ends - lo + total)
        parts.append(index.taxids[lo:int(ends[-1]) if count else lo])
        total += int(ends[-1]) - lo if count else 0
    return TaxidIndex(np.concatenate(starts),
                      np.concatenate(parts) if parts else np.zeros(0, np.int32))


# ----------------------------------------------------------------------------------------------
# The restriction


def _listed_counts(index: TaxidIndex, taxids: frozenset) -> tuple[np.ndarray, np.ndarray]:
    """(taxids of each sequence, how many of them are listed)."""
    counts = np.diff(index.start)
    listed = np.isin(index.taxids, np.fromiter(taxids, dtype=np.int64, count=len(taxids)))
    owner = np.repeat(np.arange(counts.size), counts)
    return counts, np.bincount(owner[listed], minlength=counts.size)


def kept_sequences(index: TaxidIndex, wanted: TaxidFilter) -> np.ndarray:
    """Whether each sequence stays under the filter (bool per ordinal), as SeqDB's
    TaxIdsToOids and NegativeTaxIdsToOids choose them: DatabaseError when the list names
    none (a negative list, none that it drops)."""
    counts, listed = _listed_counts(index, wanted.taxids)
    if not wanted.negative:
        kept = listed > 0
        if not kept.any():
            raise DatabaseError(NOT_FOUND)
        return kept
    # a sequence goes when every taxid it has is listed; one with more taxids than the list
    # has stays, whatever they are (SeqDB compares the counts first)
    dropped = (listed > 0) & (listed == counts) & (counts <= len(wanted.taxids))
    if not dropped.any():
        raise DatabaseError(NOT_FOUND)
    return ~dropped


class TaxonomySubset(DatabaseSubset):
    """A database restricted by a taxid list: its kept sequences show the deflines of the
    filter's taxids only (those of a BLAST+ database; gblastn's have one each)."""

    def __init__(self, db, kept: np.ndarray, wanted: TaxidFilter):
        super().__init__(db, kept, kept)
        self._wanted = wanted

    def _shown(self, ordinal: int) -> list:
        deflines = self._db.deflines_of(ordinal)
        return [d for d in deflines if self._wanted.shows(d.taxid)] or deflines

    def _first_defline(self, ordinal: int):
        return self._shown(ordinal)[0]

    def defline(self, ordinal: int) -> str:
        return self._first_defline(ordinal).text()

    def defline_texts(self, ordinal: int) -> list[str]:
        return [found.text() for found in self._shown(ordinal)]

    def seq_id(self, ordinal: int) -> str:
        return self._db.describe_deflines(self._shown(ordinal))[0]

    def accession(self, ordinal: int) -> str:
        return self._db.describe_deflines(self._shown(ordinal))[1]

    def title_of(self, ordinal: int) -> str:
        return self._db.describe_deflines(self._shown(ordinal))[2]

    def taxids_of(self, ordinal: int) -> list[int]:
        return [d.taxid for d in self._shown(ordinal)]


def restrict_to_taxids(db, wanted: TaxidFilter):
    """`db` as the search sees it under a taxid filter."""
    kept = kept_sequences(db.taxid_index(), wanted)
    if hasattr(db, "deflines_of"):
        return TaxonomySubset(db, kept, wanted)
    return DatabaseSubset(db, kept, kept)


# ----------------------------------------------------------------------------------------------
# makeblastdb -taxid_map


def read_taxid_map(path: str) -> dict[str, int]:
    """makeblastdb's -taxid_map file: lines 'id taxid' (one blank or tab between them; a
    line of any other shape is skipped, as makeblastdb skips it), keyed by
    seqid.taxid_map_key; a later line for an id wins."""
    from .seqid import taxid_map_key

    try:
        with open(path, "rb") as handle:
            lines = handle.read().decode("latin-1").splitlines()
    except OSError as exc:
        raise InputError(f"-taxid_map: cannot read {path} ({exc.strerror})") from None
    mapping = {}
    for number, line in enumerate(lines, 1):
        fields = line.strip(" \t\r").replace("\t", " ").split(" ")
        if len(fields) != 2 or not all(fields):
            continue
        try:
            taxid = _taxid(fields[1])
        except InputError:
            raise InputError(f"{path}:{number}: taxid '{fields[1]}' is not an integer") from None
        key = taxid_map_key(fields[0])
        if key:
            mapping[key] = taxid
    return mapping


class TaxidAssignment:
    """The taxid makedb gives each defline of a sequence: -taxid's for all, or the
    -taxid_map entry of the first of the defline's ids that the map has (0 when none has
    one), as makeblastdb's CTaxIdSet gives each Blast-def-line its own."""

    def __init__(self, taxid: int | None = None, taxid_map: str | None = None):
        self.taxid = taxid or 0
        self.mapping = read_taxid_map(taxid_map) if taxid_map is not None else None
        self.matched = False

    def of_each(self, defline: str) -> list[int]:
        """The taxid of each of the sequence's deflines (-taxid_map goes with -parse_seqids,
        under which a title's ^A separates them)."""
        from .seqid import DEFLINE_SEPARATOR

        if self.mapping is None:
            return [self.taxid]
        return [self.of(part) for part in defline.split(DEFLINE_SEPARATOR)]

    def of(self, defline: str) -> int:
        from .seqid import taxid_keys

        if self.mapping is None:
            return self.taxid
        for key in taxid_keys(defline):
            if key in self.mapping:
                self.matched = True
                return self.mapping[key]
        return 0
