"""Symmetric DUST: golden tests against dustmasker and blastn's own query masks, a slow
list-based model of NCBI's scan as an oracle, and properties."""

import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gblastn.alphabet import decode_blastna, encode_blastna
from gblastn.dust import _symdust, dust_intervals, dust_intervals_many, rng_draws

ACGT = "ACGT"


# ------------------------------------------------------------------ generated sequences

def _low_complexity(rs: np.random.Generator, length: int, letters: str, mutation: float) -> str:
    unit = "".join(rs.choice(list(letters), int(rs.integers(1, 4))))
    text = (unit * (length // len(unit) + 1))[:length]
    return "".join(c if rs.random() >= mutation else rs.choice(list(letters)) for c in text)


def _sequence(rs: np.random.Generator, length: int, with_n: bool) -> str:
    """Random sequence with homopolymers, di-/trinucleotide repeats and near-repeats, some at
    the ends; with_n adds N runs, isolated N and N inside repeats."""
    seq = list(rs.choice(list(ACGT), length))
    letters = ACGT + ("N" if with_n else "")
    for _ in range(int(rs.integers(0, 6))):
        size = int(rs.integers(4, 300))
        where = int(rs.integers(0, length))
        if rs.random() < 0.3:  # at the start or the end
            where = 0 if rs.random() < 0.5 else max(0, length - size)
        if with_n and rs.random() < 0.35:
            piece = "N" * int(rs.integers(1, 140))
        else:
            piece = _low_complexity(rs, size, letters, float(rs.choice([0.0, 0.03, 0.1])))
        seq[where:where + len(piece)] = list(piece)
    if with_n:  # and at least one isolated N
        seq[int(rs.integers(0, length))] = "N"
    return "".join(seq)[:length]


def _write_fasta(path, seqs):
    path.write_text("".join(f">q{i}\n{s}\n" for i, s in enumerate(seqs)))


def _ours(seqs, level=20, window=64, linker=1):
    return [[tuple(r) for r in dust_intervals(encode_blastna(s), level, window, linker).tolist()]
            for s in seqs]


# ------------------------------------------------------------------ golden: dustmasker

def _dustmasker(fasta, level, window, linker):
    out = subprocess.run(["dustmasker", "-in", str(fasta), "-outfmt", "interval",
                          "-level", str(level), "-window", str(window), "-linker", str(linker)],
                         capture_output=True, text=True, check=True).stdout
    masks, current = {}, None
    for line in out.splitlines():
        if line.startswith(">"):
            current = int(line[2:].split()[0])
            masks[current] = []
        elif line.strip():
            a, b = line.split(" - ")
            masks[current].append((int(a), int(b)))
    return masks


@pytest.mark.golden
@pytest.mark.skipif(shutil.which("dustmasker") is None, reason="dustmasker not installed")
@pytest.mark.parametrize("level,window,linker,count",
                         [(20, 64, 1, 150), (10, 30, 5, 60), (3, 10, 1, 40), (64, 64, 32, 40)])
def test_matches_dustmasker_without_n(tmp_path, level, window, linker, count):
    rs = np.random.default_rng(1000 + level)
    seqs = [_sequence(rs, int(rs.integers(4, 1500)), with_n=False) for _ in range(count)]
    seqs[0] = "A" * 200  # longer than the window
    seqs[1] = "ACG"  # too short for any mask
    fasta = tmp_path / "q.fa"
    _write_fasta(fasta, seqs)
    expected = _dustmasker(fasta, level, window, linker)
    ours = _ours(seqs, level, window, linker)
    mismatched = [i for i in range(count) if ours[i] != expected[i]]
    assert sum(map(len, expected.values())) > count // 2  # the data does get masked
    assert mismatched == []


# ------------------------------------------------------------------ golden: blastn's masks

def _blastn_query_masks(tmp_path, seqs, dust):
    """Query masks blastn puts in its archive (-outfmt 11), per query, as it merges them."""
    query = tmp_path / "q.fa"
    _write_fasta(query, seqs)
    subject = tmp_path / "s.fa"
    subject.write_text(">s\nACGTTGCAAGCTTGCAGTCCAGTAGCTAGCTAGGATCGATCGGGATCCAT\n")
    out = subprocess.run(["blastn", "-query", str(query), "-subject", str(subject),
                          "-outfmt", "11", "-dust", dust],
                         capture_output=True, text=True, check=True).stdout
    # one archive per query batch; each lists the masks of its queries
    blocks = re.findall(r"\n    masks \{\n(.*?)\n    \}", out, re.S)
    masks = {i: [] for i in range(len(seqs))}
    for block in blocks:
        for m in re.finditer(r'from (\d+),\s*to (\d+),\s*id local str "Query_(\d+)"', block):
            masks[int(m.group(3)) - 1].append((int(m.group(1)), int(m.group(2))))
    return masks


def _merged(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


@pytest.mark.golden
@pytest.mark.skipif(shutil.which("blastn") is None, reason="blastn not installed")
@pytest.mark.parametrize("level,window,linker", [(20, 64, 1), (10, 30, 5), (5, 16, 2)])
def test_matches_blastn_query_masks_with_n(tmp_path, level, window, linker):
    rs = np.random.default_rng(77 + level)
    seqs = [_sequence(rs, int(rs.integers(60, 1500)), with_n=True) for _ in range(100)]
    # N first: the first triplet's two letters are drawn in reading order
    seqs[0] = "NN" + "GAT" + "CA" * 6 + seqs[0]
    seqs[1] = "NNNN" + "AG" * 40 + seqs[1]
    seqs[2] = seqs[2] + "N" * 30  # N in the last window, which the scan reads twice
    expected = _blastn_query_masks(tmp_path, seqs, f"{level} {window} {linker}")
    ours = [_merged(m) for m in _ours(seqs, level, window, linker)]
    assert all("N" in s for s in seqs)
    compared = mismatched = 0
    for i, s in enumerate(seqs):
        if ours[i] == [(0, len(s) - 1)]:
            # blastn drops a query that is masked whole, and reports no mask for it
            assert expected[i] in ([], ours[i])
            continue
        compared += 1
        mismatched += ours[i] != expected[i]
    assert compared > 90
    assert mismatched == 0


# ------------------------------------------------------------------ a slow model of NCBI's scan

class _ReferenceRandom:
    """CRandom in its Reset() state, written independently of the module's numba version."""

    WORDS = [0xd53f1852, 0xdfc78b83, 0x4f256096, 0x0e643df7, 0x82c359bf, 0xc7794dfa,
             0xd5e9ffaa, 0x2c8cb64a, 0x2f07b334, 0xad5a7eb5, 0x96dc0cde, 0x6fc24589,
             0xa5853646, 0xe71576e2, 0x0dae30df, 0xb09ce711, 0x5e56ef87, 0x4b4b0082,
             0x6f4f340e, 0xc5bb17e8, 0xd788d765, 0x67498087, 0x9d7aba26, 0x261351d4,
             0x411ee7ea, 0x0393a263, 0x2c5a5835, 0xc115fcd8, 0x25e9132c, 0xd0c6e906,
             0xc2bc5b2d, 0x6c065c98, 0x6e37bd55]

    def __init__(self):
        self.state = list(self.WORDS)
        self.j, self.k = 12, 32

    def draw(self):
        r = (self.state[self.k] + self.state[self.j]) & 0xFFFFFFFF
        self.state[self.k] = r
        self.j -= 1
        self.k -= 1
        if self.k < 0:
            self.k = 32
        elif self.j < 0:
            self.j = 32
        return r >> 1


def _model_dust(text, level=20, window=64, linker=1):
    """NCBI's scan with its list of every perfect interval (newest start first)."""
    rng = _ReferenceRandom()

    def letter(c):
        return {"C": 1, "G": 2, "T": 3}.get(c, rng.draw() & 3 if c == "N" else 0)

    max_size, low_k = window - 2, level // 5
    thresholds = [1] + [i * level for i in range(1, window - 2)]
    res = []

    def save(perfect, wstart, offset):
        if perfect and perfect[-1][0] < wstart:
            a, b = perfect[-1][0] + offset, perfect[-1][1] + offset
            if res and res[-1][1] + linker >= a:
                res[-1][1] = max(res[-1][1], b)
            else:
                res.append([a, b])
            while perfect and perfect[-1][0] < wstart:
                perfect.pop()

    start, stop = 0, len(text) - 1
    while stop > start + 2:
        perfect = []  # [first, last, score, length - 1], newest start first
        tri = {}  # position -> triplet
        w = dict(start=0, stop=0, L=0, rw=0, rv=0)
        cw, cv = [0] * 64, [0] * 64

        def distinct():
            return sum(1 for c in cw if c)

        def shift(t):
            if w["stop"] - w["start"] >= max_size:
                uniform = distinct() <= 1
                s = tri[w["start"]]
                cw[s] -= 1
                w["rw"] -= cw[s]
                if not uniform and w["L"] == w["start"]:
                    w["L"] += 1
                    cv[s] -= 1
                    w["rv"] -= cv[s]
                w["start"] += 1
                if uniform:
                    tri[w["stop"]] = t
                    w["rw"] += cw[t]
                    cw[t] += 1
                    w["stop"] += 1
                    if distinct() <= 1:
                        perfect.insert(0, [w["start"], w["stop"] + 1, 0, 0])
                        return False
                    return True
            tri[w["stop"]] = t
            w["rw"] += cw[t]
            cw[t] += 1
            w["rv"] += cv[t]
            cv[t] += 1
            if cv[t] > low_k:
                while True:
                    x = tri[w["L"]]
                    cv[x] -= 1
                    w["rv"] -= cv[x]
                    w["L"] += 1
                    if x == t:
                        break
            w["stop"] += 1
            if w["stop"] - w["start"] >= max_size and distinct() <= 1:
                perfect.clear()
                perfect.insert(0, [w["start"], w["stop"] + 1, 0, 0])
                return False
            return True

        def find_perfect():
            count = w["stop"] - w["L"]
            counts = list(cv)
            score = w["rv"]
            i = 0
            best_score = best_len = 0
            for pos in range(w["L"] - 1, w["start"] - 1, -1):
                t = tri[pos]
                seen = counts[t]
                score += counts[t]
                counts[t] += 1
                if seen > 0 and 10 * score > thresholds[count]:
                    while i < len(perfect) and pos <= perfect[i][0]:
                        p = perfect[i]
                        if best_score == 0 or best_len * p[2] > best_score * p[3]:
                            best_score, best_len = p[2], p[3]
                        i += 1
                    if best_score == 0 or score * best_len >= best_score * count:
                        best_score, best_len = score, count
                        perfect.insert(i, [pos, w["stop"] + 1, score, count])
                count += 1

        t = (letter(text[start]) << 2) + letter(text[start + 1])
        pos, done = start + 2, False
        while not done and pos <= stop:
            save(perfect, w["start"], start)
            t = ((t << 2) & 63) + letter(text[pos])
            pos += 1
            if shift(t):
                size = w["stop"] - w["start"]
                suffix = w["stop"] - w["L"]
                if suffix < size and 10 * w["rw"] > thresholds[suffix]:
                    find_perfect()
            else:
                while pos <= stop:
                    save(perfect, w["start"], start)
                    t = ((t << 2) & 63) + letter(text[pos])
                    if shift(t):
                        done = True
                        break
                    pos += 1
        wstart = w["start"]
        while perfect:
            save(perfect, wstart, start)
            wstart += 1
        if w["start"] > 0:
            start += w["start"]
        else:
            break
    return [tuple(r) for r in res]


_motif_text = st.lists(
    st.tuples(st.text(alphabet="ACGTNR", min_size=1, max_size=4), st.integers(1, 60)),
    min_size=1, max_size=12,
).map(lambda parts: "".join(unit * times for unit, times in parts))


@settings(max_examples=150, deadline=None)
@given(text=_motif_text,
       level=st.sampled_from([20, 2, 7, 40, 64]),
       window=st.sampled_from([64, 8, 13, 40]),
       linker=st.sampled_from([1, 3, 32]))
def test_matches_list_model(text, level, window, linker):
    ours = [tuple(r) for r in dust_intervals(encode_blastna(text), level, window, linker).tolist()]
    assert ours == _model_dust(text, level, window, linker)


def test_random_generator_reset_state():
    model = _ReferenceRandom()
    assert rng_draws(100).tolist() == [model.draw() for _ in range(100)]


# ------------------------------------------------------------------ properties

@settings(max_examples=60, deadline=None)
@given(codes=st.lists(st.integers(0, 14), max_size=700).map(lambda v: np.array(v, np.uint8)),
       level=st.integers(2, 64), window=st.integers(8, 64), linker=st.integers(1, 32))
def test_intervals_sorted_disjoint_in_bounds(codes, level, window, linker):
    iv = dust_intervals(codes, level, window, linker)
    assert iv.dtype == np.int64 and iv.ndim == 2 and iv.shape[1] == 2
    if len(iv):
        assert (iv[:, 0] <= iv[:, 1]).all()
        assert iv[0, 0] >= 0 and iv[-1, 1] < len(codes)
        assert (iv[1:, 0] > iv[:-1, 1] + linker).all()


@settings(max_examples=30, deadline=None)
@given(letter=st.sampled_from("ACGT"), extra=st.integers(1, 3000), window=st.integers(8, 64))
def test_homopolymer_longer_than_window_masked_whole(letter, extra, window):
    n = window + extra
    iv = dust_intervals(encode_blastna(letter * n), 20, window, 1)
    assert iv.tolist() == [[0, n - 1]]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(500, 20000))
def test_random_sequence_mostly_unmasked(seed, n):
    codes = np.random.default_rng(seed).integers(0, 4, n).astype(np.uint8)
    iv = dust_intervals(codes)
    masked = int((iv[:, 1] - iv[:, 0] + 1).sum()) if len(iv) else 0
    assert masked < 0.05 * n


def test_short_and_empty():
    assert dust_intervals(np.zeros(0, np.uint8)).shape == (0, 2)
    assert dust_intervals(encode_blastna("AAA")).shape == (0, 2)
    assert dust_intervals(encode_blastna("AAAA")).shape == (0, 2)  # as dustmasker
    assert dust_intervals(encode_blastna("A" * 12)).tolist() == [[0, 11]]


def test_out_of_range_parameters_fall_back_to_defaults():
    rs = np.random.default_rng(5)
    text = _sequence(rs, 2000, with_n=True)
    codes = encode_blastna(text)
    assert (dust_intervals(codes, 1, 65, 33) == dust_intervals(codes)).all()
    assert decode_blastna(codes) == text


def test_many_sequences_in_one_call_are_each_masked_alone():
    rng = np.random.default_rng(12)
    sequences = [np.zeros(0, np.uint8), encode_blastna("A" * 40)]
    for n in (7, 300, 5000, 64):
        codes = rng.integers(0, 4, n).astype(np.uint8)
        codes[n // 3:n // 3 + 90] = np.tile(codes[:3], 30)[:codes[n // 3:n // 3 + 90].size]
        sequences.append(codes)
    sequences.append(encode_blastna("ACGTN" * 30 + "T" * 70))
    together = dust_intervals_many(sequences, 20, 64, 1)
    assert len(together) == len(sequences)
    assert sum(len(found) for found in together) > 3
    for codes, found in zip(sequences, together):
        alone = _symdust(np.ascontiguousarray(codes), np.int64(20), np.int64(64), np.int64(1))
        assert found.tolist() == alone.tolist()
    assert dust_intervals_many([]) == []
