"""A local cluster of a worker per GPU (drivers/gpu_workers.py, no dask-cuda) on a GPU host:
every worker's backend runs on a GPU of its own, and the cluster's searches, sharded and
replicated, give the single-process search's output byte for byte. Skipped without pycuda
and a GPU."""

import sys

import pytest

distributed = pytest.importorskip("distributed")

from golden import megablast_case  # noqa: E402

from gblastn.db.writer import make_db  # noqa: E402
from gblastn.drivers.cluster import ClusterSpec, local_cluster  # noqa: E402
from gblastn.drivers.gpu_workers import visible_gpus  # noqa: E402
from gblastn.drivers.resident import PLUGIN_NAME, ResidentDatabases  # noqa: E402
from gblastn.drivers.run import OutputSpec, RunSettings, run_search  # noqa: E402
from gblastn.options import make_options  # noqa: E402

pytestmark = pytest.mark.gpu

TABULAR = "6 qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue " \
    "bitscore score"


@pytest.fixture(scope="module")
def gpu_cluster():
    """A worker per GPU of this host, with the search's plugin on the GPU."""
    pytest.importorskip("pycuda")
    gpus = visible_gpus()
    if not gpus:
        pytest.skip("no GPU")
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # worker_gpu, on the workers
    with local_cluster(len(gpus), "gpu") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        client.register_plugin(ResidentDatabases("gpu"), name=PLUGIN_NAME)
        client.wait_for_workers(len(gpus), timeout=120)
        yield cluster, client


def worker_gpu(dask_worker=None) -> tuple:
    """The worker's backend and the PCI address of the GPU it runs on."""
    backend = dask_worker.plugins[PLUGIN_NAME].backend()
    return backend.name, backend.gpu_id, backend.device.pci_bus_id()


def test_each_worker_runs_on_a_gpu_of_its_own(gpu_cluster):
    import pycuda.driver as drv

    cluster, client = gpu_cluster
    found = list(client.run(worker_gpu).values())
    assert all(name == "gpu" and ordinal == 0 for name, ordinal, _ in found)
    drv.init()
    host = {drv.Device(k).pci_bus_id() for k in range(drv.Device.count())}
    buses = [bus for _, _, bus in found]
    assert len(set(buses)) == len(buses) == len(cluster.worker_spec)
    assert set(buses) <= host


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu-cluster")
    db_fasta, queries = megablast_case(str(folder))
    return {"db": str(make_db([db_fasta], str(folder / "gdb"), progress=False)),
            "queries": queries, "folder": folder}


def search(case, spec=None) -> bytes:
    """The tabular output of the small queries: in this process on the CPU, or on `spec`'s
    cluster."""
    out = case["folder"] / "out.txt"
    run_search([case["queries"]["small"]], case["db"], make_options("megablast"),
               OutputSpec(TABULAR, str(out), None, "db"), settings=RunSettings(cluster=spec))
    return out.read_bytes()


@pytest.mark.parametrize("mode", ["shard", "replicate", "auto"])
def test_gpu_workers_give_the_single_search(gpu_cluster, case, mode):
    cluster, _ = gpu_cluster
    expected = search(case)
    assert expected.strip()
    spec = ClusterSpec(scheduler=cluster.scheduler_address, device="gpu", mode=mode)
    assert search(case, spec) == expected


@pytest.mark.parametrize("mode", ["replicate", "shard"])
@pytest.mark.parametrize("largest", [6_000, None])
def test_gpu_workers_search_forecast_batches_as_the_single_search(gpu_cluster, case,
                                                                  monkeypatch, largest, mode):
    """Whole batches on every GPU at once (replicate mode's forecasts) or each over every
    GPU's shard, planned beside the batch before (shard mode's), blastn's batches kept at
    5,000 letters or sized anew each time (forecasts dropped): the one-process output."""
    from gblastn import engine

    cluster, _ = gpu_cluster
    monkeypatch.setattr(engine, "MIN_TARGET_EXTENSIONS", 3000)
    if largest is not None:
        monkeypatch.setitem(engine.QUERY_CHUNK_LETTERS, "blastn", largest)
    mixed = case["folder"] / "q_mixed.fa"
    small, big = (open(case["queries"][name]).read() for name in ("small", "big"))
    mixed.write_text(small + big + small + big + small)
    outputs = []
    for spec in (None, ClusterSpec(scheduler=cluster.scheduler_address, device="gpu",
                                   mode=mode)):
        out = case["folder"] / "mixed.txt"
        run_search([str(mixed)], case["db"], make_options("blastn"),
                   OutputSpec(TABULAR, str(out), None, "db"),
                   settings=RunSettings(cluster=spec))
        outputs.append(out.read_bytes())
    assert outputs[0].strip() and outputs[1] == outputs[0]
