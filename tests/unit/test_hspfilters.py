"""hspfilters.py's filters on HSPs made up so that each rule decides: culling's dominance and
merits (hspfilter_culling.c), the best-hit filter's two tests (hspfilter_besthit.c), the
subject best hit on both strands (Blast_HSPListSubjectBestHit), and the options that turn
them on."""

import numpy as np
import pytest

from gblastn.errors import OptionsError
from gblastn.hspfilters import best_hits, cull, has_query_filter, subject_best_hit_keep
from gblastn.options import make_options


def _cull(hsps, limit, query_length=1000):
    """cull over (begin, end, score, ordinal, subject start) tuples, in order."""
    columns = [np.array(column, dtype=np.int64) for column in zip(*hsps)]
    return cull(*columns, query_length, limit).tolist()


def test_a_dominated_hsp_is_culled_once_the_limit_is_reached():
    strong, weak = (0, 100, 100, 0, 0), (10, 60, 50, 1, 0)
    assert _cull([strong, weak], 1) == [True, False]
    assert _cull([strong, weak], 2) == [True, True]


def test_a_later_hsp_culls_those_it_dominates():
    assert _cull([(10, 60, 50, 1, 0), (0, 100, 100, 0, 0)], 1) == [False, True]


def test_equal_hsps_keep_the_lower_ordinal():
    assert _cull([(0, 100, 80, 5, 0), (0, 100, 80, 2, 0)], 1) == [False, True]


def test_an_hsp_covering_half_of_another_at_most_does_not_dominate_it():
    # the second covers 40 of the first's 100 letters
    assert _cull([(0, 100, 60, 0, 0), (60, 200, 500, 1, 0)], 1) == [True, True]


def test_a_split_tree_still_culls_what_a_covering_hsp_dominates():
    """Thirty disjoint HSPs fill a leaf past its split; one covering them all, scoring
    more, takes the merit of each."""
    pieces = [(30 * k, 30 * k + 20, 20, 0, 30 * k) for k in range(30)]
    assert _cull(pieces, 1) == [True] * 30
    assert _cull(pieces + [(0, 900, 2000, 1, 0)], 1) == [False] * 30 + [True]


def _best_hits(hsps, overhang=0.1, score_edge=0.1):
    """best_hits over (begin, length, score, evalue) tuples, in order, each of a subject
    of its own."""
    begin, length, score, evalue = zip(*hsps)
    return best_hits(np.array(begin, dtype=np.int64), np.array(length, dtype=np.int64),
                     np.array(score, dtype=np.int64), np.array(evalue, dtype=np.float64),
                     overhang, score_edge, np.arange(len(hsps), dtype=np.int64),
                     10)[0].tolist()


def test_a_best_hit_keeps_out_a_worse_one_inside_it():
    best, worse = (0, 100, 100, 1e-10), (20, 50, 40, 1e-3)
    assert _best_hits([best, worse]) == [True, False]


def test_a_best_hit_removes_a_worse_one_found_before_it():
    best, worse = (0, 100, 100, 1e-10), (20, 50, 40, 1e-3)
    assert _best_hits([worse, best]) == [False, True]


def test_a_hit_with_a_better_score_per_letter_survives_a_longer_one():
    long_one, dense = (0, 100, 100, 1e-10), (20, 50, 80, 1e-3)
    assert _best_hits([long_one, dense]) == [True, True]


def test_the_subject_best_hit_drops_hsps_within_a_better_one_on_either_strand():
    # query of 200 letters: [10, 100) on the plus strand is [100, 190) on the minus one
    context = np.array([0, 0, 1, 1], dtype=np.int64)
    q_start = np.array([10, 12, 98, 50], dtype=np.int64)
    q_end = np.array([100, 102, 192, 120], dtype=np.int64)
    keep = subject_best_hit_keep(context, q_start, q_end, np.full(4, 200, dtype=np.int64))
    assert keep.tolist() == [True, False, False, True]


def test_either_best_hit_value_turns_the_filter_on_with_the_others_default():
    assert not has_query_filter(make_options("blastn"))
    options = make_options("blastn", best_hit_score_edge=0.2)
    assert (options.best_hit_overhang, options.best_hit_score_edge) == (0.1, 0.2)
    assert has_query_filter(options)
    assert has_query_filter(make_options("blastn", culling_limit=1))
    assert not has_query_filter(make_options("blastn", culling_limit=0))


@pytest.mark.parametrize("given", [{"culling_limit": -1}, {"best_hit_overhang": 0.5},
                                   {"best_hit_score_edge": 0.0},
                                   {"culling_limit": 1, "best_hit_overhang": 0.1}])
def test_values_blastn_refuses_are_refused(given):
    with pytest.raises(OptionsError):
        make_options("blastn", **given)


def test_a_cluster_searches_with_query_filters_replicated():
    """Culling and the best-hit filter see a query's subjects all at once: a cluster search
    with them splits the queries, never the database."""
    from gblastn.drivers.cluster import ClusterSpec, _mode_for_query_filters

    assert _mode_for_query_filters(ClusterSpec(local_workers=2)) == "replicate"
    for spec in (ClusterSpec(local_workers=2, shards=2),
                 ClusterSpec(local_workers=2, mode="shard")):
        with pytest.raises(OptionsError):
            _mode_for_query_filters(spec)


def test_the_best_hit_filter_keeps_its_best_subjects_once_it_holds_too_many_hsps():
    """More HSPs than twice the capacity's subjects: the HSPs of all but the best subjects
    go (s_BlastHSPBestHitRun's prune), so a later HSP that one of them would have beaten
    stays. Ten subjects of two HSPs each, then an eleventh's one, E-values worsening with
    the subject; capacity 10: the 21st HSP prunes the eleventh subject, and a worse HSP
    inside its one then stays."""
    begin, length, score, evalue, sid = [], [], [], [], []
    for subject in range(11):
        for region in range(2 if subject < 10 else 1):
            begin.append(1000 * subject + 400 * region)
            length.append(100)
            score.append(100)
            evalue.append(1e-30 * 10 ** subject)
            sid.append(subject)
    begin.append(10000 + 10)   # inside the eleventh subject's HSP, less dense
    length.append(80)
    score.append(40)
    evalue.append(1.0)
    sid.append(11)
    arrays = [np.array(values, dtype=dtype) for values, dtype in
              ((begin, np.int64), (length, np.int64), (score, np.int64), (evalue, np.float64))]
    subjects = np.array(sid, dtype=np.int64)
    kept, place = best_hits(*arrays, 0.0, 0.1, subjects, 10)
    assert kept[:20].all() and not kept[20] and kept[21]
    assert sorted(place[kept].tolist()) == list(range(21)) and (place[~kept] == -1).all()
    unpruned, _ = best_hits(*arrays, 0.0, 0.1, subjects, 100)
    assert unpruned[:21].all() and not unpruned[21]
