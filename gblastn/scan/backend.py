"""The backend contract: what a search asks of the device that scans (CPU or GPU), and what
each backend declares it does.

Every backend scans (``find_seeds``: the same Seeds on either device, see ``gblastn.scan``).
Beyond that a backend declares its capabilities once, and a search resolves them into its
BackendPlan before its first batch (the engine reads the plan, never the backend's
attributes):

* ``scans_whole_volumes``: one call per volume is cheaper than one per part of it (a GPU
  call has a fixed cost), so the drivers share one scan among a volume's jobs;
* ``stops_scans``: its scan stops at a seed budget and goes on from
  there (``find_seeds_from``), so that a search holds a bounded number of seeds even
  within one chunk;
* ``ungapped_ahead``: with the seeds it makes every seed's ungapped extension ahead of the
  ungapped stage's in-order pass (``extended_seeds``);
* ``diagonals_on_device``: it makes that in-order pass too, so that only the initial hits
  come back (``initial_hits``; the seeds never leave the device);
* ``greedy_ahead``: it makes the initial hits' score-only greedy extensions ahead of the
  gapped stage (``greedy_extensions``; linear gap costs only);
* ``dp_ahead``: it makes their score-only X-drop DP extensions ahead (``dp_extensions``;
  blastn, blastn-short);
* ``tails_ahead``: it makes the traceback's alignments ahead of the traceback, on
  subjects it holds: the greedy aligner's searches (``greedy_tails``; linear gap costs
  only) or the X-drop DP's alignments (``dp_tails``), and ``resident_address``;
* ``preloads``: it keeps volumes in its own memory, and copies them ahead when asked
  (``preload``);
* ``retires``: it holds a device that the search may give back before its tracebacks
  (``retire``).

A backend keeps its copy of a volume under the SubjectBuffer's key: the volume it came from
(a later search of the same open database finds the copy), or the record itself.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Capabilities:
    scans_whole_volumes: bool = False
    stops_scans: bool = False
    ungapped_ahead: bool = False
    diagonals_on_device: bool = False
    greedy_ahead: bool = False
    dp_ahead: bool = False
    tails_ahead: bool = False
    preloads: bool = False
    retires: bool = False


@dataclass(frozen=True, eq=False)
class SubjectBuffer:
    """A volume's subjects as a backend reads them: every sequence 2-bit packed in one
    read-only buffer, sequence i from byte byte_offset[i]. A backend that copies the buffer
    keeps the copy under `key`: the volume it is of (engine.SubjectBuffers), or, for a
    buffer of no volume, this record."""

    packed: np.ndarray       # uint8
    byte_offset: np.ndarray  # int64 [num_seqs + 1]
    volume: object = None    # the volume whose buffer this is

    @property
    def key(self) -> object:
        return self if self.volume is None else self.volume


class Backend:
    """A scan backend. Subclasses implement find_seeds, declare their capabilities, and
    implement the calls those capabilities stand for; the others are never called."""

    name = "cpu"  # the device it runs on: cpu or gpu
    capabilities = Capabilities()

    def find_seeds(self, table, subjects: SubjectBuffer, chunk_byte_offset: np.ndarray,
                   chunk_length: np.ndarray, num_threads: int = 1, spread=None):
        raise NotImplementedError

    def find_seeds_from(self, table, subjects: SubjectBuffer, chunk_byte_offset: np.ndarray,
                        chunk_length: np.ndarray, position: int, budget: int,
                        out: np.ndarray | None = None) -> tuple:
        raise NotImplementedError(f"the {self.name} backend's scan does not stop")

    def extended_seeds(self, table, subjects: SubjectBuffer, chunk_byte_offset: np.ndarray,
                       chunk_length: np.ndarray, rules) -> tuple:
        raise NotImplementedError(f"the {self.name} backend makes no ungapped extensions")

    def initial_hits(self, table, subjects: SubjectBuffer, chunk_byte_offset: np.ndarray,
                     chunk_length: np.ndarray, rules, walk) -> tuple:
        """The initial hits of the ungapped stage's in-order pass, in
        ungapped.sort_initial_hits' order, and the number of seeds."""
        raise NotImplementedError(f"the {self.name} backend makes no in-order pass")

    def greedy_extensions(self, subjects: SubjectBuffer, chunk_byte_offset, chunk_length,
                          hit_chunk, hit_q_start, hit_s_start, hit_length, hit_context, batch,
                          xdrop: int, reward: int, penalty: int) -> np.ndarray:
        raise NotImplementedError(f"the {self.name} backend makes no greedy extensions")

    def dp_extensions(self, subjects: SubjectBuffer, chunk_byte_offset, chunk_length, hits,
                      contexts, batch, matrix: np.ndarray, gap_open: int, gap_extend: int,
                      xdrop: int) -> np.ndarray:
        raise NotImplementedError(f"the {self.name} backend makes no DP extensions")

    def greedy_tails(self, rows, subject_address, subject_length, exact, batch, xdrop: int,
                     reward: int, penalty: int) -> tuple:
        raise NotImplementedError(f"the {self.name} backend makes no traceback searches")

    def dp_tails(self, rows, subject_address, subject_length, exact, batch, matrix: np.ndarray,
                 gap_open: int, gap_extend: int, xdrop: int) -> tuple:
        raise NotImplementedError(f"the {self.name} backend makes no DP tracebacks")

    def resident_address(self, subjects: SubjectBuffer) -> int | None:
        """The device address of a volume's copy, if the backend holds one."""
        return None

    def preload(self, subjects: SubjectBuffer) -> bool:
        """Copy a volume ahead of its first scan; whether it is held now."""
        return False

    def retire(self, for_good: bool = False) -> None:
        """Give the device back (nothing to give for a backend without one)."""


class CpuBackend(Backend):
    """The CPU's scan (``gblastn.scan.cpu``, the reference), which stops at a seed budget."""

    capabilities = Capabilities(stops_scans=True)

    def find_seeds_from(self, table, subjects: SubjectBuffer, chunk_byte_offset: np.ndarray,
                        chunk_length: np.ndarray, position: int, budget: int,
                        out: np.ndarray | None = None) -> tuple:
        from .cpu import find_seeds_from

        return find_seeds_from(table, subjects.packed, chunk_byte_offset, chunk_length,
                               position, budget, out)

    def find_seeds(self, table, subjects: SubjectBuffer, chunk_byte_offset: np.ndarray,
                   chunk_length: np.ndarray, num_threads: int = 1, spread=None):
        from .cpu import find_seeds

        return find_seeds(table, subjects.packed, chunk_byte_offset, chunk_length, num_threads,
                          spread)


CPU = CpuBackend()


@dataclass(frozen=True)
class BackendPlan:
    """A search's backend and what the engine has it do, resolved once from the backend's
    capabilities and the options (the GPU's greedy kernels take linear gap costs only; the
    DP kernel serves the tasks that are not greedy)."""

    backend: Backend
    scans_whole_volumes: bool
    stops_scans: bool
    ungapped_ahead: bool
    diagonals_on_device: bool
    greedy_ahead: bool
    dp_ahead: bool
    tails_ahead: bool

    @classmethod
    def resolve(cls, backend: Backend, options) -> "BackendPlan":
        caps = backend.capabilities
        linear_greedy = options.greedy and options.gapopen == 0 and options.gapextend == 0
        return cls(backend, caps.scans_whole_volumes, caps.stops_scans, caps.ungapped_ahead,
                   caps.ungapped_ahead and caps.diagonals_on_device,
                   caps.greedy_ahead and linear_greedy,
                   caps.dp_ahead and not options.greedy,
                   caps.tails_ahead and (linear_greedy or not options.greedy))
