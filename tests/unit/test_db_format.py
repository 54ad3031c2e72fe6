"""Database format details: manifest fields and versions, size syntax, id lookups (ids
sharing a hash, duplicates across volumes), and volumes of many LMDB blocks read in place,
a damaged block found there."""

import json
import os

import numpy as np
import pytest

from gblastn.alphabet import decode_blastna
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


def _packed_sizes(db, volume):
    return [(int(volume.lengths[i]) + 3) // 4 for i in range(volume.num_seqs)]


def test_blocks_hold_many_sequences_and_concat(tmp_path, monkeypatch):
    monkeypatch.setattr(fmt, "BLOCK_BYTES", 64)
    (tmp_path / "in.fa").write_text("".join(f">s{i}\n{'ACGT' * (i * 7 + 1)}\n" for i in range(30)))
    make_db([str(tmp_path / "in.fa")], str(tmp_path / "db"), progress=False)
    with open_db(str(tmp_path / "db")) as db:
        (volume,) = db.volumes
        buffer, offsets = volume.concat_packed()
        assert offsets[-1] == buffer.size and not buffer.flags.writeable
        for i, size in enumerate(_packed_sizes(db, volume)):
            assert np.array_equal(buffer[offsets[i]:offsets[i] + size], db.packed(i))
            assert db.blastna(i).tolist() == [0, 1, 2, 3] * (i * 7 + 1)


def _long_blocks_db(tmp_path, monkeypatch):
    """A volume of several blocks, each long enough for LMDB to keep it on pages of its own."""
    monkeypatch.setattr(fmt, "BLOCK_BYTES", 6_000)
    rng = np.random.default_rng(3)
    records = ["".join(rng.choice(list("ACGT"), 9_000 + 1_000 * i)) for i in range(12)]
    (tmp_path / "in.fa").write_text("".join(f">s{i}\n{seq}\n" for i, seq in enumerate(records)))
    make_db([str(tmp_path / "in.fa")], str(tmp_path / "db"), progress=False)
    return tmp_path / "db", records


def test_blocks_used_where_the_file_holds_them(tmp_path, monkeypatch):
    """A volume of several blocks is not copied: its sequences are read in the volume file's
    own read-only map, each where LMDB stores it, and they are the sequences LMDB reads."""
    path, records = _long_blocks_db(tmp_path, monkeypatch)
    with open_db(str(path)) as db:
        (volume,) = db.volumes
        assert volume._block_crc.size > 3
        buffer, offsets = volume.concat_packed()
        assert not buffer.flags.owndata and not buffer.flags.writeable
        assert buffer.size < sum(_packed_sizes(db, volume)) + volume._block_crc.size * 8192
        for i, size in enumerate(_packed_sizes(db, volume)):
            block = volume._raw_block(int(volume._block_of[i]))
            start = int(volume._block_offset[i])
            stored = np.frombuffer(block, dtype=np.uint8)[start:start + size]
            assert np.array_equal(buffer[offsets[i]:offsets[i] + size], stored)
            assert decode_blastna(db.blastna(i)) == records[i]


def _resident_kib(path) -> int:
    """The KiB of the file at `path` resident in this process's maps, summed over them."""
    inode, total, counting = str(os.stat(path).st_ino), 0, False
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                counting = fields[4] == inode
            elif counting and fields[0] == "Rss:":
                total += int(fields[1])
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps")
def test_a_volume_used_in_place_is_resident_once(tmp_path, monkeypatch):
    """LMDB hands its values out with their pages faulted in, and the in-place span maps
    the same file again: once the span is made, only the span holds the volume's pages (a
    search's peak RSS would count them twice)."""
    monkeypatch.setattr(fmt, "BLOCK_BYTES", 60_000)
    rng = np.random.default_rng(5)
    records = ["".join(rng.choice(list("ACGT"), 200_000)) for _ in range(8)]
    (tmp_path / "in.fa").write_text("".join(f">s{i}\n{seq}\n" for i, seq in enumerate(records)))
    make_db([str(tmp_path / "in.fa")], str(tmp_path / "db"), progress=False)
    (volume_file,) = (tmp_path / "db.gdb").glob("gen-*/*.mdb")
    with open_db(str(tmp_path / "db")) as db:
        (volume,) = db.volumes
        buffer, _ = volume.concat_packed()
        assert not buffer.flags.owndata and volume._block_crc.size == 8
        packed_kib = buffer.size // 1024
        assert packed_kib <= _resident_kib(volume_file) < packed_kib * 5 // 4
        assert decode_blastna(db.blastna(3)) == records[3]


def test_a_damaged_block_is_found_in_place(tmp_path, monkeypatch):
    path, records = _long_blocks_db(tmp_path, monkeypatch)
    with open_db(str(path)) as db:
        tail = db.packed(7)[-64:].tobytes()
    (volume_file,) = path.with_suffix(".gdb").glob("gen-*/*.mdb")
    data = bytearray(volume_file.read_bytes())
    at = data.find(tail)
    assert at > 0
    data[at + 10] ^= 0xFF
    volume_file.write_bytes(bytes(data))
    with open_db(str(path)) as db:
        with pytest.raises(DatabaseError, match="checksum mismatch"):
            db.volumes[0].concat_packed()

def test_a_duplicate_id_in_a_later_volume_is_found(tmp_path):
    records = "".join(f">s{i} x\n{'ACGT' * 200}\n" for i in range(6)) + f">S2 again\n{'GG' * 50}\n"
    (tmp_path / "in.fa").write_text(records)
    with pytest.raises(InputError, match=r"in.fa:13: duplicate sequence id 'S2' "
                                         r"\(first seen at .*in.fa:5\)"):
        make_db([str(tmp_path / "in.fa")], str(tmp_path / "db"), parse_seqids=True,
                max_file_sz="500B", progress=False)


def test_ids_sharing_a_hash_are_told_apart(tmp_path, monkeypatch):
    """Every id under one hash: no false duplicate, and each lookup finds its own sequence."""
    monkeypatch.setattr(fmt, "id_hash", lambda identifier: 42)
    (tmp_path / "in.fa").write_text("".join(f">id{i} t\n{'ACGT' * (i + 1)}\n" for i in range(5)))
    make_db([str(tmp_path / "in.fa")], str(tmp_path / "db"), parse_seqids=True,
            max_file_sz="200B", progress=False)
    with open_db(str(tmp_path / "db")) as db:
        assert len(db.volumes) > 1
        assert [db.find(f"ID{i}") for i in range(5)] == list(range(5))
        with pytest.raises(InputError, match="no sequence with id 'id9'"):
            db.find("id9")
