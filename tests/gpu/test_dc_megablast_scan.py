"""The GPU scan's discontiguous variant against the CPU's: the same Seeds (every field, the
same order) for every template of `-task dc-megablast`, and a dc-megablast search's output
byte-identical on either device. Skipped without pycuda and a GPU."""

import os
import subprocess
import sys

import numpy as np
import pytest

from gblastn.lookup import build_lookup
from gblastn.options import TEMPLATE_LENGTHS, TEMPLATE_TYPES

from golden import mutate, revcomp, write_fasta
from test_gpu_backend import assert_same, gpu, make_batch, volume  # noqa: F401 - the fixture

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("word_size", [11, 12])
@pytest.mark.parametrize("length", TEMPLATE_LENGTHS)
@pytest.mark.parametrize("kind", TEMPLATE_TYPES)
def test_discontiguous_seeds_are_the_cpu_ones(gpu, word_size, length, kind):  # noqa: F811
    rng = np.random.default_rng(word_size * 100 + length)
    batch, options = make_batch(rng, "dc-megablast", [700, 3000, 90], word_size=word_size,
                                template_length=length, template_type=kind)
    table = build_lookup(batch, options)
    assert table.template_length == length and table.scan_step == 1
    # subjects of every size around a byte, a template and a chunk's end
    packed, chunks = volume(rng, batch, [length - 1, length, length + 3, 5000, 800, 12000],
                            plants=60)
    assert_same(gpu, table, packed, chunks, min_seeds=50)


def test_discontiguous_seeds_of_a_long_query_set(gpu):  # noqa: F811
    """A batch past 8,000 letters (the diagonal hash's order: the chains' order matters)."""
    rng = np.random.default_rng(5)
    batch, options = make_batch(rng, "dc-megablast", [9000, 4000],
                                template_type="coding_and_optimal", template_length=21,
                                word_size=12)
    table = build_lookup(batch, options)
    packed, chunks = volume(rng, batch, [20000, 3000, 7000], plants=80)
    assert_same(gpu, table, packed, chunks, min_seeds=100)


@pytest.mark.parametrize("extra", [[], ["-template_type", "coding_and_optimal",
                                        "-template_length", "16", "-word_size", "12"]])
def test_dc_megablast_output_identical(gpu, tmp_path, extra):  # noqa: F811
    rng = np.random.default_rng(11)
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    queries = [letters[rng.integers(0, 4, n)] for n in (600, 2500, 300)]
    subjects = []
    for i in range(200):
        s = letters[rng.integers(0, 4, int(rng.integers(200, 4000)))]
        q = queries[i % 3]
        a = int(rng.integers(0, q.size - 100))
        piece = mutate(rng, q[a:a + int(rng.integers(80, min(400, q.size - a) + 1))], 0.2,
                       0.01)
        if i % 2:
            piece = revcomp(piece)
        at = int(rng.integers(0, max(1, s.size - piece.size)))
        s[at:at + piece.size] = piece[:s.size - at]
        subjects.append((f"s{i}", s))
    write_fasta(tmp_path / "db.fa", subjects)
    write_fasta(tmp_path / "q.fa", [(f"q{i}", q) for i, q in enumerate(queries)])
    run = [sys.executable, "-m", "gblastn"]
    made = subprocess.run(run + ["makedb", "-in", str(tmp_path / "db.fa"), "-out",
                                 str(tmp_path / "db"), "-quiet"], capture_output=True)
    assert made.returncode == 0, made.stderr.decode()[-2000:]
    outputs = {}
    for device in ("cpu", "gpu"):
        res = subprocess.run(run + ["search", "-db", str(tmp_path / "db"), "-query",
                                    str(tmp_path / "q.fa"), "-task", "dc-megablast",
                                    "-outfmt", "6", "-device", device, *extra],
                             capture_output=True, env=dict(os.environ))
        assert res.returncode == 0, (device, res.stderr.decode()[-2000:])
        outputs[device] = res.stdout
    assert outputs["cpu"].count(b"\n") > 20, "too few hits: the comparison would prove little"
    assert outputs["gpu"] == outputs["cpu"]
