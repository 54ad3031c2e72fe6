"""Golden tests: query and -subject FASTA files that blastn 2.12 reads leniently (letters
it drops with a warning, comments, line ends, records without a defline or letters) give
blastn's hits and blastn's warnings; those it refuses are refused, in its reader's words."""

import subprocess

import numpy as np
import pytest

from golden import gblastn, needs_blast, random_dna, write_fasta

pytestmark = [pytest.mark.golden, needs_blast]

COLUMNS = "6 qseqid qlen sseqid slen qstart qend sstart send evalue bitscore"
rng = np.random.default_rng(53)
SUBJECT = random_dna(rng, 400).tobytes().decode()
A, B = SUBJECT[20:220], SUBJECT[150:340]


def _lines(text: str, width: int = 60) -> str:
    return "\n".join(text[at:at + width] for at in range(0, len(text), width))


# name: the FASTA text, as bytes; every case where blastn finds hits says so below
READ = {
    "digits_and_blanks_in_lines": f">q1\n{A[:60]} 12 {A[60:120]}\n  {A[120:]} 3\n",
    "hyphens": f">q1\n{A[:50]}---{A[50:]}\n-{B}\n",
    "stars_dots_and_letters_outside_iupac": f">q1\n{A[:100]}*X.\n{A[100:]}JO*\n",
    "lower_case": f">q1\n{A.lower()}\n",
    "uracil_and_iupac": f">q1\n{A.replace('T', 'U')[:60]}RYKMSWBDHVN{A[60:]}\n",
    "record_without_letters": f">q0 empty\n>q1\n{A}\n>q2 last empty\n",
    "defline_without_title": f">\n{A}\n>\n{B}\n",
    "windows_line_ends": f">q1 title\r\n{_lines(A)}\r\n>q2\r\n{B}\r\n",
    # (a '>' after a CR alone is not read as a defline by blastn 2.12: one record only)
    "carriage_return_line_ends": f">q1 title\r{_lines(A)}\r",
    "no_final_newline": f">q1\n{A}",
    "leading_blank_lines": f"\n\n>q1\n{A}\n",
    "text_before_the_first_defline": f"hello there\n>q1\n{A}\n",
    "comment_lines_and_comments": f";comment\n>q1\n!bang\n{A[:100]};ACGT\n # hash\n{A[100:]}\n",
    "bare_sequence": f"{_lines(A)}\n\n{B}\n",
    "blank_then_defline_mark": f" >q1\n{A}\n",
    "greater_than_inside_a_line": f">q1\n{A[:50]}>{A[50:]}\n",
    "sequence_in_the_title": f">q1 {A[:24]}\n{A}\n",
    "a_first_line_of_invalid_letters": f">q1\nXXXXXXXX\n{A}\n",
    "gap_lines": f">q1\n{A[:100]}\n>?100\n{A[100:]}\n>?_q2 x\n>?\n{B[:90]}\n>?unk 20 \n"
                 f"{B[90:]}\n>?abc\n",
}
REFUSED = {  # a record's first data line that does not look like sequence
    "digits_only_first_line": f">q1\n123456\n{A}\n",
    "punctuation_first_line": f">q0\n{B}\n>q1\n..,,..\n{A}\n",
    "hyphens_only_first_line": f">q1\n-----\n{A}\n",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("query_fasta")
    fasta = write_fasta(path / "db.fa", [("subject one", SUBJECT)])
    subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out", str(path / "db")],
                   check=True, capture_output=True)
    write_fasta(path / "query.fa", [("query one", A), ("query two", B)])
    return path


def _both(folder, name: str, text: str, role: str):
    """(blastn's (exit code, stdout, stderr), gblastn's) for the FASTA as -query against the
    database, or as -subject of a plain query."""
    path = folder / f"{name}_{role}.fa"
    path.write_bytes(text.encode())
    if role == "query":
        args = ["-query", str(path), "-db", str(folder / "db")]
    else:
        args = ["-query", str(folder / "query.fa"), "-subject", str(path)]
    theirs = subprocess.run(["blastn", *args, "-outfmt", COLUMNS], capture_output=True,
                            text=True)
    ours = gblastn("search", *args, "-outfmt", COLUMNS, "-device", "cpu")
    notices = ("gblastn: no GPU", "gblastn: compiling")
    our_stderr = "".join(line for line in ours.stderr.splitlines(keepends=True)
                         if not line.startswith(notices))
    return (theirs.returncode, theirs.stdout, theirs.stderr), \
        (ours.returncode, ours.stdout, our_stderr)


@pytest.mark.parametrize("role", ["query", "subject"])
@pytest.mark.parametrize("name", sorted(READ))
def test_read_as_blastn_reads_it(folder, name, role):
    (code, stdout, stderr), (our_code, our_stdout, our_stderr) = _both(
        folder, name, READ[name], role)
    assert code == 0 and stdout, stderr  # blastn read it and found hits
    assert our_code == 0, our_stderr
    assert our_stdout == stdout
    assert our_stderr == stderr


@pytest.mark.parametrize("role", ["query", "subject"])
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_as_blastn_refuses_it(folder, name, role):
    (code, stdout, stderr), (our_code, our_stdout, our_stderr) = _both(
        folder, name, REFUSED[name], role)
    assert code != 0 and not stdout
    reason = stderr.strip().split("CFastaReader: ", 1)[1]
    assert our_code != 0 and not our_stdout
    assert our_stderr.count("\n") == 1 and our_stderr.startswith("gblastn: error: ")
    assert our_stderr.strip().endswith("CFastaReader: " + reason)


def test_an_empty_query_file_is_warned_about_as_blastn_warns(folder):
    (code, stdout, stderr), (our_code, our_stdout, our_stderr) = _both(
        folder, "empty", "\n\n", "query")
    assert (code, stdout, stderr) == (0, "", "Warning: [blastn] Query is Empty!\n")
    assert (our_code, our_stdout, our_stderr) == (code, stdout, stderr)
