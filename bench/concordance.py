#!/usr/bin/env python3
"""gblastn's `-task dc-megablast` output beside blastn's on divergent queries, for every
discontiguous template.

Discontiguous megablast is meant for queries 15-30 % away from the database, where a few
seeds and the two-hit window decide everything; queries cut from the database itself barely
test it. This script builds such queries reproducibly from a seed (each source sequence
substituted at a given rate, with short indels, every other one reverse-complemented) and
searches them with both tools for each template (word size 11 and 12 x template length 16, 18
and 21 x coding, optimal, coding_and_optimal), reporting per combination both tools' lines,
the lines they share, whether the outputs are byte-identical, and both wall times.

Query sources, any mix:
  --source FASTA[:N]   the first N records of a FASTA (all without :N), e.g. the benchmark
                       kit's kleb q_small.fa, whose fragments of a fourth strain are already
                       a little diverged from the kleb database
  --families SYNTH_PY  the repeat-family consensuses the kit's synth.py inserts into its
                       genome (--synth-seed and --synth-chroms as given to synth.py), so each
                       query hits its family's copies, themselves 5-25 % diverged

usage: concordance.py --db-fasta DB.fa (--source FASTA[:N] ... | --families synth.py)
                      [--rates 0.15,0.20,0.25] [--indels 0.01] [--seed 40] [--threads 2]
                      [--combos all|defaults|w11_t18_coding,...] [--work DIR] [--diff N]
"""

import argparse
import collections
import importlib.util
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))  # the golden tests' FASTA and mutations

from compare import build_databases, run_child  # noqa: E402
from golden import mutate, read_fasta, revcomp, write_fasta  # noqa: E402

COLUMNS = ("6 qseqid sseqid pident length mismatch gapopen gaps qstart qend sstart send "
           "evalue bitscore score sstrand")
WORD_SIZES = (11, 12)
TEMPLATE_LENGTHS = (16, 18, 21)
TEMPLATE_TYPES = ("coding", "optimal", "coding_and_optimal")


def all_combinations() -> dict:
    """{name: blastn's template flags} for every template dc-megablast accepts."""
    return {f"w{w}_t{t}_{kind}": ["-word_size", str(w), "-template_length", str(t),
                                  "-template_type", kind]
            for w in WORD_SIZES for t in TEMPLATE_LENGTHS for kind in TEMPLATE_TYPES}


def chosen_combinations(spec: str) -> dict:
    combos = all_combinations()
    if spec == "all":
        return combos
    if spec == "defaults":
        return {"defaults (w11_t18_coding)": []}
    return {name: combos[name] for name in spec.split(",")}


def source_records(spec: str) -> list:
    path, _, count = spec.partition(":")
    return read_fasta(path)[:int(count) if count else None]


def synth_family_records(synth_py: str, seed: int, chroms: int) -> list:
    """The consensus of each repeat family synth.py inserts into the genome it makes with
    this seed and chromosome count: its genome() draws the chromosomes' weights first, then
    the families, from the generator seeded in main()."""
    spec = importlib.util.spec_from_file_location("synth", synth_py)
    synth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(synth)
    rng = np.random.default_rng(seed)
    rng.uniform(0.5, 1.5, chroms)
    return [(f"family{k}", consensus) for k, (consensus, _, _) in enumerate(synth.families(rng))]


def diverged_queries(records: list, rate: float, indels: float, seed: int) -> list:
    """Each record substituted at `rate` with short indels at `indels`; every other one
    reverse-complemented, so that both strands' paths are searched."""
    rng = np.random.default_rng(seed)
    queries = []
    for k, (name, letters) in enumerate(records):
        query = mutate(rng, letters, rate, indels)
        queries.append((f"{name}_d{round(rate * 100)}", revcomp(query) if k % 2 else query))
    return queries


def query_file(a, records: list, rate: float, work: str) -> str:
    path = os.path.join(work, f"queries_d{round(rate * 100)}_seed{a.seed}.fa")
    # each rate its own draws, so that a set does not change with the rates beside it
    queries = diverged_queries(records, rate, a.indels, a.seed + round(rate * 1000))
    write_fasta(path, queries)
    letters = sum(q.size for _, q in queries)
    print(f"{path}: {len(queries)} queries, {letters:,} letters, {rate:.0%} substituted, "
          f"{a.indels:.1%} indels")
    return path


def search_commands(a, blast_db: str, our_db: str, query: str, flags: list) -> tuple:
    common = ["-task", "dc-megablast", "-query", query, "-outfmt", COLUMNS,
              "-num_threads", str(a.threads), *flags]
    return (["blastn", "-db", blast_db, *common],
            [sys.executable, "-m", "gblastn", "search", "-db", our_db, "-device", "cpu", *common])


def compare_outputs(blast_lines: list, our_lines: list) -> dict:
    blast, ours = collections.Counter(blast_lines), collections.Counter(our_lines)
    shared = sum((blast & ours).values())
    return {"blast": len(blast_lines), "ours": len(our_lines), "shared": shared,
            "same": blast_lines == our_lines,
            "blast_only": [x for x in blast_lines if x not in ours],
            "ours_only": [x for x in our_lines if x not in blast]}


def print_row(label: str, combo: str, result: dict, blast_s: float, our_s: float) -> None:
    share = 100 * result["shared"] / max(1, result["blast"])
    print(f"{label:<8}{combo:<28}{result['blast']:>8}{result['ours']:>8}{result['shared']:>8}"
          f"{share:>9.2f}%{'yes' if result['same'] else 'NO':>6}{blast_s:>9.2f}{our_s:>10.2f}",
          flush=True)


def print_differences(result: dict, count: int) -> None:
    for line in result["blast_only"][:count]:
        print("    blastn only:  " + line)
    for line in result["ours_only"][:count]:
        print("    gblastn only: " + line)


def run_set(a, label: str, query: str, dbs: tuple, combos: dict, work: str) -> list:
    differing = []
    for combo, flags in combos.items():
        blast_cmd, our_cmd = search_commands(a, *dbs, query, flags)
        blast_s, _, blast_lines, _, _ = run_child(blast_cmd)
        our_s, _, our_lines, _, _ = run_child(our_cmd)
        result = compare_outputs(blast_lines, our_lines)
        print_row(label, combo, result, blast_s, our_s)
        if not result["same"]:
            differing.append((label, combo))
            print_differences(result, a.diff)
            for tool, lines in (("blastn", blast_lines), ("gblastn", our_lines)):
                with open(os.path.join(work, f"{label}_{combo}.{tool}.out"), "w") as out:
                    out.write("".join(line + "\n" for line in lines))
    return differing


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db-fasta", required=True)
    ap.add_argument("--source", action="append", default=[], help="FASTA[:N] to diverge")
    ap.add_argument("--families", help="the benchmark kit's synth.py: its repeat families")
    ap.add_argument("--synth-seed", type=int, default=11)
    ap.add_argument("--synth-chroms", type=int, default=24)
    ap.add_argument("--rates", default="0.15,0.20,0.25", help="substitution rates")
    ap.add_argument("--indels", type=float, default=0.01, help="short indels per letter")
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--combos", default="all", help="all, defaults or names like w11_t18_coding")
    ap.add_argument("--work", default="concordance-work", help="databases, queries, differing outputs")
    ap.add_argument("--diff", type=int, default=3, help="differing lines to print per combination")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)

    records = [r for spec in a.source for r in source_records(spec)]
    if a.families:
        records += synth_family_records(a.families, a.synth_seed, a.synth_chroms)
    if not records:
        ap.error("give --source or --families")
    dbs = build_databases(a, a.work)
    combos = chosen_combinations(a.combos)
    queries = {f"d{round(float(r) * 100)}": query_file(a, records, float(r), a.work)
               for r in a.rates.split(",")}

    warm_up = search_commands(a, *dbs, next(iter(queries.values())), [])[1]
    print(f"gblastn warm-up (untimed, compiles on first use): {run_child(warm_up)[0]:.1f} s")
    print(f"{'set':<8}{'combination':<28}{'blastn':>8}{'gblastn':>8}{'shared':>8}"
          f"{'of blastn':>10}{'same':>6}{'blastn s':>9}{'gblastn s':>10}")
    started = time.perf_counter()
    differing = [d for label, path in queries.items()
                 for d in run_set(a, label, path, dbs, combos, a.work)]
    print(f"{len(queries) * len(combos)} searches per tool in {time.perf_counter() - started:.0f} s; "
          f"{len(differing)} differ" + (": " + ", ".join(map(" ".join, differing)) if differing else ""))
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
