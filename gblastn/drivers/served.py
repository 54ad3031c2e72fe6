"""Searches sent through `gblastn serve`'s own process, which keeps a Dask client of its
cluster connected.

A searching process that imports Dask and connects to the scheduler itself spends 0.3 s or
more before its first task is sent (`import distributed` alone takes 0.2-0.5 s;
docs/perf/scale-out.md). So gblastn serve opens a door beside its scheduler (a TCP socket on
the scheduler's host) and names it in the scheduler file; `gblastn search -scheduler_file F`
sends its search through that door: the database's name, the options and the output format
in one message, then the queries as it reads them, in chunks, so that the first batch is
searched while the rest are read and sent. The served process runs the search
(cluster.ClusterSearch) with its warm client and sends each batch's output texts back as the
workers make them; the searching process reads the queries and writes the outputs, as
always, and imports neither Dask nor the compiled stages.

Messages are pickles behind their length (8 bytes). The door trusts whoever connects to
it, as the Dask scheduler beside it does: both run what they are sent.
"""

import contextlib
import json
import os
import pickle
import socket
import socketserver
import struct
import threading
from dataclasses import dataclass

from ..errors import ClusterError, GblastnError

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


# The queries follow a SearchRequest in chunks ("queries", [Query]) and an ("end", None). A
# chunk is sent once it holds this many letters, doubling from the first (small: blastn's
# first batch is, and it can be searched before the rest are read) to the last.
FIRST_CHUNK_LETTERS = 1 << 16
CHUNK_LETTERS = 1 << 22


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
    """One search sent through the door at `address`, with ClusterSearch's texts(); `times`
    (a StageTimes) is told of the time spent connecting and waiting, and the served
    search's notes (its split, each worker's share)."""

    address: str
    spec: object
    db_name: str
    options: object
    times: object

    def texts(self, queries, report, render_here):
        """Each query's output text by `report`, in input order: made on the workers; or
        here, by `render_here` ([(query, QueryResult)] -> texts), for a report that keeps
        every query until its footer (SAM). The queries are read and sent by a thread of
        their own (QuerySender) while the texts come back; an error reading them ends the
        search."""
        keeps_queries = getattr(report, "keeps_queries", False)
        request = SearchRequest(self.db_name, self.spec, self.options,
                                None if keeps_queries else report, self.spec.worker_shares)
        with self.times.stage("cluster connect"):
            connection = _connect(self.address)
        with connection:
            sender = None
            try:
                _send(connection, request)
                sender = QuerySender(connection, queries)
                while True:
                    with self.times.stage("cluster wait"):
                        kind, body = _receive(connection)
                    if kind == "texts":
                        yield from body
                    elif kind == "results":
                        yield from render_here(body)
                    elif kind == "error":
                        sender.stop(abort=True)
                        raise _error_of(*body)
                    else:  # done
                        sender.stop()
                        self.times.notes.update(body)
                        return
            except OSError as exc:
                if sender is not None:
                    sender.stop(abort=True)  # raises what stopped the queries, if anything
                raise ClusterError(f"the served cluster's door {self.address} closed "
                                   f"mid-search: {exc}") from None


class QuerySender:
    """A thread that reads the queries and sends them through the door in chunks (each of
    at least FIRST_CHUNK_LETTERS letters, doubling to CHUNK_LETTERS), then the end. An
    error reading them (a malformed input) shuts the connection, so that the search stops,
    and is raised by stop()."""

    def __init__(self, connection: socket.socket, queries):
        self.connection, self.queries, self.error = connection, queries, None
        self.thread = threading.Thread(target=self._send_all, name="gblastn-queries",
                                       daemon=True)
        self.thread.start()

    def _send_all(self) -> None:
        chunk, letters, limit = [], 0, FIRST_CHUNK_LETTERS
        try:
            for query in self.queries:
                chunk.append(query)
                letters += len(query)
                if letters >= limit:
                    _send(self.connection, ("queries", chunk))
                    chunk, letters, limit = [], 0, min(2 * limit, CHUNK_LETTERS)
            if chunk:
                _send(self.connection, ("queries", chunk))
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
        """Each batch's texts by the request's report, or without one its (query,
        QueryResult) pairs."""
        from ..timing import StageTimes
        from .cluster import ClusterSearch

        times = StageTimes()
        db, statistics = self.database(request.db_name)
        search = ClusterSearch(self.client, request.spec, db, request.db_name, request.options,
                               times, statistics=statistics)
        times.notes["cluster"] = search.split()
        queries = ReceivedQueries(connection)
        sent, done = 0, False
        for batch, outputs in search.batch_texts(queries, request.report, None):
            if request.report is None:
                _send(connection, ("results", list(zip(batch, outputs))))
            else:
                _send(connection, ("texts", outputs))
            sent += len(batch)
            if queries.count == sent and queries.ended and not request.worker_shares:
                _send(connection, ("done", dict(times.notes)))
                done = True
        if not done:
            _send(connection, ("done", dict(times.notes)))


class ReceivedQueries:
    """The queries a search sends through the door after its request, as an iterable read
    as the search forms its batches: `count` so far, `ended` once the last has come."""

    def __init__(self, connection: socket.socket):
        self.connection, self.count, self.ended = connection, 0, False

    def __iter__(self):
        while True:
            kind, chunk = _receive(self.connection)
            if kind == "end":
                self.ended = True
                return
            self.count += len(chunk)
            yield from chunk


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
