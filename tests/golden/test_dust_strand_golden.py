"""Golden test of DUST under -strand minus: blastn dusts the strand it searches, the
query's reverse complement, and places the intervals back on the plus strand; they differ
from the plus strand's where DUST's windows read the other way."""

import os
import subprocess
import sys

import pytest

from golden import needs_blast
from report_golden import blastn_output, example_data

pytestmark = [pytest.mark.golden, needs_blast]

# a Klebsiella piece whose reverse complement DUST masks at 48-54 (0-based), and whose
# plus strand it leaves whole
QUERY = ("AAATCGCCATCTTCAGGTTTACTTTCTGTATCATTTATCACTTTATCATTRYRRYGTATGTACTTACTTATCGATTTG"
         "TCTGATTTTTCATCATCTTCATCGTCAGAGCTAAACTCATCAGGAGTGCTATCGAGCCCCTCTTCGTCACAAACCTCA"
         "GTATCGTCTCCAGCAGCCGGCTCATCTGAACTGTCTTCTTCTGGTTCGGTCTTTTTGGTTAAAGAGGACTCACGTTCA"
         "GGTAACGGGCCTTCTG")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    found = example_data(tmp_path_factory.mktemp("dust_strand"))
    found["query"] = os.path.join(found["folder"], "minus.fa")
    with open(found["query"], "w") as handle:
        handle.write(">q1 dusted the other way\n" + QUERY + "\n")
    return found


@pytest.mark.parametrize("outfmt", ["15", "6 std score"])
@pytest.mark.parametrize("strand", ["minus", "plus", "both"])
def test_dust_masks_the_strand_searched_as_blastn(data, outfmt, strand):
    args = ["-strand", strand, "-soft_masking", "false"]
    expected = blastn_output(data["query"], data["example"], "blastn", outfmt, *args)
    assert ('"query_masking"' in expected) == (outfmt == "15" and strand == "minus")
    ours = subprocess.run([sys.executable, "-m", "gblastn", "search", "-device", "cpu",
                           "-task", "blastn", "-query", data["query"], "-db", data["example"],
                           "-outfmt", outfmt, *args], capture_output=True, text=True)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == expected
