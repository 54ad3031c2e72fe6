"""Helpers for the report formats' golden tests (-outfmt 0, 5, ...): both tools' databases of
the example data under one name, and both tools' whole output files for the same search."""

import os
import shutil
import subprocess

import numpy as np

from golden import makeblastdb, megablast_case, write_fasta

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE_DB = os.path.join(REPO, "db", "HS11286_chr_1-300000.fa")
QUERIES = os.path.join(REPO, "queries")


def example_data(folder) -> dict:
    """The example database built by both tools under one name (blastn reads NAME.n*,
    gblastn NAME.gdb), a generated database with many subjects likewise, and query files:
    the examples, one without hits, one without letters, and several files joined."""
    from gblastn.db.writer import make_db

    folder = str(folder)
    rng = np.random.default_rng(5)
    no_hit = write_fasta(os.path.join(folder, "nohit.fa"),
                         [("nohit random sequence", np.frombuffer(b"ACGT", np.uint8)[
                             rng.integers(0, 4, 400)])])
    empty = os.path.join(folder, "empty.fa")
    with open(empty, "w") as handle:
        handle.write(">empty one\n>x2 second\nACGTTGCATGCATGCATGCAGTCGATCGATCGATGCTAGCTAG\n")
    multi = os.path.join(folder, "multi.fa")
    with open(multi, "w") as out:
        for path in (os.path.join(QUERIES, "kp1084_small.fa"), no_hit,
                     os.path.join(QUERIES, "kp1084_medium.fa")):
            with open(path) as handle:
                shutil.copyfileobj(handle, out)
    example = os.path.join(folder, "example")
    makeblastdb(EXAMPLE_DB, example)
    make_db([EXAMPLE_DB], example, progress=False)
    generated_fasta, generated_queries = megablast_case(folder)
    generated = os.path.join(folder, "generated")
    makeblastdb(generated_fasta, generated)
    make_db([generated_fasta], generated, progress=False)
    return {"folder": folder, "example": example, "generated": generated,
            "queries": {"small": os.path.join(QUERIES, "kp1084_small.fa"),
                        "large": os.path.join(QUERIES, "kp1084_large.fa"),
                        "nohit": no_hit, "empty": empty, "multi": multi,
                        "generated": generated_queries["small"]}}


def blastn_output(query: str, db: str, task: str, outfmt: str, *args: str) -> str:
    done = subprocess.run(["blastn", "-task", task, "-query", query, "-db", db,
                           "-outfmt", outfmt, *args], check=True, capture_output=True,
                          text=True)
    return done.stdout


def gblastn_output(data: dict, query: str, db: str, task: str, outfmt: str,
                   **options) -> str:
    """gblastn's output of the same search, run in this process; `options` are
    make_options' keyword arguments, and those of the report (line_length, ...)."""
    from gblastn.options import make_options
    from gblastn.output.formats import report_limits
    from gblastn.drivers.run import OutputSpec, run_search

    line_length, show_gis = options.pop("line_length", None), options.pop("show_gis", None)
    limits = report_limits(outfmt, options.pop("max_target_seqs", None),
                           options.pop("num_descriptions", None),
                           options.pop("num_alignments", None), line_length,
                           warn=lambda text: None)
    out = os.path.join(data["folder"], "gblastn.out")
    search_options = make_options(task, max_target_seqs=limits.max_target_seqs, **options)
    run_search([query], db, search_options,
               OutputSpec(outfmt, out, None, db, line_length=line_length,
                          num_descriptions=limits.num_descriptions,
                          num_alignments=limits.num_alignments, show_gis=show_gis))
    with open(out, encoding="utf-8", errors="surrogateescape") as handle:
        return handle.read()


# the cases each report is compared on: (database, query set, search options)
REPORT_CASES = {
    "small": ("example", "small", {}),
    "multi_with_no_hits": ("example", "multi", {}),
    "no_hits": ("example", "nohit", {}),
    "query_without_letters": ("example", "empty", {}),
    "large": ("example", "large", {}),
    "many_subjects": ("generated", "generated", {}),
    "minus_strand_hard_masking": ("generated", "generated",
                                  {"strand": "minus", "soft_masking": False}),
}
NO_HITS = ("no_hits", "query_without_letters")  # the cases where blastn finds nothing
