"""`python -m gblastn` and the `gblastn` command: the device's context is begun (for a search
that may use the GPU) before the command line's modules are imported."""

import os
import sys


def main() -> None:
    # numpy starts OpenBLAS's threads as it is imported, 0.04 s of CPU beside the imports'
    # 0.08 s (a served search's process is little more than its imports); gblastn calls no
    # BLAS, and a user's own setting stands
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .cuda_context import start_context_for

    start_context_for(sys.argv)
    from .cli import main as run_command_line

    run_command_line()


if __name__ == "__main__":
    main()
