"""The gblastn database format (version 2; version 1 is still read): what is stored where.

A database NAME is a directory ``NAME.gdb/`` holding

* ``manifest.json``: ``format`` ("gblastn-nucl-db"), ``format_version``, ``title``, ``created``
  (BLAST's date style, e.g. "Nov 21, 2026  12:22 PM"), ``num_seqs``, ``total_letters``,
  ``max_length``, ``parse_seqids``, ``volumes``: per volume its ``file``, ``first_ordinal``,
  ``num_seqs``, ``total_letters``, ``file_size`` (bytes, checked on open), ``arrays_crc``
  (CRC-32 of its array values, checked on open), ``structure_crc`` (of its LMDB pages but
  the blocks' data, checked on open, `structure_crc`), ``keys_checksum`` (of its id keys,
  checked when an id is not found) and, for a database made with taxids, ``taxids_crc``
  (of its ``taxid`` array, checked on open); and ``checksum``, the CRC-32 of the rest of the manifest
  (`manifest_checksum`), checked on open.
* ``gen-XXXXXXXXXXXXXXXX/``, a generation: the volumes of one build, one LMDB environment
  per volume in a single file ``vNNN.mdb`` (opened with subdir=False), named in the manifest
  as ``gen-.../vNNN.mdb``. A build writes a new generation beside the current one and
  installs it by replacing ``manifest.json`` (one rename, see generations.py), so the name
  always holds one complete database.

Keys of a volume (integers in values are little-endian numpy arrays, read as zero-copy views):

* ``lengths``       int64 [n]      letters of each sequence (local index i = ordinal - first_ordinal)
* ``block_of``      int32 [n]      which block holds sequence i
* ``block_offset``  int64 [n]      byte offset of sequence i inside its block
* ``block_crc``     uint32 [blocks] CRC-32 of each block (checked on first use)
* ``blk`` + uint32 big-endian block number: packed bases of whole sequences, back to back.
  A sequence is never split; blocks are about BLOCK_BYTES, a longer sequence has a block of its
  own. Sequence i takes ceil(lengths[i] / 4) bytes: ncbi2na, four bases per byte, the first base
  in the two most significant bits (A=0 C=1 G=2 T=3), unused low bits of the last byte zero (no
  trailing count byte as in BLAST's .nsq). Because blocks hold sequences back to back in order,
  the blocks joined in order are every sequence of the volume, each starting at a byte boundary.
  Ambiguous positions hold makeblastdb's pseudo-random substitutes (see crandom.py).
* ``amb_start``     int64 [n+1]    sequence i's ambiguity runs are rows amb_start[i]:amb_start[i+1]
* ``amb_offset``    int64 [runs]   first base of the run, ``amb_length`` int64 [runs] its length,
  ``amb_code`` uint8 [runs] its ncbi4na code (runs of one code are maximal, not split)
* ``def`` + uint64 big-endian local index: the defline, the bytes read after '>'
* ``def_crc``       uint32 [n]     CRC-32 of each defline (checked on every read)
* ``taxid``         int32 [n]      the taxid of each sequence (makedb -taxid or -taxid_map),
  that of its first defline; only in a database made with either, whose volumes' manifest
  entries then have ``taxids_crc`` (a database without has taxid 0 everywhere, as
  makeblastdb's)
* ``taxids_of_deflines`` int32: for the sequences whose deflines (-parse_seqids, ^A between
  them) have taxids that differ, each defline's: their count m, their local indexes [m], the
  ends of their runs [m], then the runs; only where there are such sequences, whose
  volumes' manifest entries then have ``defline_taxids_crc``. A database that lacks it
  (made before it) gives every defline its sequence's taxid.
* ``msks`` / ``mskr`` + uint32 big-endian algorithm id: a masking algorithm's ranges (makedb
  -mask_data): int64 [n+1] starts (sequence i's ranges are rows starts[i]:starts[i+1]) and
  int32 [rows, 2] ranges [start, end) in increasing order; only in a database made with
  masking data, whose manifest then has ``mask_algorithms`` (algorithm id -> [name,
  options], as -db_soft_mask and -db_hard_mask select them and the pairwise report names
  them) and whose volumes' entries have ``masks_crc`` (of those values in algorithm order,
  checked on open)
* ``id`` + uint64 big-endian hash of an identifier (`id_hash`) + uint64 big-endian global
  ordinal, empty value: one per (identifier, sequence it names), for what ``dbcmd -entry`` and
  ``Database.find`` accept (see seqid.lookup_keys). Keys are short whatever the identifier's
  length (LMDB's keys end at 511 bytes), and a lookup checks each ordinal found against that
  sequence's (checked) defline, so neither a hash collision nor a damaged key can name the
  wrong sequence. ``keys_checksum`` is the CRC-32 of the keys without their prefix, in key
  order: a damaged key is found when an identifier is not.

Version 1 differs in: volume files ``vNNN.mdb`` beside the manifest, replaced by renaming
the whole directory; no ``def_crc``, ``structure_crc``, ``keys_checksum`` or manifest
``checksum`` (deflines, ids and LMDB's pages unchecked); ``key`` + identifier holding the int64 ordinals as its value; deflines
stored as UTF-8 with undecodable bytes replaced; a ``meta`` key that was never read.
"""

import json
import os
import struct
import zlib

import numpy as np

FORMAT_NAME = "gblastn-nucl-db"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
DB_SUFFIX = ".gdb"
MANIFEST = "manifest.json"
GENERATION_PREFIX = "gen-"
BLOCK_BYTES = 1 << 20
ORDINAL_BYTES = 8

_ARRAYS_V1 = {
    b"lengths": np.int64, b"block_of": np.int32, b"block_offset": np.int64,
    b"block_crc": np.uint32, b"amb_start": np.int64, b"amb_offset": np.int64,
    b"amb_length": np.int64, b"amb_code": np.uint8,
}
_ARRAYS_V2 = {**_ARRAYS_V1, b"def_crc": np.uint32}


def array_keys(version: int) -> dict:
    """The array keys of a volume of that format version, with their dtypes."""
    return _ARRAYS_V1 if version == 1 else _ARRAYS_V2


def volume_file(index: int) -> str:
    return f"v{index:03d}.mdb"


def block_key(block: int) -> bytes:
    return b"blk" + struct.pack(">I", block)


def defline_key(local: int) -> bytes:
    return b"def" + struct.pack(">Q", local)


def lookup_key_v1(identifier: str) -> bytes:
    return b"key" + identifier.lower().encode("utf-8", "replace")


def id_hash(identifier: str) -> int:
    """The 64-bit hash an identifier's keys are stored under: the CRC-32 of the identifier
    (lower-cased, UTF-8), then the CRC-32 of its bytes reversed. Two identifiers of one
    length that differ within 8 bytes never share it (a difference would have to be a
    multiple of both the CRC's polynomial and its reverse, 64 bits apart), and a lookup
    checks every sequence it names. zlib rather than hashlib, whose OpenSSL library would
    be a sizeable part of makedb's memory."""
    encoded = identifier.lower().encode("utf-8", "replace")
    return zlib.crc32(encoded) << 32 | zlib.crc32(encoded[::-1])


def id_key_prefix(identifier: str) -> bytes:
    """Where the id keys of the sequences `identifier` names start (version 2)."""
    return ID_KEY_PREFIX + id_hash(identifier).to_bytes(8, "big")


def ordinal_of_id_key(key: bytes) -> int:
    return int.from_bytes(key[-ORDINAL_BYTES:], "big")


TAXIDS_KEY = b"taxid"  # sorts after the id keys: put with the arrays, at a volume's end
# the taxid of each defline of the sequences whose deflines' taxids differ (int32: their
# count n, their local ordinals [n], the ends of their runs of taxids [n], the taxids)
DEFLINE_TAXIDS_KEY = b"taxids_of_deflines"
MASK_STARTS, MASK_RANGES = b"s", b"r"


def mask_key(algorithm_id: int, part: bytes) -> bytes:
    """Where a volume keeps a masking algorithm's range starts or ranges (sorts after the
    id keys: put with the arrays)."""
    return b"msk" + part + struct.pack(">I", algorithm_id)
ID_KEY_PREFIX = b"id"
ID_KEY_BYTES = len(ID_KEY_PREFIX) + 8 + ORDINAL_BYTES
ID_KEYS_END = b"ie"  # every id key sorts before this


def arrays_crc(values: dict) -> int:
    """CRC-32 over the array values in a fixed key order."""
    crc = 0
    for key in sorted(values):
        crc = zlib.crc32(bytes(values[key]), crc)
    return crc


_LMDB_PAGE_SIZE_AT = 40  # in the meta page: the free-page DB's md_pad, LMDB's mm_psize
_LMDB_FLAGS_AT = 10      # in a page header: pgno (8 bytes), pad (2), flags (2), pages (4)
_LMDB_OVERFLOW = 0x04
_HEADER_WINDOW = 16      # page headers read at a time


def structure_crc(path: str) -> int | None:
    """CRC-32 of an LMDB file's own structure: every page but the data of overflow pages
    (the blocks, which have their own checksums), so that a damaged B-tree page is found
    before LMDB follows it (it reads past the file's end and the process dies of SIGBUS).
    None when the file is not laid out as LMDB pages. The file is read a few pages at a time,
    jumping over the blocks, and not mapped: its pages stay out of the process's memory."""
    with open(path, "rb") as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        head = os.pread(fd, _LMDB_PAGE_SIZE_AT + 4, 0)
        page = int.from_bytes(head[_LMDB_PAGE_SIZE_AT:], "little")
        if size < 8192 or page < 512 or page > 65536 or page & (page - 1) or size % page:
            return None
        pages = size // page
        crc = 0
        at = 0
        while at < pages:
            window = min(_HEADER_WINDOW, pages - at)
            data = os.pread(fd, window * page, at * page)
            flags = np.ndarray((window,), dtype="<u2", buffer=data, offset=_LMDB_FLAGS_AT,
                               strides=(page,))
            heads = np.flatnonzero(flags & _LMDB_OVERFLOW)
            structure = int(heads[0]) if heads.size else window  # pages before an overflow
            crc = zlib.crc32(data[:structure * page], crc)
            at += structure
            if not heads.size:
                continue
            header = data[structure * page:structure * page + 16]
            count = int.from_bytes(header[12:16], "little")
            if count < 1 or at + count > pages:
                return None
            crc = zlib.crc32(header, crc)
            at += count
    return crc


def manifest_checksum(manifest: dict) -> int:
    """CRC-32 of the manifest without its checksum, written in one canonical way (sorted
    keys, no blanks, ASCII), so that reading the JSON back gives the same bytes."""
    body = {key: value for key, value in manifest.items() if key != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return zlib.crc32(canonical.encode("ascii"))


def manifest_text(manifest: dict) -> str:
    """The manifest file's text, its checksum added."""
    sealed = dict(manifest, checksum=manifest_checksum(manifest))
    return json.dumps(sealed, indent=1, sort_keys=True) + "\n"


def check_version(manifest: dict) -> int:
    """The manifest's format version; ValueError with the reason when this reader cannot
    read it (missing, not an integer, unknown, newer)."""
    version = manifest.get("format_version")
    if type(version) is not int:
        raise ValueError(f"format version {version!r} is not a version number")
    if version > max(READABLE_VERSIONS):
        raise ValueError(f"written by a newer gblastn (format version {version}; "
                         f"this version reads up to {max(READABLE_VERSIONS)})")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"unknown format version {version}")
    return version


def parse_size(text: int | str) -> int:
    """BLAST's size syntax: '1GB' = 10^9 bytes, '500MB', '20kB', '1000000' (bytes)."""
    if isinstance(text, int):
        return text
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    raw = text.strip().upper()
    digits = raw.rstrip("KMGTB")
    unit = raw[len(digits):]
    if not digits.isdigit() or unit not in units:
        raise ValueError(f"invalid size '{text}' (expected e.g. 1GB, 500MB, 100000)")
    return int(digits) * units[unit]
