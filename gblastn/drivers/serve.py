"""`gblastn serve`: a Dask cluster that holds a database for the searches sent to it
(`gblastn search -scheduler_file F`), until interrupted.

It starts a scheduler and a worker per GPU of this host (CPU worker processes without
GPUs) and writes the scheduler's address to the scheduler file; or, given a scheduler (or
a scheduler file whose scheduler answers), it adds this host's workers to that cluster.
Every worker opens the database when it starts, and copies it to its GPU as far as it fits
(cluster.ResidentDatabases); searches then find it there. A cluster it starts also gets a
door (served.SearchDoor), named in the scheduler file, through which searches are sent to
this process's own Dask client.
"""

import asyncio
import contextlib
import os
import threading
from dataclasses import dataclass, replace

from ..errors import ClusterError, GpuUnavailableError, OptionsError

PROBE_SECONDS = 5  # how long an existing scheduler file's scheduler is given to answer
PRELOAD_SECONDS = 600  # how long serving waits for its workers' preload at most
# a search's threads beyond which synth 8G's searches got no faster on an H200 host (32
# or 64 threads against 16: docs/perf/scale-out.md)
WORKER_THREADS_CAP = 16


@dataclass
class ServeSpec:
    db: str
    scheduler_file: str
    scheduler: str | None = None
    gpus: str = "all"
    workers: int = 1
    device: str = "auto"
    gpu_id: int = 0
    num_threads: int | None = None  # each worker's; None: the host's cores shared among them

    def gpu_workers(self, available: int) -> int:
        """Workers with a GPU each: -gpus all or N of the `available` ones (0 on the CPU)."""
        if self.device == "cpu":
            return 0
        wanted = available if self.gpus == "all" else _count("-gpus", self.gpus)
        if wanted > available:
            raise GpuUnavailableError(f"-gpus {self.gpus}: this host shows {available} GPU"
                                      f"{'' if available == 1 else 's'}")
        if self.device == "gpu" and wanted == 0:
            raise GpuUnavailableError("-device gpu: no GPU found for the workers "
                                      "(nvidia-smi and NVML show none)")
        return wanted


def _count(flag: str, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise OptionsError(f"{flag} takes all or a number of at least 1, not {text!r}")
    return int(text)


def serve(spec: ServeSpec, ready) -> None:
    """Serve spec.db until interrupted (SIGINT, SIGTERM); `ready(text)` is told where."""
    from ..db.reader import open_db
    from .cluster import _distributed, worker_db_name
    from .gpu_workers import visible_gpus

    distributed = _distributed()
    if spec.workers < 1 or (spec.num_threads is not None and spec.num_threads < 1):
        raise OptionsError("-workers and -num_threads must be at least 1")
    with open_db(spec.db):  # a missing or damaged database is reported here, once
        pass
    name = worker_db_name(spec.db)
    gpus = visible_gpus()
    gpus = gpus[:spec.gpu_workers(len(gpus))]
    spec = replace(spec, num_threads=spec.num_threads or _shared_cores(len(gpus) or spec.workers))
    joined = spec.scheduler or _live_scheduler(distributed, spec.scheduler_file)
    try:
        if joined:
            _join(distributed, joined, spec, name, gpus, ready)
        else:
            _start(distributed, spec, name, gpus, ready)
    except KeyboardInterrupt:
        pass


def _shared_cores(workers: int) -> int:
    """Each worker's threads where serve is not told: the host serves searches only, so its
    cores are shared among its workers (blastn's default of one thread would leave all but
    one core of a worker idle), up to WORKER_THREADS_CAP each."""
    from ..pools import available_cores

    return max(1, min(WORKER_THREADS_CAP, available_cores() // workers))


def _live_scheduler(distributed, scheduler_file: str) -> str | None:
    """The address of the scheduler file's scheduler if it answers, else None (a file a
    stopped cluster left is replaced)."""
    if not os.path.isfile(scheduler_file):
        return None
    try:
        with distributed.Client(scheduler_file=scheduler_file, timeout=PROBE_SECONDS,
                                set_as_default=False) as client:
            return client.scheduler.address
    except (OSError, TimeoutError, ValueError):
        return None


def _plugin(spec: ServeSpec, name: str):
    from .resident import ResidentDatabases

    return ResidentDatabases(spec.device, spec.gpu_id, preload=name, threads=spec.num_threads)


def _start(distributed, spec: ServeSpec, name: str, gpus: list, ready) -> None:
    """A scheduler and this host's workers (one per GPU of `gpus`, else CPU processes),
    until interrupted; the scheduler file is written once every worker is up and has
    preloaded the database, and removed at the end."""
    from .cluster import local_cluster
    from .resident import PLUGIN_NAME, preloaded
    from .served import SearchDoor, write_scheduler_file

    workers = len(gpus) or spec.workers
    device = spec.device if gpus else "cpu"
    with local_cluster(workers, device, spec.num_threads) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        client.register_plugin(_plugin(spec, name), name=PLUGIN_NAME)
        client.wait_for_workers(workers)
        # served once the workers hold the database and its stages' code: a first search
        # that came sooner waited for them (3 s on synth 1G's CPU workers, 0.3 s later)
        loading = still_loading(client.run(preloaded, PRELOAD_SECONDS))
        door = SearchDoor(client, _host_of(cluster.scheduler_address))
        write_scheduler_file(client, spec.scheduler_file, door)
        try:
            ready(f"serving {spec.db} on {cluster.scheduler_address} with {workers} "
                  f"{'GPU' if gpus else 'CPU'} worker{'s' if workers != 1 else ''} "
                  f"(scheduler file {spec.scheduler_file}){loading}")
            threading.Event().wait()
        finally:
            with contextlib.suppress(OSError):
                os.remove(spec.scheduler_file)
            door.close()


def still_loading(preloads: dict) -> str:
    """What the announcement adds where some workers' preloads (resident.preloaded's
    answers, by worker) outlasted PRELOAD_SECONDS: searches are served, but wait for them."""
    count = sum(not done for done in preloads.values())
    if not count:
        return ""
    return (f"; {count} worker{'s' if count != 1 else ''} still loading the database after "
            f"{PRELOAD_SECONDS} s (searches wait for {'them' if count != 1 else 'it'})")


def _host_of(address: str) -> str:
    """The host of a Dask address (tcp://HOST:PORT), where the door listens beside the
    scheduler."""
    return address.split("://", 1)[-1].rpartition(":")[0].strip("[]")


def _join(distributed, address: str, spec: ServeSpec, name: str, gpus: list, ready) -> None:
    """This host's workers in the cluster of `address` (a nanny each; a GPU of `gpus` each,
    seen as device 0, or CPU processes), until interrupted."""
    from .gpu_workers import worker_environments
    from .resident import PLUGIN_NAME

    try:
        with distributed.Client(address, timeout=PROBE_SECONDS, set_as_default=False) as client:
            client.register_plugin(_plugin(spec, name), name=PLUGIN_NAME)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"cannot reach the scheduler {address}: {exc}") from None
    envs = worker_environments(gpus) or [{} for _ in range(spec.workers)]
    for env in envs:
        env["OMP_NUM_THREADS"] = str(spec.num_threads)
    asyncio.run(_nannies(distributed, address, envs, spec, ready))


async def _nannies(distributed, address: str, envs: list, spec: ServeSpec, ready) -> None:
    from .resident import preloaded

    nannies = [distributed.Nanny(address, nthreads=1, env=env) for env in envs]
    await asyncio.gather(*nannies)
    loading = ""
    with contextlib.suppress(OSError, TimeoutError):  # served even where this wait fails
        async with distributed.Client(address, asynchronous=True, timeout=PROBE_SECONDS,
                                      set_as_default=False) as client:
            loading = still_loading(await client.run(
                preloaded, PRELOAD_SECONDS, workers=[nanny.worker_address for nanny in nannies]))
    try:
        ready(f"serving {spec.db} with {len(nannies)} more worker"
              f"{'s' if len(nannies) != 1 else ''} in the cluster of {address}{loading}")
        await asyncio.Event().wait()
    finally:
        await asyncio.gather(*(nanny.close() for nanny in nannies), return_exceptions=True)
