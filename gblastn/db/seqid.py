"""Sequence identifiers as BLAST shows them (spec §8 "IDs").

Without -parse_seqids a sequence's id is the first token of its defline, verbatim, and its
title the whole defline. With -parse_seqids the first token is read as a FASTA-style Seq-id
('gi|12345|gb|AB000001.2|', 'ref|NM_0001.1|', 'lcl|x', or a bare accession whose database is
guessed from its prefix, as NCBI does): `seq_id` is what blastn prints as sseqid, `accession`
what it prints as saccver (and blastdbcmd after '>'), and the title is the rest of the defline.
"""

import re

# Seq-id types and the number of '|'-separated fields each takes
_FIELDS = {"lcl": 1, "gi": 1, "bbs": 1, "bbm": 1, "gim": 1, "gnl": 2, "pdb": 2, "pat": 3,
           "pgp": 3, "gb": 2, "emb": 2, "dbj": 2, "ref": 2, "tpg": 2, "tpe": 2, "tpd": 2,
           "gpp": 2, "nat": 2, "sp": 2, "tr": 2, "pir": 2, "prf": 2, "oth": 2}
_ACCESSION_TYPES = {"gb", "emb", "dbj", "ref", "tpg", "tpe", "tpd", "gpp", "nat", "sp", "tr",
                    "pir", "prf", "oth"}

# Bare accession prefixes by database (INSDC assignments; the rest of INSDC is GenBank).
_EMBL_2 = set("AJ AL AM AN AX BN BX CQ CR CS CT CU FB FM FN FO FP FQ FR GM GN HA HB HC HD HE HF "
              "HG HH HI JA JB JC JD JE LK LL LM LN LO LP LQ LR LS LT MP MQ MR MS OA OB OC OD OE "
              "OU OV OW OX OY OZ".split())
_DDBJ_2 = set("AB AG AK AP AT AU AV BA BB BD BJ BP BR BS BW BY CI CJ DA DB DC DD DE DF DG DH DI "
              "DJ DK DL DM FS FT FU FV FW FX FY FZ GA GB HT HU HV HW HX HY HZ LA LB LC LD LE LF "
              "LG LH LI LJ LU LV LX LY LZ MA MB MC MD ME OF OG OH OI OJ PA PB PC PD PE".split())
_EMBL_1, _DDBJ_1 = set("AFVXYZ"), set("CDE")
_INSDC = re.compile(r"^(?:[A-Z]\d{5}|[A-Z]{2}\d{6}|[A-Z]{2}\d{8}|[A-Z]{4,6}\d{8,10})(?:\.\d+)?$")
_REFSEQ = re.compile(r"^[A-Z]{2}_[A-Z0-9]+(?:\.\d+)?$")


def _guess_type(token: str) -> str | None:
    """Database of a bare accession, or None when the token is not an accession."""
    if _REFSEQ.match(token):
        return "ref"
    if not _INSDC.match(token):
        return None
    letters = re.match(r"^[A-Z]+", token).group(0)
    if len(letters) == 1:
        return "emb" if letters in _EMBL_1 else "dbj" if letters in _DDBJ_1 else "gb"
    if len(letters) == 2:
        return "emb" if letters in _EMBL_2 else "dbj" if letters in _DDBJ_2 else "gb"
    first = letters[0]  # whole-genome-shotgun style prefixes
    return "dbj" if first in "BEGI" else "emb" if first in "CFHOU" else "gb"


def _parse_fasta_ids(token: str) -> list[tuple[str, list[str]]] | None:
    """'gi|1|gb|X.1|' -> [('gi', ['1']), ('gb', ['X.1', ''])]; None if not FASTA-style."""
    parts = token.split("|")
    ids, i = [], 0
    while i < len(parts):
        kind = parts[i].lower()
        if kind not in _FIELDS:
            return None
        width = _FIELDS[kind]
        fields = parts[i + 1:i + 1 + width]
        # a text id may give its name alone (pir||NAME, prf||NAME)
        if not fields or not (fields[0] or (kind in _ACCESSION_TYPES and len(fields) > 1
                                            and fields[1])):
            return None
        fields += [""] * (width - len(fields))
        ids.append((kind, fields))
        i += 1 + width
    return ids or None


def split_defline(defline: str) -> tuple[str, str]:
    """(first token, rest of the line without leading blanks)."""
    parts = defline.strip().split(None, 1)
    if not parts:
        return "", ""
    return parts[0], parts[1] if len(parts) > 1 else ""


def ids_parsed(db, ordinal: int) -> bool:
    """Whether a subject's ids were parsed (makeblastdb -parse_seqids): its own volume's
    say where one -db value names databases made with and without."""
    at = getattr(db, "ids_parsed_at", None)
    return at(ordinal) if at is not None else bool(getattr(db, "parse_seqids", False))


def describe(defline: str, parse_seqids: bool) -> tuple[str, str, str]:
    """(seq_id, accession, title) of a defline, as BLAST shows them: the title after the
    ids keeps its trailing blanks, as makeblastdb stores it."""
    token, rest = split_defline(defline)
    if not parse_seqids:
        return token, token, defline
    if rest:
        rest = defline.lstrip().split(None, 1)[1]
    ids = _parse_fasta_ids(token) if "|" in token else None
    if ids is None:
        kind = _guess_type(token)
        if kind is None:
            return token, token, rest
        return f"{kind}|{token}|", token, rest
    if len(ids) == 1 and ids[0][0] == "lcl":
        return ids[0][1][0], ids[0][1][0], rest
    seq_id = "|".join(kind + "|" + "|".join(fields) for kind, fields in ids)
    return seq_id, _best_accession(ids), rest


# makeblastdb -parse_seqids reads a FASTA title whose deflines are separated by ^A as one
# sequence's several deflines (a Blast-def-line-set); gblastn stores them joined by it
DEFLINE_SEPARATOR = "\x01"


def _has_gi(defline: str) -> bool:
    token, _ = split_defline(defline)
    ids = _parse_fasta_ids(token) if "|" in token else None
    return any(kind == "gi" for kind, _ in ids or [])


def primary_defline(deflines: list[str], parse_seqids: bool) -> str:
    """The defline whose ids a BLAST alignment names its subject by (sseqid, sacc, the
    pairwise description, SAM): the first with a GI, else the first."""
    if parse_seqids:
        for defline in deflines:
            if _has_gi(defline):
                return defline
    return deflines[0]


def describe_set(deflines: list[str], parse_seqids: bool) -> tuple[str, str, str]:
    """(seq_id, accession, title) of a sequence's deflines, as blastn's sseqid, saccver and
    stitle give them: the ids of the primary defline, the title of the first."""
    seq_id, accession, _ = describe(primary_defline(deflines, parse_seqids), parse_seqids)
    return seq_id, accession, describe(deflines[0], parse_seqids)[2]


def described_by_ordinal(described: tuple, ordinal: int, parse_seqids: bool) -> tuple:
    """describe_set's (seq_id, accession, title), where a database without parsed ids
    holds a defline without an id: makeblastdb's ordinal id, gnl|BL_ORD_ID|N (accession
    BL_ORD_ID:N), as blastn's tabular columns give it."""
    if described[0] or parse_seqids:
        return described
    return f"gnl|BL_ORD_ID|{ordinal}", f"BL_ORD_ID:{ordinal}", described[2]


def _ids_of(token: str) -> list[tuple[str, list[str]]]:
    """The Seq-ids -parse_seqids reads off a defline's first token: FASTA-style ids, else a
    bare accession of the database its prefix names, else a local id."""
    ids = _parse_fasta_ids(token) if "|" in token else None
    if ids is not None:
        return ids
    kind = _guess_type(token)
    return [(kind, [token, ""])] if kind is not None else [("lcl", [token])]


def fasta_id_text(defline: str) -> str:
    """A parsed defline's ids as blastn's XML Hit_def writes the deflines after the first:
    the GI (gi|N|) before the first other id, or before itself when it is the only one."""
    token, _ = split_defline(defline)
    ids = _ids_of(token)
    gi = next((fields[0] for kind, fields in ids if kind == "gi"), None)
    kind, fields = next(((kind, fields) for kind, fields in ids if kind != "gi"), ids[0])
    return (f"gi|{gi}|" if gi is not None else "") + "|".join([kind] + fields)


def _best_accession(ids) -> str:
    for kind, fields in ids:
        if kind in _ACCESSION_TYPES:
            return fields[0] or fields[1]  # a name alone stands for the accession
    for kind, fields in ids:
        if kind == "gnl":
            return f"{fields[0]}:{fields[1]}"
        if kind == "lcl":
            return fields[0]
        if kind == "pdb":  # a PDB id's accession names its chain: 1ABC_A
            return f"{fields[0]}_{fields[1]}" if fields[1] else fields[0]
    return ids[0][1][0]


def lookup_keys(defline: str, parse_seqids: bool) -> set[str]:
    """Every string that names this sequence for dbcmd -entry (compared lower-cased), of
    each of its deflines."""
    if DEFLINE_SEPARATOR in defline:
        return set().union(*(lookup_keys(part, parse_seqids)
                             for part in defline.split(DEFLINE_SEPARATOR)))
    token, _ = split_defline(defline)
    if not token:
        return set()
    keys = {token}
    if not parse_seqids:
        return {k.lower() for k in keys}
    seq_id, accession, _ = describe(defline, True)
    keys |= {seq_id, accession, accession.split(".")[0]}
    ids = _parse_fasta_ids(token) if "|" in token else None
    for kind, fields in ids or []:
        if kind == "gnl":
            continue
        keys.add(f"{kind}|{fields[0]}")
        keys.add(fields[0])
        if kind == "lcl":
            keys.add(f"lcl|{fields[0]}")
    if ids is None and _guess_type(token) is None:
        keys.add(f"lcl|{token}")
    return {k.lower() for k in keys if k}


def record_seq_ids(defline: str, parse_seqids: bool, record: int) -> list[str]:
    """The Seq-ids makeblastdb gives a FASTA record, in FASTA form as CSeq_id::AsFastaString
    writes them, lower-cased: with -parse_seqids those of the defline's first token (a bare
    accession typed by its prefix, another token a local id); without, 'lcl|N', N the
    record's place in its file (from 1, records without letters counted). Masking data
    (makedb -mask_data) names sequences by these."""
    if not parse_seqids:
        return [f"lcl|{record}"]
    token, _ = split_defline(defline)
    ids = _parse_fasta_ids(token) if "|" in token else None
    if ids is None:
        kind = _guess_type(token)
        ids = [(kind, [token, ""])] if kind is not None else [("lcl", [token])]
    return [(kind + "|" + "|".join(fields)).lower() for kind, fields in ids]


def duplicate_key(defline: str) -> str:
    """What makeblastdb -parse_seqids compares to find duplicates: the primary id."""
    seq_id, accession, _ = describe(defline, True)
    return seq_id.lower()


def _map_key(kind: str, fields: list[str]) -> str:
    """What makeblastdb's taxid map compares of one Seq-id (its content label): a GI's
    number, an accession without its version (in capitals: accessions match whatever
    their case), a local id's name, a general id's tag."""
    if kind in _ACCESSION_TYPES:
        accession = fields[0].upper()
        return accession.rsplit(".", 1)[0] if re.search(r"\.\d+$", accession) else accession
    if kind == "gnl":
        return fields[1]
    if kind == "pdb":
        return f"{fields[0]}_{fields[1]}" if fields[1] else fields[0]
    return fields[0]


def taxid_map_key(text: str) -> str:
    """The key of an id in a -taxid_map file, as makeblastdb reads it."""
    if text.isdigit():
        return text
    ids = _parse_fasta_ids(text) if "|" in text else None
    if ids is not None:
        return _map_key(*ids[0]) if len(ids) == 1 else ""
    kind = _guess_type(text) or _guess_type(text.upper())
    return _map_key(kind, [text]) if kind is not None else text


def taxid_keys(defline: str) -> list[str]:
    """The keys of a -parse_seqids defline's ids that a -taxid_map is searched for, in
    order: each id's, and that key up to its first '.' (makeblastdb's second try)."""
    token, _ = split_defline(defline)
    ids = _parse_fasta_ids(token) if "|" in token else None
    if ids is None:
        kind = _guess_type(token)
        ids = [(kind, [token])] if kind is not None else [("lcl", [token])]
    keys = []
    for kind, fields in ids:
        key = _map_key(kind, fields)
        keys.append(key)
        if "." in key:
            keys.append(key.split(".", 1)[0])
    return [key for key in keys if key]
