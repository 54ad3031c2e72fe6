"""Golden tests against makeblastdb: the 2-bit bytes, substitutes and ambiguity runs equal
its .nsq, ambiguity codes decode as BLAST decodes them, and deflines with bytes outside
ASCII print as blastn prints them."""

import shutil
import struct
import subprocess

import numpy as np
import pytest

from gblastn.alphabet import BLASTNA_FROM_ASCII, BLASTNA_FROM_NCBI4NA, unpack_2bit
from gblastn.db.reader import open_db
from gblastn.db.writer import make_db

pytestmark = [pytest.mark.golden,
              pytest.mark.skipif(shutil.which("makeblastdb") is None, reason="makeblastdb not installed")]


def read_blast_volume(prefix):
    """(sequence bytes, ambiguity bytes) per OID from a v5 .nin/.nsq (spec §9)."""
    nin = open(prefix + ".nin", "rb").read()
    nsq = open(prefix + ".nsq", "rb").read()
    pos = 0

    def int4():
        nonlocal pos
        pos += 4
        return struct.unpack(">i", nin[pos - 4:pos])[0]

    def string():
        nonlocal pos
        n = int4()
        pos += n
        return nin[pos - n:pos]

    version, seqtype, _volume = int4(), int4(), int4()
    assert (version, seqtype) == (5, 0)
    string(), string()          # title, LMDB file name
    string()                    # date
    pos = (pos + 3) // 4 * 4
    count = int4()
    pos += 8                    # total letters (little-endian Int8)
    int4()                      # longest
    int4s = lambda: [int4() for _ in range(count + 1)]  # noqa: E731
    int4s()
    seq, amb = int4s(), int4s()
    return [(nsq[seq[i]:amb[i]], nsq[amb[i]:seq[i + 1]]) for i in range(count)]


def blast_length(raw: bytes) -> int:
    return 4 * (len(raw) - 1) + (raw[-1] & 3)


def blast_ambiguities(raw: bytes) -> list[tuple[int, int, int]]:
    """(offset, length, ncbi4na code) runs from a .nsq ambiguity block, old or new format."""
    header = struct.unpack(">I", raw[:4])[0]
    words = struct.unpack(f">{len(raw) // 4 - 1}I", raw[4:])
    runs = []
    if header & 0x80000000:
        for k in range(0, header & 0x7FFFFFFF, 2):
            first, offset = words[k], words[k + 1]
            runs.append((offset, ((first >> 16) & 0xFFF) + 1, first >> 28))
    else:
        for word in words[:header]:
            runs.append((word & 0xFFFFFF, ((word >> 24) & 0xF) + 1, word >> 28))
    return runs


def merged(runs):
    """Adjacent runs of one code joined (BLAST splits long runs, we do not)."""
    out = []
    for offset, length, code in runs:
        if out and out[-1][2] == code and out[-1][0] + out[-1][1] == offset:
            out[-1] = (out[-1][0], out[-1][1] + length, code)
        else:
            out.append((offset, length, code))
    return out


def golden_sequences() -> list[bytes]:
    rng = np.random.default_rng(7)
    acgt = np.frombuffer(b"ACGT", np.uint8)

    def random_bases(n, lower=False):
        text = acgt[rng.integers(0, 4, n)].tobytes()
        return text.lower() if lower else text

    iupac = b"RYKMSWBDHVN"
    seqs = [
        b"ACGTNNNNNNNNNNACGTRYACGT",                                   # N run + isolated codes
        random_bases(1001) + b"N" * 5000 + iupac + random_bases(3),    # run > 4096, new format
        random_bases(57, lower=True) + b"nnnrykmswbdhv" + b"acgu-",    # lower case, U, gap
        b"NNNN", b"AC", b"A", b"RYK",                                 # lengths not divisible by 4
        bytes(iupac[i] for i in rng.integers(0, 11, 999)),             # all ambiguous
    ]
    long_seq = bytearray(random_bases((1 << 24) + 4099))               # longer than 2^24
    for at in (5, 1 << 20, (1 << 24) - 2, (1 << 24) + 50):
        long_seq[at:at + 3] = b"NRY"
    long_seq[(1 << 24) + 100:(1 << 24) + 4200] = b"N" * 4100
    seqs.append(bytes(long_seq))
    return seqs


def test_packed_bases_and_ambiguities_equal_makeblastdb(tmp_path):
    seqs = golden_sequences()
    fasta = tmp_path / "golden.fa"
    with open(fasta, "wb") as handle:
        for i, seq in enumerate(seqs):
            handle.write(b">seq%d some title\n" % i)
            for start in range(0, len(seq), 70):
                handle.write(seq[start:start + 70] + b"\n")
    subprocess.run(["makeblastdb", "-in", str(fasta), "-dbtype", "nucl", "-blastdb_version", "5",
                    "-out", str(tmp_path / "ref")], check=True, capture_output=True)
    reference = read_blast_volume(str(tmp_path / "ref"))
    make_db([str(fasta)], str(tmp_path / "ours"), progress=False)
    with open_db(str(tmp_path / "ours")) as db:
        assert db.num_seqs == len(seqs)
        for ordinal, (seq, (raw, amb)) in enumerate(zip(seqs, reference)):
            length = len(seq)
            assert blast_length(raw) == length == db.lengths[ordinal]
            ours = db.packed(ordinal)
            assert ours.size == (length + 3) // 4
            # every base, substitutes included, equals the .nsq's
            assert np.array_equal(unpack_2bit(ours, length), unpack_2bit(np.frombuffer(raw, np.uint8), length))
            offsets, run_lengths, codes = db.ambiguities(ordinal)
            ours_runs = list(zip(offsets.tolist(), run_lengths.tolist(), codes.tolist()))
            assert ours_runs == merged(blast_ambiguities(amb))
            # the runs restore the true letters ('-' reads as N)
            truth = BLASTNA_FROM_ASCII[np.frombuffer(seq, np.uint8)]
            assert np.array_equal(db.blastna(ordinal), truth)
        middle = db.blastna(len(seqs) - 1, (1 << 24) - 10, (1 << 24) + 60)
        assert np.array_equal(middle, BLASTNA_FROM_ASCII[np.frombuffer(seqs[-1][(1 << 24) - 10:(1 << 24) + 60], np.uint8)])


def test_ambiguity_codes_decode_like_blast():
    # BLAST's ncbi4na codes of the IUPAC letters, as blastdbcmd prints them back
    for letter, code in zip(b"ACGTRYMKWSBDHVN", [1, 2, 4, 8, 5, 10, 3, 12, 9, 6, 14, 13, 11, 7, 15]):
        assert BLASTNA_FROM_NCBI4NA[code] == BLASTNA_FROM_ASCII[letter]


@pytest.mark.skipif(shutil.which("blastn") is None, reason="blastn not installed")
def test_deflines_outside_ascii_print_as_blastn_prints_them(tmp_path):
    """makeblastdb stores '#' for bytes past ASCII, DEL and control characters (^A: a
    space); gblastn's makedb stores the same, so the id and title columns match."""
    import sys

    rng = np.random.default_rng(5)
    subject = "".join(np.array(list("ACGT"))[rng.integers(0, 4, 2000)])
    header = b">subj\xe9\xff caf\xc3\xa9 x\x01y\x02z\x7f title"
    (tmp_path / "db.fa").write_bytes(header + b"\n" + subject.encode() + b"\n")
    (tmp_path / "q.fa").write_text(">q1\n" + subject[500:900] + "\n")
    columns = "6 qseqid sseqid stitle"
    subprocess.run(["makeblastdb", "-in", str(tmp_path / "db.fa"), "-dbtype", "nucl", "-out",
                    str(tmp_path / "blast")], capture_output=True, check=True)
    expected = subprocess.run(["blastn", "-db", str(tmp_path / "blast"), "-query",
                               str(tmp_path / "q.fa"), "-outfmt", columns],
                              capture_output=True, check=True).stdout
    made = subprocess.run([sys.executable, "-m", "gblastn", "makedb", "-in",
                           str(tmp_path / "db.fa"), "-out", str(tmp_path / "g")],
                          capture_output=True, text=True)
    assert made.returncode == 0 and "stored as '#'" in made.stderr, made.stderr
    got = subprocess.run([sys.executable, "-m", "gblastn", "search", "-db", str(tmp_path / "g"),
                          "-query", str(tmp_path / "q.fa"), "-outfmt", columns, "-device",
                          "cpu"], capture_output=True)
    assert got.returncode == 0, got.stderr
    assert b"subj##" in expected and got.stdout == expected
