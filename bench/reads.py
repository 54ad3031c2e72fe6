#!/usr/bin/env python3
"""Short reads sampled from a genome FASTA, with sequencing-like errors: the query sets of
`-task blastn-short` benchmarks, and diverged copies of a query FASTA for dc-megablast ones.

  reads.py reads GENOME.fa OUT.fa [--count 100000] [--lengths 50,150] [--errors 0.01]
                                  [--indels 0.002] [--seed 5]
      each read from a random record (weighted by length), a random start, either strand,
      substituted at --errors with short indels at --indels
  reads.py diverge QUERIES.fa OUT.fa --rate 0.15 [--indels 0.01] [--seed 40] [--first N]
      each query substituted at --rate with short indels, every other one reverse-
      complemented (bench/concordance.py's divergent queries)

The same arguments always give the same file.
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from concordance import diverged_queries  # noqa: E402
from golden import mutate, read_fasta, revcomp, write_fasta  # noqa: E402


def sample_reads(records: list, count: int, lengths: tuple, errors: float, indels: float,
                 seed: int) -> list:
    rng = np.random.default_rng(seed)
    sizes = np.array([seq.size for _, seq in records], dtype=np.float64)
    sources = rng.choice(len(records), size=count, p=sizes / sizes.sum())
    reads = []
    for k, source in enumerate(sources):
        name, seq = records[source]
        length = int(rng.integers(lengths[0], lengths[1] + 1))
        start = int(rng.integers(0, max(1, seq.size - length)))
        read = mutate(rng, seq[start:start + length], errors, indels)
        reads.append((f"read{k}_{name}_{start}", revcomp(read) if rng.random() < 0.5 else read))
    return reads


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verbs = ap.add_subparsers(dest="verb", required=True)
    sample = verbs.add_parser("reads")
    sample.add_argument("genome")
    sample.add_argument("out")
    sample.add_argument("--count", type=int, default=100_000)
    sample.add_argument("--lengths", default="50,150", help="shortest,longest")
    sample.add_argument("--errors", type=float, default=0.01)
    sample.add_argument("--indels", type=float, default=0.002)
    sample.add_argument("--seed", type=int, default=5)
    diverge = verbs.add_parser("diverge")
    diverge.add_argument("queries")
    diverge.add_argument("out")
    diverge.add_argument("--rate", type=float, required=True)
    diverge.add_argument("--indels", type=float, default=0.01)
    diverge.add_argument("--seed", type=int, default=40)
    diverge.add_argument("--first", type=int, default=None, help="only the first N queries")
    a = ap.parse_args()
    if a.verb == "reads":
        shortest, longest = (int(x) for x in a.lengths.split(","))
        records = sample_reads(read_fasta(a.genome), a.count, (shortest, longest), a.errors,
                               a.indels, a.seed)
    else:
        records = diverged_queries(read_fasta(a.queries)[:a.first], a.rate, a.indels, a.seed)
    write_fasta(a.out, records)
    letters = sum(seq.size for _, seq in records)
    print(f"{a.out}: {len(records)} sequences, {letters:,} letters")


if __name__ == "__main__":
    main()
