"""BLAST XML2: -outfmt 14 (a file per query) and 16 (one file), byte for byte as blastn
2.12 writes them: the BlastOutput2 report of each query (output.blastoutput2) through the
serial library's XML stream, each member an element and each object inside an element of
its type's name, two spaces an indent level. 16 is one BlastXML2 document holding every
query's BlastOutput2; 14 writes each query's as a document of its own, and -out as the
BlastXML2 document that includes them (XInclude).
"""

from dataclasses import dataclass

from .blastoutput2 import BlastOutput2Report, Node
from .xml import escape, real

INDENT = 2
SCHEMA_ATTRIBUTES = (
    '    xmlns="http://www.ncbi.nlm.nih.gov"\n'
    '    xmlns:xs="http://www.w3.org/2001/XMLSchema-instance"\n'
    '    xs:schemaLocation="http://www.ncbi.nlm.nih.gov '
    'http://www.ncbi.nlm.nih.gov/data_specs/schema_alt/NCBI_BlastOutput2.xsd"\n>\n')
PROLOG = '<?xml version="1.0"?>\n'
SINGLE_END = "</BlastXML2>\n"


@dataclass
class Xml2Report(BlastOutput2Report):
    extension = ".xml"

    def whole_file(self, tree: Node) -> str:
        return (PROLOG + f"<{tree.type_name}\n" + SCHEMA_ATTRIBUTES + xml_members(tree, INDENT)
                + f"</{tree.type_name}>\n")

    def part(self, tree: Node, first: bool) -> str:
        # blastn's stream starts each part after the first on a line of its own
        head = PROLOG + "<BlastXML2\n" + SCHEMA_ATTRIBUTES if first else "\n"
        return head + xml_object(tree, 0)

    def footer(self, db, count: int) -> str:
        return SINGLE_END if count else ""

    def file_list(self, names: list) -> str:
        return (PROLOG + "<BlastXML2\n"
                'xmlns="http://www.ncbi.nlm.nih.gov"\n'
                'xmlns:xi="http://www.w3.org/2003/XInclude"\n'
                'xmlns:xs="http://www.w3.org/2001/XMLSchema-instance"\n'
                'xs:schemaLocation="http://www.ncbi.nlm.nih.gov '
                'http://www.ncbi.nlm.nih.gov/data_specs/schema_alt/NCBI_BlastOutput2.xsd">\n'
                + "".join(f'\t<xi:include href="{escape(name)}"/>\n' for name in names)
                + SINGLE_END)


def xml_object(node: Node, indent: int) -> str:
    """`node` as its type's element, at `indent`."""
    pad = " " * indent
    return (f"{pad}<{node.type_name}>\n" + xml_members(node, indent + INDENT)
            + f"{pad}</{node.type_name}>\n")


def xml_members(node: Node, indent: int) -> str:
    return "".join(xml_member(name, value, indent) for name, value in node.members)


def xml_member(name: str, value, indent: int) -> str:
    pad = " " * indent
    if isinstance(value, Node):
        return f"{pad}<{name}>\n" + xml_object(value, indent + INDENT) + f"{pad}</{name}>\n"
    if isinstance(value, list):
        if not value:
            return f"{pad}<{name}></{name}>\n"
        return (f"{pad}<{name}>\n" + "".join(xml_object(element, indent + INDENT)
                                            for element in value) + f"{pad}</{name}>\n")
    text = real(value) if isinstance(value, float) else escape(str(value))
    return f"{pad}<{name}>{text}</{name}>\n"
