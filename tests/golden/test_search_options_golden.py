"""Golden tests of blastn's options that change the statistics, the cutoffs, the extension
and the subjects searched: gblastn's output equals blastn 2.12's byte for byte on the same
command line, against makeblastdb's database and gblastn's own of the same FASTA."""

import numpy as np
import pytest

from golden import assert_blastn_found_hits, mutate, needs_blast, write_fasta
from reliability import World, blastn, search

pytestmark = [pytest.mark.golden, needs_blast]

TABULAR = "7 std score"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The reliability world with queries diverged enough that E-values are not 0 and weak
    hits lie near the cutoffs."""
    world = World(tmp_path_factory.mktemp("search_options"))
    base = np.frombuffer((world.sequences["long"]).encode(), dtype=np.uint8)
    rng = np.random.default_rng(5)
    world.diverged = write_fasta(world.folder / "diverged.fa",
                                 [("qd1 diverged", mutate(rng, base[100:900], 0.18, 0.01)),
                                  ("qd2 more diverged", mutate(rng, base[1200:1500], 0.25)),
                                  ("qd3 close", mutate(rng, base[2000:2500], 0.1, 0.01))])
    return world


def assert_same_as_blastn(world, *args):
    theirs = blastn(world, "-query", world.diverged, *args)
    ours = search(world, "-query", world.diverged, *args)
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert_blastn_found_hits(theirs.stdout)
    assert ours.stdout == theirs.stdout


STATISTICS = [
    ["-dbsize", "1000000"],
    ["-dbsize", "10"],
    ["-dbsize", "99999999999999"],
    ["-dbsize", "0"],  # blastn takes 0 and below as "the database's own"
    ["-searchsp", "5000000"],
    ["-dbsize", "1000000", "-searchsp", "300000"],  # -searchsp wins
    ["-min_raw_gapped_score", "15", "-evalue", "100"],  # below the E-value's cutoff
    ["-min_raw_gapped_score", "30"],
    ["-min_raw_gapped_score", "200"],
]


@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("args", STATISTICS, ids=" ".join)
def test_statistics_overrides_as_blastn(world, task, args):
    assert_same_as_blastn(world, "-task", task, "-outfmt", TABULAR, *args)


@pytest.mark.parametrize("args", [["-evalue", "1e-300", "-dbsize", "10000000000"],
                                  ["-evalue", "1e-299", "-searchsp", "1000000000000"]],
                         ids=" ".join)
def test_a_tiny_evalue_in_a_huge_search_space_as_blastn(world, args):
    """K x search space / E passes the largest double: blastn's cutoff score stays at 1,
    and the exact copy (E-value 0) is found (gblastn failed with an internal error)."""
    exact = write_fasta(world.folder / "exact.fa",
                        [("exact copy", world.sequences["long"][:2000]),
                         ("diverged", world.sequences["long"][3000:3400][::-1])])
    theirs = blastn(world, "-query", exact, "-outfmt", TABULAR, *args)
    ours = search(world, "-query", exact, "-outfmt", TABULAR, *args)
    assert theirs.returncode == ours.returncode == 0, ours.stderr
    assert_blastn_found_hits(theirs.stdout)
    assert ours.stdout == theirs.stdout


@pytest.mark.parametrize("outfmt", ["0", "5"])
def test_the_overridden_search_space_in_the_reports(world, outfmt):
    """The pairwise footer and the XML statistics print the search space used."""
    assert_same_as_blastn(world, "-task", "blastn", "-outfmt", outfmt, "-dbsize", "1000000")
    assert_same_as_blastn(world, "-task", "blastn", "-outfmt", outfmt, "-searchsp", "5000000")


def test_a_negative_search_space_is_refused(world):
    done = search(world, "-query", world.diverged, "-searchsp", "-5")
    assert done.returncode == 2 and "-searchsp must be at least 0" in done.stderr
    assert blastn(world, "-query", world.diverged, "-searchsp", "-5").returncode != 0


@pytest.mark.parametrize("args", [["-gapopen", "2", "-gapextend", "2"],
                                  ["-gapopen", "5", "-gapextend", "2"],
                                  ["-gapopen", "3", "-gapextend", "1", "-evalue", "1000"],
                                  ["-gapopen", "2", "-gapextend", "2", "-word_size", "11"],
                                  ["-task", "blastn"]])  # already DP: no change
@pytest.mark.parametrize("outfmt", [TABULAR, "0"])
def test_no_greedy_extends_megablast_with_dp_as_blastn(world, args, outfmt):
    assert_same_as_blastn(world, "-no_greedy", "-outfmt", outfmt, *args)


def test_no_greedy_needs_affine_gap_costs_as_in_blastn(world):
    """Megablast's 0/0 gap costs are the greedy aligner's: DP refuses them, in blastn's
    words."""
    message = "Greedy extension must be used if gap existence and extension options are zero"
    for costs in ([], ["-gapopen", "0", "-gapextend", "0"]):
        ours = search(world, "-query", world.diverged, "-no_greedy", *costs)
        assert ours.returncode == 2 and ours.stderr == f"gblastn: error: {message}\n"
        assert message in blastn(world, "-query", world.diverged, "-no_greedy", *costs).stderr


@pytest.mark.parametrize("task", ["blastn", "blastn-short", "dc-megablast"])
def test_dp_tasks_refuse_zero_gap_costs_as_blastn(world, task):
    """The tasks that extend with DP refuse 0/0 gap costs, as megablast with -no_greedy."""
    message = "Greedy extension must be used if gap existence and extension options are zero"
    costs = ["-task", task, "-gapopen", "0", "-gapextend", "0"]
    ours = search(world, "-query", world.diverged, *costs)
    assert ours.returncode == 2 and ours.stderr == f"gblastn: error: {message}\n"
    assert message in blastn(world, "-query", world.diverged, *costs).stderr


@pytest.mark.parametrize("args", [["-outfmt", "6", "-outfmt", "7"],
                                  ["-evalue", "1", "-evalue=2"], ["-ungapped", "-ungapped"]])
def test_a_flag_given_twice_is_refused_as_in_blastn(world, args):
    name = args[0].lstrip("-")
    message = f"Argument with this name is defined already: {name}"
    ours = search(world, "-query", world.diverged, *args)
    assert ours.returncode == 2 and ours.stderr == f"gblastn: error: {message}\n"
    assert message in blastn(world, "-query", world.diverged, *args).stderr


@pytest.mark.parametrize("args", [["-num_alignments", "1"], ["-num_descriptions", "1"],
                                  ["-num_alignments", "2", "-num_descriptions", "1"],
                                  ["-max_target_seqs", "1"], ["-max_target_seqs", "2"]])
def test_tabular_keeps_the_subjects_blastn_keeps(world, args):
    """For tabular output blastn keeps -max_target_seqs subjects or, without it, the larger
    of -num_alignments and -num_descriptions."""
    assert_same_as_blastn(world, "-task", "blastn", "-outfmt", TABULAR, *args)


def test_max_target_seqs_with_num_alignments_is_refused_as_in_blastn(world):
    args = ("-max_target_seqs", "1", "-num_alignments", "3", "-outfmt", "6")
    assert search(world, "-query", world.diverged, *args).returncode == 2
    assert blastn(world, "-query", world.diverged, *args).returncode != 0
