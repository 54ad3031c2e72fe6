"""Where numba keeps gblastn's compiled code: a cache keyed by content, not by place or time.

numba compiles a function together with every compiled function it calls, from whatever
module, but its own cache checks only the source of the function's own module: after an
edit of a callee elsewhere, a caller would load the old callee from its cache. Its folders
are also named after the package's path, so a reinstall of the same code elsewhere (`pip
install .` after `pip install -e .`) compiles everything again.

Here each module of the package gets a key: a hash of its source, of the sources of every
module of the package it imports at module level (directly or through others: compiled
code reads only module globals), and of the numba, llvmlite, numpy and Python versions. A module's compiled functions
live in a folder named after the module and its key, so unchanged code finds its machine
code wherever it is installed, and an edit recompiles only the modules that import the
edited one. numba itself keys each function's entries by its signature and by the CPU
(name and features) the code was made for.
"""

import os
import re
import sys
import time

PACKAGE = "gblastn"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
STALE_SECONDS = 7 * 24 * 3600  # an older key's folder unused this long is removed

_FROM_IMPORT = re.compile(r"from\s+(\.+[\w.]*|[\w.]+)\s+import\s+(.*)", re.DOTALL)
_PLAIN_IMPORT = re.compile(r"import\s+(.*)", re.DOTALL)


def cache_root() -> str:
    """gblastn's cache folder: $XDG_CACHE_HOME/gblastn, by default ~/.cache/gblastn."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, PACKAGE)


def numba_cache_dir() -> str:
    """Where compiled code is kept: numba's cache folder when the user set one
    (NUMBA_CACHE_DIR), else gblastn's own. gblastn's modules get a folder each in it."""
    return os.environ.get("NUMBA_CACHE_DIR") or os.path.join(cache_root(), "numba")


class SourceKeys:
    """The content keys of the modules of one package (a folder of .py files)."""

    def __init__(self, package: str, folder: str, salt: str = ""):
        self.package, self.folder = package, folder
        self.sources = _read_sources(package, folder)
        self.salt = salt or installed_versions()
        self._keys: dict = {}
        self._imported: dict = {}  # each module's imports, parsed once for every closure
        self._digests: dict = {}  # each module's source hashed once for every closure

    def key(self, module: str) -> str:
        """The module's key: its source, its package imports' sources, the versions."""
        if module not in self._keys:
            self._keys[module] = self._key_of(self.closure(module))
        return self._keys[module]

    def package_key(self) -> str:
        """One key for the whole package: changes with any of its modules."""
        return self._key_of(self.sources)

    def _key_of(self, modules) -> str:
        """The key of these modules' sources (by their digests: a search's twenty keys
        hashed the sources of their closures, 16-19 ms of the first compiled calls), with
        the versions."""
        digest = _digest(self.salt)
        for name in sorted(modules):
            digest.update(f"\0{name}\0".encode())
            digest.update(self._source_digest(name))
        return digest.hexdigest()[:20]

    def _source_digest(self, module: str) -> bytes:
        if module not in self._digests:
            found = _digest("")
            found.update(self.sources[module])
            self._digests[module] = found.digest()
        return self._digests[module]

    def closure(self, module: str) -> set:
        """`module` and every module of the package it imports, directly or not."""
        seen, todo = set(), [module]
        while todo:
            name = todo.pop()
            if name in seen or name not in self.sources:
                continue
            seen.add(name)
            if name not in self._imported:
                self._imported[name] = self._imports(name)
            todo.extend(self._imported[name])
        return seen

    def _imports(self, module: str) -> set:
        """The package's modules that `module` imports at module level: compiled code reads
        only its module's globals (functions and constants imported from other modules);
        imports inside functions serve Python code."""
        is_package = self.is_package(module)
        found = set()
        for statement in _module_imports(self.sources[module].decode("utf-8", "replace")):
            plain = _PLAIN_IMPORT.fullmatch(statement)
            if plain:
                found.update(name.split()[0] for name in plain.group(1).split(","))
                continue
            from_import = _FROM_IMPORT.fullmatch(statement)
            if from_import is None:
                continue  # prose in a docstring that starts a line with "from"
            target, names = from_import.groups()
            base = _resolve(target, module, is_package)
            if target.strip("."):
                found.add(base)  # not for `from . import stage`: only the stage is read
            for name in names.strip("() \n").split(","):
                if name.split():
                    found.add(f"{base}.{name.split()[0]}")  # `from . import stage`
        return {name for name in found if name in self.sources}

    def is_package(self, module: str) -> bool:
        """Whether `module` is a package's __init__ (its relative imports start there)."""
        return os.path.isdir(os.path.join(self.folder, *module.split(".")[1:]))


def _digest(salt: str):
    """BLAKE2b, the interpreter's own in every build: a search's keys hash the package's
    1.3 MB of sources, in 1.4 ms against SHA-256's 5 ms without OpenSSL (which the
    command line leaves unloaded, numba_start.skip_numba_extras)."""
    import hashlib  # not at import: OpenSSL's memory in every process (makedb's too)

    return hashlib.blake2b(salt.encode(), digest_size=32)


def _module_imports(source: str) -> list:
    """The source's import statements at module level, each on one line."""
    statements, current = [], None
    for line in source.splitlines():
        if current is None and (line.startswith("from ") or line.startswith("import ")):
            current = line
        elif current is not None:
            current += " " + line.strip()
        else:
            continue
        if current.endswith("\\") or current.count("(") > current.count(")"):
            current = current.rstrip("\\")
            continue
        statements.append(current.split("#")[0].strip())
        current = None
    return statements


def _read_sources(package: str, folder: str) -> dict:
    sources = {}
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d.isidentifier())
        relative = os.path.relpath(here, folder)
        parts = [package] + ([] if relative == "." else relative.split(os.sep))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            stem = name[:-3]
            module = ".".join(parts if stem == "__init__" else parts + [stem])
            with open(os.path.join(here, name), "rb") as source:
                sources[module] = source.read()
    return sources


def _resolve(target: str, module: str, is_package: bool) -> str:
    """The absolute name of a `from X import` target written in `module`."""
    if not target.startswith("."):
        return target
    dots = len(target) - len(target.lstrip("."))
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[:len(parts) - dots + 1]
    rest = target[dots:]
    return ".".join(parts + ([rest] if rest else []))


def installed_versions() -> str:
    import importlib.util

    found = [f"{name}={_installed_version(name, importlib.util.find_spec(name))}"
             for name in ("numba", "llvmlite", "numpy")]
    return " ".join(found + [sys.version.split()[0]])


def _installed_version(name: str, spec) -> str:
    """The version in the name of the package's .dist-info folder beside it: importlib's
    metadata scans every installed distribution, slow on hosts with hundreds of them."""
    if spec is None or not spec.origin:
        return "?"
    site = os.path.dirname(os.path.dirname(spec.origin))
    prefix = name + "-"
    try:
        for entry in os.listdir(site):
            if entry.startswith(prefix) and entry.endswith(".dist-info"):
                return entry[len(prefix):-len(".dist-info")]
    except OSError:
        pass
    return spec.origin  # not installed from a distribution: its place stands in


_KEYS: dict = {}


def source_keys(package: str = PACKAGE, folder: str = PACKAGE_DIR) -> SourceKeys:
    """The keys of a package's modules, read once per process."""
    if package not in _KEYS:
        _KEYS[package] = SourceKeys(package, folder)
    return _KEYS[package]


_PACKAGES = {PACKAGE: PACKAGE_DIR}


def key_package(package: str, folder: str) -> None:
    """Cache another package's compiled functions by content too (as gblastn's)."""
    _PACKAGES[package] = os.path.abspath(folder)


def module_cache_dir(module: str, key: str) -> str:
    return os.path.join(numba_cache_dir(), f"{module}-{key}")


def remove_stale_keys(module: str, key: str) -> None:
    """Folders of `module`'s earlier keys, unused for a week, removed."""
    parent = numba_cache_dir()
    keep = f"{module}-{key}"
    try:
        names = os.listdir(parent)
    except OSError:
        return
    now = time.time()
    for name in names:
        if name == keep or name.rsplit("-", 1)[0] != module:
            continue
        path = os.path.join(parent, name)
        try:
            if now - os.stat(path).st_mtime > STALE_SECONDS:
                import shutil

                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def install_locator() -> None:
    """Make numba find the keyed packages' compiled functions by content (called once
    numba is imported, before the first dispatcher is made)."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in 0.6x
    if any(getattr(cls, "_gblastn_keyed", False) for cls in impl._locator_classes):
        return
    impl._locator_classes = [_content_keyed_locator(caching)] + list(impl._locator_classes)
    _lock_index_updates(caching.IndexDataCacheFile)


def _lock_index_updates(index_files) -> None:
    """numba saves a function's cache entry by reading the function's index, adding the
    entry and writing the index back. A first search compiles in two processes at once
    (compile_ahead): an entry the other process added in between was lost, and the next
    search compiled it again. The update now holds a lock on the cache folder."""
    save = index_files.save
    if not hasattr(index_files, "_load_index") or getattr(save, "_locked", False):
        return

    def locked_save(self, key, data):
        try:
            import fcntl
        except ImportError:  # no POSIX locks: as numba does it
            return save(self, key, data)
        with open(os.path.join(self._cache_path, ".index-lock"), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return save(self, key, data)

    locked_save._locked = True
    index_files.save = locked_save


def _content_keyed_locator(caching):
    class ContentKeyedLocator(caching._CacheLocator):
        """numba's cache locator for the keyed packages' functions."""

        _gblastn_keyed = True

        def __init__(self, py_func, py_file: str, module: str, key: str):
            self._py_file = py_file  # numba's warnings name it
            self._lineno = py_func.__code__.co_firstlineno
            self._key = key
            self._path = module_cache_dir(module, key)

        def get_cache_path(self):
            return self._path

        def get_source_stamp(self):
            return self._key

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            module = py_func.__module__
            package = module.split(".")[0]
            folder = _PACKAGES.get(package)
            if folder is None or not os.path.abspath(py_file).startswith(folder + os.sep):
                return None
            key = source_keys(package, folder).key(module)
            self = cls(py_func, py_file, module, key)
            try:
                fresh = not os.path.isdir(self._path)
                self.ensure_cache_path()
            except OSError:
                return None  # numba's other places, or no caching
            if fresh:
                remove_stale_keys(module, key)
            return self

    return ContentKeyedLocator
