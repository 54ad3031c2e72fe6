"""Golden tests of makedb's FASTA reading: the letters makeblastdb's reader ignores (digits,
'*', '.', letters outside IUPAC, control bytes, a '>' inside a line) are dropped with its
warning naming their lines and columns, a ';' drops the rest of its line, lines starting
with '!', '#' or ';' are comments, a '-' is an N, a '>?30' line 30 of them; the database
then holds makeblastdb's sequences and gives blastn's results. -strict refuses such a
letter instead."""

import subprocess

import numpy as np
import pytest

from golden import assert_blastn_found_hits, gblastn, mutate, needs_blast, random_dna, \
    same_as_blastn, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

WIDTH = 60
# (record, line of its sequence, column, text put there): the column counts from 1
# (a text ending a line puts a line of its own: comments, a gap of 30 letters; the columns of
# a line starting with blanks count from its first non-blank)
INSERTIONS = [(0, 2, 11, b"1"), (0, 2, 40, b"**"), (0, 5, 1, b"..."), (0, 7, 1, b"!bang\n"),
              (1, 0, 59, b"X"), (1, 3, 7, b"J>"), (1, 3, 30, b"\x01"), (1, 5, 1, b">?30\n"),
              (2, 1, 20, b";comment x1 ACGT"), (2, 2, 1, b"  # hash comment\n"),
              (2, 4, 1, b"; a whole line"), (3, 0, 5, b"-"), (3, 3, 1, b"   7"),
              (3, 6, 60, b"9 9")]


def _fasta_with_oddities(path, records) -> str:
    """The records written WIDTH letters a line, INSERTIONS put into their lines."""
    with open(path, "wb") as handle:
        for number, (defline, letters) in enumerate(records):
            lines = [bytearray(letters[i:i + WIDTH].tobytes())
                     for i in range(0, letters.size, WIDTH)]
            for record, line, column, text in reversed(INSERTIONS):
                if record == number:
                    lines[line][column - 1:column - 1] = text
            handle.write(b">" + defline.encode() + b"\n" + b"\n".join(lines) + b"\n")
    return str(path)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    folder = tmp_path_factory.mktemp("makedb_fasta")
    rng = np.random.default_rng(53)
    base = random_dna(rng, 6_000)
    records = [(f"s{i} subject {i}", mutate(rng, base[s:s + 1_500], 0.03, 0.002))
               for i, s in enumerate((0, 1_200, 2_500, 4_000))]
    fasta = _fasta_with_oddities(folder / "db.fa", records)
    query = write_fasta(folder / "q.fa", [("q1", base)])
    theirs = subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out",
                             str(folder / "theirs")], capture_output=True, text=True)
    assert theirs.returncode == 0, theirs.stderr
    ours = gblastn("makedb", "-in", fasta, "-out", str(folder / "ours"))
    assert ours.returncode == 0, ours.stderr
    return {"folder": folder, "fasta": fasta, "query": query, "theirs": theirs, "ours": ours}


def test_the_warnings_are_makeblastdbs(case):
    warnings = [line for line in case["theirs"].stderr.splitlines() if "FASTA-Reader" in line]
    assert len(warnings) == 6
    ours = [line for line in case["ours"].stderr.splitlines() if "FASTA-Reader" in line]
    assert ours == ["gblastn: warning: " + line for line in warnings]


def test_the_sequences_are_makeblastdbs(case):
    theirs = subprocess.run(["blastdbcmd", "-db", str(case["folder"] / "theirs"), "-entry",
                             "all"], capture_output=True, text=True, check=True)
    ours = gblastn("dbcmd", "-db", str(case["folder"] / "ours"), "-entry", "all")
    assert ours.returncode == 0 and ours.stdout == theirs.stdout


@pytest.mark.parametrize("args", [["-outfmt", "7 std slen"], ["-task", "blastn", "-outfmt", "6"]])
def test_the_search_results_are_blastns(case, args):
    lines = same_as_blastn(case["query"], str(case["folder"] / "theirs"), *args,
                           ours_db=str(case["folder"] / "ours"))
    assert_blastn_found_hits(lines)


def test_strict_refuses_the_first_ignored_letter(case, tmp_path):
    done = gblastn("makedb", "-in", case["fasta"], "-out", str(tmp_path / "db"), "-strict")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"gblastn: error: {case['fasta']}:4: invalid character '1' in a " \
                          "sequence\n"
    assert not (tmp_path / "db.gdb").exists()
