"""Output files: whole or absent, where the user pointed, with the modes blastn gives.

Every destination is checked and its temporary file made before the search starts, so a
folder that is missing or cannot be written, or a destination that is a directory, is
reported before any work is done. Each output is written to its temporary file beside its
destination and renamed into place when the whole search succeeded; outputs of one run
(-out_dir) are renamed together at the end, so a failed run leaves none of them.

* Modes: temporary files are created 0666 less the umask, as blastn creates its files; one
  that replaces an existing file takes that file's mode, as blastn's truncation keeps it.
* A destination reached through a symbolic link is written through it: the link's target
  is replaced and the link kept. A device or a pipe (/dev/null, /dev/stdout, /dev/fd/N)
  is written directly, as it cannot be replaced.
* Temporary files are named .gblastn-<pid>-<host>-<random>.tmp. A run removes those that
  killed runs left in the folders it writes to: this host's whose process is gone, and
  any older than a day.
* A write that fails (a full disk) is an OutputError naming the destination.
"""

import hashlib
import os
import re
import secrets
import signal
import socket
import stat
import sys
import time
from contextlib import contextmanager, suppress

from ..errors import OutputError

DESCRIPTOR_FOLDERS = ("/dev/", "/proc/")  # devices and the process's own descriptors
TEMP_PREFIX = ".gblastn-"
TEMP_SUFFIX = ".tmp"
STALE_SECONDS = 24 * 3600  # a temporary file this old is left from a dead run, whoever wrote it
_TEMP_NAME = re.compile(r"\.gblastn-(?:(\d+)-([0-9a-f]{8})-)?\w+\.tmp")


def _host_tag() -> str:
    """This host's short tag in temporary names: a pid means something only on its host."""
    return hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def temporary_name(pid: int | None = None) -> str:
    """A new temporary file's name, for the process `pid` (this one by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{TEMP_PREFIX}{pid}-{_host_tag()}-{secrets.token_hex(4)}{TEMP_SUFFIX}"


class OutputStream:
    """A text stream of output whose failed writes are OutputErrors naming the destination.
    Bytes that are not UTF-8 (query deflines read with surrogateescape) go out as they came."""

    def __init__(self, binary, name: str):
        import io

        self.name = name
        self._text = io.TextIOWrapper(binary, encoding="utf-8", errors="surrogateescape",
                                      newline="\n")

    def write(self, text: str) -> None:
        try:
            self._text.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(f"cannot write {self.name}: {exc.strerror}") from None

    def flush(self) -> None:
        try:
            self._text.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(f"cannot write {self.name}: {exc.strerror}") from None

    def close(self) -> None:
        """Flush and close (the wrapped stream too)."""
        try:
            self.flush()
        finally:
            with suppress(OSError):
                self._text.close()

    def detach(self) -> None:
        """Flush and let go of the wrapped stream, leaving it open (standard output)."""
        self.flush()
        self._text.detach()


class _Destination:
    """One output's place: where it ends, and the temporary file it is written to first
    (None for a destination written directly: a device or a pipe)."""

    def __init__(self, path: str):
        self.path = path
        self.final = os.path.realpath(path)  # through symbolic links, a dangling one too
        self.folder = os.path.dirname(self.final)
        self.temp = None
        self.stream = None

    def check_and_prepare(self) -> None:
        """Reports now what would make the output fail at its end; makes the temporary file
        (none for a destination written directly)."""
        if self._written_directly():
            return
        info = self._existing()
        if not os.path.isdir(self.folder):
            self._fail(f"its folder {self.folder} does not exist")
        # named first, so that an interrupt while it is made still finds it to remove
        self.temp = os.path.join(self.folder, temporary_name())
        self._make_temporary(info)

    def _written_directly(self) -> bool:
        """A device or a pipe, or a path to one of the process's own descriptors
        (/dev/stdout, /dev/fd/N, which may be a redirected file), cannot be replaced by a
        rename: it is written directly, at its turn."""
        if os.path.abspath(self.path).startswith(DESCRIPTOR_FOLDERS):
            return True
        try:
            mode = os.stat(self.path).st_mode  # through links
        except OSError:
            return False
        return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))

    def _existing(self):
        """The destination's stat, None when it does not exist yet; an OutputError for a
        directory, or a file that blastn could not open for writing either."""
        try:
            info = os.stat(self.final)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._fail(exc.strerror)
        if stat.S_ISDIR(info.st_mode):
            self._fail("Is a directory")
        if not os.access(self.final, os.W_OK):
            self._fail("Permission denied")
        return info

    def _make_temporary(self, replaced) -> None:
        """The temporary file, empty: 0666 less the umask, or the mode of the file it will
        replace (`replaced`: that file's stat)."""
        try:
            fd = os.open(self.temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as exc:
            self.temp = None
            self._fail(exc.strerror)
        try:
            if replaced is not None:
                os.fchmod(fd, stat.S_IMODE(replaced.st_mode))
        finally:
            os.close(fd)

    def open(self) -> OutputStream:
        target = self.temp or self.path
        try:
            binary = open(target, "wb")
        except OSError as exc:
            self._fail(exc.strerror)
        self.stream = OutputStream(binary, self.path)
        return self.stream

    def finish_writing(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            stream.close()

    def put_in_place(self) -> None:
        if self.temp is None:
            return
        try:
            os.replace(self.temp, self.final)
        except OSError as exc:
            self._fail(exc.strerror)
        self.temp = None

    def discard(self) -> None:
        if self.stream is not None:
            with suppress(OSError, ValueError):
                self.stream.close()
            self.stream = None
        if self.temp is not None:
            with suppress(OSError):
                os.unlink(self.temp)
            self.temp = None

    def _fail(self, reason: str):
        raise OutputError(f"cannot write {self.path}: {reason}")


class _StandardOutput:
    """Standard output as a destination: written as it comes, nothing to put in place."""

    path = "standard output"
    folder = None

    def __init__(self):
        self.stream = None

    def check_and_prepare(self) -> None:
        pass

    def open(self):
        """An OutputStream over standard output's bytes (written as they came whatever the
        locale), or sys.stdout itself where a caller replaced it by a text-only stream."""
        if not hasattr(sys.stdout, "buffer"):
            return sys.stdout
        sys.stdout.flush()
        self.stream = OutputStream(sys.stdout.buffer, self.path)
        return self.stream

    def finish_writing(self) -> None:
        if self.stream is not None:
            stream, self.stream = self.stream, None
            stream.detach()  # standard output stays open for the process

    def put_in_place(self) -> None:
        pass

    def discard(self) -> None:
        with suppress(OSError, ValueError):
            self.finish_writing()


class OutputFiles:
    """The outputs of one run, all prepared before the search and put in place together
    when it succeeded (a context manager): `open(k)` gives output k's stream, a path of
    None or '-' being standard output. On any failure, or an interrupt, every temporary
    file is removed, and the folders this run made (prepare_output_folder) when empty."""

    def __init__(self, paths: list, made_folders: list = ()):
        self.destinations = [_StandardOutput() if path in (None, "-") else _Destination(path)
                             for path in paths]
        self.made_folders = made_folders  # deepest first
        self._cleaned = set()  # folders rid of killed runs' temporary files

    def __enter__(self) -> "OutputFiles":
        self._cleaned = {destination.folder for destination in self.destinations} - {None}
        for folder in self._cleaned:
            remove_stale_temporaries(folder)
        try:
            for destination in self.destinations:
                destination.check_and_prepare()
        except BaseException:
            self._discard()
            raise
        return self

    def open(self, index: int):
        return self.destinations[index].open()

    def path(self, index: int) -> str:
        return self.destinations[index].path

    def add(self, path: str) -> int:
        """A further output found during the search (a file per query), prepared as the
        others were and put in place with them; returns its index. Its folder was not
        cleaned of killed runs' files when the run began: it is now."""
        destination = _Destination(path)
        if destination.folder not in self._cleaned:
            remove_stale_temporaries(destination.folder)
            self._cleaned.add(destination.folder)
        self.destinations.append(destination)
        destination.check_and_prepare()
        return len(self.destinations) - 1

    def close(self, index: int) -> None:
        """Output `index` is complete: flushed and closed (standard output flushed)."""
        self.destinations[index].finish_writing()

    def __exit__(self, kind, error, trace) -> None:
        if kind is not None:
            self._discard()
            return
        try:
            for destination in self.destinations:
                destination.finish_writing()
            with _interrupts_held():
                for destination in self.destinations:
                    destination.put_in_place()
        except BaseException:
            self._discard()
            raise

    def _discard(self) -> None:
        for destination in self.destinations:
            destination.discard()
        for folder in self.made_folders:
            with suppress(OSError):
                os.rmdir(folder)  # only when empty: nothing of another run's


@contextmanager
def _interrupts_held():
    """SIGINT and SIGTERM wait until the block is done (the renames of a run's outputs, so
    that an interrupt cannot leave part of the set), then take effect. Only the main thread
    can hold them; elsewhere the block runs as it is."""
    held = (signal.SIGINT, signal.SIGTERM)
    caught = []
    try:
        previous = {signum: signal.signal(signum, lambda signum, frame: caught.append(signum))
                    for signum in held}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if caught:
        signal.raise_signal(caught[0])


def prepare_output_folder(folder: str) -> list:
    """Make the -out_dir folder, and the folders above it, where missing (0777 less the
    umask, as mkdir makes them); returns those made, deepest first, for a failed run to
    remove again."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise OutputError(f"cannot write to {folder}: not a folder")
    missing = []
    path = os.path.abspath(folder)
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot make the output folder {folder}: {exc.strerror}") from None
    return missing


def remove_stale_temporaries(folder: str) -> None:
    """Remove the temporary files that killed runs left in `folder` (see the module's
    docstring). A folder that cannot be listed is left alone."""
    try:
        entries = os.scandir(folder)
    except OSError:
        return
    host, now = _host_tag(), time.time()
    with entries:
        for entry in entries:
            found = _TEMP_NAME.fullmatch(entry.name)
            if found is None or not _stale(found, entry, host, now):
                continue
            with suppress(OSError):
                os.unlink(entry.path)


def _stale(found, entry, host: str, now: float) -> bool:
    """This host's temporary file is stale once its process is gone (kept however old while
    it runs: a long search); another host's, or one named without its process, once it is
    older than a day."""
    pid, tag = found.group(1), found.group(2)
    if pid is not None and tag == host:
        return not _running(int(pid))
    try:
        return entry.is_file(follow_symlinks=False) and \
            now - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
    except OSError:
        return False


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process
    return True
