"""-seqidlist and -negative_seqidlist: the database restricted to (or cleared of) the
sequences a list of accessions names, as BLAST's SeqDB restricts its ordinals before the
search.

A list is a text file, one id per line (the first word of the line, a leading '>' dropped),
or the binary form `blastdb_aliastool -seqid_file_in` writes. An id names a sequence by its
accession, as makeblastdb -parse_seqids indexes them: 'NC_000001.1', 'gb|AB000003.2|',
'lcl|name', 'gnl|db|tag' ('db:tag') and 'pdb|1ABC|A' ('1ABC_A') name one; an id without a
version names every version; GIs name none. Accessions are named whatever the case and
the type the key gives them; a local id only by its name as written. The statistics then count only the sequences
searched, each with the length SeqDB estimates for it (approximate_lengths), while the
reports' database lines keep the whole database's size, as blastn's do.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

from ..errors import DatabaseError, InputError
from .seqid import _ACCESSION_TYPES, _best_accession, _parse_fasta_ids, describe_set, \
    split_defline

BINARY_MARK = b"\x00"  # the binary list's first byte; a text list never starts with NUL
_LONG_ID = 0xFF        # an id length byte saying that a 4-byte length follows


class ListKeys(NamedTuple):
    """A seqidlist's keys: `accessions` in lower case (an accession is named whatever the
    case and the type its key gives), `local` the names of local ids as written (a local id
    is named only by its own name, case and all, bare or as lcl|name); `ids` how many ids
    the list gives (GIs too)."""

    accessions: list
    local: set
    ids: int


def read_id_list(path: str) -> ListKeys:
    """The ids of a text or binary seqidlist, as keys."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise InputError(f"cannot read the seqidlist {path} ({exc.strerror})") from None
    if not data:
        raise InputError(f"the seqidlist {path} is empty: Failed to map seqidlist file")
    if data.startswith(BINARY_MARK):  # blastdb_aliastool wrote each id as it indexes it
        entries = _binary_ids(data, path)
        keys = [(entry.lower(), entry) for entry in entries]
    else:
        entries = [token for token in (split_defline(line.strip().lstrip(">"))[0]
                                       for line in data.decode("latin-1").splitlines())
                   if token]
        keys = [_key(token) for token in entries]
    return ListKeys([accession for accession, _ in keys if accession],
                    {local for _, local in keys if local}, len(entries))


def _key(token: str) -> tuple[str | None, str | None]:
    """(the accession, lower case, and the local name) a list's id names; (None, None) for
    a GI or a blank line."""
    if "|" not in token:
        return token.lower() or None, token or None
    ids = _parse_fasta_ids(token) or (token.endswith("|") and _parse_fasta_ids(token[:-1]))
    if not ids or len(ids) != 1 or ids[0][0] == "gi":
        return None, None
    local = ids[0][1][0] if ids[0][0] == "lcl" else None
    return _indexed_accession(ids), local


def _indexed_accession(ids) -> str:
    """_best_accession, lower case, as SeqDB's index holds it: a text id that gives a name
    alone (pir||NAME) in that whole form, which a list must name it by."""
    kind, fields = next(((kind, fields) for kind, fields in ids if kind in _ACCESSION_TYPES),
                        (None, None))
    if kind is not None and not fields[0]:
        return f"{kind}||{fields[1]}".lower()
    return _best_accession(ids).lower()


def _binary_ids(data: bytes, path: str) -> list[str]:
    """The ids of blastdb_aliastool's binary list: NUL, Uint8 file size, Uint8 id count,
    Uint4 title length and title, Uint1 date length and date, Uint8 (0), then each id as a
    Uint1 length (0xFF: a Uint4 length follows) and its bytes. Little-endian."""
    try:
        size, count, title_length = struct.unpack_from("<QQI", data, 1)
        at = 1 + 20 + title_length
        at += 1 + data[at] + 8
        if size != len(data):
            raise ValueError
        ids = []
        for _ in range(count):
            length = data[at]
            at += 1
            if length == _LONG_ID:
                length = struct.unpack_from("<I", data, at)[0]
                at += 4
            if at + length > len(data):
                raise ValueError
            ids.append(data[at:at + length].decode("latin-1"))
            at += length
    except (struct.error, IndexError, ValueError):
        raise InputError(f"{path}: damaged binary seqidlist") from None
    return ids


def local_name(defline: str) -> str | None:
    """The name of a defline's local id (lcl|name), as written; None for any other."""
    token, _ = split_defline(defline)
    ids = _parse_fasta_ids(token) if "|" in token else None
    return ids[0][1][0] if ids and len(ids) == 1 and ids[0][0] == "lcl" else None


def accession_of(defline: str) -> tuple[str | None, bool]:
    """The accession makeblastdb -parse_seqids indexes for a defline, lower case (None for a
    sequence with a GI only), and whether the defline has a GI."""
    token, _ = split_defline(defline)
    ids = _parse_fasta_ids(token) if "|" in token else None
    if ids is None:
        return token.lower() or None, False
    has_gi = any(kind == "gi" for kind, _ in ids)
    if all(kind == "gi" for kind, _ in ids):
        return None, has_gi
    return _indexed_accession(ids), has_gi


def _without_version(accession: str) -> str:
    stem, dot, version = accession.rpartition(".")
    return stem if dot and version.isdigit() else accession


class ListedIds(NamedTuple):
    """What a seqidlist names of a database, bool [num_seqs] each: `named` the sequences of
    which it names a defline, `whole` those of which it names every defline (its accession;
    a defline with a GI alone is never named), `versioned` those of which it names every
    defline by its accession with the version, `has_accession` and `has_gi` those with a
    defline that has one; `flags` the named deflines of each sequence of several deflines
    that it names in part."""

    named: np.ndarray
    whole: np.ndarray
    versioned: np.ndarray
    has_accession: np.ndarray
    has_gi: np.ndarray
    flags: dict


def listed_ordinals(db, keys: ListKeys) -> ListedIds:
    """The sequences and deflines of `db` that `keys` name (ListedIds). A key with a version
    names that version only."""
    if not db.parse_seqids:
        raise DatabaseError(f"{db.name}: the database has no accession info (it was made "
                            "without -parse_seqids), which -seqidlist needs")
    wanted = set(keys.accessions)
    listed = ListedIds(*(np.zeros(db.num_seqs, dtype=bool) for _ in range(5)), {})
    for ordinal in range(db.num_seqs):
        flags, exact = [], []
        for defline in db.defline_texts(ordinal):
            accession, gi = accession_of(defline)
            listed.has_gi[ordinal] |= gi
            listed.has_accession[ordinal] |= accession is not None
            local = local_name(defline)
            if local is not None:
                exact.append(local in keys.local)
                flags.append(exact[-1])
                continue
            exact.append(accession is not None and accession in wanted)
            flags.append(exact[-1] or (accession is not None and
                                       _without_version(accession) in wanted))
        listed.named[ordinal], listed.whole[ordinal] = any(flags), all(flags)
        listed.versioned[ordinal] = all(exact)
        if any(flags) and not all(flags):
            listed.flags[ordinal] = tuple(flags)
    return listed


def approximate_lengths(db) -> np.ndarray:
    """The length BLAST counts for each sequence of a restricted database (SeqDB's
    GetSeqLengthApprox): its whole bytes of bases, and for the bases of its last byte the
    low two bits of its ordinal in its volume, an estimate that spares reading that byte."""
    local = np.concatenate([np.arange(volume.num_seqs, dtype=np.int64)
                            for volume in db.volumes])
    return (db.lengths & ~3) + (local & 3)


class DatabaseSubset:
    """A database whose search sees only the sequences `searched` marks (bool per ordinal),
    and whose statistics count those `counted` marks; everything else is the database's
    own. Where the statistics count no letter, they take the database's first sequence
    alone, as BLAST_GapAlignSetUp takes a source without letters for one subject."""

    def __init__(self, db, searched: np.ndarray, counted: np.ndarray):
        self._db = db
        self.searched = searched
        self.stats_num_seqs = int(counted.sum())
        self.stats_letters = int(approximate_lengths(db)[counted].sum())
        # the filter left no sequence in the statistics (blastn warns of it for each query;
        # a negative list leaves a sequence known by its GI alone counted, not searched)
        self.filtered_empty = self.stats_num_seqs == 0
        if self.filtered_empty:
            self.stats_num_seqs, self.stats_letters = 1, int(db.lengths[0])

    def __getattr__(self, name):
        return getattr(self._db, name)


class ListedSubset(DatabaseSubset):
    """A database restricted by a seqidlist, whose kept sequences of several deflines show
    those the list names (a negative list: those it does not name), as blastn shows them."""

    def __init__(self, db, searched: np.ndarray, counted: np.ndarray, flags: dict,
                 shown_if_named: bool):
        super().__init__(db, searched, counted)
        self._flags, self._shown_if_named = flags, shown_if_named

    def _shown(self, ordinal: int, items: list) -> list:
        flags = self._flags.get(int(ordinal))
        if flags is None:
            return items
        return [item for item, named in zip(items, flags) if named == self._shown_if_named]

    def defline_texts(self, ordinal: int) -> list[str]:
        return self._shown(ordinal, self._db.defline_texts(ordinal))

    def defline(self, ordinal: int) -> str:
        return self.defline_texts(ordinal)[0]

    def seq_id(self, ordinal: int) -> str:
        return describe_set(self.defline_texts(ordinal), True)[0]

    def accession(self, ordinal: int) -> str:
        return describe_set(self.defline_texts(ordinal), True)[1]

    def title_of(self, ordinal: int) -> str:
        return describe_set(self.defline_texts(ordinal), True)[2]

    def taxids_of(self, ordinal: int) -> list[int]:
        return self._shown(ordinal, self._db.taxids_of(ordinal))


def filtered_to_nothing(db) -> bool:
    """Whether `db` is a database whose seqidlist or taxid filter left no sequence in the
    statistics."""
    return bool(getattr(db, "filtered_empty", False))


def restrict(db, options):
    """`db` as the search sees it under a seqidlist or a taxid list of the options."""
    from .taxonomy import restrict_to_taxids, taxid_filter

    wanted = taxid_filter(options)
    if wanted is not None:
        return restrict_to_taxids(db, wanted)
    listed = options.seqidlist or options.negative_seqidlist
    if listed is None:
        return db
    keys = read_id_list(listed)
    if not keys.ids:  # a list of blank lines restricts nothing, as in blastn
        return db
    ids = listed_ordinals(db, keys)
    if options.seqidlist:
        return ListedSubset(db, ids.named, ids.named, ids.flags, True)
    # a negative list searches the sequences of SeqDB's accession index that it does not
    # name whole. The statistics count every sequence but those whose every id it names:
    # of a version 4 database, those of the accession index only; of a version 5 database
    # (as makeblastdb writes by default, and as gblastn's own stand in for) a sequence with
    # a GI too, unless the list names its accessions with their versions (blastn counted
    # XY000007.1 under "XY000007", not under "XY000007.1"; AB000104.1 under neither:
    # versionless keys are matched as blastn 2.12 does only in part)
    counted = ~ids.whole | (ids.has_gi & ~ids.versioned)
    if db.format_version == 4:
        counted &= ids.has_accession
    return ListedSubset(db, ids.has_accession & ~ids.whole, counted, ids.flags, False)
