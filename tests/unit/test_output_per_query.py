"""-outfmt 13 and 14 write a file per query beside -out: refused without a file name or
with -subject, put in place with -out at the end, and none of them left by a failed run.
The formats gblastn does not write are refused by number."""

import os

import pytest

from reliability import World, assert_one_line_error, gblastn, search


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return World(tmp_path_factory.mktemp("per_query_outputs"))


@pytest.mark.parametrize("outfmt,out", [("13", None), ("14", "-"), ("13", "-")])
def test_a_file_per_query_needs_a_file_name(world, outfmt, out):
    args = ["-query", world.query, "-outfmt", outfmt] + (["-out", out] if out else [])
    error = assert_one_line_error(search(world, *args), 2)
    assert f"-outfmt {outfmt}" in error and "-out" in error


@pytest.mark.parametrize("outfmt", ["13", "14", "15", "16"])
def test_blastoutput2_reports_refuse_subject(world, tmp_path, outfmt):
    done = gblastn("search", "-device", "cpu", "-query", world.query, "-outfmt", outfmt,
                   "-out", str(tmp_path / "res"), "-subject", world.query)
    error = assert_one_line_error(done, 2)
    assert f"-outfmt {outfmt}" in error and "-subject" in error
    done = search(world, "-query", world.query, "-outfmt", outfmt, "-out",
                  str(tmp_path / "res"))
    assert done.returncode == 0, done.stderr


def test_out_dir_names_each_query_s_file_after_its_output(world, tmp_path):
    query = tmp_path / "q.fa"
    query.write_text(open(world.query).read())
    (tmp_path / "list.txt").write_text("q.fa\n")
    done = search(world, "-query_list", str(tmp_path / "list.txt"), "-out_dir",
                  str(tmp_path / "out"), "-outfmt", "14")
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["q.out", "q.out_1.xml", "q.out_2.xml"]
    listing = (tmp_path / "out" / "q.out").read_text()
    assert '<xi:include href="q.out_1.xml"/>' in listing


@pytest.mark.parametrize("outfmt", ["13", "14"])
def test_a_failed_run_leaves_none_of_the_queries_files(world, tmp_path, outfmt):
    # the first listed file is searched, and its queries' files made, before the second
    # is found bad
    (tmp_path / "good.fa").write_text(open(world.query).read())
    (tmp_path / "bad.fa").write_text(">bad\n..,,..\nACGT\n")
    (tmp_path / "list.txt").write_text("good.fa\nbad.fa\n")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "other.txt").write_text("not ours\n")
    done = search(world, "-query_list", str(tmp_path / "list.txt"), "-out_dir", str(kept),
                  "-outfmt", outfmt)
    assert_one_line_error(done, 2)
    assert os.listdir(kept) == ["other.txt"]


@pytest.mark.parametrize("outfmt,words", [("1", "output format 1 (query-anchored) is not"),
                                          ("4", "output format 4 (query-anchored) is not"),
                                          ("8", "output format 8 is not")])
def test_formats_gblastn_does_not_write_are_refused(outfmt, words):
    from gblastn.errors import OptionsError
    from gblastn.options import make_options
    from gblastn.output.formats import output_format

    with pytest.raises(OptionsError) as refused:
        output_format(outfmt, make_options("megablast"), "db")
    assert words in str(refused.value)
    assert "0, 5, 6, 7, 10, 13, 14, 15, 16 or 17" in str(refused.value)
