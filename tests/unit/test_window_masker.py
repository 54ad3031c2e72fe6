"""WindowMasker: unit counts files written here in both formats blastn reads (binary pairs,
obinary's hash), a slow window-by-window model of NCBI's CSeqMasker scan as an oracle, and
the refusals of files blastn cannot read. (The golden tests compare with windowmasker and
blastn themselves.)"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gblastn.alphabet import encode_blastna
from gblastn.errors import InputError
from gblastn.window_masker import FORMAT_REFUSAL, unit_counts, window_masker_intervals_many

METADATA = b"##windowmasker-statistics-format-version:binary 1.0.0\0"


def _canonical(unit: int, size: int) -> int:
    reverse = 0
    for i in range(size):
        reverse = (reverse << 2) | (3 - ((unit >> (2 * i)) & 3))
    return min(unit, reverse)


def _words(*values) -> bytes:
    return np.array(values, dtype="<u4").tobytes()


def _with_metadata(body: bytes) -> bytes:
    return _words(3, len(METADATA)) + METADATA + body


def write_binary(path, unit_size: int, counts: dict, thresholds) -> str:
    """-sformat binary: format 0, unit size, sorted (unit, count) pairs, T_low, T_extend,
    T_threshold, T_high."""
    pairs = [value for unit in sorted(counts) for value in (unit, counts[unit])]
    path.write_bytes(_with_metadata(_words(0, unit_size, *pairs, *thresholds)))
    return str(path)


def _reverse(unit: int, size: int) -> int:
    return sum((3 - ((unit >> (2 * i)) & 3)) << (2 * (size - 1 - i)) for i in range(size))


def write_obinary(path, unit_size: int, counts: dict, thresholds, bit_array=False) -> str:
    """-sformat obinary: the hash keyed by a unit's low 2U - 1 bits, its top bit kept beside
    its count, two units of one key in the value table; with `bit_array` (format 2) the
    bits of the units counted T_extend times or more, in both orientations."""
    key_bits, collision_bits = 2 * unit_size - 1, 2
    ht = np.zeros(1 << key_bits, dtype=np.uint32)
    by_key: dict = {}
    for unit, count in sorted(counts.items()):
        by_key.setdefault(unit & ((1 << key_bits) - 1), []).append((unit >> key_bits, count))
    vt = []
    for key, entries in by_key.items():
        if len(entries) == 1:
            rest, count = entries[0]
            ht[key] = (rest << 24) + (count << collision_bits) + 1
        else:
            ht[key] = (len(vt) << collision_bits) + len(entries)
            vt += [(rest << 9) + count for rest, count in entries]
    header = _words(2 if bit_array else 1, unit_size, len(vt), key_bits, 0, collision_bits,
                    *thresholds)
    if bit_array:
        bits = np.zeros(4**unit_size, dtype=bool)
        for unit, count in counts.items():
            if count >= thresholds[1]:
                bits[unit] = bits[_reverse(unit, unit_size)] = True
        header += _words(1) + np.packbits(bits, bitorder="little").tobytes()
    path.write_bytes(_with_metadata(header + ht.tobytes() + np.array(vt, "<u2").tobytes()))
    return str(path)


def model_intervals(text: str, unit_size: int, counts: dict, thresholds) -> list:
    """CSeqMasker's scan, window by window: every window of window = U + 4 letters of ACGT,
    its mean unit score, and the masked interval's state as NCBI keeps it."""
    t_low, t_extend, t_threshold, t_high = thresholds
    window = unit_size + 4
    value = {"A": 0, "C": 1, "G": 2, "T": 3}

    def score(unit_text):
        unit = 0
        for letter in unit_text:
            unit = unit * 4 + value[letter]
        count = counts.get(_canonical(unit, unit_size), 0)
        if count == 0 or count < t_low:
            return (t_low + 1) // 2
        return min(count, t_high)

    masked, start, end, closed = [], 0, 0, 0
    for first in range(len(text) - window + 1):
        letters = text[first:first + window].upper()
        if any(letter not in value for letter in letters):
            continue
        units = [score(letters[i:i + unit_size]) for i in range(window - unit_size + 1)]
        mean, last = sum(units) // len(units), first + window - 1
        if mean < t_extend:
            if end > start and first > closed:
                masked.append((start, end))
                start = end = closed = 0
        elif mean < t_threshold:
            if end > start:
                if first > closed + 1:
                    masked.append((start, end))
                    start = end = closed = 0
                else:
                    closed = last
        else:
            if end > start:
                if first > closed + 1:
                    masked.append((start, end))
                    start = first
            else:
                start = first
            closed = end = last
    if end > start:
        masked.append((start, end))
    return masked


def _ours(texts, path) -> list:
    found = window_masker_intervals_many([encode_blastna(t) for t in texts], unit_counts(path))
    return [[tuple(row) for row in f.tolist()] for f in found]


def _repeat_rich(rng, length: int, motifs: list) -> str:
    text = "".join(rng.choice(list("ACGT"), length))
    for _ in range(int(rng.integers(0, 6))):
        motif = motifs[int(rng.integers(0, len(motifs)))]
        at = int(rng.integers(0, length))
        text = text[:at] + motif + text[at + len(motif):]
    for _ in range(int(rng.integers(0, 3))):
        at = int(rng.integers(0, length))
        text = text[:at] + rng.choice(["N", "NNNNN", "R", "acgt"]) + text[at + 1:]
    return text[:length]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), unit_size=st.sampled_from([3, 4, 5, 6]))
def test_both_formats_scan_as_ncbis_model(tmp_path_factory, seed, unit_size):
    """Counts of a repeat-rich genome, thresholds from them, and sequences with repeats,
    ambiguous letters and lower case: the model's intervals, from either file, with or
    without the bit array (whose windows passed over score below T_extend as the one before
    them did, whatever the thresholds)."""
    rng = np.random.default_rng(seed)
    motifs = ["".join(rng.choice(list("ACGT"), int(rng.integers(8, 30)))) for _ in range(3)]
    genome = _repeat_rich(rng, 3_000, motifs * 10).upper().replace("N", "A").replace("R", "G")
    counts: dict = {}
    for i in range(len(genome) - unit_size + 1):
        unit = int("".join("ACGT".index(c).__str__() for c in genome[i:i + unit_size]), 4)
        counts[_canonical(unit, unit_size)] = counts.get(_canonical(unit, unit_size), 0) + 1
    ranked = sorted(counts.values())
    # T_low may lie above T_extend, where a unit the file lacks scores T_extend or more
    t_low, t_extend, t_threshold, t_high = (ranked[int(q * (len(ranked) - 1))] for q in
                                            (rng.uniform(0.1, 0.9), rng.uniform(0.05, 0.7),
                                             0.8, 0.97))
    thresholds = (t_low, t_extend, max(t_extend, t_threshold), t_high)
    folder = tmp_path_factory.mktemp("counts")
    texts = [_repeat_rich(rng, int(rng.integers(1, 400)), motifs) for _ in range(6)]
    expected = [model_intervals(t, unit_size, counts, thresholds) for t in texts]
    for bit_array in (False, True):
        path = write_obinary(folder / f"o{bit_array}", unit_size, counts, thresholds, bit_array)
        assert _ours(texts, path) == expected
    assert _ours(texts, write_binary(folder / "b", unit_size, counts, thresholds)) == expected


def test_a_repeat_is_masked_and_ambiguity_splits_the_windows(tmp_path):
    """A unit counted often makes every window holding it score high; an N ends the window
    before it and the next window starts after it."""
    counts = {_canonical(int("0123", 4), 4): 100}
    path = write_binary(tmp_path / "c", 4, counts, (2, 20, 30, 80))
    # windows of 8 letters: (100 + 4 * 1) // 5 = 20 scores T_extend, not T_threshold
    assert _ours(["GGGGACGTGGGG"], path) == [[]]
    counts[_canonical(int("1230", 4), 4)] = 100
    path = write_binary(tmp_path / "c", 4, counts, (2, 20, 30, 80))
    # ACGTA holds ACGT and CGTA: 204 // 5 = 40 in the windows holding both
    assert _ours(["GGGGACGTAGGGG", "GGGGACGTAGGNG", "gggGACGTAGGGG"], path) == \
        [[(1, 11)], [(1, 10)], [(1, 11)]]
    assert _ours(["GGGGACGNTAGGGG"], path) == [[]]


def test_text_formats_and_unreadable_files_are_refused_as_by_blastn(tmp_path):
    refusals = {"oascii": b"##windowmasker-statistics-format-version:oascii 1.0.0\nAAAA\n8\n",
                "ascii": b"8\n2 21\n", "empty": b"", "short": _words(3, 400)}
    for name, data in refusals.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(InputError, match=f"^{FORMAT_REFUSAL}$"):
            unit_counts(str(tmp_path / name))
    with pytest.raises(InputError, match=f"^{FORMAT_REFUSAL}$"):
        unit_counts(str(tmp_path))
    with pytest.raises(InputError, match="^could not open .*missing$"):
        unit_counts(str(tmp_path / "missing"))


@pytest.mark.parametrize("cut, reason", [
    (lambda data: data[:-3], "wrong length"),
    (lambda data: _with_metadata(_words(0, 17) + bytes(16)), "illegal unit size")])
def test_a_damaged_binary_file_is_refused(tmp_path, cut, reason):
    good = write_binary(tmp_path / "good", 4, {5: 9}, (1, 2, 3, 4))
    with open(good, "rb") as handle:
        (tmp_path / "bad").write_bytes(cut(handle.read()))
    with pytest.raises(InputError, match=f"bad: {reason}$"):
        unit_counts(str(tmp_path / "bad"))


@pytest.mark.parametrize("cut, reason", [
    (lambda data: data[:90], "file too short"),
    (lambda data: data[:-1500], "not enough data to fill the hash table"),
    (lambda data: data[:-1], "not enough data to fill the values table")])
def test_a_damaged_obinary_file_is_refused(tmp_path, cut, reason):
    counts = {unit: 5 for unit in range(0, 4**5, 2)}  # two units a key
    good = write_obinary(tmp_path / "good", 5, counts, (1, 2, 3, 4))
    with open(good, "rb") as handle:
        (tmp_path / "bad").write_bytes(cut(handle.read()))
    with pytest.raises(InputError, match=f"bad: {reason}$"):
        unit_counts(str(tmp_path / "bad"))


def test_a_rewritten_file_is_read_again(tmp_path):
    path = write_binary(tmp_path / "c", 4, {}, (2, 20, 30, 80))
    assert unit_counts(path).t_high == 80
    write_binary(tmp_path / "c", 4, {1: 2}, (2, 20, 30, 90))
    assert unit_counts(path).t_high == 90
