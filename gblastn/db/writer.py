"""`make_db`: FASTA files to a gblastn database (the layout is described in format.py).

The build is streamed: the FASTA reader hands over each record's letters in pieces of at
most one read chunk, which are packed as they come (encode.py), and each record is stored as
soon as it ends: its packed bases and defline go straight into the volume's LMDB environment,
its small per-sequence numbers and its ids' hashes into compact columns (columns.py) until the
volume is finished. Memory holds the packed bases of one record (a quarter of its letters),
one read chunk and some 40 bytes a sequence, never an input or a record's letters whole.
The volumes are written into a generation folder of the build's own and installed in one
rename (generations.py): a failed or killed build never touches the database of its name.
"""

from __future__ import annotations

import os
import sys
import time
import zlib
from datetime import datetime

import lmdb
import numpy as np

from ..errors import InputError, OptionsError, OutputError
from ..fasta import TITLE_WARNING, Header, iter_fasta, reader_warning, title_ends_with_sequence
from . import format as fmt
from .columns import Column
from .encode import EncodedSequence, SequenceEncoder
from .generations import Generation, database_dir
from .mask_data import MaskData, read_mask_data
from .seqid import duplicate_key, lookup_keys, record_seq_ids
from .taxonomy import TaxidAssignment

READ_CHUNK_BYTES = 1 << 20   # FASTA read this much at a time (bounds a piece's temporaries)
COMMIT_BYTES = 1 << 20       # commit the volume's write transaction this often: LMDB holds
                             # the pages written since the last commit in memory
MAP_HEADROOM = 512 << 20     # LMDB address space beyond the volume's data
PER_SEQUENCE_BYTES = 64      # rough LMDB cost of a sequence's small records, for the volume cap
KEY_OVERHEAD_BYTES = 16      # what an LMDB entry costs beyond its key and value
ID_KEYS_PER_BATCH = 1 << 14  # id keys put per write transaction


def blast_date(moment: datetime) -> str:
    """BLAST's creation-date style: 'Nov 21, 2026  12:22 PM'."""
    return moment.strftime("%b %d, %Y  %I:%M %p")


class _VolumeWriter:
    """One LMDB volume being filled with whole sequences."""

    def __init__(self, directory: str, generation: str, index: int, first_ordinal: int,
                 map_size: int, with_taxids: bool, mask_ids: list[int]):
        self.file = f"{generation}/{fmt.volume_file(index)}"
        self.path = os.path.join(directory, fmt.volume_file(index))
        self.first_ordinal = first_ordinal
        self.env = lmdb.open(self.path, subdir=False, map_size=map_size, lock=False, sync=False,
                             metasync=False, readahead=False, max_dbs=0)
        self.txn = self.env.begin(write=True)
        self.uncommitted = 0
        self.size_estimate = 0
        # (hash, ordinal) of each id key, stored sorted when the volume is finished: keys
        # put in random order would make LMDB hold most of its key pages in memory
        self.id_hashes = Column(np.uint64)
        self.id_locals = Column(np.uint32)
        self.arrays = {key: Column(dtype)
                       for key, dtype in fmt.array_keys(fmt.FORMAT_VERSION).items()}
        self.arrays[b"block_offset"] = Column(np.uint32)  # inside a block: stored as int64
        self.arrays[b"amb_start"].append(0)
        self.taxids = Column(np.int32) if with_taxids else None  # each sequence's first
        self.defline_taxids: dict = {}  # local ordinal -> its deflines' taxids, where they differ
        # each masking algorithm's ranges: sequence i's are rows starts[i]:starts[i + 1]
        self.mask_starts = {algorithm_id: Column(np.int64) for algorithm_id in mask_ids}
        self.mask_ranges = {algorithm_id: Column(np.int32) for algorithm_id in mask_ids}
        for starts in self.mask_starts.values():
            starts.append(0)
        # the block being filled: one buffer for the volume, so that no block is copied on
        # the way to LMDB (which copies it once itself)
        self.block = np.empty(fmt.BLOCK_BYTES, dtype=np.uint8)
        self.block_used = 0

    @property
    def num_seqs(self) -> int:
        return len(self.arrays[b"lengths"])

    def _put(self, key: bytes, value) -> None:
        self.txn.put(key, value)
        self.uncommitted += len(key) + memoryview(value).nbytes + KEY_OVERHEAD_BYTES
        if self.uncommitted >= COMMIT_BYTES:
            self.txn.commit()
            self.txn = self.env.begin(write=True)
            self.uncommitted = 0

    def _store_block(self, data) -> None:
        block_crc = self.arrays[b"block_crc"]
        block_crc.append(zlib.crc32(data))
        self._put(fmt.block_key(len(block_crc) - 1), data)

    def add(self, defline: bytes, sequence: EncodedSequence, keys, taxids: list,
            masks: dict) -> None:
        local = self.num_seqs
        arrays = self.arrays
        nbytes = len(sequence.packed)
        if nbytes > fmt.BLOCK_BYTES:      # a long sequence gets a block of its own
            self.flush_block()
            arrays[b"block_of"].append(len(arrays[b"block_crc"]))
            arrays[b"block_offset"].append(0)
            self._store_block(sequence.packed)
        else:
            if self.block_used + nbytes > fmt.BLOCK_BYTES:
                self.flush_block()
            arrays[b"block_of"].append(len(arrays[b"block_crc"]))
            arrays[b"block_offset"].append(self.block_used)
            end = self.block_used + nbytes
            self.block[self.block_used:end] = np.frombuffer(sequence.packed, dtype=np.uint8)
            self.block_used = end
        arrays[b"lengths"].append(sequence.length)
        arrays[b"amb_offset"].extend(sequence.amb_offset)
        arrays[b"amb_length"].extend(sequence.amb_length)
        arrays[b"amb_code"].extend(sequence.amb_code)
        arrays[b"amb_start"].append(len(arrays[b"amb_code"]))
        self._put(fmt.defline_key(local), defline)
        arrays[b"def_crc"].append(zlib.crc32(defline))
        if self.taxids is not None:
            self.taxids.append(taxids[0])
            if any(taxid != taxids[0] for taxid in taxids[1:]):
                self.defline_taxids[local] = taxids
        for algorithm_id, ranges in masks.items():
            self.mask_ranges[algorithm_id].extend(ranges.ravel())
            self.mask_starts[algorithm_id].append(len(self.mask_ranges[algorithm_id]) // 2)
        for identifier in keys:
            self.id_hashes.append(fmt.id_hash(identifier))
            self.id_locals.append(local)
        self.size_estimate += (nbytes + len(defline) + 24 * sequence.amb_code.size
                               + PER_SEQUENCE_BYTES)

    def defline(self, ordinal: int) -> str:
        return bytes(self.txn.get(fmt.defline_key(ordinal - self.first_ordinal))).decode(
            "utf-8", "replace")

    def flush_block(self) -> None:
        if self.block_used:
            self._store_block(self.block[:self.block_used].data)
            self.block_used = 0

    def finish(self) -> dict:
        """Writes the id keys and the per-volume arrays, closes the environment; returns the
        manifest entry."""
        self.flush_block()
        num_seqs = self.num_seqs
        keys_checksum = self._write_id_keys()
        values = {key: self.arrays[key].take().astype(dtype, copy=False)
                  for key, dtype in fmt.array_keys(fmt.FORMAT_VERSION).items()}
        for key, value in values.items():
            self._put(key, value)
        taxids = self._put_taxids()
        defline_taxids = self._put_defline_taxids()
        masks_crc = self._put_masks()
        self.txn.commit()
        self.env.sync(True)
        self.env.close()
        entry = {"file": self.file, "first_ordinal": self.first_ordinal, "num_seqs": num_seqs,
                 "total_letters": int(values[b"lengths"].sum()),
                 "file_size": os.path.getsize(self.path), "arrays_crc": fmt.arrays_crc(values),
                 "keys_checksum": keys_checksum, "structure_crc": fmt.structure_crc(self.path)}
        if taxids is not None:
            entry["taxids_crc"] = zlib.crc32(taxids)
        if defline_taxids is not None:
            entry["defline_taxids_crc"] = zlib.crc32(defline_taxids)
        if masks_crc is not None:
            entry["masks_crc"] = masks_crc
        return entry

    def _put_taxids(self) -> bytes | None:
        """Stores the taxid array (a build with taxids); its bytes."""
        if self.taxids is None:
            return None
        value = self.taxids.take().astype("<i4").tobytes()
        self._put(fmt.TAXIDS_KEY, value)
        return value

    def _put_defline_taxids(self) -> bytes | None:
        """Stores the taxids of the deflines of the sequences whose deflines' taxids differ
        (format.DEFLINE_TAXIDS_KEY), where there are any; its bytes."""
        if not self.defline_taxids:
            return None
        ordinals = sorted(self.defline_taxids)
        runs = [self.defline_taxids[local] for local in ordinals]
        value = np.concatenate([[len(ordinals)], ordinals, np.cumsum([len(run) for run in runs]),
                                *runs]).astype("<i4").tobytes()
        self._put(fmt.DEFLINE_TAXIDS_KEY, value)
        return value

    def _put_masks(self) -> int | None:
        """Stores each masking algorithm's ranges (a build with -mask_data); the checksum
        of what was stored, in algorithm order."""
        if not self.mask_starts:
            return None
        crc = 0
        for algorithm_id in sorted(self.mask_starts):
            starts = self.mask_starts[algorithm_id].take().astype("<i8").tobytes()
            ranges = self.mask_ranges[algorithm_id].take().astype("<i4").tobytes()
            self._put(fmt.mask_key(algorithm_id, fmt.MASK_STARTS), starts)
            self._put(fmt.mask_key(algorithm_id, fmt.MASK_RANGES), ranges)
            crc = zlib.crc32(ranges, zlib.crc32(starts, crc))
        return crc

    def _write_id_keys(self) -> int:
        """Puts the id keys in key order, a batch per transaction; returns their checksum."""
        hashes = self.id_hashes.take()
        locals_ = self.id_locals.take()
        # keys were added in ordinal order: a stable sort by hash is the order of the keys
        order = np.argsort(hashes, kind="stable")
        # two ids of one sequence that share a hash make one key
        repeats = np.flatnonzero((hashes[order[1:]] == hashes[order[:-1]])
                                 & (locals_[order[1:]] == locals_[order[:-1]]))
        order = np.delete(order, repeats + 1)
        checksum = 0
        suffixes = np.empty(min(order.size, ID_KEYS_PER_BATCH),
                            dtype=[("hash", ">u8"), ("ordinal", ">u8")])
        for first in range(0, order.size, ID_KEYS_PER_BATCH):
            batch = order[first:first + ID_KEYS_PER_BATCH]
            part = suffixes[:batch.size]
            part["hash"] = hashes[batch]
            part["ordinal"] = locals_[batch]
            part["ordinal"] += self.first_ordinal
            raw = part.tobytes()
            checksum = zlib.crc32(raw, checksum)
            width = suffixes.itemsize
            with self.txn.cursor() as cursor:
                # after the blocks and deflines ('blk', 'def'), before the arrays: in order
                cursor.putmulti(((fmt.ID_KEY_PREFIX + raw[at:at + width], b"")
                                 for at in range(0, len(raw), width)), append=True)
            self.txn.commit()
            self.txn = self.env.begin(write=True)
        return checksum

    def abandon(self) -> None:
        try:
            self.txn.abort()
            self.env.close()
        except lmdb.Error:
            pass


def _split_inputs(inputs) -> list[str]:
    """makeblastdb takes several files in one -in value, separated by spaces."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    names = []
    for item in inputs:
        item = os.fspath(item)
        names.extend([item] if item == "-" or os.path.exists(item) else item.split())
    if not names:
        raise InputError("no input files given")
    return names


def _warn_to_stderr(message: str) -> None:
    print(f"gblastn: warning: {message}", file=sys.stderr)


class _Progress:
    """A rich progress bar on stderr, only when asked (or when stderr is a terminal)."""

    def __init__(self, enabled: bool | None, names: list[str]):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.bar = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
        sizes = [os.path.getsize(n) for n in names if n != "-" and os.path.isfile(n)]
        total = sum(sizes) if len(sizes) == len(names) else None
        self.bar = Progress("[progress.description]{task.description}", BarColumn(),
                            DownloadColumn(), TimeRemainingColumn(),
                            console=Console(stderr=True), transient=True)
        self.task = self.bar.add_task("makedb", total=total)
        self.bar.start()

    def advance(self, amount: int) -> None:
        if self.bar is not None:
            self.bar.advance(self.task, amount)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def make_db(inputs, out: str, title: str | None = None, parse_seqids: bool = False,
            max_file_sz: int | str = "1GB", progress: bool | None = None, *,
            taxid: int | None = None, taxid_map: str | None = None, strict: bool = False,
            mask_data=None, mask_id=None, deflines_as_read: bool = False,
            warn=_warn_to_stderr, blast_input: bool = False, allow_empty: bool = False) -> str:
    """Builds database `out` (directory out.gdb) from FASTA files; returns its directory.
    A missing folder on the way to it is made, as makeblastdb does. `taxid` gives every
    sequence that taxid, `taxid_map` (with parse_seqids) a file mapping ids to taxids;
    letters makeblastdb ignores are dropped with its warning, or refused when `strict`.
    `mask_data`: masking data files (dustmasker's, windowmasker's; a list, or names
    separated by commas), stored for search -db_soft_mask and -db_hard_mask under
    makeblastdb's algorithm ids; `mask_id`: a name for each file's algorithm instead of
    its program's (ids from 100 on). `deflines_as_read` keeps the deflines' bytes as they
    came (-subject's, which blastn reads without makeblastdb's conversion). `blast_input`
    reads the FASTA as blastn reads -subject (fasta.iter_fasta), its reader's warnings on
    stderr in blastn's words. `allow_empty` builds a database of no sequences where the
    inputs hold none with letters (-subject's, which blastn searches all the same)."""
    names = _split_inputs(inputs)
    cap = _volume_cap(max_file_sz)
    taxids = _taxid_assignment(taxid, taxid_map, parse_seqids)
    masks = _mask_data(mask_data, mask_id)
    started = time.time()
    final = database_dir(os.fspath(out))
    generation = _start_generation(final)
    bar = _Progress(progress, names)
    try:
        build = _Build(names, generation, cap, parse_seqids, bar, warn, taxids, strict, masks)
        build.deflines_as_read, build.blast_input = deflines_as_read, blast_input
        build.allow_empty = allow_empty
        manifest = build.run()
        manifest.update(title=title if title is not None else " ".join(names),
                        created=blast_date(datetime.fromtimestamp(started)),
                        created_iso=datetime.fromtimestamp(started).astimezone().isoformat(timespec="seconds"),
                        parse_seqids=bool(parse_seqids))
        generation.install(fmt.manifest_text(manifest))
    except BaseException as exc:
        generation.abandon()
        if isinstance(exc, (OSError, lmdb.Error)):
            raise _output_error(final, exc) from None
        raise
    finally:
        bar.stop()
    return final


def _taxid_assignment(taxid, taxid_map, parse_seqids: bool) -> TaxidAssignment | None:
    """makedb's taxids (None without -taxid and -taxid_map), refused as makeblastdb refuses
    them."""
    if taxid is not None and taxid_map is not None:
        raise OptionsError('Argument "taxid_map". Incompatible with argument:  `taxid\'')
    if taxid_map is not None and not parse_seqids:
        raise OptionsError('Argument "parse_seqids". Must be specified, as it is required by '
                           "argument:  `taxid_map'")
    if taxid is not None and not 0 <= taxid < 2**31:
        raise OptionsError(f'Argument "taxid". Illegal value, expected >=0:  `{taxid}\'')
    if taxid is None and taxid_map is None:
        return None
    return TaxidAssignment(taxid, taxid_map)


def _comma_list(value) -> list[str] | None:
    """makeblastdb's comma-separated list of names (or a list of them)."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return [os.fspath(item).strip() for item in items]


def _mask_data(mask_data, mask_id) -> MaskData | None:
    """-mask_data's files, read and checked before anything is written."""
    if mask_data is None:
        if mask_id is not None:
            raise OptionsError('Argument "mask_data". Must be specified, as it is required '
                               "by argument:  `mask_id'")
        return None
    return read_mask_data(_comma_list(mask_data), _comma_list(mask_id))


def _volume_cap(max_file_sz) -> int:
    try:
        cap = fmt.parse_size(max_file_sz)
    except ValueError as exc:
        raise OptionsError(f"-max_file_sz: {exc}") from None
    if cap <= 0:
        raise OptionsError("-max_file_sz must be positive")
    return cap


def _start_generation(final: str) -> Generation:
    parent = os.path.dirname(final) or "."
    try:
        os.makedirs(parent, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise OutputError(f"{parent}: not a directory") from None
    except OSError as exc:
        raise _output_error(parent, exc) from None
    try:
        return Generation(final)
    except OSError as exc:
        raise _output_error(final, exc) from None


def _output_error(path: str, exc: Exception) -> OutputError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
    return OutputError(f"{path}: cannot write the database ({reason})")


class _PrimaryIds:
    """-parse_seqids: makeblastdb refuses two sequences with one primary id. A volume's
    primary ids are compared by their hashes with those of the sequences before them when
    the volume is finished: memory holds some 30 bytes a sequence (hash, ordinal, where it
    was read), not its id; equal hashes are confirmed on the stored deflines."""

    def __init__(self, names: list[str]):
        self.names = names
        self.hashes = np.zeros(0, dtype=np.uint64)    # the finished volumes', sorted
        self.ordinals = np.zeros(0, dtype=np.int64)
        self.pending = Column(np.uint64)              # the volume being filled, in order
        self.files = Column(np.uint32)                # where each sequence was read
        self.lines = Column(np.int64)

    def add(self, key: str, file_index: int, line: int) -> None:
        self.pending.append(fmt.id_hash(key))
        self.files.append(file_index)
        self.lines.append(line)

    def check(self, defline_of) -> None:
        """InputError for the first sequence of the pending ones whose primary id an earlier
        sequence has; `defline_of(ordinal)` reads a stored defline."""
        first_pending = self.ordinals.size
        hashes = np.concatenate((self.hashes, self.pending.take()))
        ordinals = np.arange(hashes.size, dtype=np.int64)
        ordinals[:first_pending] = self.ordinals
        order = np.lexsort((ordinals, hashes))
        self.hashes, self.ordinals = hashes[order], ordinals[order]
        same = np.flatnonzero(self.hashes[1:] == self.hashes[:-1])
        groups: dict[int, list[int]] = {}
        for at in np.union1d(same, same + 1).tolist():
            groups.setdefault(int(self.hashes[at]), []).append(int(self.ordinals[at]))
        duplicates = [_first_repeat(members, defline_of) for members in groups.values()
                      if members[-1] >= first_pending]
        duplicates = [pair for pair in duplicates if pair is not None]
        if duplicates:
            later, first = min(duplicates)
            raise InputError(f"{self._where(later)}: duplicate sequence id "
                             f"'{_first_token(defline_of(later))}' (first seen at "
                             f"{self._where(first)})")

    def _where(self, ordinal: int) -> str:
        return f"{self.names[self.files[ordinal]]}:{self.lines[ordinal]}"


def _first_repeat(ordinals: list[int], defline_of) -> tuple[int, int] | None:
    """(later, first): the first of `ordinals` (ascending) whose primary id an earlier one
    has, and that earlier one."""
    seen: dict[str, int] = {}
    for ordinal in ordinals:
        key = duplicate_key(defline_of(ordinal))
        if key in seen:
            return ordinal, seen[key]
        seen[key] = ordinal
    return None


class _Build:
    """The records of the inputs, in order, stored into volumes of at most `cap` bytes."""

    def __init__(self, names: list[str], generation: Generation, cap: int, parse_seqids: bool,
                 bar, warn, taxids: TaxidAssignment | None, strict: bool,
                 masks: MaskData | None):
        self.names = names
        self.taxids = taxids
        self.masks = masks
        self.strict = strict
        self.generation = generation
        self.cap = cap
        self.parse_seqids = parse_seqids
        self.bar = bar
        self.warn = warn
        self.volumes: list[dict] = []
        self.volume: _VolumeWriter | None = None
        self.primary_ids = _PrimaryIds(names) if parse_seqids else None
        self.ordinal = self.total = self.longest = 0
        self.deflines_as_read = False
        self.blast_input = False  # read as blastn reads -subject (make_db)
        self.allow_empty = False

    def run(self) -> dict:
        try:
            for index, name in enumerate(self.names):
                self._read(index, name)
            if self.volume is not None:
                self._finish_volume()
        finally:
            if self.volume is not None:
                self.volume.abandon()
        if self.ordinal == 0 and not self.allow_empty:
            raise InputError(f"{' '.join(self.names)}: no sequences found (empty input?)")
        if self.taxids is not None and self.taxids.mapping and not self.taxids.matched:
            self.warn("No sequences matched any of the taxids provided.")
        manifest = {"format": fmt.FORMAT_NAME, "format_version": fmt.FORMAT_VERSION,
                    "num_seqs": self.ordinal, "total_letters": self.total,
                    "max_length": self.longest, "volumes": self.volumes}
        if self.masks is not None:
            self._add_masks(manifest)
        return manifest

    def _add_masks(self, manifest: dict) -> None:
        """The masking algorithms into the manifest; none when no sequence matched any
        mask (as makeblastdb then writes no masking data), with its warning."""
        if not self.masks.matched:
            self.warn("No sequences matched any of the masks provided. Please ensure that "
                      "the -parse_seqids option is used in the filtering program as well "
                      "as makedb.")
            for entry in self.volumes:
                del entry["masks_crc"]
            return
        manifest["mask_algorithms"] = {str(algorithm_id): list(algorithm) for algorithm_id,
                                       algorithm in self.masks.algorithms.items()}

    def _read(self, file_index: int, name: str) -> None:
        header = encoder = None
        record = 0  # the record's place in its file, as masking data may name it
        dropped = None if self.strict else reader_warning if self.blast_input else self.warn
        for item in iter_fasta(name, chunk_bytes=READ_CHUNK_BYTES, report_dropped=dropped,
                               headerless_ok=self.blast_input, blast_input=self.blast_input):
            if isinstance(item, Header):
                if header is not None:
                    self._store(file_index, name, header, encoder.finish(), record)
                header, encoder = item, SequenceEncoder()
                record += 1
                self.bar.advance(len(item.defline) + 2)
            else:
                encoder.add(item)
                self.bar.advance(len(item))
        if header is not None:
            self._store(file_index, name, header, encoder.finish(), record)

    def _store(self, file_index: int, name: str, header: Header, sequence: EncodedSequence,
               record: int) -> None:
        if self.blast_input and title_ends_with_sequence(header.defline.decode("latin-1")):
            reader_warning(TITLE_WARNING)
        stored = header.defline if self.deflines_as_read else \
            visible_defline(header.defline, self.parse_seqids)
        if stored != header.defline and sequence.length:
            self.warn(f"{name}:{header.line}: defline bytes outside printable ASCII stored "
                      "as '#', as makeblastdb stores them")
        header = header._replace(defline=stored)
        defline = stored.decode("utf-8", "surrogateescape")
        if sequence.length == 0:
            self.warn(f"{name}:{header.line}: ignoring sequence '{_first_token(defline)}' "
                      "as it has no sequence data")
            return
        primary = duplicate_key(defline) if self.primary_ids is not None else None
        if primary == "":
            raise InputError(f"{name}:{header.line}: a sequence without an id "
                             "cannot be stored with -parse_seqids")
        masks = {} if self.masks is None else self.masks.ranges_of(
            record_seq_ids(defline, self.parse_seqids, record), sequence.length,
            f"{name}:{header.line}")
        volume = self._volume_for(len(sequence.packed))
        volume.add(header.defline, sequence, lookup_keys(defline, self.parse_seqids),
                   self.taxids.of_each(defline) if self.taxids is not None else [0], masks)
        if primary is not None:
            self.primary_ids.add(primary, file_index, header.line)
        self.ordinal += 1
        self.total += sequence.length
        self.longest = max(self.longest, sequence.length)

    def _volume_for(self, nbytes: int) -> _VolumeWriter:
        """The volume the next sequence goes into: a new one when it would pass the cap."""
        volume = self.volume
        if volume is not None and volume.num_seqs and \
                volume.size_estimate + nbytes + PER_SEQUENCE_BYTES > self.cap:
            self._finish_volume()
        if self.volume is None:
            map_size = 2 * self.cap + 2 * nbytes + MAP_HEADROOM
            self.volume = _VolumeWriter(self.generation.path, self.generation.name,
                                        len(self.volumes), self.ordinal, map_size,
                                        self.taxids is not None,
                                        self.masks.algorithm_ids if self.masks else [])
        return self.volume

    def _finish_volume(self) -> None:
        if self.primary_ids is not None:
            self.primary_ids.check(self._stored_defline)
        self.volumes.append(self.volume.finish())
        self.volume = None

    def _stored_defline(self, ordinal: int) -> str:
        """The defline of a sequence stored so far (the volume being filled has it in its
        write transaction, a finished volume in its file)."""
        if self.volume is not None and ordinal >= self.volume.first_ordinal:
            return self.volume.defline(ordinal)
        index = next(i for i, entry in enumerate(self.volumes)
                     if entry["first_ordinal"] + entry["num_seqs"] > ordinal)
        path = os.path.join(self.generation.path, fmt.volume_file(index))
        env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=0)
        try:
            with env.begin() as txn:
                value = txn.get(fmt.defline_key(ordinal - self.volumes[index]["first_ordinal"]))
        finally:
            env.close()
        return value.decode("utf-8", "replace")


# makeblastdb keeps deflines as ASN.1 VisibleStrings, and blastn prints what it stored: a byte
# past ASCII, DEL or a control character becomes '#', except the tab, which it expands (kept
# here), and ^A (BLAST's defline separator), which becomes a space, or with -parse_seqids
# separates the sequence's deflines (kept, as seqid.DEFLINE_SEPARATOR)
_REPLACED = bytes(c for c in range(32) if c not in (1, 9)) + b"\x7f" + bytes(range(128, 256))
_VISIBLE = bytes.maketrans(_REPLACED + b"\x01", b"#" * len(_REPLACED) + b" ")
_VISIBLE_KEEPING_SEPARATOR = bytes.maketrans(_REPLACED, b"#" * len(_REPLACED))


def visible_defline(defline: bytes, several: bool = False) -> bytes:
    """A FASTA defline as makeblastdb stores it: printable ASCII (and tabs), and with
    `several` (-parse_seqids) the ^A between deflines."""
    return defline.translate(_VISIBLE_KEEPING_SEPARATOR if several else _VISIBLE)


def _first_token(defline: str) -> str:
    parts = defline.split(None, 1)
    return parts[0] if parts else ""
