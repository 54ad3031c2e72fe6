"""The command line: `gblastn makedb | dbinfo | dbcmd | search`, with BLAST's single-dash flags.

The only place that prints errors: every GblastnError becomes one line on stderr
(`gblastn: error: ...`) and its exit code.
"""

import sys

import typer

from .errors import GblastnError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  context_settings={"help_option_names": ["-help", "--help", "-h"]},
                  help="GPU-accelerated nucleotide search with NCBI BLAST+ 2.12's results.")


def main() -> None:
    try:
        app(standalone_mode=False)
    except GblastnError as exc:
        print(f"gblastn: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("gblastn: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # click's usage errors and the like
        import click
        if isinstance(exc, click.exceptions.Abort):
            print("gblastn: interrupted", file=sys.stderr)
            sys.exit(130)
        if isinstance(exc, click.ClickException):
            print(f"gblastn: error: {exc.format_message()}", file=sys.stderr)
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Exit):
            sys.exit(exc.exit_code)
        raise


# ---------------------------------------------------------------------------------------------
# search


@app.command("search", help="Search nucleotide queries against a gblastn database (blastn's flags).")
def search_command(
    db: str = typer.Option(..., "-db", help="Database name (as given to makedb -out)."),
    query: str = typer.Option(None, "-query", help="Query FASTA file ('-' for stdin)."),
    query_list: str = typer.Option(None, "-query_list", help="File naming query FASTA files, one per line."),
    out: str = typer.Option(None, "-out", help="Output file (default: stdout)."),
    out_dir: str = typer.Option(None, "-out_dir", help="With -query_list: one output per listed file."),
    task: str = typer.Option("megablast", "-task", help="megablast, blastn or blastn-short."),
    outfmt: str = typer.Option("6", "-outfmt", help="'6' or '7', optionally followed by column names."),
    evalue: float = typer.Option(None, "-evalue"),
    word_size: int = typer.Option(None, "-word_size"),
    reward: int = typer.Option(None, "-reward"),
    penalty: int = typer.Option(None, "-penalty"),
    gapopen: int = typer.Option(None, "-gapopen"),
    gapextend: int = typer.Option(None, "-gapextend"),
    xdrop_ungap: float = typer.Option(None, "-xdrop_ungap"),
    xdrop_gap: float = typer.Option(None, "-xdrop_gap"),
    xdrop_gap_final: float = typer.Option(None, "-xdrop_gap_final"),
    dust: str = typer.Option(None, "-dust", help="yes, no, or 'level window linker'."),
    soft_masking: str = typer.Option(None, "-soft_masking", help="true or false."),
    lcase_masking: bool = typer.Option(False, "-lcase_masking", help="Mask lower-case query letters."),
    strand: str = typer.Option(None, "-strand", help="both, plus or minus."),
    max_target_seqs: int = typer.Option(None, "-max_target_seqs"),
    max_hsps: int = typer.Option(None, "-max_hsps"),
    perc_identity: float = typer.Option(None, "-perc_identity"),
    qcov_hsp_perc: float = typer.Option(None, "-qcov_hsp_perc"),
    num_threads: int = typer.Option(None, "-num_threads"),
    device: str = typer.Option("auto", "-device", help="auto, gpu or cpu."),
    gpu_id: int = typer.Option(0, "-gpu_id"),
) -> None:
    from .options import make_options
    from .pipeline import OutputSpec, query_files, run_search
    from .scan import select_backend

    options = make_options(
        task, evalue=evalue, word_size=word_size, reward=reward, penalty=penalty,
        gapopen=gapopen, gapextend=gapextend, xdrop_ungap=xdrop_ungap, xdrop_gap=xdrop_gap,
        xdrop_gap_final=xdrop_gap_final, dust=dust, soft_masking=_parse_bool("-soft_masking", soft_masking),
        lcase_masking=lcase_masking or None, strand=strand, max_target_seqs=max_target_seqs,
        max_hsps=max_hsps, perc_identity=perc_identity, qcov_hsp_perc=qcov_hsp_perc,
        num_threads=num_threads)
    backend = select_backend(device, gpu_id)
    files = query_files(query, query_list)
    run_search(files, db, options, OutputSpec(outfmt, out, out_dir, db), backend)


def _parse_bool(flag: str, value: str | None) -> bool | None:
    if value is None:
        return None
    text = value.strip().lower()
    if text in ("true", "t", "yes", "1"):
        return True
    if text in ("false", "f", "no", "0"):
        return False
    from .errors import OptionsError
    raise OptionsError(f"{flag} takes true or false, not {value!r}")
