"""The deflines of a BLAST+ database: one Blast-def-line-set per sequence in its volume's
.nhr, ASN.1 in BER (asn/blastdb.asn of the NCBI toolkit):

    Blast-def-line-set ::= SEQUENCE OF Blast-def-line
    Blast-def-line ::= SEQUENCE { title [0] VisibleString OPTIONAL,
                                  seqid [1] SEQUENCE OF Seq-id,
                                  taxid [2] INTEGER OPTIONAL, ... }

Seq-id is a CHOICE (seqloc.asn), each alternative an explicit context tag: local [0]
Object-id, gibbsq [1], gibbmt [2], giim [3], genbank [4] Textseq-id, embl [5], pir [6],
swissprot [7], patent [8], other (RefSeq) [9], general [10] Dbtag, gi [11] INTEGER, ddbj [12],
prf [13], pdb [14], tpg [15], tpe [16], tpd [17], gpipe [18], named-annot-track [19].
makeblastdb writes indefinite lengths (0x80 ... 00 00); definite ones are read too.

Without -parse_seqids makeblastdb gives every sequence the id gnl|BL_ORD_ID|<oid> and keeps the
whole FASTA defline as the title; blastn then shows the title's first token as the id.
"""

from __future__ import annotations

from typing import NamedTuple

UNIVERSAL_INTEGER = 0x02
UNIVERSAL_VISIBLE_STRING = 0x1A
UNIVERSAL_SEQUENCE = 0x30
CONTEXT_CONSTRUCTED = 0xA0
ORDINAL_ID_DB = "BL_ORD_ID"

# FASTA prefixes of the Seq-id alternatives held in a Textseq-id (acc.version and name)
_TEXT_IDS = {4: "gb", 5: "emb", 6: "pir", 7: "sp", 9: "ref", 12: "dbj", 13: "prf", 15: "tpg",
             16: "tpe", 17: "tpd", 18: "gpp", 19: "nat"}
_NUMBER_IDS = {1: "bbs", 2: "bbm", 11: "gi"}
LOCAL, GIIM, PATENT, GENERAL, PDB = 0, 3, 8, 10, 14


class BerError(ValueError):
    """Bytes that are not the BER of a Blast-def-line-set."""


class Defline(NamedTuple):
    """One Blast-def-line: its title, its Seq-ids as FASTA strings ('gi|12345',
    'gb|AB000001.2|', 'gnl|BL_ORD_ID|0') and its taxid (0 when it has none)."""

    title: str
    seq_ids: tuple
    taxid: int = 0

    @property
    def parsed(self) -> bool:
        """Whether makeblastdb read the ids from the FASTA defline (-parse_seqids)."""
        return bool(self.seq_ids) and not self.seq_ids[0].startswith(f"gnl|{ORDINAL_ID_DB}|")

    def text(self) -> str:
        """The defline as the FASTA record carried it, as far as BLAST keeps it: the ids in
        FASTA form, then the title; the title alone when the ids were not parsed."""
        if not self.parsed:
            return self.title
        ids = "|".join(self.seq_ids)
        return f"{ids} {self.title}" if self.title else ids


def ber_element(data: bytes, pos: int, end: int) -> tuple:
    """((tag, content), next position): content is the bytes of a primitive element, the
    list of elements of a constructed one."""
    if pos + 2 > end:
        raise BerError("element runs past its end")
    tag, size = data[pos], data[pos + 1]
    pos += 2
    if tag & 0x1F == 0x1F:
        raise BerError("multi-byte tag")
    constructed = bool(tag & 0x20)
    if size == 0x80:
        if not constructed:
            raise BerError("indefinite length of a primitive element")
        children = []
        while True:
            if pos + 2 > end:
                raise BerError("missing end of contents")
            if data[pos] == 0 and data[pos + 1] == 0:
                return (tag, children), pos + 2
            child, pos = ber_element(data, pos, end)
            children.append(child)
    if size & 0x80:
        width = size & 0x7F
        if width == 0 or width > 4 or pos + width > end:
            raise BerError("bad length")
        size = int.from_bytes(data[pos:pos + width], "big")
        pos += width
    if pos + size > end:
        raise BerError("element runs past its end")
    if not constructed:
        return (tag, bytes(data[pos:pos + size])), pos + size
    children, inner = [], pos
    while inner < pos + size:
        child, inner = ber_element(data, inner, pos + size)
        children.append(child)
    return (tag, children), pos + size


def ber_constructed(element, tag: int) -> list:
    found, content = element
    if found != tag or not isinstance(content, list):
        raise BerError(f"expected tag {tag:#x}, found {found:#x}")
    return content


def ber_explicit(element) -> tuple:
    """The one element an explicit context tag wraps."""
    tag, content = element
    if not isinstance(content, list) or len(content) != 1:
        raise BerError(f"tag {tag:#x} does not wrap one element")
    return content[0]


def ber_fields(element) -> dict:
    """A SEQUENCE's fields by context tag number, each the element it wraps."""
    return {tag & 0x1F: ber_explicit((tag, content))
            for tag, content in ber_constructed(element, UNIVERSAL_SEQUENCE)}


def ber_string(element) -> str:
    tag, content = element
    if tag != UNIVERSAL_VISIBLE_STRING or isinstance(content, list):
        raise BerError("expected a VisibleString")
    return content.decode("utf-8", "replace")


def ber_integer(element) -> int:
    tag, content = element
    if tag != UNIVERSAL_INTEGER or isinstance(content, list) or not content:
        raise BerError("expected an INTEGER")
    return int.from_bytes(content, "big", signed=True)


def _object_id(element) -> str:
    """Object-id ::= CHOICE { id [0] INTEGER, str [1] VisibleString }"""
    tag = element[0]
    inner = ber_explicit(element)
    return str(ber_integer(inner)) if tag == CONTEXT_CONSTRUCTED else ber_string(inner)


def _text_id(prefix: str, element) -> str:
    """Textseq-id ::= SEQUENCE { name [0], accession [1], release [2], version [3] }"""
    fields = ber_fields(element)
    accession = ber_string(fields[1]) if 1 in fields else ""
    if accession and 3 in fields and ber_integer(fields[3]) > 0:
        accession += f".{ber_integer(fields[3])}"
    name = ber_string(fields[0]) if 0 in fields else ""
    return f"{prefix}|{accession}|{name}"


def _patent_id(element) -> str:
    """Patent-seq-id ::= SEQUENCE { seqid [0] INTEGER, cit [1] Id-pat }, Id-pat ::=
    SEQUENCE { country [0], id [1] CHOICE { number [0], app-number [1] }, doc-type [2] }"""
    fields = ber_fields(element)
    citation = ber_fields(fields[1])
    number_choice = citation[1]
    prefix = "pat" if number_choice[0] == CONTEXT_CONSTRUCTED else "pgp"
    return (f"{prefix}|{ber_string(citation[0])}|{ber_string(ber_explicit(number_choice))}|"
            f"{ber_integer(fields[0])}")


def _pdb_id(element) -> str:
    """PDB-seq-id ::= SEQUENCE { mol [0], chain [1] INTEGER DEFAULT 32, rel [2], chain-id [3] }"""
    fields = ber_fields(element)
    if 3 in fields:
        chain = ber_string(fields[3])
    else:
        chain = chr(ber_integer(fields[1])) if 1 in fields else ""
    return f"pdb|{ber_string(fields[0])}|{chain.strip()}"


def seq_id_text(element) -> str:
    """A Seq-id in FASTA form, as CSeq_id::AsFastaString writes it."""
    choice = element[0] - CONTEXT_CONSTRUCTED
    inner = ber_explicit(element)
    if choice in _TEXT_IDS:
        return _text_id(_TEXT_IDS[choice], inner)
    if choice in _NUMBER_IDS:
        return f"{_NUMBER_IDS[choice]}|{ber_integer(inner)}"
    if choice == LOCAL:
        return "lcl|" + _object_id(inner)
    if choice == GENERAL:
        fields = ber_fields(inner)
        return f"gnl|{ber_string(fields[0])}|{_object_id(fields[1])}"
    if choice == GIIM:
        return f"gim|{ber_integer(ber_fields(inner)[0])}"
    if choice == PATENT:
        return _patent_id(inner)
    if choice == PDB:
        return _pdb_id(inner)
    raise BerError(f"unknown Seq-id choice {choice}")


def decode_deflines(data: bytes) -> list[Defline]:
    """The Blast-def-lines of one sequence's header bytes; BerError when damaged."""
    try:
        top, end = ber_element(data, 0, len(data))
        deflines = []
        for entry in ber_constructed(top, UNIVERSAL_SEQUENCE):
            fields = ber_fields(entry)
            title = ber_string(fields[0]) if 0 in fields else ""
            ids = ber_constructed(fields[1], UNIVERSAL_SEQUENCE) if 1 in fields else []
            taxid = ber_integer(fields[2]) if 2 in fields else 0
            deflines.append(Defline(title, tuple(seq_id_text(i) for i in ids), taxid))
    except (KeyError, IndexError, TypeError) as exc:
        raise BerError(f"incomplete Blast-def-line ({exc})") from None
    if not deflines:
        raise BerError("no Blast-def-line")
    return deflines
