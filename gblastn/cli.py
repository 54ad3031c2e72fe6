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
