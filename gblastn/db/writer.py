"""`make_db`: FASTA files to a gblastn database (the layout is described in format.py).

The build is streamed: one FASTA record at a time is read, encoded (2-bit + substitutes +
ambiguity runs) and appended to the current volume, so memory stays bounded by the longest
sequence plus small per-sequence arrays. Everything is written into a temporary directory next
to the target and renamed into place only when complete: a failed or killed build leaves no
database under the target name and never touches an existing one.
"""

from __future__ import annotations

import os
import queue
import shutil
import sys
import tempfile
import threading
import time
import zlib
from datetime import datetime

import lmdb
import numpy as np

from ..errors import InputError, OptionsError, OutputError
from ..fasta import iter_records
from ..tasks import TaskPool
from . import format as fmt
from .encode import encode_sequence
from .seqid import duplicate_key, lookup_keys

COMMIT_BYTES = 64 << 20      # commit the volume's write transaction this often (bounds memory)
MAP_HEADROOM = 512 << 20     # LMDB address space beyond the volume's data
PER_SEQUENCE_BYTES = 64      # rough LMDB cost of a sequence's small records, for the volume cap


def blast_date(moment: datetime) -> str:
    """BLAST's creation-date style: 'Nov 21, 2026  12:22 PM'."""
    return moment.strftime("%b %d, %Y  %I:%M %p")


class _VolumeWriter:
    """One LMDB volume being filled with whole sequences."""

    def __init__(self, directory: str, index: int, first_ordinal: int, map_size: int):
        self.index = index
        self.file = fmt.volume_file(index)
        self.path = os.path.join(directory, self.file)
        self.first_ordinal = first_ordinal
        self.env = lmdb.open(self.path, subdir=False, map_size=map_size, lock=False, sync=False,
                             metasync=False, readahead=False, max_dbs=0)
        self.txn = self.env.begin(write=True)
        self.uncommitted = 0
        self.size_estimate = 0
        self.lengths: list[int] = []
        self.block_of: list[int] = []
        self.block_offset: list[int] = []
        self.block_crc: list[int] = []
        self.block = bytearray()
        self.amb_counts: list[int] = []
        self.amb_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.keys: dict[str, list[int]] = {}

    @property
    def num_seqs(self) -> int:
        return len(self.lengths)

    def _put(self, key: bytes, value) -> None:
        self.txn.put(key, value)
        self.uncommitted += len(value)
        if self.uncommitted >= COMMIT_BYTES:
            self.txn.commit()
            self.txn = self.env.begin(write=True)
            self.uncommitted = 0

    def _store_block(self, data) -> None:
        self.block_crc.append(zlib.crc32(data))
        self._put(fmt.block_key(len(self.block_crc) - 1), data)

    def add(self, defline: str, length: int, packed: np.ndarray, runs, keys) -> None:
        local = self.num_seqs
        nbytes = packed.size
        if nbytes > fmt.BLOCK_BYTES:      # a long sequence gets a block of its own
            self.flush_block()
            self.block_of.append(len(self.block_crc))
            self.block_offset.append(0)
            self._store_block(packed)
        else:
            if len(self.block) + nbytes > fmt.BLOCK_BYTES:
                self.flush_block()
            self.block_of.append(len(self.block_crc))
            self.block_offset.append(len(self.block))
            self.block += packed.tobytes()
        self.lengths.append(length)
        self.amb_counts.append(runs[0].size)
        if runs[0].size:
            self.amb_parts.append(runs)
        encoded = defline.encode("utf-8", "replace")
        self._put(fmt.defline_key(local), encoded)
        for key in keys:
            self.keys.setdefault(key, []).append(self.first_ordinal + local)
        self.size_estimate += nbytes + len(encoded) + 24 * runs[0].size + PER_SEQUENCE_BYTES

    def flush_block(self) -> None:
        if self.block:
            self._store_block(bytes(self.block))
            self.block = bytearray()

    def finish(self) -> dict:
        """Writes the per-volume arrays, closes the environment; returns the manifest entry."""
        self.flush_block()
        amb_start = np.zeros(self.num_seqs + 1, dtype=np.int64)
        np.cumsum(self.amb_counts, out=amb_start[1:])
        parts = self.amb_parts

        def joined(column: int, dtype) -> np.ndarray:
            return np.concatenate([p[column] for p in parts]).astype(dtype) if parts else np.zeros(0, dtype)

        arrays = {
            b"lengths": np.asarray(self.lengths, dtype=np.int64),
            b"block_of": np.asarray(self.block_of, dtype=np.int32),
            b"block_offset": np.asarray(self.block_offset, dtype=np.int64),
            b"block_crc": np.asarray(self.block_crc, dtype=np.uint32),
            b"amb_start": amb_start,
            b"amb_offset": joined(0, np.int64),
            b"amb_length": joined(1, np.int64),
            b"amb_code": joined(2, np.uint8),
        }
        values = {key: array.tobytes() for key, array in arrays.items()}
        for key, value in values.items():
            self._put(key, value)
        for key, ordinals in self.keys.items():
            self._put(fmt.lookup_key(key), np.asarray(ordinals, dtype=np.int64).tobytes())
        meta = {"num_seqs": self.num_seqs, "first_ordinal": self.first_ordinal,
                "num_blocks": len(self.block_crc)}
        self._put(b"meta", fmt.manifest_text(meta).encode())
        self.txn.commit()
        self.env.sync(True)
        self.env.close()
        return {"file": self.file, "first_ordinal": self.first_ordinal, "num_seqs": self.num_seqs,
                "total_letters": int(arrays[b"lengths"].sum()),
                "file_size": os.path.getsize(self.path), "arrays_crc": fmt.arrays_crc(values)}

    def abandon(self) -> None:
        try:
            self.txn.abort()
            self.env.close()
        except lmdb.Error:
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _temp_prefix(final: str) -> str:
    return "." + os.path.basename(final) + fmt.TEMP_MARK


def _remove_stale_builds(final: str) -> None:
    """Leftovers of builds of the same name whose process is gone (killed builds)."""
    parent = os.path.dirname(final) or "."
    prefix = _temp_prefix(final)
    for entry in os.listdir(parent):
        if entry.startswith(prefix):
            pid_text = entry[len(prefix):].split("-", 1)[0]
            if pid_text.isdigit() and not _pid_alive(int(pid_text)):
                shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def database_dir(out: str) -> str:
    """The directory a database name refers to ('db/example' -> 'db/example.gdb')."""
    out = os.fspath(out)
    return out if out.endswith(fmt.DB_SUFFIX) else out + fmt.DB_SUFFIX


def _prepare_target(out: str) -> tuple[str, str]:
    final = database_dir(out)
    parent = os.path.dirname(final) or "."
    if not os.path.isdir(parent):
        raise OutputError(f"{parent}: output directory does not exist")
    if os.path.exists(final) and not os.path.isfile(os.path.join(final, fmt.MANIFEST)):
        raise OutputError(f"{final}: exists and is not a gblastn database; not overwriting it")
    try:
        _remove_stale_builds(final)
        temp = tempfile.mkdtemp(prefix=_temp_prefix(final) + f"{os.getpid()}-", dir=parent)
    except OSError as exc:
        raise OutputError(f"{parent}: cannot write the database there ({exc.strerror})") from None
    return final, temp


def _install(temp: str, final: str) -> None:
    """Renames the finished build into place, replacing an older database of that name."""
    old = None
    if os.path.exists(final):
        old = temp + "-old"
        os.rename(final, old)
    os.rename(temp, final)
    if old:
        shutil.rmtree(old, ignore_errors=True)


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
            warn=_warn_to_stderr) -> str:
    """Builds database `out` (directory out.gdb) from FASTA files; returns its directory."""
    names = _split_inputs(inputs)
    try:
        cap = fmt.parse_size(max_file_sz)
    except ValueError as exc:
        raise OptionsError(f"-max_file_sz: {exc}") from None
    if cap <= 0:
        raise OptionsError("-max_file_sz must be positive")
    started = time.time()
    final, temp = _prepare_target(os.fspath(out))
    bar = _Progress(progress, names)
    try:
        manifest = _build(names, temp, cap, parse_seqids, bar, warn)
        manifest.update(title=title if title is not None else " ".join(names),
                        created=blast_date(datetime.fromtimestamp(started)),
                        created_iso=datetime.fromtimestamp(started).astimezone().isoformat(timespec="seconds"),
                        parse_seqids=bool(parse_seqids))
        with open(os.path.join(temp, fmt.MANIFEST), "w", encoding="utf-8") as handle:
            handle.write(fmt.manifest_text(manifest))
            handle.flush()
            os.fsync(handle.fileno())
        _install(temp, final)
    except BaseException as exc:
        shutil.rmtree(temp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, lmdb.Error):
            raise OutputError(f"{final}: cannot write the database ({exc.strerror or exc})") from None
        if isinstance(exc, lmdb.Error):
            raise OutputError(f"{final}: cannot write the database ({exc})") from None
        raise
    finally:
        bar.stop()
    return final


def _build(names, temp, cap, parse_seqids, bar, warn) -> dict:
    volumes: list[dict] = []
    volume: _VolumeWriter | None = None
    seen_ids: dict[str, str] = {}
    ordinal = total = longest = 0
    pool = TaskPool(_cpu_count())
    records = _read_ahead(record for name in names for record in iter_records(name))
    try:
        for record in records:
            length = int(record.letters.size)
            bar.advance(length + len(record.defline) + 2)
            if length == 0:
                warn(f"{record.source}:{record.line}: ignoring sequence '{record.id}' "
                     "as it has no sequence data")
                continue
            if parse_seqids:
                _check_unique(record, seen_ids)
            packed, *runs = encode_sequence(record.letters, pool)
            if volume is not None and volume.num_seqs and \
                    volume.size_estimate + packed.size + PER_SEQUENCE_BYTES > cap:
                volumes.append(volume.finish())
                volume = None
            if volume is None:
                map_size = 2 * cap + 2 * packed.size + MAP_HEADROOM
                volume = _VolumeWriter(temp, len(volumes), ordinal, map_size)
            volume.add(record.defline, length, packed, runs,
                       lookup_keys(record.defline, parse_seqids))
            ordinal += 1
            total += length
            longest = max(longest, length)
        if volume is not None:
            volumes.append(volume.finish())
            volume = None
    finally:
        records.close()
        pool.close()
        if volume is not None:
            volume.abandon()
    if ordinal == 0:
        raise InputError(f"{' '.join(names)}: no sequences found (empty input?)")
    return {"format": fmt.FORMAT_NAME, "format_version": fmt.FORMAT_VERSION, "num_seqs": ordinal,
            "total_letters": total, "max_length": longest, "volumes": volumes}


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _read_ahead(items):
    """Iterate `items` one step ahead in a thread: the next FASTA record is read and parsed
    while this one is encoded and stored. Errors are raised here, in order."""
    slot: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()
    done = object()

    def produce():
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        slot.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            slot.put((done, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            slot.put((done, exc))

    threading.Thread(target=produce, name="gblastn-fasta", daemon=True).start()
    try:
        while True:
            item, error = slot.get()
            if error is not None:
                raise error
            if item is done:
                return
            yield item
    finally:
        stop.set()


def _check_unique(record, seen_ids: dict) -> None:
    key = duplicate_key(record.defline)
    if not key:
        raise InputError(f"{record.source}:{record.line}: a sequence without an id "
                         "cannot be stored with -parse_seqids")
    if key in seen_ids:
        raise InputError(f"{record.source}:{record.line}: duplicate sequence id "
                         f"'{record.id}' (first seen at {seen_ids[key]})")
    seen_ids[key] = f"{record.source}:{record.line}"
