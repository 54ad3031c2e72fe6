"""Where a build writes, and how it replaces the database of its name in one step.

A database directory ``NAME.gdb/`` keeps its name for life. A build writes its volumes into a
generation folder of its own inside it (``gen-<random>/``) and installs them by renaming its
finished manifest over ``NAME.gdb/manifest.json``: one rename, so at every instant the name
holds either the complete old database or the complete new one. Only then are generations
that the manifest no longer names removed.

Two locks keep removal from touching anything in use, both flock(2) locks, which the kernel
drops when their process dies, even by SIGKILL:

* each build holds an exclusive lock on its own generation folder while it runs: a folder
  whose lock can be taken belongs to no running build;
* the database directory's lock is held while a generation is created, while one is
  installed, and while leftovers are removed, so removal never judges a generation by a
  manifest that is being replaced.

Leftovers (the generations of killed builds, the generation a build replaced) are removed by
the next build of the name, under the directory's lock, only when no build holds them and the
current manifest does not name them. A search that opened the old database before it was
replaced keeps reading it: its files stay readable until closed.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil

from ..errors import OutputError
from . import format as fmt

_GENERATION = re.compile(re.escape(fmt.GENERATION_PREFIX) + r"[0-9a-f]{16}$")
_VERSION_1_VOLUME = re.compile(r"v\d{3}\.mdb$")


def database_dir(out: str) -> str:
    """The directory a database name refers to ('db/example' -> 'db/example.gdb')."""
    out = os.fspath(out)
    return out if out.endswith(fmt.DB_SUFFIX) else out + fmt.DB_SUFFIX


class Generation:
    """A build's own generation folder inside the database directory, locked while it lives."""

    def __init__(self, final: str):
        self.final = final
        self._created_final = False
        self._fd = None
        try:
            with self._directory_lock() as directory_fd:
                self._check_is_database_directory()
                _remove_leftovers(final)
                self.name = _new_generation_name(final)
                self.path = os.path.join(final, self.name)
                os.mkdir(self.path)
                self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.fsync(directory_fd)  # the generation's folder is durable before it fills
        except BaseException:
            self._remove_final_if_made()
            raise

    def install(self, manifest_text: str) -> None:
        """Writes the manifest and makes this generation the database's, in one rename."""
        staged = os.path.join(self.path, fmt.MANIFEST)
        with open(staged, "w", encoding="utf-8") as handle:
            handle.write(manifest_text)
            handle.flush()
            os.fsync(handle.fileno())
        os.fsync(self._fd)  # the volumes' names are durable before the manifest names them
        with self._directory_lock() as directory_fd:
            os.replace(staged, os.path.join(self.final, fmt.MANIFEST))
            # the database's now: released, so that nothing (abandon) can remove it
            self.release()
            os.fsync(directory_fd)
            _remove_leftovers(self.final)

    def abandon(self) -> None:
        """Removes this generation unless installed; and the database directory too when
        this build made it and nothing else is in it."""
        if self._fd is None:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        self.release()
        self._remove_final_if_made()

    def _remove_final_if_made(self) -> None:
        if not self._created_final:
            return
        try:
            with self._directory_lock():
                os.rmdir(self.final)
        except OSError:
            pass  # another build's generation or a database arrived meanwhile

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _directory_lock(self) -> "_DirectoryLock":
        return _DirectoryLock(self)

    def _check_is_database_directory(self) -> None:
        entries = os.listdir(self.final)
        if fmt.MANIFEST in entries:
            return
        strangers = [entry for entry in entries if not _GENERATION.match(entry)]
        if strangers:
            raise OutputError(f"{self.final}: exists and is not a gblastn database; "
                              "not overwriting it")


class _DirectoryLock:
    """The database directory's exclusive lock (the directory made first when missing). A
    directory removed while its lock was awaited (by a failed first build) is made again."""

    def __init__(self, generation: Generation):
        self.generation = generation
        self.fd = None

    def __enter__(self) -> int:
        final = self.generation.final
        while self.fd is None:
            try:
                os.mkdir(final)
                self.generation._created_final = True
            except FileExistsError:
                if not os.path.isdir(final):
                    raise OutputError(f"{final}: exists and is not a gblastn database; "
                                      "not overwriting it") from None
            fd = os.open(final, os.O_RDONLY | os.O_DIRECTORY)
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, final):
                self.fd = fd
            else:
                os.close(fd)
        return self.fd

    def __exit__(self, *exc) -> None:
        os.close(self.fd)
        self.fd = None


def _same_file(fd: int, path: str) -> bool:
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino)


def _new_generation_name(final: str) -> str:
    while True:
        name = fmt.GENERATION_PREFIX + os.urandom(8).hex()
        if not os.path.exists(os.path.join(final, name)):
            return name


def _named_entries(final: str) -> set[str] | None:
    """The top-level entries of the directory that its manifest names (a generation, or a
    version 1 volume file); None when there is a manifest that cannot be read, whose
    database must then be left whole."""
    try:
        with open(os.path.join(final, fmt.MANIFEST), encoding="utf-8") as handle:
            manifest = json.load(handle)
        return {str(volume["file"]).split("/", 1)[0] for volume in manifest["volumes"]}
    except FileNotFoundError:
        return set()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _remove_leftovers(final: str) -> None:
    """Removes the generations no build holds and the manifest does not name, and version 1
    volume files it does not name. Called with the directory's lock held."""
    named = _named_entries(final)
    if named is None:
        return
    for entry in os.listdir(final):
        if entry in named:
            continue
        path = os.path.join(final, entry)
        try:
            if _GENERATION.match(entry):
                _remove_unheld_generation(path)
            elif _VERSION_1_VOLUME.match(entry):
                os.unlink(path)
        except OSError:
            pass  # left for the next build of the name; the database itself is whole


def _remove_unheld_generation(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a running build's
        shutil.rmtree(path)
    finally:
        os.close(fd)
