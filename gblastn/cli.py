"""The command line: `gblastn search | warmup | makedb | dbinfo | dbcmd`, with BLAST's
single-dash flags.

The only place that prints errors: every GblastnError becomes one line on stderr
(`gblastn: error: ...`) and its exit code.
"""

import math
import os
import re
import signal
import sys
import time

STARTED = time.perf_counter()  # the search's start-up is counted from here

import typer

from .errors import GblastnError, OptionsError
from .numba_start import skip_numba_extras

try:  # typer 0.28 carries its own copy of click
    from typer._click.types import ParamType
except ImportError:
    from click import ParamType

HELP_FLAGS = ["-help", "--help", "-h"]
app = typer.Typer(add_completion=False, no_args_is_help=True,
                  context_settings={"help_option_names": HELP_FLAGS},
                  help="GPU-accelerated nucleotide search with NCBI BLAST+ 2.12's results.")


def main() -> None:
    signal.signal(signal.SIGTERM, _terminate)
    skip_numba_extras()
    # threads that only need the GIL between compiled calls (DUST, the table, the gapped and
    # traceback workers) wait up to this long whenever another thread runs Python, as the
    # warm-up does beside the query setup (docs/perf/start-up.md)
    sys.setswitchinterval(0.001)
    if sys.argv[1:] in (["-version"], ["--version"]):
        _leave(_version_text(), 0, sys.stdout)
    try:
        check_flags(sys.argv[1:])
        code = app(standalone_mode=False)
    except GblastnError as exc:
        _leave(f"gblastn: error: {exc}", exc.exit_code)
    except KeyboardInterrupt:
        _leave("gblastn: interrupted", 130)
    except BrokenPipeError:
        os._exit(141)  # the reader of our output went away (| head): stop quietly
    except SystemExit as exc:  # click's own exits, e.g. after a broken pipe
        if exc.code:
            _leave("", exc.code if isinstance(exc.code, int) else 1)
        raise
    except Exception as exc:  # click's usage errors and the like (typer may vendor click)
        kind = type(exc).__name__
        if kind == "Abort":
            _leave("gblastn: interrupted", 130)
        if kind == "Exit":
            sys.exit(getattr(exc, "exit_code", 0))
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            _leave(f"gblastn: error: {exc.format_message()}", exc.exit_code)
        if os.environ.get("GBLASTN_DEBUG"):
            raise
        _leave(f"gblastn: internal error: {type(exc).__name__}: {exc} "
               "(set GBLASTN_DEBUG=1 for the traceback)", 70)
    # click reports an interrupt (KeyboardInterrupt -> Abort) as the return value 130
    if isinstance(code, int) and code:
        _leave("gblastn: interrupted" if code == 130 else f"gblastn: exit status {code}", code)
    # done, the output complete: leave without the interpreter's teardown, which spent half a
    # second freeing the unpacked subjects and joining idle thread pools
    _leave("", 0)


def _version_text() -> str:
    """As `blastn -version` prints its own."""
    from . import __version__

    return f"gblastn: {__version__}\n Package: gblastn {__version__}, results of BLAST+ 2.12.0"


def _terminate(signum, frame) -> None:
    """SIGTERM takes the interrupt's path: the output's temporary file is removed on the way."""
    raise KeyboardInterrupt


def _leave(message: str, code: int, stream=None) -> None:
    """Print one line (on stderr, or `stream`) and exit at once. Pipeline threads may still
    be inside a numba call (which cannot be interrupted); a normal interpreter shutdown
    under them could crash, and the output file has already been removed, so nothing is
    left to clean up."""
    if message:
        print(message, file=stream or sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def check_flags(argv: list) -> None:
    """An OptionsError naming a flag that the command does not have, as typed, with the
    closest one it has. Left to click, a misspelt single-dash flag (-evlaue) was read as a
    bundle of one-letter options and reported as its first letter ("No such option: -e")."""
    import difflib

    import typer.main

    command = getattr(typer.main.get_command(app), "commands", {}).get(argv[0] if argv else "")
    if command is None:
        return  # no command, or an unknown one: click reports it
    takes_value = {name: not getattr(param, "is_flag", False)
                   for param in command.params for name in param.opts + param.secondary_opts}
    takes_value.update(dict.fromkeys(HELP_FLAGS, False))
    given = set()
    tokens = iter(argv[1:])
    for token in tokens:
        if token == "--":
            return
        name = token.split("=", 1)[0]
        if name in takes_value:
            if name in given and name not in HELP_FLAGS:
                # blastn's words; click would keep the last value in silence
                raise OptionsError(f"Argument with this name is defined already: "
                                   f"{name.lstrip('-')}")
            given.add(name)
            if takes_value[name] and "=" not in token:
                next(tokens, None)  # its value, which may start with '-' (-penalty -3)
            continue
        if argv[0] == "search" and name in BLASTN_FLAGS:
            raise OptionsError(_refusal(name, argv))
        if token.startswith("-") and token != "-" and not _is_number(token):
            closest = difflib.get_close_matches(name, list(takes_value), n=1)
            hint = f"; did you mean {closest[0]}?" if closest else ""
            raise OptionsError(f"unknown argument {name!r} for {argv[0]}{hint}")


# Every flag of blastn 2.12 (`blastn -help`). Those that `search` does not have are refused
# by name, so that none is taken for a misspelling of another or for a bundle of letters.
BLASTN_FLAGS = frozenset("-" + name for name in """
    h help version import_search_strategy export_search_strategy task db dbsize gilist
    seqidlist negative_gilist negative_seqidlist taxids negative_taxids taxidlist
    negative_taxidlist entrez_query db_soft_mask db_hard_mask subject subject_loc query out
    evalue word_size gapopen gapextend perc_identity qcov_hsp_perc max_hsps xdrop_ungap
    xdrop_gap xdrop_gap_final searchsp sum_stats penalty reward no_greedy
    min_raw_gapped_score template_type template_length dust filtering_db
    window_masker_taxid window_masker_db soft_masking ungapped culling_limit
    best_hit_overhang best_hit_score_edge subject_besthit window_size off_diagonal_range
    use_index index_name lcase_masking query_loc strand parse_deflines outfmt show_gis
    num_descriptions num_alignments line_length html sorthits sorthsps max_target_seqs
    num_threads mt_mode remote""".split())

# the remote-only options get blastn's own words: -entrez_query is refused without -remote,
# which gblastn never has, and -remote sends the search to NCBI, which gblastn never does
_BLASTN_REFUSALS = {
    "-entrez_query": 'Argument "remote". Must be specified, as it is required by argument:  '
                     "`entrez_query'",
    "-remote": "option -remote is not supported by gblastn: it searches local databases "
               "and -subject files only",
}


def _refusal(flag: str, argv: list) -> str:
    if flag == "-entrez_query" and "-remote" in argv:
        flag = "-remote"  # blastn requires -remote with it, so -remote is what gblastn lacks
    return _BLASTN_REFUSALS.get(flag, f"option {flag} is not supported by gblastn")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class BlastReal(ParamType):
    """A real number as blastn takes one: a finite decimal. nan and inf are refused, as
    blastn refuses them; a decimal beyond the largest double is that largest double (blastn
    runs such an -evalue as it runs 1.7e308)."""

    name = "real"
    _DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        if not self._DECIMAL.fullmatch(value):
            self.fail(f"{value!r} is not a finite decimal number", param, ctx)
        number = float(value)
        return math.copysign(sys.float_info.max, number) if math.isinf(number) else number


class BlastInteger(ParamType):
    """An integer as blastn takes one: decimal digits with an optional sign, within 32
    bits (blastn's integer arguments are 32-bit)."""

    name = "integer"
    _INTEGER = re.compile(r"[+-]?\d+")

    def __init__(self, bits: int = 32):
        self.bits = bits

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        if not self._INTEGER.fullmatch(value):
            self.fail(f"{value!r} is not an integer", param, ctx)
        number = int(value)
        if not -2**(self.bits - 1) <= number < 2**(self.bits - 1):
            self.fail(f"{value} is out of range ({self.bits}-bit integers)", param, ctx)
        return number


REAL = BlastReal()
INTEGER = BlastInteger()
BIG_INTEGER = BlastInteger(bits=64)  # blastn's Int8 arguments (-dbsize, -searchsp)


# ---------------------------------------------------------------------------------------------
# search


def _option(default, flag: str, text: str, default_text: str, **kwargs):
    """A command-line option whose help gives its description and, as blastn -help does,
    its default ("Default = `10'")."""
    return typer.Option(default, flag, help=f"{text} {default_text}", show_default=False,
                        **kwargs)


def _task_option(flag: str, text: str, click_type, name: str | None = None):
    """A search option whose default is the task's (options.task_default_text)."""
    from .options import task_default_text

    return _option(None, flag, text, task_default_text(name or flag.lstrip("-")),
                   click_type=click_type)


NO_DEFAULT = "Default = none"
OFF = "Default = `false'"


@app.command("search", help="Search nucleotide queries against a database (blastn's flags).")
def search_command(
    db: str = _option(None, "-db", "BLAST database name: a gblastn makedb -out name, or BLAST+ "
                      "databases (makeblastdb volumes or alias files; several in quotes).",
                      "Default = none: give -db or -subject"),
    subject: str = _option(None, "-subject", "Subject sequence(s) to search: a FASTA file, "
                           "searched without a database (instead of -db).", NO_DEFAULT),
    subject_loc: str = _option(None, "-subject_loc", "Location on the subject sequence in "
                               "1-based offsets (Format: start-stop), of every subject; with "
                               "-subject only.", "Default = the whole subject"),
    query: str = _option(None, "-query", "Input file name: the query FASTA ('-': standard "
                         "input).", "Default = `-'"),
    query_loc: str = _option(None, "-query_loc", "Location on the query sequence in 1-based "
                             "offsets (Format: start-stop), of every query.",
                             "Default = the whole query"),
    query_list: str = _option(None, "-query_list", "File naming query FASTA files, one per "
                              "line (instead of -query).", NO_DEFAULT),
    out: str = _option(None, "-out", "Output file name ('-': standard output).",
                       "Default = `-'"),
    out_dir: str = _option(None, "-out_dir", "With -query_list: the folder of one output per "
                           "listed file.", NO_DEFAULT),
    task: str = _option("megablast", "-task", "Task to execute: megablast, dc-megablast, "
                        "blastn or blastn-short.", "Default = `megablast'"),
    outfmt: str = _option("0", "-outfmt", "Alignment view: 0 (pairwise), 5 (BLAST XML), 6, 7 "
                          "or 10 optionally followed by column names, 13 or 15 (BLAST JSON: a "
                          "file per query named after -out, or one file), 14 or 16 (BLAST "
                          "XML2, likewise), or 17 (SAM; '17 SQ' with the letters, '17 SR' "
                          "with the subject as the reference).", "Default = `0'"),
    evalue: float = _task_option("-evalue", "Expectation value (E) threshold for saving "
                                 "hits.", REAL),
    word_size: int = _task_option("-word_size", "Word size for wordfinder algorithm (length of "
                                  "best perfect match), >=4.", INTEGER),
    reward: int = _task_option("-reward", "Reward for a nucleotide match, >=0.", INTEGER),
    penalty: int = _task_option("-penalty", "Penalty for a nucleotide mismatch, <=0.",
                                INTEGER),
    gapopen: int = _task_option("-gapopen", "Cost to open a gap.", INTEGER),
    gapextend: int = _task_option("-gapextend", "Cost to extend a gap.", INTEGER),
    xdrop_ungap: float = _task_option("-xdrop_ungap", "X-dropoff value (in bits) for ungapped "
                                      "extensions (0: the ungapped cutoff score).", REAL),
    xdrop_gap: float = _task_option("-xdrop_gap", "X-dropoff value (in bits) for preliminary "
                                    "gapped extensions.", REAL),
    xdrop_gap_final: float = _task_option("-xdrop_gap_final", "X-dropoff value (in bits) for "
                                          "final gapped alignment.", REAL),
    dust: str = _task_option("-dust", "Filter query sequence with DUST (Format: 'yes', 'level "
                             "window linker', or 'no' to disable).", None),
    soft_masking: str = _task_option("-soft_masking", "Apply filtering locations as soft "
                                     "masks: true or false.", None),
    lcase_masking: bool = _option(False, "-lcase_masking", "Use lower case filtering in query "
                                  "sequence(s).", OFF),
    window_masker_db: str = _option(None, "-window_masker_db", "Enable WindowMasker filtering "
                                     "using this repeats database: a unit counts file of "
                                     "windowmasker -mk_counts -sformat obinary or binary (its "
                                     "masks replace DUST's and lower case's, as in blastn).",
                                     NO_DEFAULT),
    strand: str = _task_option("-strand", "Query strand(s) to search against "
                               "database/subject: both, plus or minus.", None),
    max_target_seqs: int = _task_option("-max_target_seqs", "Maximum number of aligned "
                                        "sequences to keep, >=1 (tabular and XML outputs; "
                                        "not with -num_descriptions or -num_alignments).",
                                        INTEGER),
    num_descriptions: int = _option(None, "-num_descriptions", "-outfmt 0: number of database "
                                    "sequences to show one-line descriptions for.",
                                    "Default = `500'", click_type=INTEGER),
    num_alignments: int = _option(None, "-num_alignments", "Number of database sequences to "
                                  "show alignments for.", "Default = `250'",
                                  click_type=INTEGER),
    line_length: int = _option(None, "-line_length", "-outfmt 0: line length for formatting "
                               "alignments.", "Default = `60'", click_type=INTEGER),
    show_gis: bool = _option(False, "-show_gis", "-outfmt 0: show NCBI GIs in deflines.", OFF),
    max_hsps: int = _option(None, "-max_hsps", "Set maximum number of HSPs per subject "
                            "sequence to save for each query, >=1.", "Default = no limit",
                            click_type=INTEGER),
    perc_identity: float = _task_option("-perc_identity", "Percent identity cutoff, 0..100.",
                                        REAL),
    qcov_hsp_perc: float = _task_option("-qcov_hsp_perc", "Percent query coverage per hsp, "
                                        "0..100.", REAL),
    num_threads: int = _task_option("-num_threads", "Number of threads (CPUs) to use in the "
                                    "search.", INTEGER),
    dbsize: int = _option(None, "-dbsize", "Effective length of the database, for the "
                          "statistics.", "Default = the database's letters",
                          click_type=BIG_INTEGER),
    searchsp: int = _option(None, "-searchsp", "Effective length of the search space of every "
                            "query (0: computed).", "Default = `0'", click_type=BIG_INTEGER),
    min_raw_gapped_score: int = _option(None, "-min_raw_gapped_score", "Minimum raw gapped "
                                        "score to keep an alignment in the preliminary gapped "
                                        "and traceback stages.", "Default = from -evalue",
                                        click_type=INTEGER),
    no_greedy: bool = _option(False, "-no_greedy", "Use non-greedy dynamic programming "
                              "extension (megablast; needs -gapopen and -gapextend).", OFF),
    ungapped: bool = _option(False, "-ungapped", "Perform ungapped alignment only?", OFF),
    seqidlist: str = _option(None, "-seqidlist", "Restrict search of database to list of "
                             "SeqIDs (a text file, or blastdb_aliastool's binary list).",
                             NO_DEFAULT),
    negative_seqidlist: str = _option(None, "-negative_seqidlist", "Restrict search of "
                                      "database to everything except the specified SeqIDs.",
                                      NO_DEFAULT),
    taxids: str = _option(None, "-taxids", "Restrict search of database to include only the "
                          "specified taxonomy IDs (comma-separated; a version 5 BLAST+ database "
                          "or a gblastn one).", NO_DEFAULT),
    negative_taxids: str = _option(None, "-negative_taxids", "Restrict search of database to "
                                   "everything except the specified taxonomy IDs.", NO_DEFAULT),
    taxidlist: str = _option(None, "-taxidlist", "Restrict search of database to include only "
                             "the taxonomy IDs a file lists, one a line.", NO_DEFAULT),
    negative_taxidlist: str = _option(None, "-negative_taxidlist", "Restrict search of "
                                      "database to everything except the taxonomy IDs a file "
                                      "lists.", NO_DEFAULT),
    db_soft_mask: str = _option(None, "-db_soft_mask", "Filtering algorithm ID of the "
                                "database's masking data (makeblastdb or makedb -mask_data) to "
                                "apply as a soft mask: its ranges are not scanned for seeds "
                                "(searched on the CPU).",
                                NO_DEFAULT),
    db_hard_mask: str = _option(None, "-db_hard_mask", "Filtering algorithm ID to apply as a "
                                "hard mask: its ranges are neither scanned nor aligned across "
                                "(searched on the CPU).", NO_DEFAULT),
    template_type: str = _option(None, "-template_type", "Discontiguous MegaBLAST template "
                                 "type: coding, optimal or coding_and_optimal (with "
                                 "-template_length).", "Default = `coding' (dc-megablast), "
                                 "none (contiguous words: the other tasks)"),
    template_length: int = _option(None, "-template_length", "Discontiguous MegaBLAST "
                                   "template length: 16, 18 or 21 (with -template_type).",
                                   "Default = `18' (dc-megablast), none (contiguous words: "
                                   "the other tasks)", click_type=INTEGER),
    window_size: int = _task_option("-window_size", "Multiple hits window size of "
                                    "discontiguous words, use 0 to specify 1-hit algorithm.",
                                    INTEGER),
    culling_limit: int = _option(None, "-culling_limit", "If the query range of a hit is "
                                 "enveloped by that of at least this many higher-scoring "
                                 "hits, delete the hit (0: no culling; not with "
                                 "-best_hit_*).", "Default = `0'", click_type=INTEGER),
    best_hit_overhang: float = _option(None, "-best_hit_overhang", "Best Hit algorithm "
                                       "overhang value, >0 and <0.5 (recommended value: 0.1; "
                                       "not with -culling_limit).", "Default = off, `0.1' "
                                       "with -best_hit_score_edge", click_type=REAL),
    best_hit_score_edge: float = _option(None, "-best_hit_score_edge", "Best Hit algorithm "
                                         "score edge value, >0 and <0.5 (recommended value: "
                                         "0.1; not with -culling_limit).", "Default = off, "
                                         "`0.1' with -best_hit_overhang", click_type=REAL),
    subject_besthit: bool = _option(False, "-subject_besthit", "Turn on best hit per subject "
                                    "sequence.", OFF),
    device: str = _option("auto", "-device", "Where the search runs: auto (a GPU if there is "
                          "one), gpu or cpu.", "Default = `auto'"),
    gpu_id: int = _option(0, "-gpu_id", "The GPU to search on, among those this process "
                          "sees.", "Default = `0'", click_type=INTEGER),
    mode: str = _option("pipeline", "-mode", "pipeline (stages overlap in threads) or serial.",
                        "Default = `pipeline'"),
    prelim_threads: int = _option(0, "-prelim_threads", "Threads for scanning and ungapped "
                                  "extension (0: -num_threads).", "Default = `0'"),
    traceback_threads: int = _option(0, "-traceback_threads", "Threads for gapped extension "
                                     "and traceback (0: -num_threads).", "Default = `0'"),
    stage_times: bool = _option(False, "-stage_times", "Print the time spent in each stage on "
                                "stderr.", OFF),
    scheduler: str = _option(None, "-scheduler", "Search on the Dask cluster of this scheduler "
                             "address (e.g. one gblastn serve started).", NO_DEFAULT),
    scheduler_file: str = _option(None, "-scheduler_file", "Search on the Dask cluster this "
                                  "scheduler file names (gblastn serve's).", NO_DEFAULT),
    local_workers: int = _option(0, "-local_workers", "Search on a local Dask cluster of this "
                                 "many workers (one per GPU with GPUs, else CPU processes; 0: "
                                 "in this process).", "Default = `0'", click_type=INTEGER),
    shards: int = _option(0, "-shards", "On a cluster: split the database into this many "
                          "shards (0: one per worker).", "Default = `0'", click_type=INTEGER),
    cluster_mode: str = _option("auto", "-cluster_mode", "On a cluster: shard (split the "
                                "database), replicate (whole query batches, several at "
                                "once) or auto.", "Default = `auto'"),
) -> None:
    from .drivers.run import OutputSpec, RunSettings, query_files, run_search
    from .options import make_options
    from .output.formats import report_limits, warn_missing_taxonomy_names
    from .timing import StageTimes

    if subject_loc is not None and db is not None:
        raise OptionsError('Argument "subject_loc". Incompatible with argument:  `db\'')
    if (db is None) == (subject is None):
        raise OptionsError("give one of -db and -subject")
    _check_subject_compatible(subject, taxids=taxids, negative_taxids=negative_taxids,
                              taxidlist=taxidlist, negative_taxidlist=negative_taxidlist,
                              seqidlist=seqidlist, negative_seqidlist=negative_seqidlist,
                              db_soft_mask=db_soft_mask, db_hard_mask=db_hard_mask)
    if mode not in ("pipeline", "serial"):
        raise OptionsError(f"invalid -mode {mode!r}: use pipeline or serial")
    if prelim_threads < 0 or traceback_threads < 0:
        raise OptionsError("thread counts must not be negative")
    num_threads = _within_cpus(num_threads)
    _check_template_pair(template_type, template_length)

    def warn(text: str) -> None:
        print(text, file=sys.stderr)

    limits = report_limits(outfmt, max_target_seqs, num_descriptions, num_alignments,
                           line_length, warn=warn)
    warn_missing_taxonomy_names(outfmt, warn)
    if db_soft_mask is not None and db_hard_mask is not None:
        raise OptionsError('Argument "db_soft_mask". Incompatible with argument:  '
                           "`db_hard_mask'")
    soft_mask = _mask_algorithm_id(db_soft_mask, db, warn)
    hard_mask = _mask_algorithm_id(db_hard_mask, db, warn)
    device = _device_for_masks(soft_mask, hard_mask, device)
    cluster = _cluster_spec(scheduler, scheduler_file, local_workers, shards, cluster_mode,
                            device, gpu_id, subject, stage_times)

    times = StageTimes()
    files = query_files(query, query_list)
    # the GPU's set-up (pycuda, its context) runs while options, files and database are read;
    # a cluster's workers hold their own backends and compiled stages, and this process none
    backend = compile_stages = None
    if cluster is None:
        from .compile_ahead import stages_before_search
        from .pools import beside
        from .scan import select_backend

        backend = beside(select_backend, device, gpu_id, times)
        compile_stages = stages_before_search(task, device, word_size, _query_bytes(files),
                                              backend)
    options = make_options(
        task, evalue=evalue, word_size=word_size, reward=reward, penalty=penalty,
        gapopen=gapopen, gapextend=gapextend, xdrop_ungap=xdrop_ungap, xdrop_gap=xdrop_gap,
        xdrop_gap_final=xdrop_gap_final, dust=dust, soft_masking=_parse_bool("-soft_masking", soft_masking),
        lcase_masking=lcase_masking or None, window_masker_db=window_masker_db, strand=strand,
        max_target_seqs=limits.max_target_seqs,
        max_hsps=max_hsps, perc_identity=perc_identity, qcov_hsp_perc=qcov_hsp_perc,
        num_threads=num_threads, dbsize=dbsize, searchsp=searchsp,
        min_raw_gapped_score=min_raw_gapped_score, no_greedy=no_greedy or None,
        ungapped=ungapped or None,
        seqidlist=seqidlist, negative_seqidlist=negative_seqidlist, taxids=taxids,
        negative_taxids=negative_taxids, taxidlist=taxidlist,
        negative_taxidlist=negative_taxidlist, db_soft_mask=soft_mask, db_hard_mask=hard_mask,
        template_type=template_type, template_length=template_length, window_size=window_size,
        culling_limit=culling_limit, best_hit_overhang=best_hit_overhang,
        best_hit_score_edge=best_hit_score_edge, subject_besthit=subject_besthit or None,
        query_loc=query_loc)
    settings = RunSettings(mode, prelim_threads, traceback_threads, progress=sys.stderr.isatty(),
                           release_device=True, compile_stages=compile_stages, cluster=cluster)
    times.add("start-up", time.perf_counter() - STARTED)
    database, label = db, db
    if subject is not None:
        from .db.subjects import SubjectFile
        from .options import parse_location
        database = SubjectFile(subject, parse_location(subject_loc, "subject")
                               if subject_loc is not None else ())
        label = database.label
    output = OutputSpec(outfmt, out, out_dir, label, line_length=line_length,
                        num_descriptions=limits.num_descriptions,
                        num_alignments=limits.num_alignments, show_gis=show_gis,
                        command_line=_command_line())
    run_search(files, database, options, output, backend, settings, times)
    if cluster is None:
        from .compile_ahead import after_search

        after_search(task, device, backend)
    if stage_times:
        print("gblastn: " + times.report(), file=sys.stderr)


# the options that name themselves first when blastn refuses them with -subject
_REFUSING_SUBJECT = ("taxids", "taxidlist")


def _check_subject_compatible(subject: str | None, **database_options) -> None:
    """blastn's refusal of an option that restricts a database, given with -subject."""
    given = [name for name, value in database_options.items() if value is not None]
    if subject is None or not given:
        return
    if given[0] in _REFUSING_SUBJECT:
        raise OptionsError(f'Argument "{given[0]}". Incompatible with argument:  `subject\'')
    raise OptionsError(f'Argument "subject". Incompatible with argument:  `{given[0]}\'')


def _mask_algorithm_id(value: str | None, db: str | None, warn) -> int | None:
    """-db_soft_mask's or -db_hard_mask's algorithm id. A value that is no id names no
    algorithm: blastn then warns and searches without masks."""
    if value is None:
        return None
    if re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    warn(f"Warning: [blastn] Subject mask not found in {db}, proceeding without subject "
         "masking.")
    return None


def _device_for_masks(soft_mask: int | None, hard_mask: int | None, device: str) -> str:
    """The device of a search under -db_soft_mask or -db_hard_mask: the CPU, whose scan
    alone reads the unmasked ranges."""
    if soft_mask is None and hard_mask is None:
        return device
    if device == "gpu":
        flag = "-db_soft_mask" if soft_mask is not None else "-db_hard_mask"
        raise OptionsError(f"{flag} is searched on the CPU: give -device cpu or auto")
    return "cpu"


def _cluster_spec(scheduler, scheduler_file, local_workers, shards, cluster_mode, device,
                  gpu_id, subject, stage_times):
    """The search's ClusterSpec, or None when it runs in this process."""
    from .drivers.cluster import ClusterSpec, requested

    spec = ClusterSpec(scheduler, scheduler_file, local_workers, shards, cluster_mode,
                       device, gpu_id, worker_shares=stage_times)
    spec.check()
    if not requested(spec):
        return None
    if subject is not None:
        raise OptionsError("-subject is searched in this process: a cluster searches a "
                           "database (-db)")
    return spec


def _check_template_pair(template_type: str | None, template_length: int | None) -> None:
    """blastn takes -template_type and -template_length only together (in its words)."""
    given = {"template_type": template_type, "template_length": template_length}
    for name, other in (("template_type", "template_length"),
                        ("template_length", "template_type")):
        if given[name] is not None and given[other] is None:
            raise OptionsError(f'Argument "{other}". Must be specified, as it is required '
                               f"by argument:  `{name}'")


def _command_line() -> str:
    """The command as typed, each word followed by a space, as blastn's @PG line has it."""
    return "".join(word + " " for word in ["gblastn", *sys.argv[1:]])


def _within_cpus(threads: int | None) -> int | None:
    """-num_threads reduced to the CPUs this process may use, with blastn's warning: more
    threads than cores only contend."""
    from .pools import available_cores

    cpus = available_cores()
    if threads is None or threads <= cpus:
        return threads
    print(f"Warning: [blastn] Number of threads was reduced to {cpus} to match the number "
          "of available CPUs", file=sys.stderr)
    return cpus


def _query_bytes(files: list) -> int | None:
    """The query files' size, an upper bound of their letters (None for stdin)."""
    try:
        return sum(os.path.getsize(path) for path in files)
    except OSError:
        return None


def _parse_bool(flag: str, value: str | None) -> bool | None:
    if value is None:
        return None
    text = value.strip().lower()
    if text in ("true", "t", "yes", "1"):
        return True
    if text in ("false", "f", "no", "0"):
        return False
    raise OptionsError(f"{flag} takes true or false, not {value!r}")


@app.command("serve", help="Serve a database on a Dask cluster until interrupted: searches "
             "sent with -scheduler or -scheduler_file find it loaded.")
def serve_command(
    db: str = typer.Option(..., "-db", help="Database to hold on the workers."),
    scheduler_file: str = typer.Option(..., "-scheduler_file", help="Where the scheduler's "
                                       "address is written (or read, to join its cluster)."),
    scheduler: str = typer.Option(None, "-scheduler", help="Join this scheduler instead of "
                                  "starting one."),
    gpus: str = typer.Option("all", "-gpus", help="all, or how many of this host's GPUs get a "
                             "worker each."),
    workers: int = typer.Option(1, "-workers", click_type=INTEGER, help="CPU worker processes, "
                                "on a host without GPUs (or with -device cpu)."),
    device: str = typer.Option("auto", "-device", help="auto, gpu or cpu."),
    gpu_id: int = typer.Option(0, "-gpu_id", click_type=INTEGER,
                               help="The device a worker uses among those it sees."),
    num_threads: int = typer.Option(None, "-num_threads", click_type=INTEGER,
                                    help="Threads of each worker's searches (default: this "
                                    "host's cores shared among its workers, at most 16 "
                                    "each)."),
) -> None:
    from .drivers.serve import ServeSpec, serve

    serve(ServeSpec(db, scheduler_file, scheduler, gpus, workers, device, gpu_id,
                    _within_cpus(num_threads)),
          ready=lambda text: print(f"gblastn: {text}", file=sys.stderr, flush=True))


@app.command("warmup", help="Compile the search's code ahead, once per install (e.g. in a "
             "container build): later searches start at once.")
def warmup_command(
    task: str = typer.Option("all", "-task", help="megablast, dc-megablast, blastn, "
                             "blastn-short or all."),
    device: str = typer.Option("auto", "-device", help="auto, gpu or cpu: the stages the "
                               "searches on this machine will use (with a GPU, its kernels too)."),
    gpu_id: int = typer.Option(0, "-gpu_id"),
) -> None:
    from .compile_ahead import TASKS, compile_task, is_compiled, write_bundles, write_bytecode
    from .scan import select_backend

    tasks = TASKS if task == "all" else (task,)
    if any(name not in TASKS for name in tasks):
        raise OptionsError(f"-task {task}: use {', '.join(TASKS)} or all")
    from .pools import beside

    write_bytecode()  # its worker processes forked before this command starts a thread
    backend = beside(select_backend, device, gpu_id)
    compiled = []
    for name in tasks:
        started = time.perf_counter()
        if is_compiled(name, device):
            print(f"gblastn: -task {name} is compiled", file=sys.stderr)
            continue
        compile_task(name, device, backend)
        compiled.append(name)
        print(f"gblastn: -task {name} compiled in {time.perf_counter() - started:.0f} s",
              file=sys.stderr)
    backend.result()  # a GPU asked for and missing is an error here too
    # their machine-code bundles, as a compiling search writes its task's: the first
    # search after a warm-up then starts without numba too
    write_bundles(compiled, device, gpu_id)


# -- database commands: makedb, dbinfo, dbcmd ------------------------------------------------

FASTA_LINE_WIDTH = 80  # blastdbcmd's default -line_length


@app.command("makedb")
def makedb_command(
    inputs: list[str] = typer.Option(..., "-in", help="FASTA file(s), plain or gzip; '-' reads stdin. "
                                     "Repeat the flag or give several names in one quoted value."),
    dbtype: str = typer.Option("nucl", "-dbtype", help="Molecule type; only 'nucl' is supported."),
    out: str = typer.Option(None, "-out", help="Database name (default: the first input's name); "
                            "missing folders on the way are made."),
    title: str = typer.Option(None, "-title", help="Database title (default: the input names)."),
    parse_seqids: bool = typer.Option(False, "-parse_seqids", help="Parse FASTA-style Seq-ids "
                                      "(gi|..., ref|...|); duplicate ids are an error."),
    max_file_sz: str = typer.Option("1GB", "-max_file_sz", help="Volume size cap, e.g. 1GB, 500MB."),
    taxid: int = typer.Option(None, "-taxid", click_type=INTEGER,
                              help="Taxid of every sequence (for -taxids and staxid)."),
    taxid_map: str = typer.Option(None, "-taxid_map", help="File of 'id taxid' lines giving "
                                  "the sequences their taxids (needs -parse_seqids)."),
    strict: bool = typer.Option(False, "-strict", help="Refuse a sequence letter outside "
                                "IUPAC (default: drop it with makeblastdb's warning)."),
    mask_data: str = typer.Option(None, "-mask_data", help="Comma-separated masking data files "
                                  "(dustmasker or windowmasker -outfmt maskinfo_asn1_bin or "
                                  "maskinfo_asn1_text), for search -db_soft_mask and "
                                  "-db_hard_mask."),
    mask_id: str = typer.Option(None, "-mask_id", help="Comma-separated names of the "
                                "-mask_data algorithms (their ids then count from 100)."),
    quiet: bool = typer.Option(False, "-quiet", help="No progress bar and no summary."),
) -> None:
    """Build a gblastn database from FASTA (as makeblastdb -dbtype nucl)."""
    import time

    from .db.writer import make_db
    from .errors import OptionsError

    if dbtype != "nucl":
        raise OptionsError(f"-dbtype {dbtype}: only nucleotide databases (-dbtype nucl) are supported")
    if out is None:
        if inputs[0] == "-":
            raise OptionsError("-out is required when reading stdin")
        out = inputs[0]
    started = time.perf_counter()
    warn = (lambda message: None) if quiet else None
    kwargs = {"warn": warn} if warn else {}
    path = make_db(inputs, out, title=title, parse_seqids=parse_seqids, max_file_sz=max_file_sz,
                   progress=False if quiet else None, taxid=taxid, taxid_map=taxid_map,
                   strict=strict, mask_data=mask_data, mask_id=mask_id, **kwargs)
    if not quiet:
        from .db.reader import open_db
        with open_db(path) as db:
            print(f"Added {db.num_seqs:,} sequences ({db.total_letters:,} letters, "
                  f"{len(db.volumes)} volume{'s' if len(db.volumes) != 1 else ''}) to {path} "
                  f"in {time.perf_counter() - started:.2f} s")


@app.command("dbinfo")
def dbinfo_command(db: str = typer.Option(..., "-db", help="Database name.")) -> None:
    """Describe a database (as blastdbcmd -info)."""
    from .db.reader import open_db

    with open_db(db) as database:
        lines = [f"Database: {database.title}",
                 f"\t{database.num_seqs:,} sequences; {database.total_letters:,} total bases",
                 "",
                 f"Date: {database.created}\tLongest sequence: {database.max_length:,} bases",
                 "",
                 f"gblastn database format version: {database.format_version}",
                 "",
                 *_mask_algorithm_lines(getattr(database, "mask_algorithms", {})),
                 "Volumes:"]
        lines += [f"\t{v.path} ({v.num_seqs:,} sequences, "
                  f"ordinals {v.first_ordinal:,}-{v.first_ordinal + v.num_seqs - 1:,})"
                  for v in database.volumes]
    print("\n".join(lines))


def _mask_algorithm_lines(algorithms: dict) -> list[str]:
    """The masking algorithms of a database (makedb -mask_data), as blastdbcmd -info
    lists them."""
    if not algorithms:
        return []
    return ["Available filtering algorithms applied to database sequences:", "",
            f"{'Algorithm ID':<13}{'Algorithm name':<40}{'Algorithm options':<40}",
            *(f"{algorithm_id:<13}{name:<40}{options or 'default options used':<40}"
              for algorithm_id, (name, options) in sorted(algorithms.items())), ""]


@app.command("dbcmd")
def dbcmd_command(
    db: str = typer.Option(..., "-db", help="Database name."),
    entry: str = typer.Option(..., "-entry", help="Comma-separated ids, or 'all'."),
    line_length: int = typer.Option(FASTA_LINE_WIDTH, "-line_length", help="Letters per FASTA line."),
) -> None:
    """Print sequences as FASTA with their true letters (as blastdbcmd -entry)."""
    from .alphabet import IUPAC_FROM_BLASTNA
    from .db.reader import open_db
    from .errors import OptionsError

    if line_length < 1:
        raise OptionsError("-line_length must be at least 1")
    out = sys.stdout.buffer
    with open_db(db) as database:
        if entry.strip().lower() == "all":
            ordinals = range(database.num_seqs)
        else:
            ordinals = [database.find(item) for item in entry.split(",") if item.strip()]
        for ordinal in ordinals:
            if database.parse_seqids:
                header = f">{database.accession(ordinal)} {database.title_of(ordinal)}"
            else:
                header = ">" + database.defline(ordinal)
            out.write(header.encode("utf-8", "replace") + b"\n")
            letters = IUPAC_FROM_BLASTNA[database.blastna(ordinal)].tobytes()
            out.write(_wrap(letters, line_length))
    out.flush()


def _wrap(letters: bytes, width: int) -> bytes:
    """Letters cut into lines of `width`, each ending with a newline."""
    import numpy as np

    n = len(letters)
    if n == 0:
        return b""
    rows = (n + width - 1) // width
    grid = np.full((rows, width + 1), 0x0A, dtype=np.uint8)
    padded = np.zeros(rows * width, dtype=np.uint8)
    padded[:n] = np.frombuffer(letters, dtype=np.uint8)
    grid[:, :width] = padded.reshape(rows, width)
    text = grid.tobytes()
    tail = n - (rows - 1) * width  # letters on the last line
    return text[:(rows - 1) * (width + 1) + tail] + b"\n"
