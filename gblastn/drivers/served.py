"""Searches sent through `gblastn serve`'s own process, which keeps a Dask client of its
cluster connected.

A searching process that imports Dask and connects to the scheduler itself spends 0.3 s or
more before its first task is sent (`import distributed` alone takes 0.2-0.5 s;
docs/perf/scale-out.md). So gblastn serve opens a door beside its scheduler (a TCP socket on
the scheduler's host) and names it in the scheduler file; `gblastn search -scheduler_file F`
sends its search through that door: the database's name, the options, the output format and
the names of the query files in one message, then the files' bytes as it reads them, in
chunks, so that the first batch is searched while the rest are read and sent. The served
process reads the queries from them (with the reader's warnings sent back), runs the search
(cluster.ClusterSearch) with its warm client and sends each batch's output texts back as
the workers make them, then the report's last text. The searching process parses its
command line and writes the outputs, as always, and imports neither numpy, Dask nor the
compiled stages: on a GPU host numpy's import alone took 0.3 s of a served search's 1.5 s
(docs/perf/scale-out.md).

Messages are pickles behind their length (8 bytes). The door trusts whoever connects to
it, as the Dask scheduler beside it does: both run what they are sent.
"""

import contextlib
import io
import json
import os
import pickle
import socket
import socketserver
import struct
import sys
import threading
from dataclasses import dataclass

from ..errors import ClusterError, GblastnError, InputError

DOOR_KEY = "gblastn-search"  # the scheduler file's entry naming the door: HOST:PORT
CONNECT_SECONDS = 5
_LENGTH = struct.Struct("!Q")


@dataclass
class SearchRequest:
    """One search sent through the door."""

    db_name: str          # as the workers open it (cluster.worker_db_name)
    spec: object          # the search's ClusterSpec: its mode and shards
    options: object       # SearchOptions
    report: object        # the output format
    worker_shares: bool   # wait for each worker's share of the time (-stage_times)
    inputs: list          # the query files as named to the search ('-': standard input)


# The query files' bytes follow a SearchRequest in chunks ("bytes", (index of the file in
# `inputs`, bytes)), file after file, and an ("end", None). A chunk is sent once it holds
# this many bytes, doubling from the first (small: blastn's first batch is, and it can be
# searched before the rest are read) to the last.
FIRST_CHUNK_BYTES = 1 << 16
CHUNK_BYTES = 1 << 22


# ----------------------------------------------------------------------------------------------
# the searching process


def door_of(spec) -> str | None:
    """The door (HOST:PORT) that the spec's scheduler file names; None for a cluster that
    gblastn serve did not start there, or a spec without a scheduler file."""
    if spec.scheduler_file is None:
        return None
    try:
        with open(spec.scheduler_file) as handle:
            door = json.load(handle).get(DOOR_KEY)
    except (OSError, ValueError, AttributeError):
        return None  # the Dask client reports a missing or damaged file
    return door if isinstance(door, str) else None


@dataclass
class ServedSearch:
    """One search sent through the door at `address`; `times` (a StageTimes) is told of the
    time spent connecting and waiting, and the served search's notes (its split, each
    worker's share). `footer` holds the report's last text once texts() is through."""

    address: str
    spec: object
    db_name: str
    options: object
    times: object
    footer: str = ""

    def texts(self, files: list, report):
        """Each query's output text by `report`, in input order, as the served process
        makes them from the queries of `files` (their bytes sent by a thread of their own,
        InputSender, while the texts come back); the reader's warnings on stderr as they
        come. An error reading the files ends the search."""
        request = SearchRequest(self.db_name, self.spec, self.options, report,
                                self.spec.worker_shares, list(files))
        with self.times.stage("cluster connect"):
            connection = _connect(self.address)
        with connection:
            sender = None
            try:
                _send(connection, request)
                sender = InputSender(connection, files)
                while True:
                    with self.times.stage("cluster wait"):
                        kind, body = _receive(connection)
                    if kind == "texts":
                        yield from body
                    elif kind == "warning":
                        print(body, file=sys.stderr)
                    elif kind == "error":
                        sender.stop(abort=True)
                        raise _error_of(*body)
                    else:  # done
                        sender.stop()
                        self.footer, notes = body
                        self.times.notes.update(notes)
                        return
            except OSError as exc:
                if sender is not None:
                    sender.stop(abort=True)  # raises what stopped the reading, if anything
                raise ClusterError(f"the served cluster's door {self.address} closed "
                                   f"mid-search: {exc}") from None


class InputSender:
    """A thread that reads the query files and sends their bytes through the door in
    chunks (the first of FIRST_CHUNK_BYTES, doubling to CHUNK_BYTES), then the end. An
    error reading them shuts the connection, so that the search stops, and is raised by
    stop()."""

    def __init__(self, connection: socket.socket, files: list):
        self.connection, self.files, self.error = connection, files, None
        self.thread = threading.Thread(target=self._send_all, name="gblastn-queries",
                                       daemon=True)
        self.thread.start()

    def _send_all(self) -> None:
        limit = FIRST_CHUNK_BYTES
        try:
            for index, name in enumerate(self.files):
                with _opened(name) as stream:
                    while chunk := _read(stream, name, limit):
                        _send(self.connection, ("bytes", (index, chunk)))
                        limit = min(2 * limit, CHUNK_BYTES)
            _send(self.connection, ("end", None))
        except OSError:
            pass  # the search ended first: the reader of the texts tells why
        except BaseException as exc:  # noqa: BLE001 - raised in the searching thread
            self.error = exc
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

    def stop(self, abort: bool = False) -> None:
        """Wait for the thread (the search is over, or with `abort` failed: the thread's
        sending fails at once); raise its reading error."""
        if abort:
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_WR)
        self.thread.join()
        if self.error is not None:
            raise self.error


def _opened(name: str):
    """A query file's bytes as they lie ('-': standard input, left open)."""
    if name == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    try:
        return open(name, "rb")
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror})") from None


def _read(stream, name: str, size: int) -> bytes:
    try:
        return stream.read(size)
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror})") from None


def _connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    try:
        connection = socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS)
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot reach the served cluster's door {address} (is gblastn "
                           f"serve running?): {exc}") from None
    connection.settimeout(None)  # a search takes as long as it takes
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def _error_of(kind: str, message: str) -> GblastnError:
    """The served search's error as raised there (its class, for its exit status)."""
    from .. import errors

    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, GblastnError):
        return cls(message)
    return ClusterError(message)


# ----------------------------------------------------------------------------------------------
# gblastn serve's process


class SearchDoor:
    """gblastn serve's door: a thread that answers each search sent through it, in a
    thread of its own, with `client` (the served cluster's). It opens the databases the
    searches name (LMDB lets a process open a database once: not in a searching
    process)."""

    def __init__(self, client, host: str):
        self.client = client
        self.databases: dict = {}  # name -> (the database, its statistics), made here once
        self.lock = threading.Lock()
        self.server = _DoorServer((host, 0), self)
        self.thread = threading.Thread(target=self.server.serve_forever, name="gblastn-door",
                                       daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            for db, _ in self.databases.values():
                db.close()

    def database(self, name: str) -> tuple:
        """The database, opened once, and its DatabaseStatistics, made once: the searches'
        statistics and sizes come from them."""
        from ..db.reader import open_db
        from ..shards import DatabaseStatistics

        with self.lock:
            if name not in self.databases:
                db = open_db(name)
                self.databases[name] = (db, DatabaseStatistics.of(db))
            return self.databases[name]

    def answer(self, connection: socket.socket) -> None:
        """One search: its batches' texts sent as they come, then "done" with the search's
        notes, or an "error". Without worker_shares, "done" goes as soon as the last query's
        text has: the workers are told to forget the search after it."""
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            request = _receive(connection)
            self._search(connection, request)
        except OSError:
            return  # the searching process went away; its search was forgotten
        except GblastnError as exc:
            _send_quietly(connection, ("error", (type(exc).__name__, str(exc))))
        except Exception as exc:  # noqa: BLE001 - the search's failure, as one line there
            _send_quietly(connection, ("error", ("ClusterError", f"the served search "
                                                 f"failed: {type(exc).__name__}: {exc}")))

    def _search(self, connection: socket.socket, request: SearchRequest) -> None:
        """Each batch's texts by the request's report (made here, with the database, for a
        report that keeps every query until its footer: SAM), the reader's warnings as they
        come, then "done" with the report's last text and the search's notes."""
        from ..output.formats import query_warnings
        from ..query import warned_queries
        from ..timing import StageTimes
        from .cluster import ClusterSearch
        from .run import searched_queries

        times = StageTimes()
        db, statistics = self.database(request.db_name)
        search = ClusterSearch(self.client, request.spec, db, request.db_name, request.options,
                               times, statistics=statistics)
        times.notes["cluster"] = search.split()
        inputs = ReceivedInputs(connection)
        # the queries are read (and their warnings sent) in this thread, as the batches form
        warn = query_warnings(request.report, lambda text: _send(connection, ("warning", text)))
        queries = _Counted(warned_queries(
            lambda said: searched_queries(request.inputs, request.options.query_loc,
                                          inputs.stream_of, said), request.options, warn))
        report = request.report
        sent, done = 0, False
        for batch, texts in search.batch_texts(queries, report,
                                               lambda pairs: report.render(pairs, db)):
            _send(connection, ("texts", texts))
            sent += len(batch)
            if queries.count == sent and queries.ended and not request.worker_shares:
                _send(connection, ("done", (report.footer(db, sent), dict(times.notes))))
                done = True
        if not done:
            _send(connection, ("done", (report.footer(db, sent), dict(times.notes))))


class _Counted:
    """The queries, as an iterable read as the search forms its batches: `count` so far,
    `ended` once the last has come."""

    def __init__(self, queries):
        self.queries, self.count, self.ended = queries, 0, False

    def __iter__(self):
        for query in self.queries:
            self.count += 1
            yield query
        self.ended = True


class ReceivedInputs:
    """The query files' bytes that a search sends through the door after its request, each
    file a stream (stream_of, in the files' order) read as the search reads its queries."""

    def __init__(self, connection: socket.socket):
        self.connection = connection
        self.index = -1          # the file being read
        self.pending = None      # a chunk received for a later file, or the end
        self.ended = False

    def stream_of(self, name: str):
        """The bytes of the next file (`name`: they come in the files' order), gunzipped
        where they are gzip's."""
        from ..fasta import gunzipped

        self.index += 1
        return gunzipped(io.BufferedReader(_ReceivedFile(self, self.index)))

    def chunk_for(self, index: int) -> bytes:
        """The next chunk of file `index`; b"" once its bytes are through."""
        if self.pending is None and not self.ended:
            kind, body = _receive(self.connection)
            if kind == "end":
                self.ended = True
            else:
                self.pending = body
        if self.pending is None or self.pending[0] != index:
            return b""
        chunk, self.pending = self.pending[1], None
        return chunk


class _ReceivedFile(io.RawIOBase):
    """One query file's bytes as they come through the door."""

    def __init__(self, inputs: ReceivedInputs, index: int):
        self.inputs, self.index, self.left = inputs, index, memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self.left:
            self.left = memoryview(self.inputs.chunk_for(self.index))
        count = min(len(buffer), len(self.left))
        buffer[:count] = self.left[:count]
        self.left = self.left[count:]
        return count


class _DoorServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple, door: SearchDoor):
        super().__init__(address, _DoorHandler)
        self.door = door


class _DoorHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.server.door.answer(self.request)


def write_scheduler_file(client, path: str, door: SearchDoor) -> None:
    """The scheduler file Dask writes (Client.write_scheduler_file), with the door added;
    put in place whole, as searches may read it at any time."""
    info = client.scheduler_info()
    info[DOOR_KEY] = door.address
    partial = f"{path}.{os.getpid()}.tmp"
    with open(partial, "w") as handle:
        json.dump(info, handle, indent=2)
    os.replace(partial, path)


# ----------------------------------------------------------------------------------------------
# messages


def _send(connection: socket.socket, message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    connection.sendall(_LENGTH.pack(len(data)))
    connection.sendall(data)


def _send_quietly(connection: socket.socket, message) -> None:
    try:
        _send(connection, message)
    except OSError:
        pass  # the searching process went away


def _receive(connection: socket.socket):
    size = _LENGTH.unpack(_exactly(connection, _LENGTH.size))[0]
    return pickle.loads(_exactly(connection, size))


def _exactly(connection: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        count = connection.recv_into(view[got:])
        if count == 0:
            raise ConnectionError("the other side closed the connection")
        got += count
    return buffer
