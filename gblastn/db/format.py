"""The gblastn database format (version 1): what is stored where.

A database NAME is a directory ``NAME.gdb/`` holding

* ``manifest.json``: ``format`` ("gblastn-nucl-db"), ``format_version``, ``title``, ``created``
  (BLAST's date style, e.g. "Nov 21, 2026  12:22 PM"), ``num_seqs``, ``total_letters``,
  ``max_length``, ``parse_seqids`` and ``volumes``: per volume its ``file``, ``first_ordinal``,
  ``num_seqs``, ``total_letters``, ``file_size`` (bytes, checked on open) and ``arrays_crc``
  (CRC-32 of its array values, checked on open).
* one LMDB environment per volume, a single file ``vNNN.mdb`` (opened with subdir=False).

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
* ``def`` + uint64 big-endian local index: the defline (UTF-8), as read after '>'
* ``key`` + lower-cased identifier: int64 global ordinals of the sequences it names (what
  ``dbcmd -entry`` and ``Database.find`` accept; see seqid.lookup_keys)
* ``meta``          JSON: ``num_seqs``, ``first_ordinal``, ``num_blocks``
"""

import json
import struct
import zlib

import numpy as np

FORMAT_NAME = "gblastn-nucl-db"
FORMAT_VERSION = 1
DB_SUFFIX = ".gdb"
MANIFEST = "manifest.json"
BLOCK_BYTES = 4 << 20
TEMP_MARK = ".gdb-building-"

ARRAY_KEYS = {
    b"lengths": np.int64, b"block_of": np.int32, b"block_offset": np.int64,
    b"block_crc": np.uint32, b"amb_start": np.int64, b"amb_offset": np.int64,
    b"amb_length": np.int64, b"amb_code": np.uint8,
}


def volume_file(index: int) -> str:
    return f"v{index:03d}.mdb"


def block_key(block: int) -> bytes:
    return b"blk" + struct.pack(">I", block)


def defline_key(local: int) -> bytes:
    return b"def" + struct.pack(">Q", local)


def lookup_key(identifier: str) -> bytes:
    return b"key" + identifier.lower().encode("utf-8", "replace")


def arrays_crc(values: dict) -> int:
    """CRC-32 over the array values in a fixed key order."""
    crc = 0
    for key in sorted(ARRAY_KEYS):
        crc = zlib.crc32(bytes(values[key]), crc)
    return crc


def manifest_text(manifest: dict) -> str:
    return json.dumps(manifest, indent=1, sort_keys=True) + "\n"


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
