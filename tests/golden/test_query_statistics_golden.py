"""Golden tests: queries whose Karlin-Altschul statistics cannot be had (all N, lower case
masked whole, DUST masked whole), beside one with hits, in the reports blastn 2.12 writes
for them: no blocks in the pairwise report, blastn's warning in the XML's and JSON's
message, and its warning on stderr; and those of a batch none of whose queries has
statistics, which blastn does not search (blocks of -1, no hit list)."""

import os
import subprocess
import sys

import pytest

from golden import needs_blast
from report_golden import QUERIES, blastn_output, example_data, gblastn_output

pytestmark = [pytest.mark.golden, needs_blast]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    found = example_data(tmp_path_factory.mktemp("statistics"))
    with open(found["queries"]["small"]) as handle:
        with_hits = handle.read()
    path = os.path.join(found["folder"], "no_statistics.fa")
    with open(path, "w") as handle:
        handle.write(">all_n only N\n" + "N" * 200 + "\n" +
                     ">lower all lower case\n" + "acgtgcattgcaccgtattgcaatgccgttagcatgcca" * 3 +
                     "\n>dusted repeat\n" + "ACGT" * 20 + "\n" + with_hits)
    found["query"] = path
    return found


@pytest.mark.parametrize("outfmt", ["0", "5", "7", "15"])
@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_queries_without_statistics_reported_as_blastn(data, outfmt, task):
    flags = {"lcase_masking": True, "soft_masking": False}
    expected = blastn_output(data["query"], data["example"], task, outfmt, "-lcase_masking",
                             "-soft_masking", "false")
    assert "Could not calculate" in expected or outfmt in ("0", "7")
    got = gblastn_output(data, data["query"], data["example"], task, outfmt, **flags)
    assert got == expected


@pytest.mark.parametrize("outfmt", ["6", "0", "5", "17"])
@pytest.mark.parametrize("masking", [[], ["-lcase_masking", "-soft_masking", "false"],
                                     ["-soft_masking", "false", "-query_loc", "1-40"]],
                         ids=["soft", "hard", "hard_part"])
def test_queries_without_statistics_warned_about_as_blastn(data, outfmt, masking):
    """blastn's warning for each query without statistics, in its words, on stderr
    where the report does not carry it (it does in XML and SAM)."""
    args = ["-query", data["query"], "-db", data["example"], "-outfmt", outfmt, *masking]
    theirs = subprocess.run(["blastn", *args], capture_output=True, text=True)
    ours = subprocess.run([sys.executable, "-m", "gblastn", "search", "-device", "cpu", *args],
                          capture_output=True, text=True)
    assert theirs.returncode == ours.returncode == 0, ours.stderr
    warned = [line for line in theirs.stderr.splitlines() if line.startswith("Warning")]
    assert warned == [line for line in ours.stderr.splitlines() if line.startswith("Warning")]
    assert bool(warned) == (outfmt in ("6", "0"))


@pytest.fixture(scope="module")
def unsearched(data):
    """Queries with hits whose second crosses blastn's first batch size (5,000 letters),
    then two without statistics that blastn's batches leave alone in the second batch."""
    path = os.path.join(data["folder"], "unsearched_last.fa")
    with open(os.path.join(QUERIES, "kp1084_medium.fa")) as handle:
        with_hits = handle.read().split(">")[1:3]
    with open(path, "w") as out:
        out.write("".join(">" + record for record in with_hits) +
                  ">all_n only N\n" + "N" * 200 + "\n>empty\n")
    return path


@pytest.mark.parametrize("outfmt", ["0", "5", "7", "14", "15"])
@pytest.mark.parametrize("extra", [[], ["-mode", "serial"], ["-local_workers", "2"]],
                         ids=["pipeline", "serial", "cluster"])
def test_a_batch_without_statistics_unsearched_as_blastn(data, unsearched, outfmt, extra,
                                                         tmp_path):
    args = ["-query", unsearched, "-db", data["example"], "-outfmt", outfmt]
    theirs, ours = tmp_path / "theirs" / "out", tmp_path / "ours" / "out"
    for folder in (theirs.parent, ours.parent):
        folder.mkdir()
    subprocess.run(["blastn", *args, "-out", str(theirs)], check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "gblastn", "search", "-device", "cpu", *args,
                           *extra, "-out", str(ours)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    names = sorted(os.listdir(theirs.parent))
    assert names == sorted(os.listdir(ours.parent))
    for name in names:
        expected = (theirs.parent / name).read_text()
        assert (ours.parent / name).read_text() == expected, name
    if outfmt == "0":
        assert expected.count("   -1.00    -1.00    -1.00") == 4, "no lone batch: no test"
