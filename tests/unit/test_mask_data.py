"""makedb -mask_data: masking data files read in text and binary ASN.1, makeblastdb's
algorithm ids, the ranges a database stores, and bad files refused before anything is
written."""

import pytest

from gblastn.db.blast_masks import volume_masks
from gblastn.db.mask_data import MaskFile, MaskData, read_mask_file
from gblastn.db.reader import open_db
from gblastn.db.writer import make_db
from gblastn.errors import InputError, OptionsError

TEXT = """Blast-db-mask-info ::= {
  algo-id 2,
  algo-program dust,
  algo-options "window=64; level=20; linker=1",
  masks {
    masks {
      packed-int { { from 2, to 5, id local str "s1" }, { from 9, to 9, id local str "s1" } },
      int { from 0, to 3, id genbank { accession "AB000001", version 2 } }
    },
    more TRUE
  }
}
Blast-mask-list ::= {
  masks { int { from 4, to 7, id gi 42 } },
  more FALSE
}
"""


def _tlv(tag: int, *content: bytes) -> bytes:
    """An element of definite length (short form)."""
    body = b"".join(content)
    return bytes([tag, len(body)]) + body


def _indefinite(tag: int, *content: bytes) -> bytes:
    """A constructed element of indefinite length, as dustmasker writes them."""
    return bytes([tag, 0x80]) + b"".join(content) + b"\0\0"


def _ctx(number: int, *content: bytes, element=_tlv) -> bytes:
    return element(0xA0 | number, *content)


def _integer(value: int) -> bytes:
    return _tlv(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def _interval(first: int, last: int, name: str) -> bytes:
    local_str = _ctx(0, _ctx(1, _tlv(0x1A, name.encode())))
    return _tlv(0x30, _ctx(0, _integer(first)), _ctx(1, _integer(last)), _ctx(3, local_str))


def _mask_lists(element) -> bytes:
    """A Blast-db-mask-info whose masks continue in a Blast-mask-list, in BER with
    constructed elements of that kind of length."""
    def ctx(number, *content):
        return _ctx(number, *content, element=element)

    def mask_list(more: bytes, *locations: bytes) -> bytes:
        return element(0x30, ctx(0, element(0x30, *locations)), ctx(1, _tlv(0x01, more)))

    packed = ctx(4, element(0x30, _interval(2, 5, "s1"), _interval(9, 9, "s1")))
    single = ctx(3, _interval(0, 3, "s2"))
    return element(0x30, ctx(0, _integer(2)), ctx(1, _integer(10)), ctx(2, _tlv(0x1A, b"x-y")),
                   ctx(3, mask_list(b"\xff", packed))) + mask_list(b"\x00", single)


BER = _mask_lists(_tlv)


def _file(program, options, path="m"):
    return MaskFile(path, program, options, {})


def test_text_asn1_with_a_continuation(tmp_path):
    mask = read_mask_file(_write(tmp_path, "m.asnt", TEXT.encode()))
    assert (mask.program, mask.options) == (10, "window=64; level=20; linker=1")
    assert {key: value.tolist() for key, value in mask.ranges.items()} == {
        "lcl|s1": [[2, 6], [9, 10]], "gb|ab000001.2|": [[0, 4]], "gi|42": [[4, 8]]}


@pytest.mark.parametrize("element", [_tlv, _indefinite])
def test_binary_asn1_with_a_continuation(tmp_path, element):
    mask = read_mask_file(_write(tmp_path, "m.asnb", _mask_lists(element)))
    assert (mask.program, mask.options) == (10, "x-y")
    assert {key: value.tolist() for key, value in mask.ranges.items()} == {
        "lcl|s1": [[2, 6], [9, 10]], "lcl|s2": [[0, 4]]}


@pytest.mark.parametrize("content, words", [
    (b"", "Unknown encoding for mask data"), (b"<?xml", "Unknown encoding for mask data"),
    (BER[:40], "damaged mask data"), (TEXT.encode()[:300], "damaged mask data"),
    (TEXT.encode().replace(b"more FALSE", b"more TRUE"), "damaged mask data"),
    (TEXT.encode().replace(b"int { from 4, to 7, id gi 42 }",
                           b"mix { int { from 4, to 7, id gi 42 }, "
                           b"int { from 1, to 2, id gi 43 } }"),
     "Cannot get masked range Seq-id")])
def test_bad_files_are_input_errors_naming_them(tmp_path, content, words):
    path = _write(tmp_path, "bad", content)
    with pytest.raises(InputError, match=words) as error:
        read_mask_file(path)
    assert path in str(error.value)


def test_algorithm_ids_as_makeblastdb_registers_them():
    files = [_file(10, "a", "1"), _file(10, "", "2"), _file(30, "", "3"), _file(10, "b", "4"),
             _file(40, "", "5"), _file(30, "c", "6")]
    assert MaskData(files).algorithm_ids == [11, 10, 30, 12, 40, 31]
    assert MaskData(files[:2], ["mine", "yours"]).algorithm_ids == [100, 101]
    assert MaskData(files[:1], ["mine"]).algorithms == {100: ("mine", "a")}
    for refused, words in [([_file(10, "a", "1"), _file(10, "a", "1")], "Duplicate masking"),
                           ([_file(30, "", "1"), _file(30, "", "2")], "default arguments"),
                           ([_file(10, "a", "1"), _file(10, "a", "2")], "the same options"),
                           ([_file(7, "", "1")], "Invalid filtering program")]:
        with pytest.raises(OptionsError, match=words):
            MaskData(refused)


def test_the_database_stores_each_sequences_ranges(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">s1 one\n" + "ACGT" * 5 + "\n>gb|AB000001.2| two\nACGTACGT\n"
                     ">s3 three\nACGT\n")
    masks = tmp_path / "m.asnt"
    masks.write_text(TEXT)
    db_dir = make_db([str(fasta)], str(tmp_path / "db"), parse_seqids=True,
                     mask_data=str(masks), progress=False)
    with open_db(db_dir) as db:
        found = volume_masks(db.volumes[0], db)
        assert found.algorithms[11].description() == \
            "'dust', options: 'window=64; level=20; linker=1'"
        assert [found.ranges(local, 11).tolist() for local in range(3)] == [
            [[2, 6], [9, 10]], [[0, 4]], []]


def test_a_range_past_its_sequence_is_refused_and_nothing_written(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">s1 one\nACGTACGT\n")
    masks = tmp_path / "m.asnt"
    masks.write_text(TEXT)
    with pytest.raises(InputError, match="Masked data offsets out of bounds"):
        make_db([str(fasta)], str(tmp_path / "db"), parse_seqids=True, mask_data=str(masks),
                progress=False)
    assert not (tmp_path / "db.gdb" / "manifest.json").exists()


def _write(folder, name: str, content: bytes) -> str:
    (folder / name).write_bytes(content)
    return str(folder / name)


def test_option_refusals_in_makeblastdbs_words(tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">s1 one\nACGTACGTAC\n")
    masks = _write(tmp_path, "m.asnt", TEXT.encode())
    for kwargs, words in [({"mask_id": "mine"}, 'Argument "mask_data". Must be specified'),
                          ({"mask_data": f"{masks},{masks}", "mask_id": "mine"},
                           "the size of mask_id does not match that of mask_data."),
                          ({"mask_data": ","}, "no files were specified")]:
        with pytest.raises(OptionsError, match=words):
            make_db([str(fasta)], str(tmp_path / "db"), progress=False, **kwargs)
    assert not (tmp_path / "db.gdb").exists()
