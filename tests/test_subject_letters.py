"""Subject letters for traceback: unpacked granule by granule, only around the HSPs, with
the same final output as from whole subjects."""

import numpy as np
import pytest

from gblastn.db.reader import GRANULE, Database, open_db
from gblastn.db.writer import make_db
from gblastn.engine import search
from gblastn.traceback import subject_spans

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


def test_spans_cover_the_alignment_windows():
    from types import SimpleNamespace
    from gblastn.hsp import Hsps

    hsps = Hsps.empty()
    hsps.context = np.array([0, 1], dtype=np.int32)
    hsps.s_start = np.array([100_000, 5], dtype=np.int32)
    hsps.s_end = np.array([100_700, 900], dtype=np.int32)
    batch = SimpleNamespace(context_length=np.array([1000, 1000]))
    spans = subject_spans(hsps, batch, 1_000_000)
    assert spans[0, 0] <= 100_000 - 1000 - 3000 and spans[0, 1] >= 100_700 + 1000 + 3000
    assert subject_spans(hsps, batch, 89_999) is None  # short subjects are aligned whole


def test_granules_are_unpacked_once_and_match_the_letters(long_subjects, monkeypatch):
    from gblastn.db import reader

    monkeypatch.setattr(reader, "WHOLE_SUBJECT_SHARE", 1)  # windows only, however wide
    db_path, _ = long_subjects
    with open_db(db_path) as db:
        truth = db.blastna(0)
        spans = np.array([[10, 20], [3 * GRANULE - 5, 3 * GRANULE + 5], [truth.size - 3, truth.size + 50]])
        letters = db.subject_letters(0, spans)
        assert letters.size == truth.size and not letters.flags.writeable
        for start, end in np.clip(spans, 0, truth.size):
            assert np.array_equal(letters[start:end], truth[start:end])
        entry = db._letters[0]
        assert entry.filled.sum() == 4  # granules 0, 2, 3 and the last
        assert entry.unpacked_bytes < truth.size
        assert db.subject_letters(0, spans[:1]) is letters
        assert entry.filled.sum() == 4
        assert np.array_equal(db.subject_letters(0), truth)  # None: every letter
        assert entry.unpacked_bytes == truth.size


def test_wide_windows_unpack_the_whole_subject(long_subjects):
    db_path, _ = long_subjects
    with open_db(db_path) as db:
        truth = db.blastna(0)
        letters = db.subject_letters(0, np.array([[0, truth.size // 4]]))
        assert db._letters[0].unpacked_bytes == truth.size
        assert np.array_equal(letters, truth)


def test_threads_asking_for_overlapping_spans_get_true_letters(long_subjects, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor
    from gblastn.db import reader

    monkeypatch.setattr(reader, "WHOLE_SUBJECT_SHARE", 1)

    db_path, _ = long_subjects
    rng = np.random.default_rng(3)
    with open_db(db_path) as db:
        truth = db.blastna(0)
        starts = rng.integers(0, truth.size, 64)
        spans = np.stack([starts, starts + rng.integers(1, 5 * GRANULE, 64)], axis=1)

        def ask(span):
            letters = db.subject_letters(0, span[None, :])
            start, end = int(span[0]), min(int(span[1]), truth.size)
            return np.array_equal(letters[start:end], truth[start:end])

        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(ask, spans))
        entry = db._letters[0]
        assert entry.filled.sum() == entry.claimed.sum()
        assert entry.unpacked_bytes == int(np.minimum(
            (np.flatnonzero(entry.filled) + 1) * GRANULE, truth.size).sum()
            - (np.flatnonzero(entry.filled) * GRANULE).sum())
