"""-outfmt 13, 14, 15, 16 (BLAST JSON and XML2): every file equals blastn 2.12's byte for
byte, but the list of files -outfmt 13 writes to -out, where blastn names files it did not
write; `json` and Biopython read the same from both."""

import io
import json
import os
import subprocess
import tempfile

import pytest

from golden import needs_blast, option_flags, read_fasta, write_fasta
from report_golden import EXAMPLE_DB, NO_HITS, REPORT_CASES, blastn_output, example_data, \
    gblastn_output

from gblastn.output.blastoutput2 import query_file_name
from gblastn.output.json_report import json_string


@pytest.mark.parametrize("out,extension,name", [
    ("res.json", ".json", "res_3.json"), ("res.JSON", ".json", "res_3.json"),
    ("res", ".json", "res_3.json"), ("res.txt", ".json", "res.txt_3.json"),
    ("a.b.json", ".json", "a.b_3.json"), ("dir/res.xml", ".xml", "dir/res_3.xml"),
    ("res.json", ".xml", "res.json_3.xml"), (".json", ".json", "_3.json"),
])
def test_query_files_are_named_as_blastn_names_them(out, extension, name):
    assert query_file_name(out, 3, extension) == name


def test_json_strings():
    assert json_string('a"b\\c\x01') == '"a\\"b\\\\c\\u0001"'
    assert json_string("café") == '"café"'
    # bytes that are not UTF-8 (read with surrogateescape) are read as Latin-1, all of them
    latin = b"caf\xc3\xa9 \xe9".decode("utf-8", "surrogateescape")
    assert json_string(latin) == '"cafÃ© é"'


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return example_data(tmp_path_factory.mktemp("blastoutput2"))


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("outfmt,task", [("15", "megablast"), ("15", "blastn"),
                                         ("16", "blastn")])
@pytest.mark.parametrize("name", sorted(REPORT_CASES))
def test_single_file_equals_blastn(data, outfmt, task, name):
    db, query, options = REPORT_CASES[name]
    expected = blastn_output(data["queries"][query], data[db], task, outfmt,
                             *option_flags(options))
    if name not in NO_HITS:  # else equal files could both have lost every hit
        assert '"hsps"' in expected or "<hsps>" in expected
    got = gblastn_output(data, data["queries"][query], data[db], task, outfmt, **options)
    assert got == expected


def _per_query_files(data, tool: str, outfmt: str, task: str, query: str, db: str,
                     options: dict) -> dict:
    """The files a search with -out FOLDER/res.EXT writes: {name: text}."""
    from gblastn.drivers.run import OutputSpec, run_search
    from gblastn.options import make_options

    folder = tempfile.mkdtemp(prefix=f"{tool}{outfmt}", dir=data["folder"])
    out = os.path.join(folder, "res.json" if outfmt == "13" else "res.xml")
    if tool == "blastn":
        subprocess.run(["blastn", "-task", task, "-query", query, "-db", db, "-outfmt", outfmt,
                        "-out", out, *option_flags(options)], check=True, capture_output=True)
    else:
        run_search([query], db, make_options(task, **options), OutputSpec(outfmt, out, None, db))
    files = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as handle:
            files[name] = handle.read()
    return files


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("task", ["megablast", "blastn"])
@pytest.mark.parametrize("outfmt", ["13", "14"])
def test_a_file_per_query_equals_blastn(data, outfmt, task):
    db, query, options = REPORT_CASES["multi_with_no_hits"]
    args = (outfmt, task, data["queries"][query], data[db], options)
    expected = _per_query_files(data, "blastn", *args)
    got = _per_query_files(data, "gblastn", *args)
    with open(data["queries"][query]) as handle:
        queries = handle.read().count(">")
    assert len(expected) == 1 + queries  # -out and the queries' files
    assert sorted(got) == sorted(expected)
    listing = "res.json" if outfmt == "13" else "res.xml"
    for name in expected:
        if name != listing:
            assert got[name] == expected[name], name
    if outfmt == "13":
        # blastn 2.12 lists res.json_N.json for the res_N.json it wrote
        assert got[listing] == expected[listing].replace("res.json_", "res_")
        assert [entry["File"] for entry in json.loads(got[listing])["BlastJSON"]] == \
            [f"res_{number}.json" for number in range(1, queries + 1)]
    else:
        assert got[listing] == expected[listing]


@needs_blast
@pytest.mark.golden
def test_ids_of_a_database_with_parsed_ids(tmp_path, data):
    from gblastn.db.writer import make_db

    with open(data["queries"]["nohit"]) as handle:
        sequence = "".join(handle.read().splitlines()[1:])
    fasta = write_fasta(tmp_path / "ids.fa", [("gi|12345|gb|AB000001.2| first", sequence),
                                             ("lcl|local3 third", sequence),
                                             ("ref|NC_000001.1| ", sequence)])
    db = str(tmp_path / "ids")
    subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-parse_seqids",
                    "-out", db], check=True, capture_output=True)
    make_db([fasta], db, parse_seqids=True, progress=False)
    query = data["queries"]["nohit"]
    for outfmt in ("15", "16"):
        expected = blastn_output(query, db, "megablast", outfmt)
        assert "AB000001" in expected and "local3" in expected
        assert gblastn_output(data, query, db, "megablast", outfmt) == expected


@needs_blast
@pytest.mark.golden
def test_json_and_biopython_read_the_same(data):
    from Bio import Blast

    query, db = data["queries"]["generated"], data["generated"]
    expected = blastn_output(query, db, "blastn", "15")
    got = gblastn_output(data, query, db, "blastn", "15")
    assert json.loads(got) == json.loads(expected)
    for outfmt in ("16",):
        expected = blastn_output(query, db, "blastn", outfmt)
        got = gblastn_output(data, query, db, "blastn", outfmt)
        parsed = _blast_parse(Blast, got)
        assert parsed == _blast_parse(Blast, expected)
        assert sum(len(hits) for _, _, _, hits in parsed) > 3
    files = {tool: _per_query_files(data, tool, "14", "blastn", query, db, {})
             for tool in ("blastn", "gblastn")}
    for name in files["blastn"]:
        if name != "res.xml":
            assert _blast_parse(Blast, files["gblastn"][name]) == \
                _blast_parse(Blast, files["blastn"][name])


def _blast_parse(Blast, text):
    records = Blast.parse(io.BytesIO(text.encode()))
    return [(record.query.id, record.query.description, len(record.query),
             [(hit.target.id, hit.target.description,
               [(hsp.score, hsp.annotations["bit score"], hsp.annotations["evalue"],
                 hsp.coordinates.tolist(), hsp[0], hsp[1])
                for hsp in hit])
              for hit in record])
            for record in records]


@needs_blast
@pytest.mark.golden
@pytest.mark.parametrize("outfmt", ["15", "16"])
def test_lower_case_masks_equal_blastn(data, tmp_path, outfmt):
    """-lcase_masking: a query with a lower-case stretch lists it; one lower case end to end
    (nothing of it searched) lists none, as blastn's reports do."""
    letters = read_fasta(EXAMPLE_DB)[0][1].tobytes().decode()
    query = tmp_path / "lower.fa"
    query.write_text(f">part partly lower case\n{letters[5000:5100]}"
                     f"{letters[5100:5160].lower()}{letters[5160:5400]}\n"
                     f">whole all lower case\n{letters[9000:9100].lower()}\n")
    expected = blastn_output(str(query), data["example"], "blastn", outfmt, "-lcase_masking")
    assert expected.count("query-masking" if outfmt == "16" else "query_masking") == \
        (2 if outfmt == "16" else 1)  # the partly masked query's only (XML2: open and close)
    got = gblastn_output(data, str(query), data["example"], "blastn", outfmt,
                         lcase_masking=True)
    assert got == expected
