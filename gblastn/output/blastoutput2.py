"""BLAST's second report object (BlastOutput2, blastxml2.asn), which -outfmt 13 and 15 write
as JSON and 14 and 16 as XML2, one report per query, as blastn 2.12 fills it
(blastxml2_format.cpp): the program and its reference, the database, the scoring
parameters, and the query's search: its masked ranges, hits with their HSPs, statistics and
a message when nothing was found.

The report is a tree of Nodes, each the serial library's object of a named ASN.1 type with
its members in order; json_report and xml2 write it each in its own syntax. The per-query
formats (13, 14) name their files as blastn names them from -out (query_file_name) and write
-out itself as a list of them.
"""

import os
from dataclasses import dataclass

from ..db.seqid import ids_parsed
from ..db.subjects import whole_length
from ..query import local_id
from .alignments import lower_masked, mask_of, shown_hsps
from .statistics import query_statistics
from .xml import NO_HITS, PROGRAM, PROGRAM_VERSION, filter_string, no_hits_message, reference


@dataclass
class Node:
    """An object of ASN.1 type `type_name` (XML2 wraps its members in an element of that
    name): `members` are (name, value) pairs, a value an int, a float, a str, a Node or a
    list of Nodes."""

    type_name: str
    members: list


def report_trees(pairs: list, db, options, db_name: str) -> list:
    """The BlastOutput2 Node of each (query, result) pair."""
    statistics = query_statistics([query for query, _ in pairs], db, options)
    return [_report(query, result, stats, db, options, db_name)
            for (query, result), stats in zip(pairs, statistics)]


def _report(query, result, stats, db, options, db_name: str) -> Node:
    parameters = [("expect", float(options.evalue))]
    # blastn leaves out the scores that are 0
    parameters += [(name, value) for name, value in (("sc-match", options.reward),
                                                     ("sc-mismatch", options.penalty)) if value]
    if not options.ungapped:  # blastn reports no gap costs for an ungapped search
        parameters += [("gap-open", options.gapopen), ("gap-extend", options.gapextend)]
    parameters.append(("filter", filter_string(options)))
    report = Node("Report", [
        ("program", PROGRAM),
        ("version", PROGRAM_VERSION),
        ("reference", reference(options.task)),
        ("search-target", Node("Target", [("db", db_name)])),
        ("params", Node("Parameters", parameters)),
        ("results", Node("Results", [("search", _search(query, result, stats, db))]))])
    return Node("BlastOutput2", [("report", report)])


def _search(query, result, stats, db) -> Node:
    from ..query import report_title

    number = result.query_index + 1
    members = [("query-id", local_id(query, result.query_index))]
    title = report_title(query.defline or "")
    if title:
        members.append(("query-title", title))
    members.append(("query-len", query.searched_length))
    searched = slice(0, len(query)) if query.location is None else \
        slice(query.location.start, query.location.end)
    # blastn lists no masking for a query (or -query_loc's part of it) masked end to end:
    # nothing of it was searched
    if stats.masked and not mask_of(len(query), stats.masked)[searched].all():
        # ranges as the Seq-locs hold them: 0-based, the last position included
        members.append(("query-masking", [Node("Range", [("from", start), ("to", end - 1)])
                                          for start, end in stats.masked]))
    subjects = [subject for subject in result.subjects if len(subject.hsps)]
    if not query.batch_unsearched:  # blastn has no hit list for an unsearched batch
        members.append(("hits", [_hit(number, subject, query, db, stats.masked)
                                 for number, subject in enumerate(subjects, 1)]))
    members.append(("stat", _statistics(stats, db)))
    if not subjects:
        message = no_hits_message(query, number, stats, db)
        if query.batch_unsearched:
            message += f" \n{NO_HITS}"
        members.append(("message", message))
    return Node("Search", members)


def _statistics(stats, db) -> Node:
    block = stats.of_evalues
    kappa, lambda_, entropy = (block.k, block.lambda_, block.h) if block else (-1, -1, -1)
    return Node("Statistics", [("db-num", db.num_seqs), ("db-len", db.total_letters),
                               ("hsp-len", stats.length_adjustment),
                               ("eff-space", float(stats.search_space)),
                               ("kappa", float(kappa)), ("lambda", float(lambda_)),
                               ("entropy", float(entropy))])


def _hit(number: int, subject, query, db, masked: tuple) -> Node:
    names = hit_names(db, subject.ordinal)
    taxids = db.taxids_of(subject.ordinal) or [0] * len(names)  # each defline's, 0: none
    descriptions = [
        Node("HitDescr", [("id", seq_id)] + ([("accession", accession)] if accession else [])
             + [("title", title)] + ([("taxid", taxid)] if taxid else []))
        for (seq_id, accession, title), taxid in zip(names, taxids)]
    hsps = [_hsp(hsp_number, hsp, len(query), masked)
            for hsp_number, hsp in enumerate(shown_hsps(query, db, subject), 1)]
    return Node("Hit", [("num", number), ("description", descriptions),
                        ("len", whole_length(db, subject.ordinal)), ("hsps", hsps)])


def hit_names(db, ordinal: int) -> list[tuple]:
    """(id, accession, title) of each of the subject's deflines (an empty accession is left
    out): without parsed ids the database's local id (gnl|BL_ORD_ID|N, accession N) and the
    whole defline; with them the ids, the accession without its version (a general id's
    tag), and the title."""
    from .tabular import report_accession_of, subject_deflines

    if not ids_parsed(db, ordinal):
        return [(f"gnl|BL_ORD_ID|{ordinal}", str(ordinal), db.defline(ordinal))]
    return [(seq_id, report_accession_of(seq_id, accession, True), title)
            for seq_id, accession, title in subject_deflines(db, ordinal)]


def _hsp(number: int, hsp, query_length: int, masked: tuple) -> Node:
    """An HSP, its query row in lower case where masked: blastn lower-cases only the masked
    ranges (`masked`, half-open) that start within the HSP, since its formatter finds no
    alignment column for a range's start outside it (s_MaskQuerySeq)."""
    starting_within = [(start, end) for start, end in masked
                       if hsp.query_start - 1 <= start < hsp.query_end]
    return Node("Hsp", [
        ("num", number),
        ("bit-score", six_digits(hsp.bitscore)),
        ("score", hsp.score),
        ("evalue", six_digits(hsp.evalue)),
        ("identity", hsp.identities),
        ("query-from", hsp.query_start),
        ("query-to", hsp.query_end),
        ("query-strand", "Plus"),
        ("hit-from", hsp.subject_start),
        ("hit-to", hsp.subject_end),
        ("hit-strand", "Minus" if hsp.minus else "Plus"),
        ("align-len", hsp.length),
        ("gaps", hsp.gaps),
        ("qseq", lower_masked(hsp.query_row, hsp.query_start,
                              mask_of(query_length, starting_within))),
        ("hseq", hsp.subject_row),
        ("midline", hsp.midline())])


def six_digits(value: float) -> float:
    """Bit scores and E-values: blastn keeps 6 significant digits."""
    return float("%.6g" % value)


# --------------------------------------------------------------------------------------------
# The reports

@dataclass
class BlastOutput2Report:
    """What -outfmt 13 to 16 share: each query's report is a BlastOutput2 tree, written as
    a file of its own (13, 14: render() gives each file's text, which the driver writes to
    query_file(out, N); master_file() is -out's text, the list of them) or as a part of one
    document (15, 16: render() gives each part, the first with the document's head, and
    footer() its end). A subclass writes the trees (whole_file, part) and the document's
    head and ends."""

    says_empty_queries = True  # blastn writes no warning of them on stderr

    options: object
    db_name: str
    single_file: bool
    extension = ""

    @property
    def per_query_files(self) -> bool:
        return not self.single_file

    def render(self, pairs: list, db) -> list:
        trees = report_trees(pairs, db, self.options, self.db_name)
        if not self.single_file:
            return [self.whole_file(tree) for tree in trees]
        return [self.part(tree, result.query_index == 0) for (_, result), tree in zip(pairs, trees)]

    def query_file(self, out: str, number: int) -> str:
        return query_file_name(out, number, self.extension)

    def master_file(self, out: str, count: int) -> str:
        """-out's text for the per-query formats: the names of the queries' files."""
        return self.file_list([os.path.basename(self.query_file(out, number))
                               for number in range(1, count + 1)])

    def whole_file(self, tree: Node) -> str:
        raise NotImplementedError

    def part(self, tree: Node, first: bool) -> str:
        raise NotImplementedError

    def file_list(self, names: list) -> str:
        raise NotImplementedError


# --------------------------------------------------------------------------------------------
# One file per query (-outfmt 13, 14)

def query_file_name(out: str, number: int, extension: str) -> str:
    """The file of query `number` (from 1) beside `out`, as blastn names it: `out` without
    its extension when that is `extension` (in any case), then _N and `extension`
    (res.json gives res_1.json, res gives res_1.json, res.txt res.txt_1.json)."""
    folder, name = os.path.split(out)
    dot = name.rfind(".")
    if dot >= 0 and name[dot:].lower() == extension:
        name = name[:dot]
    return os.path.join(folder, f"{name}_{number}{extension}")

