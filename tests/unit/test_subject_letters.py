"""Subject letters for traceback: only those around the HSPs are unpacked, as BLAST's partial
fetching, and a traceback that reads beyond them is redone; the final output is the one
from whole subjects."""

import numpy as np
import pytest

from gblastn import pools, search, traceback
from gblastn.db.reader import open_db
from gblastn.db.writer import make_db
from gblastn.layouts import TAIL_FIELDS, TAIL_READ

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
    """Each group of tracebacks given a fresh letter buffer full of random bases: letters
    outside the unpacked spans are unlike the subject's, so a traceback that read there
    would align differently (spans cut 100 letters inside the HSPs change every
    alignment)."""
    rng = np.random.default_rng(11)

    def poisoned(self, length):
        return rng.integers(0, 4, length).astype(np.uint8)

    monkeypatch.setattr(pools.PerThreadBuffer, "__call__", poisoned)


@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_traceback_reads_only_its_subject_spans(long_subjects, monkeypatch, task):
    db, queries = long_subjects
    columns = "std score qlen slen"
    whole = search("".join(queries), db, columns, task=task)
    assert sum(len(q.hsps) for q in whole) > 30
    _poisoned_outside_spans(monkeypatch)
    assert search("".join(queries), db, columns, task=task) == whole


def _counting_redone(monkeypatch) -> list:
    """Tracebacks that read outside their letters, as a list that grows with each group's
    count."""
    redone = []
    real = traceback.traceback_group

    def counting(*args, **kwargs):
        final, count = real(*args, **kwargs)
        redone.append(count)
        return final, count

    monkeypatch.setattr(traceback, "traceback_group", counting)
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
    assert sum(redone) >= 10


NOTHING_AHEAD = traceback.NOTHING_AHEAD


def _rows(context, s_start, s_end) -> np.ndarray:
    """HSP rows (hsp_rows' columns) with the fields letter_spans reads."""
    rows = np.zeros((len(context), 8), dtype=np.int64)
    rows[:, 0], rows[:, 3], rows[:, 4] = context, s_start, s_end
    return rows


def test_spans_around_the_hsps_and_the_alignment_windows():
    rows = _rows([0, 1, 0], [100_000, 5, 101_000], [100_700, 900, 101_500])
    lengths = np.array([1000, 1000], dtype=np.int64)
    margin = traceback.FETCH_MARGIN

    def spans(length, every_read):
        return traceback.letter_spans(rows, NOTHING_AHEAD, lengths, length, margin,
                                      every_read).tolist()

    assert spans(1_000_000, False) == [[0, 900 + margin], [100_000 - margin, 101_500 + margin]]
    reach = 1000 + traceback.MAX_TOTAL_GAPS + traceback.SPAN_MARGIN
    assert spans(1_000_000, True) == [[0, 900 + reach], [100_000 - reach, 101_500 + reach]]
    assert spans(89_999, False) == spans(89_999, True) == [[0, 89_999]]  # aligned whole


def test_merged_spans():
    spans = np.array([[50, 60], [-5, 10], [10, 20], [55, 58], [100, 300], [30, 40]])
    merged = traceback._merged(spans[:, 0].copy(), spans[:, 1].copy(), 200)
    assert merged.tolist() == [[0, 20], [30, 40], [50, 60], [100, 200]]
    none = np.zeros(0, dtype=np.int64)
    assert traceback._merged(none, none, 10).shape == (0, 2)


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
    rows = _rows([0, 0], [100_000, 200_000], [100_600, 200_500])
    ahead = np.zeros((2, TAIL_FIELDS + 1), dtype=np.int64)
    ahead[0, [TAIL_READ, TAIL_READ + 1, TAIL_FIELDS]] = (99_950, 100_630, 1)
    margin, near = traceback.FETCH_MARGIN, traceback.SPAN_MARGIN
    spans = traceback.letter_spans(rows, ahead, np.array([1000]), 1_000_000, margin, False)
    assert spans.tolist() == [[99_950 - near, 100_630 + near],
                              [200_000 - margin, 200_500 + margin]]
