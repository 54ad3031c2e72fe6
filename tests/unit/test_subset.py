"""-seqidlist's parts: the ids a list names (text and binary), the accession a defline gives,
the subset a database is restricted to and its statistics, through every driver and the
API, and the errors for lists that cannot be read."""

import struct

import numpy as np
import pytest
from hypothesis import given, strategies as st

from golden import random_dna, write_fasta
from gblastn.db.reader import open_db
from gblastn.db.subset import accession_of, approximate_lengths, read_id_list, restrict
from gblastn.db.writer import make_db
from gblastn.errors import DatabaseError, InputError, OptionsError
from gblastn.options import make_options


def _binary_list(ids: list, title: bytes = b"t", date: bytes = b"today") -> bytes:
    """blastdb_aliastool's binary form of `ids`."""
    body = b"".join((bytes([len(i)]) + i if len(i) < 0xFF else
                     b"\xff" + struct.pack("<I", len(i)) + i) for i in ids)
    head_size = 1 + 8 + 8 + 4 + len(title) + 1 + len(date) + 8
    return (b"\x00" + struct.pack("<QQI", head_size + len(body), len(ids), len(title)) +
            title + bytes([len(date)]) + date + bytes(8) + body)


def test_a_text_list_takes_each_lines_first_word_as_an_accession(tmp_path):
    path = tmp_path / "list.txt"
    path.write_text(">NC_1.1 first\n\n  gb|AB2.2|\textra\nlcl|three\ngnl|db|tag\n"
                    "pdb|1XYZ|B\ngi|5\n12|gi|x\n")
    keys = read_id_list(str(path))
    assert keys.accessions == ["nc_1.1", "ab2.2", "three", "db:tag", "1xyz_b"]
    assert keys.local == {"NC_1.1", "three"}  # a local id is named as written


@given(st.lists(st.binary(min_size=1, max_size=300).filter(lambda b: b"\x00" not in b[:1]),
                max_size=5))
def test_a_binary_list_gives_its_ids(tmp_path_factory, ids):
    path = tmp_path_factory.mktemp("binary") / "list.bsl"
    path.write_bytes(_binary_list(ids))
    assert read_id_list(str(path)).accessions == [i.decode("latin-1").lower() for i in ids]


def test_a_damaged_binary_list_is_an_input_error(tmp_path):
    path = tmp_path / "list.bsl"
    path.write_bytes(_binary_list([b"NC_1.1", b"AB2"])[:-2])
    with pytest.raises(InputError, match="damaged binary seqidlist"):
        read_id_list(str(path))
    with pytest.raises(InputError, match="cannot read the seqidlist"):
        read_id_list(str(tmp_path / "missing"))


@pytest.mark.parametrize("defline,expected", [
    ("ref|NC_1.1| title", ("nc_1.1", False)), ("gi|7|gb|AB2.2| t", ("ab2.2", True)),
    ("gi|7 t", (None, True)), ("lcl|x t", ("x", False)), ("AB9.1 bare", ("ab9.1", False)),
    ("sp|P1.1|NAME t", ("p1.1", False))])
def test_the_accession_of_a_defline(defline, expected):
    assert accession_of(defline) == expected


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    folder = tmp_path_factory.mktemp("subset")
    letters = random_dna(np.random.default_rng(3), 81)
    # one sequence four times, of 41, 82, 20 and 28 letters
    fasta = write_fasta(folder / "db.fa", [("ref|NC_1.1| a", letters[:41]),
                                           ("gi|9|gb|AB2.2| b", np.concatenate([letters,
                                                                                letters[:1]])),
                                           ("gi|8 c", letters[:20]), ("lcl|d d", letters[:28])])
    (folder / "list").write_text("NC_1\nAB2.2\n")
    return folder, str(make_db([fasta], str(folder / "db"), parse_seqids=True,
                               progress=False, warn=lambda message: None))


def test_the_subset_and_its_statistics(database):
    folder, path = database
    with open_db(path) as db:
        # whole bytes, then the ordinal's low bits for the last byte's bases
        assert approximate_lengths(db).tolist() == [40, 81, 22, 31]
        listed = restrict(db, make_options(seqidlist=str(folder / "list")))
        assert listed.searched.tolist() == [True, True, False, False]
        assert (listed.stats_num_seqs, listed.stats_letters) == (2, 121)
        assert (listed.num_seqs, listed.total_letters) == (db.num_seqs, db.total_letters)
        others = restrict(db, make_options(negative_seqidlist=str(folder / "list")))
        # a GI-only sequence is not searched, but counted; one with a GI besides, named by
        # its accession with the version, is not counted
        assert others.searched.tolist() == [False, False, False, True]
        assert (others.stats_num_seqs, others.stats_letters) == (2, 22 + 31)
        assert restrict(db, make_options()) is db


def test_a_database_without_parsed_ids_is_refused(database, tmp_path):
    folder, _ = database
    plain = make_db([str(folder / "db.fa")], str(tmp_path / "plain"), progress=False,
                    warn=lambda message: None)
    with open_db(plain) as db, pytest.raises(DatabaseError, match="no accession info"):
        restrict(db, make_options(seqidlist=str(folder / "list")))


def test_both_lists_together_are_refused():
    with pytest.raises(OptionsError, match="Incompatible with argument:  `negative_seqidlist'"):
        make_options(seqidlist="a", negative_seqidlist="b")


def test_the_api_and_both_modes_search_the_subset(database):
    from gblastn import search
    from gblastn.drivers.run import OutputSpec, RunSettings, run_search

    folder, path = database
    query = write_fasta(folder / "q.fa", [("q", random_dna(np.random.default_rng(3), 81))])
    kept = search(query, path, task="blastn-short", seqidlist=str(folder / "list"))
    assert {hit.id for hit in kept[0].hits} <= {"ref|NC_1.1|", "gi|9|gb|AB2.2|"}
    assert kept[0].hits
    dropped = search(query, path, task="blastn-short",
                     negative_seqidlist=str(folder / "list"))
    assert not {hit.id for hit in dropped[0].hits} & {"ref|NC_1.1|", "gi|9|gb|AB2.2|"}
    options = make_options("blastn-short", seqidlist=str(folder / "list"))
    texts = []
    for mode in ("serial", "pipeline"):
        out = folder / f"{mode}.out"
        run_search([query], path, options, OutputSpec("6", str(out), None, path),
                   settings=RunSettings(mode))
        texts.append(out.read_text())
    assert texts[0] == texts[1] and texts[0]
