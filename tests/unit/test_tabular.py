"""Tabular output (-outfmt 6/7/10): parsing, number formatting, column derivations on
hand-made HSPs, and golden comparisons with the real blastn (headers; every column of real
alignments rebuilt from blastn's own BTOP)."""

import io
import re
import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest

from gblastn.alphabet import encode_blastna
from gblastn.errors import OptionsError
from gblastn.hsp import Hsps, QueryResult, SubjectHits
from gblastn.layouts import OP_DEL, OP_INS, OP_SUB
from gblastn.options import make_options
from gblastn.output.tabular import (btop, coverage_percent, display_hsp, format_bitscore,
                                    format_evalue, format_percent, format_queries,
                                    write_header, write_query)
from gblastn.output.tabular_format import DEFAULT_COLUMNS, TabularFormat, write_footer
from gblastn.query import Query, build_batch
from gblastn.stats import bit_scores, evalues, prepare_statistics

# ---- parsing -----------------------------------------------------------------------------


def test_parse_defaults_and_kinds():
    assert TabularFormat.parse("6") == TabularFormat(6, DEFAULT_COLUMNS, "\t")
    assert TabularFormat.parse(" 7 ").columns == DEFAULT_COLUMNS
    assert TabularFormat.parse("10 qseqid sseqid") == TabularFormat(10, ("qseqid", "sseqid"), ",")
    assert TabularFormat.parse("7 std qlen").columns == DEFAULT_COLUMNS + ("qlen",)
    assert TabularFormat.parse("6 std qlen std").columns == DEFAULT_COLUMNS + ("qlen",)
    assert TabularFormat.parse("6 qseqid qseqid").columns == ("qseqid",)
    assert TabularFormat.parse("6 qseqid -qseqid sseqid").columns == ("sseqid",)
    assert TabularFormat.parse("6 std -evalue").columns == tuple(
        c for c in DEFAULT_COLUMNS if c != "evalue")
    assert TabularFormat.parse("6  qseqid   sseqid").columns == ("qseqid", "sseqid")


def test_parse_delimiters():
    assert TabularFormat.parse("6 delim=, qseqid sseqid") == TabularFormat(6, ("qseqid", "sseqid"), ",")
    assert TabularFormat.parse("6 delim=@@ qseqid").delimiter == "@@"
    assert TabularFormat.parse("6 delim= qseqid").delimiter == "\t"
    assert TabularFormat.parse("6 delim=ab").columns == DEFAULT_COLUMNS
    with pytest.raises(OptionsError, match="Delimiter format is invalid"):
        TabularFormat.parse("6 delim qseqid")


@pytest.mark.parametrize("spec,clash", [
    ("6 delim=; qseqid sallseqid", "sallseqid"),
    ("6 delim=; qseqid staxids sallseqid", "sallseqid"),  # blastn's order, not the columns'
    ("7 delim=; sscinames staxids", "staxids"),
    ("6 delim=; sallseqid -sallseqid qseqid", "sallseqid"),  # named, then removed
    ("10 delim=<> salltitles", "salltitles"),
    ("6 delim=; staxid", None), ("6 delim=;; sallseqid", None), ("6 delim=< salltitles", None),
    ("6 delim=; sallacc sallgi", None)])
def test_a_delimiter_that_a_listing_column_uses_is_refused_as_by_blastn(spec, clash):
    if clash is None:
        TabularFormat.parse(spec)
        return
    with pytest.raises(OptionsError, match=re.escape(f"format specifier ({clash})")):
        TabularFormat.parse(spec)


@pytest.mark.parametrize("spec,message", [
    ("abc", "'abc' is not a valid output format"),
    ("6x qseqid", "'6x' is not a valid output format"),
    ("", "'' is not a valid output format"),
    ("5", "not supported by gblastn"),
    ("6 qseqid foo", "'foo' is not a valid output format column"),
])
def test_parse_errors(spec, message):
    with pytest.raises(OptionsError, match=re.escape(message)):
        TabularFormat.parse(spec)


# ---- number formatting -------------------------------------------------------------------

@pytest.mark.parametrize("value,text", [
    (0.0, "0.0"), (9.9e-181, "0.0"), (1e-180, "1.00e-180"), (1.404e-106, "1.40e-106"),
    (4.75e-11, "4.75e-11"), (0.000899, "8.99e-04"), (0.0009, "0.001"), (0.048, "0.048"),
    (0.0999, "0.100"), (0.1, "0.10"), (0.17, "0.17"), (0.999, "1.00"), (1.0, "1.0"),
    (5.3, "5.3"), (9.96, "10.0"), (10.0, "10"), (446.4, "446"), (3744.0, "3744"),
])
def test_format_evalue(value, text):
    assert format_evalue(value) == text


@pytest.mark.parametrize("value,text", [
    (6.5, " 6.5"), (0.04, " 0.0"), (24.66, "24.7"), (99.9, "99.9"), (99.95, " 99"),
    (100.0, "100"), (1622.48, "1622"), (99999.0, "99999"), (100000.0, "1.000e+05"),
    (123456.7, "1.235e+05"),
])
def test_format_bitscore(value, text):
    assert format_bitscore(value) == text


def test_percentages_and_coverage():
    assert format_percent(1896, 2005, 3) == "94.564"
    assert format_percent(300, 300, 3) == "100.000"
    assert format_percent(294, 302, 2) == "97.35"
    assert format_percent(9999, 10000, 3) == "99.990"
    assert format_percent(0, 0, 3) == "0.000"
    assert coverage_percent(302, 302) == 100
    assert coverage_percent(299, 300) == 99        # 99.67 is truncated, not rounded up
    assert coverage_percent(297, 300) == 99        # 99.0 exactly: truncated
    assert coverage_percent(296, 300) == 99        # 98.67 + 0.5
    assert coverage_percent(1, 300) == 0           # 0.33 + 0.5


# ---- column derivations on hand-made HSPs ------------------------------------------------

QUERY = "ACGTACGTTTGCAN"    # 14 letters


def test_plus_strand_alignment():
    q = encode_blastna(QUERY)
    # query[2:12) = GTACGTTTGC against subject letters with one deletion and one insertion
    subject = encode_blastna("GTAACGTTGCA")
    ops = np.array([OP_SUB, OP_DEL, OP_SUB, OP_INS, OP_SUB], dtype=np.uint8)
    op_len = np.array([3, 1, 4, 1, 2], dtype=np.int32)
    shown = display_hsp(q, 0, 2, 12, 100, 110, subject[:10], ops, op_len)
    assert (shown.qstart, shown.qend, shown.sstart, shown.send) == (3, 12, 101, 110)
    rows = [x.tobytes() for x in (shown.qseq, shown.sseq)]
    assert rows == [b"\x02\x03\x00\x0f\x01\x02\x03\x03\x03\x02\x01",
                    b"\x02\x03\x00\x00\x01\x02\x03\x03\x0f\x02\x01"]
    assert btop(shown.qseq, shown.sseq) == "3-A4T-2"
    assert shown.gap_runs == 2 and not shown.minus


def test_minus_strand_alignment_is_shown_reversed():
    q = encode_blastna(QUERY)
    rc = "NTGCAAACGTACGT"
    # context 1: reverse complement; align rc[1:9) = TGCAAACG with a subject gap after 4
    subject = encode_blastna("TGCAACG")
    ops = np.array([OP_SUB, OP_INS, OP_SUB], dtype=np.uint8)
    op_len = np.array([4, 1, 3], dtype=np.int32)
    shown = display_hsp(q, 1, 1, 9, 50, 57, subject, ops, op_len)
    assert rc[1:9] == "TGCAAACG"
    assert (shown.qstart, shown.qend) == (14 - 9 + 1, 14 - 1)
    assert (shown.sstart, shown.send) == (57, 51) and shown.minus
    qtext = shown.qseq.tobytes().translate(bytes.maketrans(bytes(range(16)), b"ACGTRYMKWSBDHVN-"))
    stext = shown.sseq.tobytes().translate(bytes.maketrans(bytes(range(16)), b"ACGTRYMKWSBDHVN-"))
    assert qtext == b"CGTTTGCA" and QUERY[5:13] == "CGTTTGCA"
    assert stext == b"CGT-TGCA"
    assert btop(shown.qseq, shown.sseq) == "3T-4"


class FakeDb:
    """The database interface the formatter uses."""

    def __init__(self, records, parse_seqids=False):
        self.parse_seqids = parse_seqids
        self.records = records   # (seq_id, accession, title, sequence text)
        self.lengths = np.array([len(r[3]) for r in records], dtype=np.int64)

    def seq_id(self, o):
        return self.records[o][0]

    def accession(self, o):
        return self.records[o][1]

    def title_of(self, o):
        return self.records[o][2]

    def defline_texts(self, o):
        return [f"{self.records[o][0]} {self.records[o][2]}"]

    def blastna(self, o, start=0, end=None):
        return encode_blastna(self.records[o][3][start:end])


def _hsps(rows):
    """rows: (context, q_start, q_end, s_start, s_end, score, evalue, bits, [(op, n), ...])"""
    cols = list(zip(*rows))
    ints = [np.array(c, dtype=np.int32) for c in cols[:6]]
    h = Hsps(*ints, ints[1].copy(), ints[3].copy())
    h.evalue, h.bitscore = np.array(cols[6]), np.array(cols[7])
    scripts = cols[8]
    h.op_start = np.cumsum([0] + [len(s) for s in scripts]).astype(np.int64)
    h.ops = np.array([op for s in scripts for op, _ in s], dtype=np.uint8)
    h.op_len = np.array([n for s in scripts for _, n in s], dtype=np.int32)
    return h


def test_write_query_columns_and_coverage():
    subject = "GG" + "ACGTACGTTTGCAA" + "CCCC" + "TTGCAAACGTACGT" + "GG"
    db = FakeDb([("gi|5|gb|AB1.2|", "AB1.2", "", subject)], parse_seqids=True)
    query = Query("q1", "q1  some  description ", encode_blastna(QUERY), np.zeros(14, bool))
    hsps = _hsps([
        (0, 0, 14, 2, 16, 12, 1e-5, 25.1, [(OP_SUB, 14)]),            # plus, N/A at the end
        (1, 1, 14, 21, 34, 13, 0.2, 21.0, [(OP_SUB, 13)]),            # minus strand copy
    ])
    result = QueryResult(0, "q1", query.defline, 14, [SubjectHits(0, hsps)])
    fmt = TabularFormat.parse("7 qseqid sseqid sacc saccver sgi stitle qlen slen std nident "
                              "gaps sstrand frames sframe qcovs qcovhsp qcovus btop score")
    out = io.StringIO()
    write_query(out, fmt, query, result, db, db_name="some/db")
    write_footer(out, fmt, 1)
    lines = out.getvalue().splitlines()
    # blastn keeps the defline's inner spaces and drops the trailing ones
    assert lines[:3] == ["# BLASTN 2.12.0+", "# Query: q1  some  description", "# Database: some/db"]
    # saccver, already asked for, is not repeated by std
    assert lines[3].startswith("# Fields: query id, subject id, subject acc., subject acc.ver, "
                               "subject gi, subject title, query length, subject length, "
                               "query acc.ver, % identity, alignment length")
    assert lines[4] == "# 2 hits found"
    assert lines[5].split("\t") == [
        "q1", "gi|5|gb|AB1.2|", "AB1", "AB1.2", "5", "N/A", "14", "36", "q1", "92.857", "14",
        "1", "0", "1", "14", "3", "16", "1.00e-05", "25.1", "13", "0", "plus", "1/1", "1",
        "100", "100", "100", "13NA", "12"]
    # the minus-strand HSP: query 1..13 on the plus strand, subject shown from 34 down to 22
    assert lines[6].split("\t") == [
        "q1", "gi|5|gb|AB1.2|", "AB1", "AB1.2", "5", "N/A", "14", "36", "q1", "100.000", "13",
        "0", "0", "1", "13", "34", "22", "0.20", "21.0", "13", "0", "minus", "1/-1", "-1",
        "100", "93", "100", "13", "13"]
    assert lines[7] == "# BLAST processed 1 queries"


def test_queries_formatted_together_as_one_by_one():
    """A batch's queries are formatted in one go (format_queries): each query's text must be
    what it gets alone, its own length used for its rows (minus-strand coordinates, qlen,
    qcovhsp) and queries without hits kept in their place."""
    subject = "ACGT" * 30
    db = FakeDb([("s1", "s1", "first", subject), ("s2", "s2", "second", subject[::-1])])

    def counted(rows):
        hsps = _hsps(rows)
        hsps.counts = np.array([[q_end - q_start, q_end - q_start - 1, 0, 0]
                                for _, q_start, q_end, *_ in rows], dtype=np.int64)
        return hsps

    def query(name, length):
        return Query(name, name, encode_blastna(("ACGT" * 20)[:length]), np.zeros(length, bool))

    q1, q2, q3 = query("q1", 14), query("q2", 20), query("q3", 30)
    pairs = [
        (q1, QueryResult(0, "q1", "q1", 14, [SubjectHits(0, counted([
            (0, 0, 14, 2, 16, 12, 1e-5, 25.1, [(OP_SUB, 14)]),
            (1, 1, 14, 21, 34, 13, 0.2, 21.0, [(OP_SUB, 13)])]))])),
        (q2, QueryResult(1, "q2", "q2", 20, [])),
        (q3, QueryResult(2, "q3", "q3", 30, [
            SubjectHits(1, counted([(1, 3, 28, 40, 65, 25, 3e-9, 48.2, [(OP_SUB, 25)])])),
            SubjectHits(0, counted([(0, 0, 30, 0, 30, 30, 0.0, 120.4, [(OP_SUB, 30)]),
                                    (0, 5, 9, 50, 54, 4, 7.5, 8.1, [(OP_SUB, 4)])]))])),
    ]
    for spec in ("6", "7 qseqid sseqid qlen slen qstart qend sstart send qcovhsp qcovs evalue "
                 "bitscore pident sstrand stitle", "10 qaccver qstart qend length mismatch"):
        fmt = TabularFormat.parse(spec)
        together = format_queries(fmt, pairs, db, db_name="db")
        assert together == [format_queries(fmt, [pair], db, db_name="db")[0] for pair in pairs]
    # q3's first HSP, on the minus strand: shown on the plus strand of a 30-letter query
    q3_text = format_queries(TabularFormat.parse("6 qseqid qlen qstart qend qcovhsp"), pairs,
                             db, db_name="db")[2]
    assert q3_text.splitlines()[0] == "q3\t30\t3\t27\t83"


def test_header_without_hits_has_no_fields_line():
    fmt = TabularFormat.parse("7")
    out = io.StringIO()
    query = Query("q9", "q9", encode_blastna("ACGT"), np.zeros(4, bool))
    write_query(out, fmt, query, QueryResult(0, "q9", "q9", 4, []), FakeDb([]), db_name="db")
    assert out.getvalue() == "# BLASTN 2.12.0+\n# Query: q9\n# Database: db\n# 0 hits found\n"
    out = io.StringIO()
    write_query(out, TabularFormat.parse("6"), query, QueryResult(0, "q9", "q9", 4, []),
                FakeDb([]), db_name="db")
    assert out.getvalue() == ""


# ---- golden -------------------------------------------------------------------------------

BLASTN = shutil.which("blastn")
needs_blast = pytest.mark.skipif(BLASTN is None or shutil.which("makeblastdb") is None,
                                 reason="NCBI BLAST+ not installed")
_COMP = str.maketrans("ACGTNRY", "TGCANYR")

ALL_COLUMNS = ("qseqid qgi qacc qaccver qlen sseqid sallseqid sgi sallgi sacc saccver sallacc "
               "slen qstart qend sstart send qseq sseq evalue bitscore score length pident "
               "nident mismatch positive gapopen gaps ppos frames qframe sframe btop stitle "
               "salltitles sstrand qcovs qcovhsp qcovus")


def _mutate(rng, seq, rate):
    out = []
    for c in seq:
        r = rng.random()
        if r < rate * 0.7:
            out.append(str(rng.choice(list("ACGT"))))
        elif r < rate * 0.85:
            continue                                   # deletion
        elif r < rate:
            out.append(c + str(rng.choice(list("ACGT"))))   # insertion
        else:
            out.append(c)
    return "".join(out)


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    rng = np.random.default_rng(11)
    work = tmp_path_factory.mktemp("tabular_golden")
    subjects = ["".join(rng.choice(list("ACGT"), n)) for n in (6000, 4000, 3000)]
    subjects[1] = subjects[1][:1000] + "NNNNNRYKM" + subjects[1][1009:]
    deflines = ["s0 first subject", "s1  second subject", "s2"]
    with open(work / "db.fa", "w") as f:
        for d, s in zip(deflines, subjects):
            f.write(f">{d}\n{s}\n")
    filler = lambda n: "".join(rng.choice(list("ACGT"), n))
    pieces = [subjects[0][100:600], subjects[1][900:1300], subjects[0][3000:3400],
              subjects[2][200:700], subjects[0][100:400], subjects[1][2000:2300]]
    parts = []
    for k, p in enumerate(pieces):
        p = _mutate(rng, p, [0.03, 0.08, 0.12][k % 3])
        parts.append(p[::-1].translate(_COMP) if k % 2 else p)
    queries = {"qa": ("qa the first  query ", filler(40).join(parts[:3])),
               "qb": ("qb", filler(25).join(parts[3:])),
               "qnone": ("qnone nothing here", filler(200))}
    with open(work / "q.fa", "w") as f:
        for defline, seq in queries.values():
            f.write(f">{defline}\n{seq}\n")
    subprocess.run(["makeblastdb", "-in", str(work / "db.fa"), "-dbtype", "nucl", "-out",
                    str(work / "db")], check=True, capture_output=True)
    db = FakeDb([(d.split()[0], d.split()[0], d, s) for d, s in zip(deflines, subjects)])
    return work, queries, db


def _blastn(work, task, outfmt):
    return subprocess.run([BLASTN, "-task", task, "-query", str(work / "q.fa"), "-db",
                           str(work / "db"), "-outfmt", outfmt, "-dust", "no"],
                          check=True, capture_output=True, text=True).stdout


def _script_from_btop(text, minus):
    ops = []
    for number, pair in re.findall(r"(\d+)|(..)", text):
        if number:
            ops.append((OP_SUB, int(number)))
        elif pair[0] == "-":
            ops.append((OP_DEL, 1))
        elif pair[1] == "-":
            ops.append((OP_INS, 1))
        else:
            ops.append((OP_SUB, 1))
    merged = []
    for op, n in (ops[::-1] if minus else ops):
        if merged and merged[-1][0] == op:
            merged[-1] = (op, merged[-1][1] + n)
        else:
            merged.append((op, n))
    return merged


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("task", ["megablast", "blastn"])
def test_golden_all_columns(golden, task):
    """Rebuild each HSP blastn reports (coordinates, raw score, edit script from its BTOP),
    then format it: every column must print exactly as blastn printed it."""
    work, queries, db = golden
    spec = "6 " + ALL_COLUMNS
    expected = _blastn(work, task, spec)
    fmt = TabularFormat.parse(spec)
    names = list(queries)
    options = replace(make_options(task), dust=None)
    query_objs = [Query(n, queries[n][0], encode_blastna(queries[n][1]),
                        np.zeros(len(queries[n][1]), bool)) for n in names]
    stats = prepare_statistics(build_batch(query_objs, options), int(db.lengths.sum()), 3, options)
    per_query = {n: [] for n in names}
    for line in expected.splitlines():
        f = dict(zip(fmt.columns, line.split("\t")))
        q = names.index(f["qseqid"])
        length = int(f["qlen"])
        minus = f["sstrand"] == "minus"
        qs, qe, ss, se = (int(f[k]) for k in ("qstart", "qend", "sstart", "send"))
        if minus:
            ctx, q0, q1, s0, s1 = 2 * q + 1, length - qe, length - qs + 1, se - 1, ss
        else:
            ctx, q0, q1, s0, s1 = 2 * q, qs - 1, qe, ss - 1, se
        ordinal = [d[0] for d in db.records].index(f["sseqid"])
        per_query[f["qseqid"]].append((ordinal, (ctx, q0, q1, s0, s1, int(f["score"]), 0.0, 0.0,
                                                 _script_from_btop(f["btop"], minus))))
    out = io.StringIO()
    for qi, name in enumerate(names):
        subjects = []
        for ordinal, row in per_query[name]:
            if not subjects or subjects[-1][0] != ordinal:
                subjects.append((ordinal, []))
            subjects[-1][1].append(row)
        hits = []
        for ordinal, rows in subjects:
            h = _hsps(rows)
            h.evalue = evalues(h.score, h.context, stats)
            h.bitscore = bit_scores(h.score, h.context, stats)
            hits.append(SubjectHits(ordinal, h))
        write_query(out, fmt, query_objs[qi], QueryResult(qi, name, queries[name][0],
                                                          len(queries[name][1]), hits),
                    db, db_name="db")
    assert len(expected.splitlines()) >= 6
    assert out.getvalue() == expected


@needs_blast
@pytest.mark.golden
def test_golden_comment_lines(golden):
    work, queries, db = golden
    spec = "7 qseqid sseqid pident length qcovs score nident gaps qlen slen sstrand btop"
    expected = _blastn(work, "megablast", spec).splitlines()
    fmt = TabularFormat.parse(spec)
    out = io.StringIO()
    counts = {}
    for line in expected:
        if not line.startswith("#"):
            counts[line.split("\t")[0]] = counts.get(line.split("\t")[0], 0) + 1
    assert counts, "blastn reported no hits: the '# N hits found' lines would all be 0"
    for name, (defline, seq) in queries.items():
        query = Query(name, defline, encode_blastna(seq), np.zeros(len(seq), bool))
        write_header(out, fmt, query, str(work / "db"), counts.get(name, 0))
    write_footer(out, fmt, len(queries))
    assert out.getvalue().splitlines() == [line for line in expected if line.startswith("#")]
