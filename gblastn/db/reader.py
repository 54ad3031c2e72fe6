"""Reading a gblastn database: `open_db(path) -> Database`.

Each volume's LMDB environment is opened read-only without a lock file (many processes may
search one database) and one read transaction with buffers=True stays open for the life of the
Database, so the arrays and packed sequences handed out are zero-copy views of the memory map;
they stay valid until `close()`.
"""

from __future__ import annotations

import json
import mmap
import os
import threading
import zlib
from functools import lru_cache
from typing import NamedTuple

import lmdb
import numpy as np

from ..alphabet import BLASTNA_FROM_NCBI4NA
from ..errors import DatabaseError, InputError
from ..numba_start import njit
from . import format as fmt
from .seqid import describe

CODE_OF = np.ascontiguousarray(BLASTNA_FROM_NCBI4NA, dtype=np.uint8)


@njit(cache=True, nogil=True)
def _fill_true_letters(out, packed, start, end, amb_offset, amb_length, amb_code, code_of):
    """Write letters [start, end) of a packed subject into out[0:end - start] as blastna: the
    2-bit bases, then the ambiguity runs (offset, length, ncbi4na code; in increasing offset
    order) written over them, as blastna codes through code_of."""
    p = start
    while p < end and p & 3:
        out[p - start] = (packed[p >> 2] >> (2 * (3 - (p & 3)))) & 3
        p += 1
    whole = (end - p) >> 2
    # four letters of each whole byte; on slices, so the compiler vectorises the loop
    target = out[p - start:]
    source = packed[p >> 2:]
    for j in range(whole):
        byte = source[j]
        target[4 * j] = byte >> 6
        target[4 * j + 1] = (byte >> 4) & 3
        target[4 * j + 2] = (byte >> 2) & 3
        target[4 * j + 3] = byte & 3
    p += 4 * whole
    while p < end:
        out[p - start] = (packed[p >> 2] >> (2 * (3 - (p & 3)))) & 3
        p += 1
    for k in range(amb_offset.size):
        lo = np.int64(amb_offset[k])
        if lo >= end:
            break
        hi = lo + np.int64(amb_length[k])
        if hi <= start:
            continue
        code = code_of[amb_code[k]]
        for p in range(max(lo, start), min(hi, end)):
            out[p - start] = code


@njit(cache=True, nogil=True)
def fill_ranges(out, offset, ranges, packed, amb_offset, amb_length, amb_end, amb_code,
                 code_of):
    """_fill_true_letters for each range [start, end) of `ranges` (int64 [k, 2]), into
    out[start - offset:end - offset]; amb_end: the ambiguity runs' ends, which step over
    the runs ending before a range."""
    for k in range(ranges.shape[0]):
        start = ranges[k, 0]
        end = ranges[k, 1]
        skip = np.searchsorted(amb_end, start, side="right")
        _fill_true_letters(out[start - offset:end - offset], packed, start, end,
                           amb_offset[skip:], amb_length[skip:], amb_code[skip:], code_of)


@njit(cache=True, nogil=True)
def _bases_only(local, starts, ends, amb_start, amb_offset, amb_length):
    """For each window [starts[i], ends[i]) of volume sequence local[i], whether no
    ambiguity run (in increasing offset order, disjoint) overlaps it."""
    out = np.empty(local.size, dtype=np.bool_)
    for i in range(local.size):
        lo = amb_start[local[i]]
        hi = amb_start[local[i] + 1]
        # the last run starting before the window's end is the only one that may reach into it
        k = lo + np.searchsorted(amb_offset[lo:hi], ends[i])
        out[i] = k == lo or np.int64(amb_offset[k - 1]) + np.int64(amb_length[k - 1]) <= starts[i]
    return out


def _resolve(path: str) -> str:
    path = os.fspath(path)
    for candidate in (path, path + fmt.DB_SUFFIX):
        if os.path.isfile(os.path.join(candidate, fmt.MANIFEST)):
            return candidate
    raise DatabaseError(f"{path}: no gblastn database found (expected {path}{fmt.DB_SUFFIX}/"
                        f"{fmt.MANIFEST}; build one with gblastn makedb)")


def _read_manifest(directory: str, name: str) -> dict:
    try:
        with open(os.path.join(directory, fmt.MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
        version = int(manifest["format_version"])
        ok = manifest.get("format") == fmt.FORMAT_NAME
    except (OSError, ValueError, KeyError, TypeError):
        raise DatabaseError(f"{name}: damaged database (unreadable manifest)") from None
    if not ok:
        raise DatabaseError(f"{name}: not a gblastn nucleotide database")
    if version > fmt.FORMAT_VERSION:
        raise DatabaseError(f"{name}: written by a newer gblastn (format version {version}; "
                            f"this version reads up to {fmt.FORMAT_VERSION})")
    return manifest


class PackedSubjects(NamedTuple):
    """A volume's subjects as compiled code unpacks them (fill_ranges): the packed 2-bit
    bases (subject i from byte_offset[i], as concat_packed gives them), the lengths, and the
    ambiguity runs (those of subject i at amb_start[i]:amb_start[i + 1]; offset, length,
    end, ncbi4na code)."""

    packed: np.ndarray
    byte_offset: np.ndarray
    lengths: np.ndarray
    amb_start: np.ndarray
    amb_offset: np.ndarray
    amb_length: np.ndarray
    amb_end: np.ndarray
    amb_code: np.ndarray


class Volume:
    """One LMDB volume: sequences first_ordinal .. first_ordinal + num_seqs - 1."""

    def __init__(self, directory: str, index: int, entry: dict, db_name: str):
        self.index = index
        self._concat = None
        self._packed_subjects = None
        self._concat_lock = threading.Lock()
        self.first_ordinal = int(entry["first_ordinal"])
        self.num_seqs = int(entry["num_seqs"])
        self._label = f"{db_name}: volume {index} ({entry['file']})"
        path = self._path = os.path.join(directory, entry["file"])
        try:
            size = os.path.getsize(path)
        except OSError:
            raise DatabaseError(f"{self._label}: missing") from None
        if size != int(entry["file_size"]):
            raise DatabaseError(f"{self._label}: damaged (size {size}, expected {entry['file_size']})")
        try:
            self._env = lmdb.open(path, subdir=False, readonly=True, lock=False, readahead=False,
                                  max_dbs=0)
            self._txn = self._env.begin(buffers=True)
            values = {key: self._txn.get(key) for key in fmt.ARRAY_KEYS}
        except lmdb.Error as exc:
            raise DatabaseError(f"{self._label}: damaged ({exc})") from None
        if any(v is None for v in values.values()) or fmt.arrays_crc(values) != int(entry["arrays_crc"]):
            self.close()
            raise DatabaseError(f"{self._label}: damaged (checksum mismatch)")
        arrays = {key.decode(): np.frombuffer(v, dtype=dtype) for (key, dtype), v
                  in zip(fmt.ARRAY_KEYS.items(), (values[k] for k in fmt.ARRAY_KEYS))}
        self.lengths = arrays["lengths"]
        self._block_of = arrays["block_of"]
        self._block_offset = arrays["block_offset"]
        self._block_crc = arrays["block_crc"]
        self._amb_start = arrays["amb_start"]
        self._amb_offset = arrays["amb_offset"]
        self._amb_length = arrays["amb_length"]
        self._amb_code = arrays["amb_code"]
        if self.lengths.size != self.num_seqs:
            raise DatabaseError(f"{self._label}: damaged (sequence count)")
        self._blocks: dict[int, np.ndarray] = {}
        self._concat = None

    def _block(self, block: int) -> np.ndarray:
        view = self._blocks.get(block)
        if view is None:
            value = self._raw_block(block)
            self._check(block, value)
            view = np.frombuffer(value, dtype=np.uint8)
            self._blocks[block] = view
        return view

    def _raw_block(self, block: int):
        try:
            value = self._txn.get(fmt.block_key(block))
        except lmdb.Error as exc:
            raise DatabaseError(f"{self._label}: damaged ({exc})") from None
        if value is None:
            raise DatabaseError(f"{self._label}: damaged (block {block} missing)")
        return value

    def _check(self, block: int, value) -> None:
        if zlib.crc32(value) != int(self._block_crc[block]):
            raise DatabaseError(f"{self._label}: damaged (block {block} checksum mismatch)")

    def packed(self, i_local: int) -> np.ndarray:
        """Packed 2-bit bases of local sequence i (zero-copy, ceil(len/4) bytes)."""
        start = int(self._block_offset[i_local])
        return self._block(int(self._block_of[i_local]))[start:start + (int(self.lengths[i_local]) + 3) // 4]

    def ambiguities(self, i_local: int):
        lo, hi = int(self._amb_start[i_local]), int(self._amb_start[i_local + 1])
        return self._amb_offset[lo:hi], self._amb_length[lo:hi], self._amb_code[lo:hi]

    def bases_only(self, local: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Whether each window [starts[i], ends[i]) of local sequence local[i] holds bases
        only (no ambiguity code), so that its 2-bit letters are its true letters."""
        return _bases_only(np.ascontiguousarray(local, dtype=np.int64),
                           np.ascontiguousarray(starts, dtype=np.int64),
                           np.ascontiguousarray(ends, dtype=np.int64), self._amb_start,
                           self._amb_offset, self._amb_length)

    def packed_subjects(self) -> "PackedSubjects":
        """The volume's subjects as the traceback unpacks them; built once."""
        with self._concat_lock:
            if self._packed_subjects is None:
                buffer, byte_offset = self._concat_packed()
                amb_end = self._amb_offset.astype(np.int64) + self._amb_length
                self._packed_subjects = PackedSubjects(
                    buffer, byte_offset, self.lengths.astype(np.int64), self._amb_start,
                    self._amb_offset, self._amb_length, amb_end, self._amb_code)
            return self._packed_subjects

    def defline(self, i_local: int) -> str:
        value = self._txn.get(fmt.defline_key(i_local))
        if value is None:
            raise DatabaseError(f"{self._label}: damaged (defline {i_local} missing)")
        return bytes(value).decode("utf-8", "replace")

    def lookup(self, key: str) -> np.ndarray | None:
        value = self._txn.get(fmt.lookup_key(key))
        return None if value is None else np.frombuffer(value, dtype=np.int64)

    def concat_packed(self) -> tuple[np.ndarray, np.ndarray]:
        """(buffer, byte_offset [num_seqs+1]): every sequence of the volume in one read-only
        array, sequence i's packed bytes from byte_offset[i] (byte_offset[num_seqs] is the
        buffer's size); built once (pipeline jobs of one volume ask for it from several
        threads). The sequences are in database order but need not be back to back: the
        blocks are used where the volume's file holds them, gaps and all."""
        with self._concat_lock:
            return self._concat_packed()

    def _concat_packed(self) -> tuple[np.ndarray, np.ndarray]:
        if self._concat is None:
            nbytes = (self.lengths + 3) // 4
            num_blocks = self._block_crc.size
            in_place = self._blocks_in_place() if num_blocks > 1 else None
            if in_place is not None:
                buffer, block_start = in_place
                byte_offset = np.empty(self.num_seqs + 1, dtype=np.int64)
                byte_offset[:-1] = block_start[self._block_of] + self._block_offset
                byte_offset[-1] = buffer.size
            else:
                byte_offset = np.zeros(self.num_seqs + 1, dtype=np.int64)
                np.cumsum(nbytes, out=byte_offset[1:])
                if num_blocks == 1:
                    buffer = self._block(0)
                else:
                    buffer = np.empty(int(byte_offset[-1]), dtype=np.uint8)
                    self._check_blocks(buffer)
                    # read-only like a single block (LMDB's memory): one compiled variant
                    # of each stage for both
                    buffer.flags.writeable = False
            self._concat = (buffer, byte_offset)
        return self._concat

    def _blocks_in_place(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(span, block_start): the part of the volume's file from its first block to its
        last, mapped read-only, and where each block starts in it; every block checked.
        Copying the blocks end to end cost synth 8G's searches 2 GB of fresh memory, written
        by 8 threads beside the query setup and freed again at exit. None where LMDB's map
        of the file cannot be located (no /proc/self/maps): the blocks are copied."""
        views = [np.frombuffer(self._raw_block(block), dtype=np.uint8)
                 for block in range(self._block_crc.size)]
        placed = _file_offsets(self._path, [view.ctypes.data for view in views])
        if placed is None:
            return None
        first = min(placed)
        end = max(at + view.size for at, view in zip(placed, views))
        mapped_from = first - first % mmap.ALLOCATIONGRANULARITY
        with open(self._path, "rb") as handle:
            area = mmap.mmap(handle.fileno(), end - mapped_from, prot=mmap.PROT_READ,
                             offset=mapped_from)
        span = np.frombuffer(area, dtype=np.uint8, count=end - first, offset=first - mapped_from)
        block_start = np.array(placed, dtype=np.int64) - first
        for view, start in zip(views, block_start.tolist()):
            if not np.array_equal(span[start:start + 64], view[:64]):
                return None  # not where LMDB reads it: the blocks are copied instead
        self._check_blocks(None, [(block, span[start:start + view.size]) for block, (view, start)
                                  in enumerate(zip(views, block_start.tolist()))])
        return span, block_start

    def _check_blocks(self, buffer: np.ndarray | None, blocks: list | None = None) -> None:
        """Check every block (block, view) (by default LMDB's own), and copy them into
        `buffer` back to back when given; the checks and copies of a large volume run on
        several threads (zlib and numpy release the GIL)."""
        from ..tasks import TaskPool

        if blocks is None:
            blocks = [(block, np.frombuffer(self._raw_block(block), dtype=np.uint8))
                      for block in range(self._block_crc.size)]
        starts = np.zeros(len(blocks), dtype=np.int64)
        np.cumsum([view.size for _, view in blocks[:-1]], out=starts[1:])

        def check(item):
            (block, view), start = item
            self._check(block, view)
            if buffer is not None:
                buffer[start:start + view.size] = view
            # checked: the subjects' letters for traceback read it without a second check
            # (on synth 8G, 2 GB of checksums on the traceback's path)
            self._blocks[block] = view

        total = int(starts[-1]) + blocks[-1][1].size
        with TaskPool(min(8, os.cpu_count() or 1) if total > (64 << 20) else 1) as pool:
            pool.map(check, list(zip(blocks, starts.tolist())))

    def close(self) -> None:
        self._blocks = {}
        self._concat = None
        if getattr(self, "_env", None) is not None:
            try:
                self._txn.abort()
            except lmdb.Error:
                pass
            self._env.close()
            self._env = None


def _file_offsets(path: str, addresses: list) -> list | None:
    """Where in the file at `path` the bytes at each address of this process lie, read from
    the process's memory maps; None when a map of that file holds not all of them."""
    try:
        inode = os.stat(path).st_ino
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return None
    regions = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[4] == str(inode):
            low, high = (int(x, 16) for x in fields[0].split("-"))
            regions.append((low, high, int(fields[2], 16)))
    placed = []
    for address in addresses:
        region = next((r for r in regions if r[0] <= address < r[1]), None)
        if region is None:
            return None
        placed.append(address - region[0] + region[2])
    return placed


def sparse_letters(length: int) -> np.ndarray:
    """A letter array in fresh anonymous memory: pages never written are never faulted in,
    so tracebacks that fill a few thousand letters around each HSP of a chromosome pay for
    those alone. Small pages: a huge page would be faulted in whole."""
    if length < mmap.PAGESIZE:
        return np.empty(length, dtype=np.uint8)
    area = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        area.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(area, dtype=np.uint8)


class Database:
    """A whole database: counts, ids and titles by global ordinal, sequences by ordinal."""

    def __init__(self, name: str):
        self.name = os.fspath(name)
        self.directory = _resolve(self.name)
        manifest = _read_manifest(self.directory, self.name)
        try:
            self.title = str(manifest["title"])
            self.num_seqs = int(manifest["num_seqs"])
            self.total_letters = int(manifest["total_letters"])
            self.max_length = int(manifest["max_length"])
            self.created = str(manifest["created"])
            self.format_version = int(manifest["format_version"])
            self.parse_seqids = bool(manifest["parse_seqids"])
            entries = list(manifest["volumes"])
        except (KeyError, TypeError, ValueError):
            raise DatabaseError(f"{self.name}: damaged database (incomplete manifest)") from None
        self.volumes: list[Volume] = []
        try:
            for index, entry in enumerate(entries):
                self.volumes.append(Volume(self.directory, index, entry, self.name))
        except (KeyError, TypeError, ValueError):
            self.close()
            raise DatabaseError(f"{self.name}: damaged database (volume list)") from None
        except DatabaseError:
            self.close()
            raise
        self._firsts = np.array([v.first_ordinal for v in self.volumes], dtype=np.int64)
        parts = [v.lengths for v in self.volumes]
        self.lengths = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
        if self.lengths.size != self.num_seqs or int(self.lengths.sum()) != self.total_letters:
            self.close()
            raise DatabaseError(f"{self.name}: damaged database (totals do not match volumes)")
        self._describe = lru_cache(maxsize=4096)(self._describe_uncached)

    # -- locating an ordinal ---------------------------------------------------------------
    def _locate(self, ordinal: int) -> tuple[Volume, int]:
        ordinal = int(ordinal)
        if not 0 <= ordinal < self.num_seqs:
            raise IndexError(f"ordinal {ordinal} outside 0..{self.num_seqs - 1}")
        volume = self.volumes[int(np.searchsorted(self._firsts, ordinal, side="right")) - 1]
        return volume, ordinal - volume.first_ordinal

    # -- ids and titles --------------------------------------------------------------------
    def defline(self, ordinal: int) -> str:
        volume, local = self._locate(ordinal)
        return volume.defline(local)

    def _describe_uncached(self, ordinal: int) -> tuple[str, str, str]:
        return describe(self.defline(ordinal), self.parse_seqids)

    def seq_id(self, ordinal: int) -> str:
        return self._describe(int(ordinal))[0]

    def accession(self, ordinal: int) -> str:
        return self._describe(int(ordinal))[1]

    def title_of(self, ordinal: int) -> str:
        return self._describe(int(ordinal))[2]

    def find(self, seq_id: str) -> int:
        """Ordinal of the (first) sequence an id names, as dbcmd -entry accepts ids."""
        for volume in self.volumes:
            found = volume.lookup(seq_id.strip())
            if found is not None and found.size:
                return int(found[0])
        raise InputError(f"{self.name}: no sequence with id '{seq_id}'")

    # -- sequences -------------------------------------------------------------------------
    def packed(self, ordinal: int) -> np.ndarray:
        volume, local = self._locate(ordinal)
        return volume.packed(local)

    def ambiguities(self, ordinal: int):
        volume, local = self._locate(ordinal)
        return volume.ambiguities(local)

    def blastna(self, ordinal: int, start: int = 0, end: int | None = None) -> np.ndarray:
        """True letters of [start, end) as blastna codes (ambiguity codes restored)."""
        length = int(self.lengths[ordinal]) if 0 <= int(ordinal) < self.num_seqs else 0
        end = length if end is None else min(int(end), length)
        start = max(0, int(start))
        if end <= start:
            self._locate(ordinal)  # an ordinal outside the database is an error
            return np.zeros(0, dtype=np.uint8)
        letters = np.empty(end - start, dtype=np.uint8)
        volume, local = self._locate(ordinal)
        offsets, run_lengths, run_codes = volume.ambiguities(local)
        fill_ranges(letters, start, np.array([[start, end]], dtype=np.int64),
                    volume.packed(local), offsets, run_lengths, offsets + run_lengths,
                    run_codes, CODE_OF)
        return letters

    # -- life cycle ------------------------------------------------------------------------
    def close(self) -> None:
        for volume in self.volumes:
            volume.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_db(path: str) -> Database:
    """Opens database `path` ('NAME' or 'NAME.gdb'); DatabaseError if missing, damaged or newer."""
    return Database(path)
