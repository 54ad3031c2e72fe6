"""Property tests: FASTA -> database -> FASTA, through the reader API and through dbcmd."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gblastn.alphabet import decode_blastna, pack_2bit
from gblastn.db.reader import open_db
from gblastn.db.writer import make_db

REPO = Path(__file__).resolve().parents[2]
LETTERS = "ACGTURYKMSWBDHVNacgturykmswbdhvn-"
ids = st.from_regex(r"[A-Za-z0-9_.]{1,12}", fullmatch=True)
descriptions = st.one_of(st.just(""), st.from_regex(r"[ -~]{0,40}", fullmatch=True).map(str.strip))
sequences = st.one_of(st.text("ACGT", min_size=1, max_size=300),
                      st.text(LETTERS, min_size=1, max_size=300))
records = st.lists(st.tuples(ids, descriptions, sequences, st.integers(1, 400)), min_size=1, max_size=6)
line_ends = st.sampled_from(["\n", "\r\n"])


def fasta_text(recs, end, blank_lines):
    out = []
    for ident, desc, seq, width in recs:
        out.append(">" + ident + (" " + desc if desc else "") + end)
        for start in range(0, len(seq), width):
            out.append(seq[start:start + width] + end)
        if blank_lines:
            out.append(end)
    return "".join(out)


def expected_letters(seq):
    return seq.upper().replace("U", "T").replace("-", "N")


def dbcmd(db):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "gblastn", "dbcmd", "-db", db, "-entry", "all"],
                          capture_output=True, env=env, check=True)
    return done.stdout.decode()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recs=records, end=line_ends, blank_lines=st.booleans())
def test_reader_round_trip(tmp_path_factory, recs, end, blank_lines):
    tmp = tmp_path_factory.mktemp("rt")
    path = tmp / "in.fa"
    path.write_bytes(fasta_text(recs, end, blank_lines).encode())
    make_db([str(path)], str(tmp / "db"), max_file_sz="600B", progress=False)
    with open_db(str(tmp / "db")) as db:
        assert db.num_seqs == len(recs)
        assert db.total_letters == sum(len(r[2]) for r in recs)
        for ordinal, (ident, desc, seq, _) in enumerate(recs):
            assert db.defline(ordinal) == ident + (" " + desc if desc else "")
            assert db.seq_id(ordinal) == ident
            assert decode_blastna(db.blastna(ordinal)) == expected_letters(seq)
            codes = db.blastna(ordinal)
            unambiguous = codes < 4
            stored = np.unpackbits(db.packed(ordinal)).reshape(-1, 2)
            two_bit = (stored[:, 0] * 2 + stored[:, 1])[:codes.size]
            assert np.array_equal(two_bit[unambiguous], codes[unambiguous])
        for volume in db.volumes:
            buffer, offsets = volume.concat_packed()
            for i in range(volume.num_seqs):
                size = (int(volume.lengths[i]) + 3) // 4
                assert np.array_equal(buffer[offsets[i]:offsets[i] + size], volume.packed(i))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recs=records, end=line_ends)
def test_dbcmd_round_trip(tmp_path_factory, recs, end):
    tmp = tmp_path_factory.mktemp("cmd")
    path = tmp / "in.fa"
    path.write_bytes(fasta_text(recs, end, False).encode())
    make_db([str(path)], str(tmp / "db"), progress=False)
    expected = []
    for ident, desc, seq, _ in recs:
        expected.append(">" + ident + (" " + desc if desc else ""))
        letters = expected_letters(seq)
        expected += [letters[i:i + 80] for i in range(0, len(letters), 80)]
    assert dbcmd(str(tmp / "db")) == "\n".join(expected) + "\n"


def test_pack_matches_alphabet_packing(tmp_path):
    seq = "ACGTTGCAAC"
    (tmp_path / "a.fa").write_text(">a\n" + seq + "\n")
    make_db([str(tmp_path / "a.fa")], str(tmp_path / "db"), progress=False)
    with open_db(str(tmp_path / "db")) as db:
        assert np.array_equal(db.packed(0), pack_2bit(db.blastna(0)))


def test_letters_unpacked_from_a_volumes_packed_subjects(tmp_path):
    """fill_ranges on a volume's PackedSubjects (as the traceback unpacks a subject's
    letters) gives, in each range, the letters blastna gives, ambiguity runs included."""
    from gblastn.db.reader import CODE_OF, fill_ranges

    rng = np.random.default_rng(7)
    seq = "".join(rng.choice(list("ACGT"), 9_999))
    seq = seq[:995] + "N" * 20 + seq[1015:2998] + "RYKM" + seq[3002:]
    fasta = tmp_path / "long.fa"
    fasta.write_text(">short\nACGTNACGT\n>long\n" + seq + "\n")
    make_db([str(fasta)], str(tmp_path / "db"), progress=False)
    with open_db(str(tmp_path / "db")) as db:
        truth = db.blastna(1)
        assert decode_blastna(truth) == expected_letters(seq)
        subjects = db.volumes[0].packed_subjects()
        a, b = subjects.amb_start[1], subjects.amb_start[2]
        bases = subjects.packed[subjects.byte_offset[1]:]
        for _ in range(50):
            cuts = np.sort(rng.choice(len(seq) + 1, size=4, replace=False))
            ranges = cuts.reshape(2, 2).astype(np.int64)
            out = np.full(len(seq), 99, dtype=np.uint8)
            fill_ranges(out, 0, ranges, bases, subjects.amb_offset[a:b],
                        subjects.amb_length[a:b], subjects.amb_end[a:b],
                        subjects.amb_code[a:b], CODE_OF)
            for start, end in ranges:
                assert np.array_equal(out[start:end], truth[start:end])
        assert np.array_equal(db.blastna(1, 997, 8_003), truth[997:8_003])
