"""`python -m gblastn` and the `gblastn` command: the device's context is begun (for a search
that may use the GPU) before the command line's modules are imported."""

import sys


def main() -> None:
    from .cuda_context import start_context_for

    start_context_for(sys.argv)
    from .cli import main as run_command_line

    run_command_line()


if __name__ == "__main__":
    main()
