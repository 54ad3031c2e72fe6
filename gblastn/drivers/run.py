"""The command line's search: queries in, tabular output out, written atomically.

Every output is checked and prepared before the database is opened; the queries are read
from the files in order; the search runs through the serial driver (serial.py) or the
pipeline (pipeline.py), which give byte-identical output; the outputs are renamed into place
only when the whole search succeeded (output.files), and removed on a failure.
"""

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable

from ..errors import InputError, OptionsError


@dataclass
class OutputSpec:
    outfmt: str = "0"
    out: str | None = None        # None or '-': standard output
    out_dir: str | None = None    # one output per listed query file
    db_name: str = ""             # as the user gave it, for '# Database:'
    # -outfmt 0's settings (None: blastn's default)
    line_length: int | None = None
    num_descriptions: int | None = None
    num_alignments: int | None = None
    show_gis: bool | None = None
    command_line: str = ""        # the search's, which -outfmt 17 names in its @PG line


@dataclass
class RunSettings:
    mode: str = "pipeline"        # or "serial"
    prelim_threads: int = 0       # 0: derived from options.num_threads
    traceback_threads: int = 0
    progress: bool = False
    # the process ends with the search: the GPU is given back as soon as the search is done
    # with it (GpuBackend.retire), while the CPU finishes the tracebacks and the output
    release_device: bool = False
    # called once the outputs and the database are ready, before the first query is read:
    # a first search compiles its stages there (compile_ahead), before its progress bar
    compile_stages: Callable[[], None] | None = None
    # the search runs on a Dask cluster (drivers/cluster.py's ClusterSpec) when given
    cluster: object = None


def query_files(query: str | None, query_list: str | None) -> list:
    """The FASTA files to search, from -query or -query_list (standard input without
    either, as blastn reads it), each checked to be a readable file before the search."""
    if query is not None and query_list is not None:
        raise InputError("give one of -query and -query_list, not both")
    if query_list is not None:
        return read_query_list(query_list)
    query = "-" if query is None else query
    if query != "-":
        check_query_file(query)
    return [query]


def read_query_list(path: str) -> list:
    """The query FASTA files a -query_list file names, one per line, relative to its folder;
    each is checked (check_query_file) before any is searched."""
    try:
        # names that are not UTF-8 stay the bytes they are, as the file system takes them
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            lines = [line.strip() for line in handle]
    except OSError as exc:
        raise InputError(f"cannot read query list {path}: {exc.strerror}") from None
    folder = os.path.dirname(os.path.abspath(path))
    files = [os.path.join(folder, line) for line in lines if line and not line.startswith("#")]
    if not files:
        raise InputError(f"query list {path} names no files")
    for listed in files:
        check_query_file(listed, f"query list {path}: ")
    return files


def check_query_file(path: str, context: str = "") -> None:
    """InputError, prefixed by `context`, unless `path` is a file that can be read."""
    if os.path.isdir(path):
        raise InputError(f"{context}query file {path} is a directory, not a FASTA file")
    if not os.path.exists(path):
        raise InputError(f"{context}query file {path} does not exist")
    if not os.access(path, os.R_OK):
        raise InputError(f"{context}query file {path} cannot be read (permission denied)")


def run_search(files: list, db_path: str, options, output: OutputSpec, backend=None,
               settings: RunSettings | None = None, times=None) -> int:
    """Search every query of `files`; one output, or one per file with out_dir. Returns the
    number of queries searched. `backend`: a scan Backend, or the Future of its set-up (the
    CPU's when None); `times`: the StageTimes the search's time is counted in. Every output
    is checked and prepared before the database is opened, and put in place only when the
    whole search succeeded (output.files)."""
    from ..output.files import OutputFiles, prepare_output_folder
    from ..output.formats import output_format
    from ..pools import rare_collections
    from ..timing import StageTimes

    settings = settings or RunSettings()
    times = times or StageTimes()
    fmt = output_format(output.outfmt, options, output.db_name, output.command_line,
                        line_length=output.line_length,
                        num_descriptions=output.num_descriptions,
                        num_alignments=output.num_alignments, show_gis=output.show_gis)
    _check_report_place(fmt, output, db_path)
    if options.window_masker_db is not None:
        from ..window_masker import unit_counts
        unit_counts(options.window_masker_db)  # refused before any output is made
    paths = output_paths(output, files)
    made_folders = prepare_output_folder(output.out_dir) if output.out_dir else []
    with OutputFiles(paths, made_folders) as outputs, rare_collections():
        door = _door(settings)
        if door is not None:
            return _search_served(door, db_path, options, times, files, fmt, output, settings,
                                  outputs)
        from ..db.reader import open_db

        with times.stage("database load"):
            db = open_db(db_path)
        try:
            searched = _search_with(db, db_path, options, times, backend, files, fmt,
                                    output, settings, outputs)
        except BaseException:
            # threads still inside compiled calls may read the volumes' mapped pages:
            # closing the database unmapped them, which crashed the process before its
            # outputs' temporary files were removed
            db.abandon()
            raise
        db.close()
        return searched


def _check_report_place(fmt, output: OutputSpec, db_path) -> None:
    """The BlastOutput2 reports (-outfmt 13 to 16) need a database (blastn writes another
    layout for -subject, bl2seq's), and 13 and 14 a file name to name the queries' files
    after."""
    if not hasattr(fmt, "per_query_files"):  # BlastOutput2Report's alone
        return
    from ..db.subjects import SubjectFile

    number = output.outfmt.split()[0]
    if isinstance(db_path, SubjectFile):
        raise OptionsError(f"-outfmt {number} is not supported by gblastn with -subject: "
                           "search a database of the subjects (gblastn makedb) with -db")
    if fmt.per_query_files and output.out in (None, "-") and output.out_dir is None:
        raise OptionsError(f"-outfmt {number} writes a file per query named after -out: "
                           "give -out a file name")


def _search_with(db, db_path, options, times, backend, files, fmt, output, settings,
                 outputs) -> int:
    from . import Search

    if settings.cluster is not None:
        return _search_on_cluster(ClusterSide(db, options, times), db_path, files, fmt,
                                  output, settings, outputs)
    if settings.compile_stages is not None:
        settings.compile_stages()
    if backend is None:
        from ..scan.backend import CPU
        backend = CPU
    search = Search(db, options, times, backend)
    loader = _preload(search)
    try:
        return _search_all(search, files, fmt, output, settings, outputs)
    finally:
        loader.join()  # the volume's memory must outlive the copy


@dataclass
class ClusterSide:
    """What this process holds of a search that runs on a cluster: the database (the
    output's header and footer, the statistics), the options, the StageTimes. It scans
    nothing, so it sets up no engine (drivers.Search); the options that would restrict or
    mask the database are refused first, as the cluster refuses them."""

    db: object
    options: object
    times: object

    def __post_init__(self):
        from .cluster import refuse_local_only

        refuse_local_only(self.options)

    def ready_backend(self) -> None:
        """No backend: the workers scan."""


def _door(settings: RunSettings) -> str | None:
    """gblastn serve's door, where the search's cluster is one that it serves."""
    if settings.cluster is None:
        return None
    from .served import door_of

    return door_of(settings.cluster)


def _search_served(door, db_path, options, times, files, fmt, output, settings,
                   outputs) -> int:
    """The search sent through gblastn serve's door: its process reads the queries, opens
    the database and makes every text, this one only writes them."""
    from .cluster import worker_db_name
    from .served import ServedSearch

    served = ServedSearch(door, settings.cluster, worker_db_name(db_path), options, times)
    return _search_all(ClusterSide(None, options, times), files, fmt, output, settings,
                       outputs, served=served)


def _search_on_cluster(search, db_path, files, fmt, output, settings, outputs) -> int:
    from .cluster import ClusterSearch, connected, worker_db_name

    times = search.times
    with contextlib.ExitStack() as stack:
        with times.stage("cluster connect"):
            client = stack.enter_context(connected(settings.cluster, search.options.num_threads))
        with times.stage("cluster set-up"):
            cluster = ClusterSearch(client, settings.cluster, search.db, worker_db_name(db_path),
                                    search.options, times)
        times.notes["cluster"] = cluster.split()
        return _search_all(search, files, fmt, output, settings, outputs, cluster)


def output_paths(output: OutputSpec, files: list) -> list:
    """Where the search writes: [output.out], or with out_dir one file per query file, named
    after it (q.fa gives q.out). Two query files that would give the same name are refused,
    naming both: one's results would replace the other's."""
    if output.out_dir is None:
        return [output.out]
    if output.out not in (None, "-"):
        raise OptionsError("give one of -out and -out_dir, not both")
    claimed = {}
    for path in files:
        name = os.path.splitext(os.path.basename(path))[0] + ".out"
        if name in claimed:
            raise InputError(f"{claimed[name]} and {path} would both be written to "
                             f"{os.path.join(output.out_dir, name)}: rename one of them")
        claimed[name] = path
    return [os.path.join(output.out_dir, name) for name in claimed]


def _search_all(search, files, fmt, output, settings, outputs, cluster=None,
                served=None) -> int:
    if not output.out_dir:
        return _search_into(search, outputs, 0, fmt, files, output, settings, cluster, served)
    total = 0
    for number, path in enumerate(files):
        last = number == len(files) - 1
        these = replace(settings, release_device=settings.release_device and last)
        total += _search_into(search, outputs, number, fmt, [path], output, these, cluster,
                              served)
    return total


def _preload(search) -> threading.Thread:
    """Load the volumes in a thread, while the first batch's queries are read, masked and
    indexed, and copy each to the GPU as the next one loads, as many as fit there together
    (a volume loaded only when its first job came would hold up that job's scan). Without a
    GPU only the first volume is loaded ahead. The backend's set-up is waited for here.
    A failure here is left for the search to meet (and report) when it reaches the
    volume."""
    def body():
        with ThreadPoolExecutor(1, thread_name_prefix="gblastn-preload-copy") as copier:
            copied = None
            try:
                for volume in search.db.volumes:
                    subjects = search.buffers.of(volume)
                    ready = search.ready_backend()
                    if not ready.capabilities.preloads or \
                            (copied is not None and not copied.result()):
                        return
                    copied = copier.submit(ready.preload, subjects)
                if copied is not None:
                    copied.result()
            except Exception:  # noqa: BLE001 - see the docstring
                pass

    thread = threading.Thread(target=body, name="gblastn-preload", daemon=True)
    thread.start()
    return thread


def _search_into(search, outputs, index, fmt, files, output, settings, cluster=None,
                 served=None) -> int:
    """Search the queries of `files` into output `index` of `outputs` (an OutputFiles), here,
    on `cluster` (a cluster.ClusterSearch), or through gblastn serve's door (`served`, a
    served.ServedSearch)."""
    times = search.times

    def render(pairs):
        with times.stage("output"):
            return fmt.render(pairs, search.db)

    if served is not None:
        texts = served.texts(files, fmt)
    else:
        from ..db.subset import filtered_to_nothing
        from ..fasta import reader_warning
        from ..output.formats import query_warnings
        from ..query import warned_queries

        queries = warned_queries(
            lambda said: searched_queries(files, search.options.query_loc, warn=said),
            search.options, query_warnings(fmt, reader_warning),
            filtered_to_nothing(search.db))
        texts = _texts(search, queries, fmt, render, settings, cluster)
    per_query = getattr(fmt, "per_query_files", False)  # -outfmt 13, 14
    progress = _Progress(files) if settings.progress else None
    out = outputs.open(index)
    count = 0
    try:
        for text in texts:
            with times.stage("output"):
                if per_query:
                    _write_query_file(outputs, fmt.query_file(outputs.path(index), count + 1),
                                      text)
                else:
                    out.write(text)
            count += 1
            if progress:
                progress.advance()
    finally:
        if progress:
            progress.close()
    if per_query:
        out.write(fmt.master_file(outputs.path(index), count))
    else:
        out.write(served.footer if served is not None else fmt.footer(search.db, count))
    search.ready_backend()  # -device gpu without a GPU fails even when nothing needed a scan
    outputs.close(index)
    return count


def _texts(search, queries, fmt, render, settings, cluster=None):
    """The queries' output texts, in order: made in this process, or by `cluster`'s workers
    (a report that keeps every query until its footer rendered here)."""
    if cluster is not None:
        return cluster.texts(queries, fmt, render)
    if settings.mode == "serial":
        from .serial import serial_texts

        return serial_texts(search, queries, render, settings.release_device)
    from .pipeline import Pipeline

    return Pipeline(search, queries, settings, render).texts()


def _write_query_file(outputs, path: str, text: str) -> None:
    """A query's own output (-outfmt 13, 14), put in place with the run's others."""
    index = outputs.add(path)
    outputs.open(index).write(text)
    outputs.close(index)


# blastn's words for an input without a record
EMPTY_INPUT_WARNING = "Warning: [blastn] Query is Empty!"


def searched_queries(files, query_loc: tuple, source_of=None, warn=None):
    """The queries of `files` (numbered_queries), each with -query_loc's part to search
    (query.located_queries)."""
    from ..query import located_queries

    # where -query_loc is given, its part of an empty record is what blastn warns about
    return located_queries(numbered_queries(files, source_of, warn, warn_empty=not query_loc),
                           query_loc, warn)


def numbered_queries(files, source_of=None, warn=None, warn_empty: bool = True):
    """The queries of `files`, numbered across them as blastn numbers its input, each file
    read from `source_of(file)` where given (the stream a served search receives for it),
    warnings to `warn` (stderr without it). A record without letters is warned about in
    blastn's words (unless not `warn_empty`) and searched (it has no hits); when no record
    has letters blastn fails,
    and so does this: empty records are held back until a query with letters comes, so that
    nothing of theirs is written first."""
    from ..fasta import reader_warning
    from ..query import EMPTY_QUERY_WARNING, iter_queries

    warn = warn or reader_warning
    held, number, any_letters = [], 0, False
    for path in files:
        count = 0
        source = path if source_of is None else source_of(path)
        for query in iter_queries(source, number + 1, name=path, warn=warn):
            number += 1
            count += 1
            if len(query) == 0:
                if warn_empty:
                    label = " ".join(filter(None, (f"Query_{number}", query.defline)))
                    warn(EMPTY_QUERY_WARNING.format(label=label))
                if not any_letters:
                    held.append(query)
                    continue
            elif not any_letters:
                any_letters = True
                yield from held
                held = []
            yield query
        if count == 0:
            warn(EMPTY_INPUT_WARNING)
    if held:
        raise InputError(f"Sequence contains no data: no query of {', '.join(files)} has letters")


class _Progress:
    """Queries done of total, with rate and ETA, on stderr (only when it is a terminal)."""

    def __init__(self, files):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeRemainingColumn)
        total = sum(_count_records(path) for path in files)
        self.progress = Progress(TextColumn("searching"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                                 console=Console(stderr=True), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("search", total=total or None, rate="")

    def advance(self):
        self.progress.advance(self.task)
        speed = self.progress.tasks[0].speed
        if speed:
            self.progress.update(self.task, rate=f"{speed:.1f} queries/s")

    def close(self):
        self.progress.stop()


def _count_records(path) -> int:
    """Number of '>' lines of a FASTA file (0 for stdin): the progress bar's total."""
    if path == "-":
        return 0
    from ..fasta import open_binary
    count, at_line_start = 0, True
    with open_binary(path) as handle:
        while chunk := handle.read(8 << 20):
            count += chunk.count(b"\n>") + (1 if at_line_start and chunk[:1] == b">" else 0)
            at_line_start = chunk.endswith(b"\n")
    return count
