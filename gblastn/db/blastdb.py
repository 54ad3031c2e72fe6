"""Reading a BLAST+ nucleotide database as makeblastdb writes it, in place (spec §9).

A name is an alias file NAME.nal (a DBLIST of further names, relative to its folder) or a
volume: NAME.nin (index), NAME.nsq (packed bases and ambiguity runs), NAME.nhr (deflines).
makeblastdb's format versions 4 and 5 share these three files; version 5 adds a field to the
index naming its LMDB files, of which a search reads the taxids (taxonomy.py), and the
masking data of -mask_data sits beside the volumes (blast_masks.py).

.nin, big-endian Int4 unless noted: version (4 or 5), sequence type (0: nucleotide),
[v5: volume number], title and [v5: LMDB file name] as Int4 length + bytes, creation date
likewise (NUL-padded), sequence count, total letters (Int8, little-endian), longest sequence,
then num_seqs + 1 header offsets (.nhr), sequence offsets and ambiguity offsets (.nsq).
Sequence i's packed bases are .nsq bytes [seq[i], amb[i]) and its ambiguity runs
[amb[i], seq[i + 1]).

The packed bases are 2-bit, four a byte, first base in the most significant bits, as
gblastn's own volumes hold them, so the whole .nsq serves as the volume's packed buffer
(mapped, never copied): sequence i from byte seq[i]. Its last byte keeps the count of bases it
holds in its two low bits (a length divisible by 4 has an extra byte holding 0); the stages
read no base past a sequence's length. At ambiguous positions the bases are makeblastdb's
substitutes, which the scan and the preliminary extensions see, as blastn's do; the runs
restore the true letters for traceback.

Volumes named more than once (by two alias files) are searched once, but the database's size
for E-values is that of the alias tree, where each name counts with what it holds, or with
the NSEQ and LENGTH (STATS_NSEQ, STATS_TOTLEN) its alias file states: as blastn counts.
"""

from __future__ import annotations

import mmap
import os
import shlex
import struct
import threading
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

import numpy as np

from ..errors import DatabaseError, InputError
from ..numba_start import njit
from .blast_deflines import BerError, Defline, decode_deflines
from .reader import OrdinalAccess, PackedSubjects, _bases_only
from .seqid import described_by_ordinal, describe, lookup_keys

ALIAS_SUFFIX, INDEX_SUFFIX, SEQUENCE_SUFFIX, HEADER_SUFFIX = ".nal", ".nin", ".nsq", ".nhr"
NUCLEOTIDE = 0
KNOWN_VERSIONS = (4, 5)
# alias-file keys that restrict a database to some of its sequences, which is not supported
SUBSET_KEYS = ("OIDLIST", "GILIST", "TILIST", "SEQIDLIST", "TAXIDLIST", "MEMB_BIT",
               "FIRST_OID", "LAST_OID")


def split_names(text: str) -> list[str]:
    """Database names as BLAST splits a -db value or a DBLIST: on blanks, double quotes
    keeping a name with blanks whole."""
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def _search_folders() -> list[str]:
    """Where a name that is not found as given is looked for: $BLASTDB's folders."""
    return [folder for folder in os.environ.get("BLASTDB", "").split(os.pathsep) if folder]


def find_name(name: str, folder: str = "") -> str | None:
    """The path (without suffix) of database name `name`, an alias file or a volume, as given
    (relative to `folder`) or in $BLASTDB's folders; an alias file before a volume."""
    bases = [os.path.join(folder, name)]
    if not os.path.isabs(name):
        bases += [os.path.join(other, name) for other in _search_folders()]
    for base in bases:
        for suffix in (ALIAS_SUFFIX, INDEX_SUFFIX):
            if os.path.isfile(base + suffix):
                return base
    return None


def is_blast_db(text: str) -> bool:
    """Whether some name of a -db value names a BLAST+ database."""
    return any(find_name(name) is not None for name in split_names(os.fspath(text)))


# ----------------------------------------------------------------------------------------------
# Ambiguity runs


@njit(cache=True, nogil=True)
def _read_ambiguities(nsq, seq_start, amb_start_byte, lengths):
    """The ambiguity runs of every sequence of a volume, from their .nsq blocks: (damaged
    sequence or -1, run start per sequence [n + 1], offsets, lengths, ncbi4na codes).

    A block starts with an Int4 count; with its high bit set the runs are two Int4 each
    (code in bits 31-28, length - 1 in 27-16; then the offset), else one (code in 31-28,
    length - 1 in 27-24, offset in 23-0). Runs must lie in the sequence, in order."""
    n = lengths.size
    run_start = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        lo, hi = amb_start_byte[i], seq_start[i + 1]
        runs = 0
        if hi > lo:
            if hi - lo < 4:
                return i, run_start, run_start, run_start, np.zeros(0, np.uint8)
            header = (np.int64(nsq[lo]) << 24) | (np.int64(nsq[lo + 1]) << 16) | \
                (np.int64(nsq[lo + 2]) << 8) | np.int64(nsq[lo + 3])
            words = header & 0x7FFFFFFF
            new_format = header & 0x80000000 != 0
            if 4 * (words + 1) > hi - lo or (new_format and words % 2):
                return i, run_start, run_start, run_start, np.zeros(0, np.uint8)
            runs = words // 2 if new_format else words
        run_start[i + 1] = run_start[i] + runs
    total = run_start[n]
    offsets = np.empty(total, dtype=np.int64)
    run_lengths = np.empty(total, dtype=np.int64)
    codes = np.empty(total, dtype=np.uint8)
    for i in range(n):
        lo = amb_start_byte[i]
        new_format = run_start[i + 1] > run_start[i] and nsq[lo] & 0x80 != 0
        previous_end = 0
        for k in range(run_start[i], run_start[i + 1]):
            at = lo + 4 + (8 if new_format else 4) * (k - run_start[i])
            word = (np.int64(nsq[at]) << 24) | (np.int64(nsq[at + 1]) << 16) | \
                (np.int64(nsq[at + 2]) << 8) | np.int64(nsq[at + 3])
            codes[k] = word >> 28
            if new_format:
                run_lengths[k] = ((word >> 16) & 0xFFF) + 1
                offsets[k] = (np.int64(nsq[at + 4]) << 24) | (np.int64(nsq[at + 5]) << 16) | \
                    (np.int64(nsq[at + 6]) << 8) | np.int64(nsq[at + 7])
            else:
                run_lengths[k] = ((word >> 24) & 0xF) + 1
                offsets[k] = word & 0xFFFFFF
            if offsets[k] < previous_end or offsets[k] + run_lengths[k] > lengths[i]:
                return i, run_start, run_start, run_start, np.zeros(0, np.uint8)
            previous_end = offsets[k] + run_lengths[k]
    return -1, run_start, offsets, run_lengths, codes


def _read_only(array: np.ndarray) -> np.ndarray:
    """As gblastn's own volumes hand their arrays out (LMDB's memory): the stages are
    compiled for read-only arrays, and this keeps them to one compiled variant."""
    array.flags.writeable = False
    return array


# ----------------------------------------------------------------------------------------------
# A volume


def _map(path: str, label: str) -> np.ndarray:
    """A file mapped read-only as bytes (an empty file as an empty array)."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                return _read_only(np.zeros(0, dtype=np.uint8))
            area = mmap.mmap(handle.fileno(), size, prot=mmap.PROT_READ)
    except FileNotFoundError:
        raise DatabaseError(f"{label}: missing volume file {path}") from None
    except OSError as exc:
        raise DatabaseError(f"{label}: cannot read {path} ({exc.strerror})") from None
    return np.frombuffer(area, dtype=np.uint8)


class _IndexReader:
    """Reads the fields of a .nin in order; DatabaseError when it ends early."""

    def __init__(self, data: np.ndarray, label: str):
        self.data, self.pos, self.label = data, 0, label

    def take(self, size: int) -> bytes:
        if self.pos + size > self.data.size:
            raise DatabaseError(f"{self.label}: damaged index (truncated)")
        self.pos += size
        return self.data[self.pos - size:self.pos].tobytes()

    def int4(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def string(self) -> str:
        size = self.int4()
        if size < 0:
            raise DatabaseError(f"{self.label}: damaged index (string length)")
        return self.take(size).rstrip(b"\0").decode("utf-8", "replace")

    def offsets(self, count: int) -> np.ndarray:
        self.take(4 * count)
        return self.data[self.pos - 4 * count:self.pos].view(">u4").astype(np.int64)


class BlastVolume:
    """One makeblastdb volume (NAME.nin/.nsq/.nhr), mapped: the Volume interface of
    gblastn.db.reader."""

    def __init__(self, path: str, index: int = 0, first_ordinal: int = 0):
        self.path, self.index, self.first_ordinal = path, index, first_ordinal
        self._label = path
        self._ambiguity_lock = threading.Lock()
        self._runs = None
        self._packed_subjects = None
        self._read_index(_map(path + INDEX_SUFFIX, path))
        self._nsq = _map(path + SEQUENCE_SUFFIX, path)
        self._nhr = _map(path + HEADER_SUFFIX, path)
        self._check_offsets()
        self._read_lengths()

    def _read_index(self, data: np.ndarray) -> None:
        fields = _IndexReader(data, self._label)
        self.version = fields.int4()
        if self.version not in KNOWN_VERSIONS:
            raise DatabaseError(f"{self._label}: not a BLAST database volume of version 4 or 5 "
                                f"(version field {self.version})")
        if fields.int4() != NUCLEOTIDE:
            raise DatabaseError(f"{self._label}: a protein database (only nucleotide "
                                "databases are searched)")
        if self.version == 5:
            fields.int4()  # the volume's number
        self.title = fields.string()
        # version 5: the LMDB file of its ids and taxids, in the volume's folder
        self.lmdb_name = fields.string() if self.version == 5 else None
        self.created = fields.string()
        self.num_seqs = fields.int4()
        self.total_letters = struct.unpack("<q", fields.take(8))[0]
        self.max_length = fields.int4()
        if self.num_seqs < 0 or self.total_letters < 0:
            raise DatabaseError(f"{self._label}: damaged index (counts)")
        self._header_at = fields.offsets(self.num_seqs + 1)
        self._seq_at = fields.offsets(self.num_seqs + 1)
        self._amb_at = fields.offsets(self.num_seqs + 1)

    def _check_offsets(self) -> None:
        seq, amb, header = self._seq_at, self._amb_at, self._header_at
        if self.num_seqs and (seq[0] < 1 or np.any(seq[:-1] >= amb[:-1])
                              or np.any(amb[:-1] > seq[1:]) or np.any(np.diff(header) < 0)):
            raise DatabaseError(f"{self._label}: damaged index (offsets)")
        if seq[-1] > self._nsq.size:
            raise DatabaseError(f"{self._label}: damaged ({self.path}{SEQUENCE_SUFFIX} is "
                                f"truncated: {self._nsq.size} bytes, the index needs {seq[-1]})")
        if header[-1] > self._nhr.size:
            raise DatabaseError(f"{self._label}: damaged ({self.path}{HEADER_SUFFIX} is "
                                f"truncated: {self._nhr.size} bytes, the index needs {header[-1]})")

    def _read_lengths(self) -> None:
        """Lengths from each sequence's byte count and its last byte's base count."""
        seq, amb = self._seq_at[:-1], self._amb_at[:-1]
        last = self._nsq[amb - 1].astype(np.int64) if self.num_seqs else np.zeros(0, np.int64)
        self.lengths = _read_only(4 * (amb - seq - 1) + (last & 3))
        longest = int(self.lengths.max()) if self.num_seqs else 0
        if int(self.lengths.sum()) != self.total_letters or longest != self.max_length:
            raise DatabaseError(f"{self._label}: damaged (the sequences' lengths do not match "
                                "the index)")
        byte_offset = np.empty(self.num_seqs + 1, dtype=np.int64)
        byte_offset[:-1] = seq
        byte_offset[-1] = self._nsq.size
        self._concat = (self._nsq, byte_offset)

    # -- sequences -------------------------------------------------------------------------
    def packed(self, i_local: int) -> np.ndarray:
        """Packed 2-bit bases of local sequence i (zero-copy, ceil(len/4) bytes)."""
        start = int(self._seq_at[i_local])
        return self._nsq[start:start + (int(self.lengths[i_local]) + 3) // 4]

    def concat_packed(self) -> tuple[np.ndarray, np.ndarray]:
        """(the mapped .nsq, byte_offset [num_seqs + 1]): sequence i's bases from
        byte_offset[i]; byte_offset[num_seqs] is the buffer's size."""
        return self._concat

    def _ambiguity_runs(self) -> tuple:
        """(run start per sequence, offsets, lengths, codes) of the volume, read once."""
        with self._ambiguity_lock:
            if self._runs is None:
                damaged, *runs = _read_ambiguities(self._nsq, self._seq_at, self._amb_at,
                                                   np.ascontiguousarray(self.lengths))
                if damaged >= 0:
                    raise DatabaseError(f"{self._label}: damaged (ambiguity data of sequence "
                                        f"{damaged})")
                self._runs = tuple(_read_only(array) for array in runs)
            return self._runs

    def ambiguities(self, i_local: int):
        run_start, offsets, lengths, codes = self._ambiguity_runs()
        lo, hi = int(run_start[i_local]), int(run_start[i_local + 1])
        return offsets[lo:hi], lengths[lo:hi], codes[lo:hi]

    def bases_only(self, local: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Whether each window [starts[i], ends[i]) of local sequence local[i] holds bases
        only (no ambiguity code), so that its 2-bit letters are its true letters."""
        run_start, offsets, lengths, _ = self._ambiguity_runs()
        return _bases_only(np.ascontiguousarray(local, dtype=np.int64),
                           np.ascontiguousarray(starts, dtype=np.int64),
                           np.ascontiguousarray(ends, dtype=np.int64), run_start, offsets,
                           lengths)

    def packed_subjects(self) -> PackedSubjects:
        """The volume's subjects as the traceback unpacks them; built once."""
        run_start, offsets, lengths, codes = self._ambiguity_runs()
        with self._ambiguity_lock:
            if self._packed_subjects is None:
                buffer, byte_offset = self._concat
                self._packed_subjects = PackedSubjects(
                    buffer, byte_offset, self.lengths.astype(np.int64), run_start, offsets,
                    lengths, offsets + lengths, codes)
            return self._packed_subjects

    # -- deflines --------------------------------------------------------------------------
    def deflines(self, i_local: int) -> list[Defline]:
        lo, hi = int(self._header_at[i_local]), int(self._header_at[i_local + 1])
        try:
            return decode_deflines(self._nhr[lo:hi].tobytes())
        except BerError as exc:
            raise DatabaseError(f"{self._label}: damaged (defline of sequence {i_local}: "
                                f"{exc})") from None

    def close(self) -> None:
        """The maps close when the last array viewing them goes."""
        self._runs = self._packed_subjects = None


# ----------------------------------------------------------------------------------------------
# Alias files and the database


@dataclass
class _Node:
    """A name of the alias tree: the volumes it holds, in order, and its size for E-values."""

    volumes: list = field(default_factory=list)
    num_seqs: int = 0
    letters: int = 0
    title: str = ""


def newest_date(volumes: list) -> str:
    """The latest of the volumes' build dates, as SeqDB dates a database of several (the
    first where one is not in makeblastdb's form)."""
    try:
        return max((volume.created for volume in volumes),
                   key=lambda text: datetime.strptime(text, "%b %d, %Y  %I:%M %p"))
    except ValueError:
        return volumes[0].created


def _read_alias(path: str) -> dict:
    """An alias file's keys and values (the first of each key); DatabaseError unless it
    names databases, or when it keeps only some of their sequences."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("latin-1")
    except OSError as exc:
        raise DatabaseError(f"{path}: cannot read the alias file ({exc.strerror})") from None
    values = {}
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if parts and not parts[0].startswith("#"):
            values.setdefault(parts[0], parts[1] if len(parts) > 1 else "")
    subset = [key for key in SUBSET_KEYS if key in values]
    if subset:
        raise DatabaseError(f"{path}: {subset[0]} (a subset of the databases) is not supported")
    if not split_names(values.get("DBLIST", "")):
        raise DatabaseError(f"{path}: no database names were found in the alias file")
    return values


def _count(values: dict, keys: tuple, path: str) -> int | None:
    for key in keys:
        if key in values:
            try:
                number = int(values[key])
            except ValueError:
                number = -1
            if number < 0:
                raise DatabaseError(f"{path}: {key} {values[key]!r} is not a count")
            return number
    return None


class BlastDatabase(OrdinalAccess):
    """A BLAST+ database, or several (a -db value of several names): the Database
    interface of gblastn.db.reader over makeblastdb's volumes and alias files."""

    def __init__(self, name: str):
        self.name = os.fspath(name)
        self._opened: dict = {}  # real path of a volume -> BlastVolume
        self.volumes: list[BlastVolume] = []
        try:
            self._open()
        except DatabaseError:
            self.close()
            raise
        self._describe = lru_cache(maxsize=4096)(self._describe_uncached)

    def _open(self) -> None:
        names = list(dict.fromkeys(split_names(self.name)))
        if not names:
            raise DatabaseError("-db names no database")
        nodes = []
        for name in names:
            path = find_name(name)
            if path is None:
                raise DatabaseError(f"{name}: no BLAST database found ({name}{ALIAS_SUFFIX} "
                                    f"or {name}{INDEX_SUFFIX})")
            nodes.append(self._node(path, ()))
        self.title = "; ".join(node.title for node in nodes)
        # the pairwise report's footer names each database of several
        self.footer_parts = [(node.title, newest_date(node.volumes), node.letters,
                              node.num_seqs) for node in nodes] if len(nodes) > 1 else None
        self.stats_num_seqs = sum(node.num_seqs for node in nodes)
        self.stats_letters = sum(node.letters for node in nodes)
        self._order_volumes()
        first = self.volumes[0]
        if len({v.version for v in self.volumes}) > 1:
            raise DatabaseError(f"{self.name}: the databases mix BLAST database versions 4 "
                                "and 5 (blastn refuses them together)")
        self.created, self.format_version = newest_date(self.volumes), first.version
        self._firsts = np.array([v.first_ordinal for v in self.volumes], dtype=np.int64)
        self.lengths = np.concatenate([v.lengths for v in self.volumes]).astype(np.int64)
        self.num_seqs = int(self.lengths.size)
        self.total_letters = int(self.lengths.sum())
        self.max_length = max(v.max_length for v in self.volumes)
        # whether ids were parsed (-parse_seqids), as the first sequence of a volume shows
        parsed = [bool(v.num_seqs and v.deflines(0)[0].parsed) for v in self.volumes]
        self.parse_seqids = any(parsed)
        # databases made with and without -parse_seqids in one -db value: each volume's own
        self._parsed_volumes = np.array(parsed) if len(set(parsed)) > 1 else None

    def _order_volumes(self) -> None:
        """The volumes in SeqDB's order, by file name (then by path), whatever order -db
        and the alias files name them in: their ordinals break ties between subjects."""
        self.volumes.sort(key=lambda volume: (os.path.basename(volume.path), volume.path))
        first = 0
        for index, volume in enumerate(self.volumes):
            volume.index, volume.first_ordinal = index, first
            first += volume.num_seqs

    def _node(self, path: str, within: tuple) -> _Node:
        """The alias tree below `path` (an alias file's or a volume's, without suffix)."""
        if not os.path.isfile(path + ALIAS_SUFFIX):
            volume = self._volume(path)
            return _Node([volume], volume.num_seqs, volume.total_letters, volume.title)
        alias = path + ALIAS_SUFFIX
        real = os.path.realpath(alias)
        if real in within:
            raise DatabaseError(f"{alias}: the alias file names itself (through "
                                f"{' -> '.join(within)})")
        values = _read_alias(alias)
        folder = os.path.dirname(alias)
        children, seen = [], set()
        for child in split_names(values["DBLIST"]):
            found = find_name(child, folder)
            if found is None:
                base = os.path.join(folder, child)
                raise DatabaseError(f"{alias}: names {child}, which is neither an alias file "
                                    f"({base}{ALIAS_SUFFIX}) nor a volume ({base}{INDEX_SUFFIX})")
            if os.path.realpath(found) not in seen:
                seen.add(os.path.realpath(found))
                children.append(self._node(found, within + (real,)))
        num_seqs = _count(values, ("STATS_NSEQ", "NSEQ"), alias)
        letters = _count(values, ("STATS_TOTLEN", "LENGTH"), alias)
        return _Node([v for child in children for v in child.volumes],
                     sum(c.num_seqs for c in children) if num_seqs is None else num_seqs,
                     sum(c.letters for c in children) if letters is None else letters,
                     values.get("TITLE", children[0].title).strip())

    def _volume(self, path: str) -> BlastVolume:
        """The volume at `path`, opened once however often the alias tree names it."""
        real = os.path.realpath(path)
        volume = self._opened.get(real)
        if volume is None:
            first = sum(v.num_seqs for v in self.volumes)
            volume = self._opened[real] = BlastVolume(path, len(self.volumes), first)
            self.volumes.append(volume)
        return volume

    # -- ids and titles --------------------------------------------------------------------
    def _first_defline(self, ordinal: int) -> Defline:
        volume, local = self._locate(ordinal)
        return volume.deflines(local)[0]

    def deflines_of(self, ordinal: int) -> list[Defline]:
        volume, local = self._locate(ordinal)
        return volume.deflines(local)

    def defline(self, ordinal: int) -> str:
        return self._first_defline(ordinal).text()

    def ids_parsed_at(self, ordinal: int) -> bool:
        """Whether the subject's ids were parsed (its volume's -parse_seqids)."""
        if self._parsed_volumes is None:
            return self.parse_seqids
        return bool(self._parsed_volumes[np.searchsorted(self._firsts, ordinal, "right") - 1])

    def defline_texts(self, ordinal: int) -> list[str]:
        return [found.text() for found in self.deflines_of(ordinal)]

    @staticmethod
    def describe_defline(found: Defline) -> tuple[str, str, str]:
        return describe(found.text(), found.parsed)

    def _describe_uncached(self, ordinal: int) -> tuple[str, str, str]:
        deflines = self.deflines_of(ordinal)
        return described_by_ordinal(self.describe_deflines(deflines), ordinal,
                                    deflines[0].parsed)

    # -- taxonomy --------------------------------------------------------------------------
    def taxids_of(self, ordinal: int) -> list[int]:
        """The taxid of each defline of the sequence (0 for one without)."""
        return [found.taxid for found in self.deflines_of(ordinal)]

    def taxid_index(self):
        """The taxids -taxids and its kin select by (taxonomy.TaxidIndex): those of the
        version 5 LMDB files; DatabaseError for version 4, which has none."""
        from .taxonomy import blast_taxid_index

        return blast_taxid_index(self)

    def find(self, seq_id: str) -> int:
        """Ordinal of the first sequence an id names, as dbcmd -entry accepts ids (read off
        every defline in turn: makeblastdb's id indexes are not read)."""
        identifier = seq_id.strip().lower()
        for ordinal in range(self.num_seqs):
            if any(identifier in lookup_keys(found.text(), found.parsed)
                   for found in self.deflines_of(ordinal)):
                return ordinal
        raise InputError(f"{self.name}: no sequence with id '{seq_id}'")
