"""Helpers for golden tests: deterministic test data with the cases that trip BLAST clones,
and runners for the real NCBI BLAST+ binaries and for gblastn on the same inputs."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

BASES = np.frombuffer(b"ACGT", dtype=np.uint8)
IUPAC = np.frombuffer(b"RYKMSWBDHVN", dtype=np.uint8)

needs_blast = pytest.mark.skipif(shutil.which("blastn") is None or shutil.which("makeblastdb") is None,
                                 reason="NCBI BLAST+ (blastn, makeblastdb) is not installed")


def random_dna(rng, n: int) -> np.ndarray:
    return BASES[rng.integers(0, 4, n)]


def mutate(rng, seq: np.ndarray, sub_rate: float, indel_rate: float = 0.0) -> np.ndarray:
    """Copy with substitutions and short insertions/deletions."""
    out = seq.copy()
    subs = rng.random(out.size) < sub_rate
    out[subs] = BASES[(np.searchsorted(BASES, out[subs]) + rng.integers(1, 4, subs.sum())) % 4]
    if indel_rate <= 0:
        return out
    pieces, pos = [], 0
    for site in np.sort(rng.choice(out.size, int(out.size * indel_rate), replace=False)):
        pieces.append(out[pos:site])
        if rng.random() < 0.5:
            pieces.append(random_dna(rng, int(rng.integers(1, 4))))
            pos = site
        else:
            pos = site + int(rng.integers(1, 4))
    pieces.append(out[pos:])
    return np.concatenate(pieces)


def revcomp(seq: np.ndarray) -> np.ndarray:
    table = np.arange(256, dtype=np.uint8)
    for a, b in (b"AT", b"TA", b"CG", b"GC"):
        table[a] = b
    return table[seq[::-1]]


def sprinkle(rng, seq: np.ndarray, n_runs: int = 0, n_iupac: int = 0, run_len=(5, 40)) -> np.ndarray:
    out = seq.copy()
    for _ in range(n_runs):
        length = int(rng.integers(*run_len))
        start = int(rng.integers(0, max(1, out.size - length)))
        out[start:start + length] = ord("N")
    for pos in rng.choice(out.size, n_iupac, replace=False):
        out[pos] = IUPAC[rng.integers(0, IUPAC.size)]
    return out


def lower(seq: np.ndarray, start: int, end: int) -> np.ndarray:
    out = seq.copy()
    out[start:end] = np.frombuffer(out[start:end].tobytes().lower(), dtype=np.uint8)
    return out


def write_fasta(path, records) -> str:
    with open(path, "w") as handle:
        for name, seq in records:
            text = seq.tobytes().decode() if isinstance(seq, np.ndarray) else seq
            handle.write(f">{name}\n")
            for i in range(0, len(text), 70):
                handle.write(text[i:i + 70] + "\n")
    return str(path)


def option_flags(options: dict) -> list:
    """blastn's command-line flags for `options` ({name: value}): True alone names the flag,
    -soft_masking takes blastn's lower-case true/false."""
    flags = []
    for key, value in options.items():
        if value is True and key != "soft_masking":
            flags.append(f"-{key}")
        else:
            flags += [f"-{key}", str(value).lower() if key == "soft_masking" else str(value)]
    return flags


def read_fasta(path) -> list:
    """(first word of the defline, letters as upper-case uint8) of each record."""
    records = []
    with open(path) as handle:
        for line in handle:
            if line.startswith(">"):
                records.append((line[1:].split()[0], []))
            else:
                records[-1][1].append(line.strip().upper())
    return [(name, np.frombuffer("".join(lines).encode(), dtype=np.uint8))
            for name, lines in records]


def megablast_case(folder, seed: int = 7):
    """A database and query files exercising megablast's paths. Returns (db_fasta, queries)."""
    rng = np.random.default_rng(seed)
    base = random_dna(rng, 60_000)
    lowc = np.frombuffer(b"CA" * 60 + b"T" * 50 + b"GGA" * 30, dtype=np.uint8)
    repeat_unit = random_dna(rng, 400)

    queries_small = [
        ("qs1 plain 2kb region", base[1000:3000]),
        ("qs2 with N runs and IUPAC", sprinkle(rng, base[5000:8000], n_runs=2, n_iupac=6)),
        ("qs3 low complexity inside", np.concatenate([base[9000:9700], lowc, base[9700:10400]])),
        ("qs4 lower case half", lower(base[12000:14500], 0, 1200)),
        ("qs5 minus-strand copy", revcomp(base[20000:21800])),
        ("qs6 repeat element", repeat_unit),
        ("qs7 no homology", random_dna(rng, 1500)),
        ("qs8 short", base[30000:30040]),
        ("qs9 identical subjects", base[40500:42000]),
    ]
    big = random_dna(rng, 170_000)
    queries_big = [("qbig 170kb query", big)]

    repeats = np.concatenate([np.concatenate([random_dna(rng, int(rng.integers(200, 600))),
                                              mutate(rng, repeat_unit, 0.06, 0.01)])
                              for _ in range(12)])
    subjects = [
        ("subj1 mutated copy of the base", sprinkle(rng, mutate(rng, base, 0.03, 0.004),
                                                    n_runs=3, n_iupac=12)),
        ("subj2 diverged copy", mutate(rng, base[:30000], 0.12, 0.01)),
        ("subj3 repeats", repeats),
        ("subj4 reverse complement", revcomp(mutate(rng, base[18000:26000], 0.02, 0.002))),
        ("subj5 tiny", base[1000:1020]),
        ("subj6 big query homolog", mutate(rng, big[20_000:150_000], 0.04, 0.003)),
        ("dupA identical copies", base[40000:43000]),
        ("dupB identical copies", base[40000:43000]),
        ("dupC identical copies", base[40000:43000]),
        ("subj7 low complexity", np.concatenate([lowc, random_dna(rng, 3000), lowc])),
    ]
    db_fasta = write_fasta(os.path.join(folder, "db.fa"), subjects)
    small = write_fasta(os.path.join(folder, "q_small.fa"), queries_small)
    big_path = write_fasta(os.path.join(folder, "q_big.fa"), queries_big)
    return db_fasta, {"small": small, "big": big_path}


def makeblastdb(fasta: str, out: str) -> str:
    subprocess.run(["makeblastdb", "-in", fasta, "-dbtype", "nucl", "-out", out],
                   check=True, capture_output=True)
    return out


def blastn(query: str, db: str, *args: str, env: dict | None = None) -> list:
    """blastn's output lines; `env`: variables added to its environment."""
    done = subprocess.run(["blastn", "-query", query, "-db", db, *args],
                          check=True, capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})
    return done.stdout.splitlines()


def gblastn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gblastn", *args], capture_output=True, text=True)


def hit_lines(output) -> list:
    """The hit lines of a tabular output given as text, bytes or a list of lines: those
    neither blank nor comments."""
    lines = output.splitlines() if isinstance(output, (str, bytes)) else output
    comment = "#" if all(isinstance(line, str) for line in lines) else b"#"
    return [line for line in lines if line.strip() and not line.startswith(comment)]


def assert_blastn_found_hits(output) -> None:
    """Two empty outputs are equal whatever either tool does: a golden case that expects
    hits must see blastn report some."""
    assert hit_lines(output), "blastn reported no hits: the comparison would prove nothing"


def same_as_blastn(query: str, db: str, *args: str, ours_db: str | None = None) -> list:
    """blastn's output lines of a search, checked equal to gblastn's of the same search of
    `ours_db` (default: the same database)."""
    theirs = subprocess.run(["blastn", "-query", query, "-db", db, *args],
                            capture_output=True, text=True)
    assert theirs.returncode == 0, theirs.stderr
    ours = gblastn("search", "-query", query, "-db", ours_db or db, "-device", "cpu", *args)
    assert ours.returncode == 0, ours.stderr
    expected, got = theirs.stdout.splitlines(), ours.stdout.splitlines()
    if ours_db is not None:  # the header names the database as given
        got = [line.replace(ours_db, db) for line in got]
        # and each database its own making's minute
        expected, got = ([line for line in lines if not line.startswith("    Posted date:")]
                         for lines in (expected, got))
    assert expected == got, compare_lines(expected, got)
    return expected


def compare_lines(expected: list, got: list) -> str:
    """A short report of the first differences, or '' when identical."""
    if expected == got:
        return ""
    missing = [line for line in expected if line not in set(got)]
    extra = [line for line in got if line not in set(expected)]
    report = [f"blastn {len(expected)} lines, gblastn {len(got)} lines"]
    report += ["  missing: " + line for line in missing[:8]]
    report += ["  extra:   " + line for line in extra[:8]]
    if not missing and not extra:
        report.append("  same lines, different order")
    return "\n".join(report)


def golden_databases(folder, make_case) -> dict:
    """Both tools' databases of a generated case: {blast_db, our_db, queries, folder}."""
    from gblastn.db.writer import make_db

    db_fasta, queries = make_case(str(folder))
    blast_db = makeblastdb(db_fasta, str(folder / "blastdb"))
    our_db = make_db([db_fasta], str(folder / "gdb"), progress=False)
    return {"blast_db": blast_db, "our_db": str(our_db), "queries": queries, "folder": folder}


def run_ours(case, query: str, task: str, outfmt: str, extra: dict,
             mode: str = "pipeline", cluster=None) -> list:
    """gblastn's output lines for the same search as blastn(query, ..., *flags(extra)), by
    the driver `mode` names, or on `cluster` (a ClusterSpec) when given."""
    from gblastn.options import make_options
    from gblastn.drivers.run import OutputSpec, RunSettings, run_search

    out = str(case["folder"] / "ours.out")
    options = make_options(task, **extra)
    run_search([query], case["our_db"], options, OutputSpec(outfmt, out, None, case["blast_db"]),
               settings=RunSettings(mode, cluster=cluster))
    with open(out) as handle:
        return handle.read().splitlines()


def flags(extra: dict) -> list:
    """Options as blastn's command-line flags (True: a flag without value)."""
    args = []
    for key, value in extra.items():
        if value is True:
            args.append(f"-{key}")
        else:
            args += [f"-{key}", str(value)]
    return args
