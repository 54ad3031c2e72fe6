"""Subject letters for traceback: only those around the HSPs are unpacked, as BLAST's partial
fetching, and a traceback that reads beyond them is redone; the final output is the one
from whole subjects."""

import numpy as np
import pytest

from gblastn import traceback
from gblastn.db import reader
from gblastn.db.reader import Database, open_db
from gblastn.db.writer import make_db
from gblastn.engine import search
from gblastn.traceback import fetch_spans, merged_spans, subject_spans

from golden import mutate, random_dna, revcomp, sprinkle, write_fasta


@pytest.fixture(scope="module")
def long_subjects(tmp_path_factory):
    """Two chromosome-like subjects (well over MAX_SUBJECT_OFFSET) with mutated copies of the
    queries' pieces scattered over both strands, at their ends too, and a short subject."""
    folder = tmp_path_factory.mktemp("letters")
    rng = np.random.default_rng(5)
    pieces = [random_dna(rng, int(n)) for n in (2500, 6000, 900, 12000)]
    queries = [("q%d" % i, piece) for i, piece in enumerate(pieces)]
    queries.append(("joined", np.concatenate([pieces[0], random_dna(rng, 300), pieces[2]])))

    def chromosome(length, copies):
        parts, total = [], 0
        for k in range(copies):
            piece = pieces[int(rng.integers(len(pieces)))]
            copy = mutate(rng, piece, float(rng.uniform(0.01, 0.08)), 0.005)
            copy = revcomp(copy) if k % 2 else copy
            gap = random_dna(rng, int(rng.integers(5_000, 60_000))) if k else np.zeros(0, np.uint8)
            parts += [gap, copy]
            total += gap.size + copy.size
        parts.append(random_dna(rng, max(0, length - total)))
        parts.append(mutate(rng, pieces[1], 0.02, 0.0))  # a copy at the very end
        return sprinkle(rng, np.concatenate(parts), n_runs=4, n_iupac=20)

    subjects = [("chrA", chromosome(700_000, 12)), ("chrB", chromosome(400_000, 7)),
                ("short", mutate(rng, pieces[3], 0.03, 0.004))]
    db = make_db([write_fasta(folder / "db.fa", subjects)], str(folder / "db"), progress=False)
    return db, [f">{name}\n{bytes(seq).decode()}\n" for name, seq in queries]


def _poisoned_outside_spans(monkeypatch):
    """Database.subject_letters giving, outside the asked-for spans, letters unlike the
    subject's (each base code turned into another): a traceback that read there would
    align differently (spans cut 100 letters inside the HSPs change every alignment)."""
    def letters(self, ordinal, spans=None):
        truth = self.blastna(ordinal)
        if spans is None:
            return truth
        inside = np.zeros(truth.size + 1, dtype=np.int64)
        for start, end in np.clip(spans, 0, truth.size).tolist():
            if end > start:
                inside[start] += 1
                inside[end] -= 1
        outside = np.cumsum(inside[:-1]) == 0
        poisoned = truth.copy()
        poisoned[outside & (truth < 4)] ^= 1
        return poisoned

    monkeypatch.setattr(Database, "subject_letters", letters)


@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_traceback_reads_only_its_subject_spans(long_subjects, monkeypatch, task):
    db, queries = long_subjects
    columns = "std score qlen slen"
    whole = search("".join(queries), db, columns, task=task)
    assert sum(len(q.hits) for q in whole) > 30
    _poisoned_outside_spans(monkeypatch)
    assert search("".join(queries), db, columns, task=task) == whole


def _counting_redone(monkeypatch) -> list:
    """Tracebacks that read outside their letters, as a list that grows with each."""
    redone = []
    real = traceback.traceback_final

    def counting(*args, **kwargs):
        final = real(*args, **kwargs)
        if final is None:
            redone.append(args[0])
        return final

    monkeypatch.setattr(traceback, "traceback_final", counting)
    return redone


@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_alignments_reading_past_the_fetched_letters_are_redone(long_subjects, monkeypatch,
                                                                task):
    """Spans cut 100 letters inside each HSP: the alignments read outside them, which is
    noticed, and their tracebacks are redone. Letters outside the spans are wrong, so reads
    that went unnoticed would change the output (they do when the check is left out)."""
    db, queries = long_subjects
    columns = "std score qlen slen"
    whole = search("".join(queries), db, columns, task=task)
    monkeypatch.setattr(traceback, "FETCH_MARGIN", -100)
    _poisoned_outside_spans(monkeypatch)
    redone = _counting_redone(monkeypatch)
    assert search("".join(queries), db, columns, task=task) == whole
    assert len(redone) >= 10


def test_spans_around_the_hsps_and_the_alignment_windows():
    from types import SimpleNamespace
    from gblastn.hsp import Hsps

    hsps = Hsps.empty()
    hsps.context = np.array([0, 1, 0], dtype=np.int32)
    hsps.s_start = np.array([100_000, 5, 101_000], dtype=np.int32)
    hsps.s_end = np.array([100_700, 900, 101_500], dtype=np.int32)
    margin = traceback.FETCH_MARGIN
    assert fetch_spans(hsps, 1_000_000).tolist() == [[0, 900 + margin],
                                                     [100_000 - margin, 101_500 + margin]]
    batch = SimpleNamespace(context_length=np.array([1000, 1000]))
    reach = 1000 + traceback.MAX_TOTAL_GAPS + traceback.SPAN_MARGIN
    assert subject_spans(hsps, batch, 1_000_000).tolist() == [
        [0, 900 + reach], [100_000 - reach, 101_500 + reach]]
    assert fetch_spans(hsps, 89_999) is None  # short subjects are aligned whole
    assert subject_spans(hsps, batch, 89_999) is None


def test_merged_spans():
    spans = np.array([[50, 60], [-5, 10], [10, 20], [55, 58], [100, 300], [30, 40]])
    assert merged_spans(spans, 200).tolist() == [[0, 20], [30, 40], [50, 60], [100, 200]]
    assert merged_spans(np.zeros((0, 2)), 10).shape == (0, 2)


def test_letters_of_spans_and_of_whole_subjects(long_subjects):
    db_path, _ = long_subjects
    with open_db(db_path) as db:
        truth = db.blastna(0)
        spans = merged_spans(np.array([[10, 20], [70_000, 90_000], [truth.size - 3,
                                                                  truth.size]]), truth.size)
        letters = db.subject_letters(0, spans)
        assert letters.size == truth.size and not letters.flags.writeable
        for start, end in spans:
            assert np.array_equal(letters[start:end], truth[start:end])
        assert db.subject_letters(0, spans) is letters  # the subject's tracebacks share it
        entry = db._shared[0]
        size = reader.GRANULE
        touched = {g for start, end in spans.tolist() for g in range(start // size, -(-end // size))}
        assert entry.filled.sum() == len(touched)  # each granule unpacked once
        assert entry.filled.sum() == entry.claimed.sum()
        whole = db.subject_letters(0)
        assert np.array_equal(whole, truth) and not whole.flags.writeable
        assert db.subject_letters(0) is whole  # kept for the next traceback


def test_threads_asking_for_letters_get_true_letters(long_subjects):
    from concurrent.futures import ThreadPoolExecutor

    db_path, _ = long_subjects
    rng = np.random.default_rng(3)
    with open_db(db_path) as db:
        truths = [db.blastna(ordinal) for ordinal in range(3)]

        def ask(k):
            ordinal = k % 3
            truth = truths[ordinal]
            if k % 2:
                return np.array_equal(db.subject_letters(ordinal), truth)
            start = int(rng.integers(0, truth.size))
            span = merged_spans(np.array([[start, start + 5000]]), truth.size)
            letters = db.subject_letters(ordinal, span)
            return np.array_equal(letters[span[0, 0]:span[0, 1]], truth[span[0, 0]:span[0, 1]])

        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(ask, range(96)))


def test_missing_granules_are_those_the_spans_touch_and_not_filled():
    rng = np.random.default_rng(3)
    size = reader.GRANULE * 40
    for _ in range(200):
        cuts = np.sort(rng.choice(size, size=2 * int(rng.integers(1, 6)), replace=False))
        spans = cuts.reshape(-1, 2).astype(np.int64)
        filled = rng.random(40) < 0.5
        touched = {g for start, end in spans.tolist()
                   for g in range(start // reader.GRANULE, -(-end // reader.GRANULE))}
        expected = sorted(g for g in touched if not filled[g])
        assert reader._missing_granules(filled, spans).tolist() == expected


def test_windows_of_bases_only(long_subjects):
    """Volume.bases_only: a window is bases only exactly when no letter in it is an
    ambiguity code (checked against the unpacked letters, at random windows and at windows
    ending or starting at ambiguity runs)."""
    db_path, _ = long_subjects
    with open_db(db_path) as db:
        volume = db.volumes[0]
        rng = np.random.default_rng(3)
        for ordinal in range(db.num_seqs):
            letters = db.blastna(ordinal)
            offsets, lengths, _ = db.ambiguities(ordinal)
            edges = np.concatenate([offsets, offsets + lengths]).astype(np.int64)
            starts = np.concatenate([rng.integers(0, letters.size, 300), edges, edges - 5])
            ends = starts + rng.integers(1, 3000, starts.size)
            starts, ends = np.clip(starts, 0, letters.size), np.clip(ends, 0, letters.size)
            local = np.full(starts.size, ordinal - volume.first_ordinal)
            got = volume.bases_only(local, starts, ends)
            want = [bool((letters[a:b] < 4).all()) for a, b in zip(starts, ends)]
            assert got.tolist() == want
            assert not all(want) or offsets.size == 0


def test_spans_of_searches_made_ahead_are_what_they_read():
    """An HSP whose traceback search was made ahead needs its range and the letters that
    search read, SPAN_MARGIN more either side; the others FETCH_MARGIN either side."""
    from gblastn.hsp import Hsps, hsp_rows, score_order

    hsps = Hsps.empty()
    for name, values in (("context", [0, 0]), ("q_start", [0, 0]), ("q_end", [500, 600]),
                         ("s_start", [200_000, 100_000]), ("s_end", [200_500, 100_600]),
                         ("score", [500, 600]), ("q_gapped_start", [10, 10]),
                         ("s_gapped_start", [200_010, 100_010])):
        setattr(hsps, name, np.array(values, dtype=np.int32))
    hsps.score_rows = hsp_rows(hsps)[score_order(hsps)]  # the 600 first
    hsps.ahead = np.zeros((2, traceback.TAIL_FIELDS + 1), dtype=np.int64)
    hsps.ahead[0, [4, 5, traceback.TAIL_FIELDS]] = (99_950, 100_630, 1)
    margin, near = traceback.FETCH_MARGIN, traceback.SPAN_MARGIN
    assert fetch_spans(hsps, 1_000_000).tolist() == [[99_950 - near, 100_630 + near],
                                                     [200_000 - margin, 200_500 + margin]]
