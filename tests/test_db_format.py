"""Database format details: manifest, versions, sizes, lookups."""

import json

import numpy as np
import pytest

from gblastn.db import format as fmt
from gblastn.db.reader import open_db
from gblastn.db.writer import make_db
from gblastn.errors import DatabaseError, InputError


@pytest.fixture
def small_db(tmp_path):
    (tmp_path / "in.fa").write_text(">ref|NM_1.2| one\nACGTN\n>b two\nGGGG\n>c\nT\n")
    make_db([str(tmp_path / "in.fa")], str(tmp_path / "db"), title="T", parse_seqids=True,
            progress=False)
    return tmp_path / "db"


def test_manifest_and_reader_fields(small_db):
    with open_db(str(small_db)) as db:
        assert (db.title, db.num_seqs, db.total_letters, db.max_length) == ("T", 3, 10, 5)
        assert db.format_version == fmt.FORMAT_VERSION and db.name == str(small_db)
        assert db.lengths.tolist() == [5, 4, 1] and db.lengths.dtype == np.int64
        assert (db.seq_id(0), db.accession(0), db.title_of(0)) == ("ref|NM_1.2|", "NM_1.2", "one")
        assert db.defline(0) == "ref|NM_1.2| one"
        assert db.find("nm_1") == 0 and db.find("b") == 1 and db.find("lcl|c") == 2
        with pytest.raises(InputError):
            db.find("zzz")
        offsets, lengths, codes = db.ambiguities(0)
        assert (offsets.tolist(), lengths.tolist(), codes.tolist()) == ([4], [1], [15])
        assert db.blastna(0, 2, 5).tolist() == [2, 3, 14]


def test_newer_format_version_is_refused(small_db):
    path = small_db.with_suffix(".gdb") / fmt.MANIFEST
    manifest = json.loads(path.read_text())
    manifest["format_version"] = fmt.FORMAT_VERSION + 1
    path.write_text(json.dumps(manifest))
    with pytest.raises(DatabaseError, match="newer"):
        open_db(str(small_db))


def test_missing_database(tmp_path):
    with pytest.raises(DatabaseError, match="no gblastn database"):
        open_db(str(tmp_path / "nothing"))


@pytest.mark.parametrize("text,value", [("1GB", 10**9), ("500MB", 5 * 10**8), ("20kB", 20000),
                                        ("123", 123), (77, 77)])
def test_parse_size(text, value):
    assert fmt.parse_size(text) == value


def test_blocks_hold_many_sequences_and_concat(tmp_path, monkeypatch):
    monkeypatch.setattr(fmt, "BLOCK_BYTES", 64)
    (tmp_path / "in.fa").write_text("".join(f">s{i}\n{'ACGT' * (i * 7 + 1)}\n" for i in range(30)))
    make_db([str(tmp_path / "in.fa")], str(tmp_path / "db"), progress=False)
    with open_db(str(tmp_path / "db")) as db:
        (volume,) = db.volumes
        buffer, offsets = volume.concat_packed()
        assert offsets[-1] == buffer.size == sum((len("ACGT") * (i * 7 + 1) + 3) // 4 for i in range(30))
        for i in range(30):
            assert np.array_equal(buffer[offsets[i]:offsets[i + 1]], db.packed(i))
            assert db.blastna(i).tolist() == [0, 1, 2, 3] * (i * 7 + 1)
