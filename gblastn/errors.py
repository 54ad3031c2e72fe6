"""Typed errors. Library code raises these; the CLI turns each into one line on stderr
(`gblastn: error: ...`) and the exit code the class carries. Never a traceback for bad input."""


class GblastnError(Exception):
    """Base of every error gblastn reports to a user."""

    exit_code = 1


class InputError(GblastnError):
    """Bad user input: a FASTA file, a query list, a missing file."""

    exit_code = 2


class OptionsError(GblastnError):
    """An invalid option or combination of options (BLAST refuses it too)."""

    exit_code = 2


class DatabaseError(GblastnError):
    """A database that is missing, damaged, or written by a newer format version."""

    exit_code = 3


class OutputError(GblastnError):
    """An output that cannot be written."""

    exit_code = 4


class MissingPackageError(GblastnError, ImportError):
    """An optional package a feature needs is not installed (Biopython for the API's
    conversions)."""

    exit_code = 1


class GpuUnavailableError(GblastnError):
    """`-device gpu` was asked for but no usable GPU (or pycuda) is present."""

    exit_code = 5


class ClusterError(GblastnError):
    """A search on a Dask cluster that could not reach it or could not finish there."""

    exit_code = 6
