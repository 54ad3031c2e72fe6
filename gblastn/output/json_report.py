"""BLAST JSON: -outfmt 13 (a file per query) and 15 (one file), byte for byte as blastn
2.12 writes them: the BlastOutput2 report of each query (output.blastoutput2) through the
serial library's JSON stream (CObjectOStreamJson: two spaces an indent level, member names
with '_' for '-', doubles as %.15g, as the XML stream writes them).

blastn 2.12's -out file for -outfmt 13 names the queries' files wrongly: for -out res.json
it writes res_1.json, res_2.json, ... and lists res.json_1.json, ... (its list drops the
extension only when it is .xml). gblastn lists the files it wrote.
"""

from dataclasses import dataclass

from .blastoutput2 import BlastOutput2Report, Node
from .xml import real

INDENT = 2
SINGLE_HEAD = '{\n"BlastOutput2": [\n'
SINGLE_END = "]\n}\n"


@dataclass
class JsonReport(BlastOutput2Report):
    extension = ".json"

    def whole_file(self, tree: Node) -> str:
        return '{\n  "BlastOutput2": ' + json_value(tree, INDENT) + "\n}\n"

    def part(self, tree: Node, first: bool) -> str:
        # blastn's stream for a part of the document starts one level in, its brace unindented
        return (SINGLE_HEAD if first else ",\n") + json_value(tree, INDENT) + "\n"

    def footer(self, db, count: int) -> str:
        return SINGLE_END if count else ""

    def file_list(self, names: list) -> str:
        # blastn's list ends without a newline
        entries = "".join(f'\t\t{{"File": {json_string(name)} }}' + ("," if number < len(names) else "")
                          + "\n" for number, name in enumerate(names, 1))
        return '{\n\t"BlastJSON": [\n' + entries + "\t]\n}"


def json_value(value, indent: int) -> str:
    """`value` as CObjectOStreamJson writes it where its line is indented `indent`."""
    inner = " " * (indent + INDENT)
    if isinstance(value, Node):
        members = ",\n".join(f'{inner}"{name.replace("-", "_")}": '
                             f"{json_value(member, indent + INDENT)}"
                             for name, member in value.members)
        return "{\n" + members + "\n" + " " * indent + "}"
    if isinstance(value, list):
        elements = ",\n".join(inner + json_value(element, indent + INDENT) for element in value)
        return "[\n" + elements + ("\n" if elements else "") + " " * indent + "]"
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, float):
        return real(value)
    return str(value)


def json_string(text: str) -> str:
    """A string as CObjectOStreamJson writes it: UTF-8 (a string with bytes that are not
    UTF-8, read with surrogateescape, is read as Latin-1, all of it, as blastn converts
    it), quotes and backslashes escaped, control characters as \\u00XX."""
    from ..query import latin1_if_not_utf8

    text = latin1_if_not_utf8(text).replace("\\", "\\\\").replace('"', '\\"')
    if any(ord(c) < 0x20 for c in text):
        text = "".join(f"\\u00{ord(c):02X}" if ord(c) < 0x20 else c for c in text)
    return f'"{text}"'
