"""Reading a gblastn database: `open_db(path) -> Database`.

Each volume's LMDB environment is opened read-only without a lock file (many processes may
search one database) and one read transaction with buffers=True stays open for the life of the
Database, so the arrays and packed sequences handed out are zero-copy views of the memory map;
they stay valid until `close()`.

Everything a search reads is checked, so that damage is a DatabaseError naming the database,
never a wrong answer: the manifest (format version, and in version 2 its checksum) and each
volume's size and arrays on open, each block of packed bases on first use, each defline (version
2) on every read, and every sequence an id lookup finds against that sequence's defline. A
database replaced by a build while it is being opened is opened again, as the new one.
"""

from __future__ import annotations

import gc
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
from ..arrays import fresh_pages
from ..errors import DatabaseError, InputError
from ..numba_start import njit
from . import format as fmt
from .seqid import DEFLINE_SEPARATOR, described_by_ordinal, describe_set, lookup_keys

CODE_OF = np.ascontiguousarray(BLASTNA_FROM_NCBI4NA, dtype=np.uint8)
OPEN_ATTEMPTS = 3  # a database replaced while it is opened is opened again, this often


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


def warm_up_bases_only() -> None:
    """Load (or compile) the check a GPU megablast search makes on the windows of its
    searches made ahead (Volume.bases_only), on arrays typed as a volume's."""
    runs = np.zeros(1, dtype=np.int64)
    starts = np.zeros(2, dtype=np.int64)
    runs.flags.writeable = starts.flags.writeable = False  # LMDB's memory
    _bases_only(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64),
                np.ones(1, dtype=np.int64), starts, runs, runs)


def warm_up_letters() -> None:
    """Load (or compile) the unpacking of a subject's true letters that the pairwise, XML
    and SAM reports make (Database.blastna), on arrays typed as a volume's."""
    packed = np.zeros(1, dtype=np.uint8)
    runs = np.zeros(0, dtype=np.int64)
    codes = np.zeros(0, dtype=np.uint8)
    packed.flags.writeable = runs.flags.writeable = codes.flags.writeable = False  # LMDB's
    fill_ranges(np.empty(4, dtype=np.uint8), 0, np.array([[0, 4]], dtype=np.int64), packed,
                runs, runs, runs.copy(), codes, CODE_OF)


def _resolve(path: str) -> str:
    path = os.fspath(path)
    for candidate in (path, path + fmt.DB_SUFFIX):
        if os.path.isfile(os.path.join(candidate, fmt.MANIFEST)):
            return candidate
    raise DatabaseError(f"{path}: no gblastn database found (expected {path}{fmt.DB_SUFFIX}/"
                        f"{fmt.MANIFEST}; build one with gblastn makedb), nor a BLAST+ "
                        f"database ({path}.nal or {path}.nin)")


def _read_manifest(directory: str, name: str) -> tuple[dict, bytes]:
    """(manifest, its bytes), checked: a gblastn database, a format version this reader
    knows, and (version 2) its checksum."""
    try:
        with open(os.path.join(directory, fmt.MANIFEST), "rb") as handle:
            raw = handle.read()
        manifest = json.loads(raw)
        known_format = manifest.get("format") == fmt.FORMAT_NAME
    except (OSError, ValueError, AttributeError):
        raise DatabaseError(f"{name}: damaged database (unreadable manifest)") from None
    if not known_format:
        raise DatabaseError(f"{name}: not a gblastn nucleotide database")
    try:
        version = fmt.check_version(manifest)
    except ValueError as exc:
        raise DatabaseError(f"{name}: cannot read this database: {exc}") from None
    if version >= 2 and manifest.get("checksum") != fmt.manifest_checksum(manifest):
        raise DatabaseError(f"{name}: damaged database (manifest checksum mismatch)")
    return manifest, raw


def _manifest_bytes(directory: str) -> bytes | None:
    try:
        with open(os.path.join(directory, fmt.MANIFEST), "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _volume_path(directory: str, file: str, label: str) -> str:
    """The volume file a manifest names, which must lie inside the database directory."""
    if not isinstance(file, str) or os.path.isabs(file) or os.path.normpath(file) != file \
            or file.split("/", 1)[0] == "..":
        raise DatabaseError(f"{label}: damaged database (volume file {file!r})")
    return os.path.join(directory, file)


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

    def __init__(self, directory: str, index: int, entry: dict, db_name: str, version: int,
                 mask_ids: tuple = ()):
        self.index = index
        self.version = version
        self._concat = None
        self._packed_subjects = None
        self._concat_lock = threading.Lock()
        self.first_ordinal = int(entry["first_ordinal"])
        self.num_seqs = int(entry["num_seqs"])
        self._keys_checksum = int(entry["keys_checksum"]) if version >= 2 else None
        self._label = f"{db_name}: volume {index} ({entry['file']})"
        path = self.path = _volume_path(directory, entry["file"], db_name)
        try:
            size = os.path.getsize(path)
        except OSError:
            raise DatabaseError(f"{self._label}: missing") from None
        if size != int(entry["file_size"]):
            raise DatabaseError(f"{self._label}: damaged (size {size}, expected {entry['file_size']})")
        if version >= 2:
            self._check_structure(int(entry["structure_crc"]))
        try:
            self._env = _open_environment(path, self._label)
            self._txn = self._env.begin(buffers=True)
            values = {key: self._txn.get(key) for key in fmt.array_keys(version)}
        except lmdb.Error as exc:
            raise DatabaseError(f"{self._label}: damaged ({exc})") from None
        if any(v is None for v in values.values()) or fmt.arrays_crc(values) != int(entry["arrays_crc"]):
            self.close()
            raise DatabaseError(f"{self._label}: damaged (checksum mismatch)")
        arrays = {key.decode(): np.frombuffer(values[key], dtype=dtype)
                  for key, dtype in fmt.array_keys(version).items()}
        self.lengths = arrays["lengths"]
        self._block_of = arrays["block_of"]
        self._block_offset = arrays["block_offset"]
        self._block_crc = arrays["block_crc"]
        self._amb_start = arrays["amb_start"]
        self._amb_offset = arrays["amb_offset"]
        self._amb_length = arrays["amb_length"]
        self._amb_code = arrays["amb_code"]
        self._def_crc = arrays.get("def_crc")  # version 1 stored none
        if self.lengths.size != self.num_seqs:
            raise DatabaseError(f"{self._label}: damaged (sequence count)")
        self.taxids = self._read_taxids(entry.get("taxids_crc"))
        self.defline_taxids = self._read_defline_taxids(entry.get("defline_taxids_crc"))
        self.masks = self._read_masks(mask_ids, entry.get("masks_crc"))
        self._blocks: dict[int, np.ndarray] = {}
        self._concat = None

    def _read_taxids(self, expected_crc) -> np.ndarray:
        """The taxid of each sequence (makedb -taxid or -taxid_map; 0 for a sequence without,
        and for every sequence of a database made with neither, which stores none)."""
        if expected_crc is None:
            return np.zeros(self.num_seqs, dtype=np.int32)
        value = self._get(fmt.TAXIDS_KEY)
        if value is None or len(value) != 4 * self.num_seqs \
                or zlib.crc32(value) != int(expected_crc):
            raise DatabaseError(f"{self._label}: damaged (taxids)")
        return np.frombuffer(value, dtype="<i4")

    def _read_defline_taxids(self, expected_crc) -> dict:
        """Local ordinal -> the taxid of each of its deflines, for the sequences whose
        deflines' taxids differ (format.DEFLINE_TAXIDS_KEY); the others' deflines share
        their sequence's taxid."""
        if expected_crc is None:
            return {}
        value = self._get(fmt.DEFLINE_TAXIDS_KEY)
        if value is None or zlib.crc32(value) != int(expected_crc):
            raise DatabaseError(f"{self._label}: damaged (taxids of deflines)")
        table = np.frombuffer(value, dtype="<i4")
        count = int(table[0])
        ordinals, ends = table[1:count + 1], table[count + 1:2 * count + 1]
        runs = np.split(table[2 * count + 1:], ends[:-1])
        return {int(local): run.tolist() for local, run in zip(ordinals, runs)}

    def _read_masks(self, mask_ids: tuple, expected_crc) -> dict:
        """Each masking algorithm's (starts, ranges) (makedb -mask_data): sequence i's
        ranges [start, end) are rows starts[i]:starts[i + 1] of ranges, int32 [rows, 2]."""
        if (expected_crc is None) != (not mask_ids):
            raise DatabaseError(f"{self._label}: damaged (masking data)")
        masks, crc = {}, 0
        for algorithm_id in mask_ids:
            starts = self._get(fmt.mask_key(algorithm_id, fmt.MASK_STARTS))
            ranges = self._get(fmt.mask_key(algorithm_id, fmt.MASK_RANGES))
            if starts is None or ranges is None or len(starts) != 8 * (self.num_seqs + 1) \
                    or len(ranges) % 8:
                raise DatabaseError(f"{self._label}: damaged (masking data)")
            crc = zlib.crc32(ranges, zlib.crc32(starts, crc))
            masks[algorithm_id] = (np.frombuffer(starts, dtype="<i8"),
                                   np.frombuffer(ranges, dtype="<i4").reshape(-1, 2))
        if mask_ids and crc != int(expected_crc):
            raise DatabaseError(f"{self._label}: damaged (masking data checksum mismatch)")
        for starts, ranges in masks.values():
            if starts[0] != 0 or starts[-1] != len(ranges) or np.any(np.diff(starts) < 0):
                raise DatabaseError(f"{self._label}: damaged (masking data)")
        return masks

    def _check_structure(self, expected: int) -> None:
        """LMDB follows its pages without checking them; they are checked before it does."""
        try:
            found = fmt.structure_crc(self.path)
        except OSError as exc:
            raise DatabaseError(f"{self._label}: unreadable ({exc})") from None
        if found != expected:
            raise DatabaseError(f"{self._label}: damaged (structure checksum mismatch)")

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

    def _get(self, key: bytes):
        try:
            return self._txn.get(key)
        except lmdb.Error as exc:
            raise DatabaseError(f"{self._label}: damaged ({exc})") from None

    def defline(self, i_local: int) -> str:
        return self.defline_bytes(i_local).decode("utf-8", "replace")

    def defline_bytes(self, i_local: int) -> bytes:
        value = self._get(fmt.defline_key(i_local))
        if value is None:
            raise DatabaseError(f"{self._label}: damaged (defline {i_local} missing)")
        if self._def_crc is not None and zlib.crc32(value) != int(self._def_crc[i_local]):
            raise DatabaseError(f"{self._label}: damaged (defline {i_local} checksum mismatch)")
        return bytes(value)

    def ordinals_named(self, identifier: str) -> list[int]:
        """Global ordinals of the sequences that have an id key for `identifier`, unchecked
        against their deflines (Database.find checks them)."""
        if self.version == 1:
            value = self._get(fmt.lookup_key_v1(identifier))
            return [] if value is None else np.frombuffer(value, dtype=np.int64).tolist()
        prefix = fmt.id_key_prefix(identifier)
        found = []
        try:
            with self._txn.cursor() as cursor:
                if cursor.set_range(prefix):
                    for key in cursor.iternext(values=False):
                        key = bytes(key)
                        if not key.startswith(prefix):
                            break
                        if len(key) == len(prefix) + fmt.ORDINAL_BYTES:
                            found.append(fmt.ordinal_of_id_key(key))
        except lmdb.Error as exc:
            raise DatabaseError(f"{self._label}: damaged ({exc})") from None
        return found

    def check_id_keys(self) -> None:
        """DatabaseError unless the volume's id keys are those written (version 2): an id
        that is not found is then truly absent, not lost to a damaged key."""
        if self._keys_checksum is None:
            return
        checksum = 0
        try:
            with self._txn.cursor() as cursor:
                if cursor.set_range(fmt.ID_KEY_PREFIX):
                    for key in cursor.iternext(values=False):
                        if bytes(key[:len(fmt.ID_KEYS_END)]) >= fmt.ID_KEYS_END:
                            break
                        if len(key) != fmt.ID_KEY_BYTES:
                            raise DatabaseError(f"{self._label}: damaged (an id key's length)")
                        checksum = zlib.crc32(key[len(fmt.ID_KEY_PREFIX):], checksum)
        except lmdb.Error as exc:
            raise DatabaseError(f"{self._label}: damaged ({exc})") from None
        if checksum != self._keys_checksum:
            raise DatabaseError(f"{self._label}: damaged (id keys checksum mismatch)")

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
        Copying the blocks end to end would cost a search as much fresh memory as the
        volume's packed bases, written beside the query setup and freed again at exit. None
        where LMDB's map of the file cannot be located (no /proc/self/maps): the blocks are
        copied."""
        views = [np.frombuffer(self._raw_block(block), dtype=np.uint8)
                 for block in range(self._block_crc.size)]
        placed = _file_offsets(self.path, [view.ctypes.data for view in views])
        if placed is None:
            return None
        first = min(placed)
        end = max(at + view.size for at, view in zip(placed, views))
        mapped_from = first - first % mmap.ALLOCATIONGRANULARITY
        try:
            with open(self.path, "rb") as handle:
                area = mmap.mmap(handle.fileno(), end - mapped_from, prot=mmap.PROT_READ,
                                 offset=mapped_from)
        except OSError:
            return None  # removed since (a build replaced the database): the blocks are copied
        span = np.frombuffer(area, dtype=np.uint8, count=end - first, offset=first - mapped_from)
        block_start = np.array(placed, dtype=np.int64) - first
        for view, start in zip(views, block_start.tolist()):
            if not np.array_equal(span[start:start + 64], view[:64]):
                return None  # not where LMDB reads it: the blocks are copied instead
        # py-lmdb faults every page of a value in as it hands it out, and the span maps the
        # same pages again: held in both maps, the volume counted twice in the process's RSS
        for view in views:
            _unmapped_pages(view)
        self._check_blocks(None, [(block, span[start:start + view.size]) for block, (view, start)
                                  in enumerate(zip(views, block_start.tolist()))])
        return span, block_start

    def _check_blocks(self, buffer: np.ndarray | None, blocks: list | None = None) -> None:
        """Check every block (block, view) (by default LMDB's own), and copy them into
        `buffer` back to back when given; the checks and copies of a large volume run on
        several threads (zlib and numpy release the GIL)."""
        from ..pools import TaskPool

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
            # checked: the subjects' letters for traceback read it without a second check,
            # which would checksum the whole volume again on the traceback's path
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


def _open_environment(path: str, label: str):
    """The volume's LMDB environment, read-only. LMDB opens a file once per process: a
    database left open by a search that failed (Database.abandon) holds it until it is
    collected, which a reference cycle (its traceback's frames) puts off to the next garbage
    collection, so that collection is made before a second try."""
    for second_try in (False, True):
        if second_try:
            gc.collect()
        try:
            return lmdb.open(path, subdir=False, readonly=True, lock=False, readahead=False,
                             max_dbs=0)
        except lmdb.Error as exc:
            if "already open" not in str(exc):
                raise
    raise DatabaseError(f"{label}: still open in this process, held by an earlier search that "
                        "failed")


def _unmapped_pages(view: np.ndarray) -> None:
    """Drop this process's page-table entries of the whole pages of a read-only view of a
    shared file map: the pages stay in the page cache, and fault back in where read again.
    Nothing happens where madvise is missing."""
    import ctypes

    start = -(-view.ctypes.data // mmap.PAGESIZE) * mmap.PAGESIZE
    end = (view.ctypes.data + view.size) // mmap.PAGESIZE * mmap.PAGESIZE
    madvise = getattr(ctypes.CDLL(None), "madvise", None)
    if end > start and madvise is not None and hasattr(mmap, "MADV_DONTNEED"):
        madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), mmap.MADV_DONTNEED)


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
    """A letter array in fresh anonymous memory (arrays.fresh_pages): tracebacks that fill
    a few thousand letters around each HSP of a chromosome pay for those alone."""
    return fresh_pages(length)


class OrdinalAccess:
    """What a database of either kind offers by global ordinal, given its `volumes` (each
    with first_ordinal, num_seqs, packed and ambiguities), `num_seqs`, `lengths`, `_firsts`
    (the volumes' first ordinals), `parse_seqids` and `defline`: ids and titles, packed
    bases and true letters."""

    searched = None  # every sequence is searched (db.subset.DatabaseSubset marks some)

    @staticmethod
    def describe_deflines(deflines: list) -> tuple[str, str, str]:
        """describe_set of deflines_of's deflines (a taxid filter shows some of them)."""
        return describe_set([found.text() for found in deflines], deflines[0].parsed)

    def _locate(self, ordinal: int):
        ordinal = int(ordinal)
        if not 0 <= ordinal < self.num_seqs:
            raise IndexError(f"ordinal {ordinal} outside 0..{self.num_seqs - 1}")
        volume = self.volumes[int(np.searchsorted(self._firsts, ordinal, side="right")) - 1]
        return volume, ordinal - volume.first_ordinal

    # -- ids and titles --------------------------------------------------------------------
    def _describe_uncached(self, ordinal: int) -> tuple[str, str, str]:
        return described_by_ordinal(describe_set(self.defline_texts(ordinal), self.parse_seqids),
                                    ordinal, self.parse_seqids)

    def defline_texts(self, ordinal: int) -> list[str]:
        """Each of the sequence's deflines in FASTA form (several where makeblastdb
        -parse_seqids would store several)."""
        return [self.defline(ordinal)]

    def seq_id(self, ordinal: int) -> str:
        return self._describe(int(ordinal))[0]

    def accession(self, ordinal: int) -> str:
        return self._describe(int(ordinal))[1]

    def title_of(self, ordinal: int) -> str:
        return self._describe(int(ordinal))[2]

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

    def abandon(self) -> None:
        """What the process does with the database when it ends after a failure or an
        interrupt, while other threads may still read the volumes' mapped pages: nothing
        (unmapping them would crash those threads)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class StoredDefline(NamedTuple):
    """One of a sequence's deflines in a gblastn database, with its taxid."""

    defline: str
    taxid: int
    parsed: bool  # makedb -parse_seqids

    def text(self) -> str:
        return self.defline


class Database(OrdinalAccess):
    """A gblastn database: counts, ids and titles by global ordinal, sequences by ordinal."""

    def __init__(self, name: str):
        self.name = os.fspath(name)
        self.volumes: list[Volume] = []
        for attempt in range(OPEN_ATTEMPTS):
            self.directory = _resolve(self.name)
            manifest, raw = _read_manifest(self.directory, self.name)
            try:
                self._open(manifest)
                break
            except DatabaseError:
                # a build that replaced the database between our reading its manifest and
                # opening its volumes removed them: the new one is complete, open that
                if attempt + 1 == OPEN_ATTEMPTS or _manifest_bytes(self.directory) == raw:
                    raise
        self._describe = lru_cache(maxsize=4096)(self._describe_uncached)
        self._id_keys_checked = False
        # the size E-values are computed for
        self.stats_letters, self.stats_num_seqs = self.total_letters, self.num_seqs

    def _open(self, manifest: dict) -> None:
        try:
            self.title = str(manifest["title"])
            self.num_seqs = int(manifest["num_seqs"])
            self.total_letters = int(manifest["total_letters"])
            self.max_length = int(manifest["max_length"])
            self.created = str(manifest["created"])
            self.format_version = int(manifest["format_version"])
            self.parse_seqids = bool(manifest["parse_seqids"])
            entries = list(manifest["volumes"])
            # masking algorithm id -> (name, options) (makedb -mask_data)
            self.mask_algorithms = {int(key): (str(name), str(options)) for key, (name, options)
                                    in manifest.get("mask_algorithms", {}).items()}
        except (KeyError, TypeError, ValueError):
            raise DatabaseError(f"{self.name}: damaged database (incomplete manifest)") from None
        self.volumes = []
        try:
            for index, entry in enumerate(entries):
                self.volumes.append(Volume(self.directory, index, entry, self.name,
                                           self.format_version,
                                           tuple(sorted(self.mask_algorithms))))
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

    # -- ids and titles --------------------------------------------------------------------
    def defline(self, ordinal: int) -> str:
        """The sequence's (first) defline."""
        return self.defline_texts(ordinal)[0]

    def defline_texts(self, ordinal: int) -> list[str]:
        volume, local = self._locate(ordinal)
        return volume.defline(local).split(DEFLINE_SEPARATOR)

    # -- taxonomy --------------------------------------------------------------------------
    def taxids_of(self, ordinal: int) -> list[int]:
        """The taxid of each of the sequence's deflines: its own where they differ, else
        the sequence's."""
        volume, local = self._locate(ordinal)
        own = volume.defline_taxids.get(local)
        return list(own) if own is not None else \
            [int(volume.taxids[local])] * len(self.defline_texts(ordinal))

    def deflines_of(self, ordinal: int) -> list[StoredDefline]:
        """Each of the sequence's deflines with its taxid (as a BLAST+ database's
        Blast-def-lines: a taxid filter shows those of its taxids)."""
        return [StoredDefline(text, taxid, self.parse_seqids) for text, taxid
                in zip(self.defline_texts(ordinal), self.taxids_of(ordinal))]

    def taxid_index(self):
        """Every sequence's taxids, once each and in increasing order, as a BLAST+
        database's taxid files hold them (taxonomy.TaxidIndex)."""
        from .taxonomy import TaxidIndex

        counts, parts = [], []
        for volume in self.volumes:
            count = np.ones(volume.num_seqs, dtype=np.int64)
            previous = 0
            for local in sorted(volume.defline_taxids):  # the few of several taxids
                own = np.unique(volume.defline_taxids[local]).astype(np.int32)
                parts += [volume.taxids[previous:local], own]
                count[local], previous = own.size, local + 1
            parts.append(volume.taxids[previous:])
            counts.append(count)
        starts = np.concatenate([[0], np.cumsum(np.concatenate(counts))]) if counts else [0]
        return TaxidIndex(np.asarray(starts, dtype=np.int64),
                          np.concatenate(parts).astype(np.int32) if parts
                          else np.zeros(0, np.int32))

    def find(self, seq_id: str) -> int:
        """Ordinal of the (first) sequence an id names, as dbcmd -entry accepts ids."""
        identifier = seq_id.strip()
        for volume in self.volumes:
            for ordinal in volume.ordinals_named(identifier):
                if self._names(ordinal, identifier, volume):
                    return ordinal
        if not self._id_keys_checked:
            # an id key that is damaged, not one that is absent, must not read as "no such id"
            for volume in self.volumes:
                volume.check_id_keys()
            self._id_keys_checked = True
        raise InputError(f"{self.name}: no sequence with id '{seq_id}'")

    def _names(self, ordinal: int, identifier: str, volume: Volume) -> bool:
        """Whether the sequence an id key gave carries the id in its defline (version 2: the
        keys are hashes, which two ids may share)."""
        if volume.version == 1:
            return True
        local = ordinal - volume.first_ordinal
        return 0 <= local < volume.num_seqs and identifier.lower() in lookup_keys(
            volume.defline(local), self.parse_seqids)


def open_db(path):
    """Opens database `path`: a gblastn database ('NAME' or 'NAME.gdb'), else a BLAST+
    database as makeblastdb writes it (volumes and alias files; several names in one value,
    as blastn's -db takes them); or the FASTA subjects of a SubjectFile. DatabaseError if
    neither is there, or damaged or newer."""
    from .subjects import SubjectDatabase, SubjectFile

    if isinstance(path, SubjectFile):
        return SubjectDatabase(path)
    path = os.fspath(path)
    if any(os.path.isfile(os.path.join(candidate, fmt.MANIFEST))
           for candidate in (path, path + fmt.DB_SUFFIX)):
        return Database(path)
    from .blastdb import BlastDatabase, is_blast_db  # BLAST+'s reader, when it is needed

    return BlastDatabase(path) if is_blast_db(path) else Database(path)
