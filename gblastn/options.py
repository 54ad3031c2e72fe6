"""Search options: a task preset plus the user's overrides, validated once and frozen.

Defaults are BLAST+ 2.12's command-line defaults per task (spec §1). Values derived from
the statistics (raw cutoffs, X-drops in raw units) are not here: they depend on the query
batch and the database and are computed in `gblastn.stats`.
"""

import math
import re
from dataclasses import dataclass, field, fields, replace

from .errors import OptionsError

TASKS = ("megablast", "dc-megablast", "blastn", "blastn-short")
TEMPLATE_TYPES = ("coding", "optimal", "coding_and_optimal")  # -template_type
TEMPLATE_LENGTHS = (16, 18, 21)  # -template_length
LARGEST_INTEGER = 2**31 - 1  # blastn's integer arguments are 32-bit
_REAL_FIELDS = ("evalue", "xdrop_ungap", "xdrop_gap", "xdrop_gap_final", "perc_identity",
                "qcov_hsp_perc", "best_hit_overhang", "best_hit_score_edge")
BEST_HIT_OPTIONS = ("best_hit_overhang", "best_hit_score_edge")
# blastn's defaults (kBestHit_OverhangDflt, kBestHit_ScoreEdgeDflt): giving one of the two
# options turns the filter on with the other's default
BEST_HIT_DEFAULT = 0.1


@dataclass(frozen=True)
class DustOptions:
    level: int = 20
    window: int = 64
    linker: int = 1
    # the values as given, which BLAST's reports name even where they fall back
    given: tuple | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SearchOptions:
    task: str = "megablast"
    word_size: int = 28
    reward: int = 1
    penalty: int = -2
    gapopen: int = 0
    gapextend: int = 0
    evalue: float = 10.0
    xdrop_ungap: float = 20.0
    xdrop_gap: float = 25.0
    xdrop_gap_final: float = 100.0
    gap_trigger: float = 27.0
    dust: DustOptions | None = field(default_factory=DustOptions)
    soft_masking: bool = True
    lcase_masking: bool = False
    window_masker_db: str | None = None  # -window_masker_db: a windowmasker unit counts file
                                         # whose masks replace DUST's and lower case's
    strand: str = "both"
    max_target_seqs: int = 500
    max_hsps: int = 0  # 0: unlimited
    perc_identity: float = 0.0
    qcov_hsp_perc: float = 0.0
    min_diag_separation: int = 6
    num_threads: int = 1
    dbsize: int = 0                # -dbsize: the database's letters for the statistics (0: its own)
    searchsp: int = 0              # -searchsp: every context's effective search space (0: computed)
    min_raw_gapped_score: int = 0  # -min_raw_gapped_score: the gapped cutoff (0: from -evalue)
    no_greedy: bool = False        # -no_greedy: megablast extends with DP, as the other tasks
    ungapped: bool = False         # -ungapped: the ungapped alignments are the HSPs
    seqidlist: str | None = None   # -seqidlist: search only the sequences this file names
    negative_seqidlist: str | None = None  # -negative_seqidlist: all but those
    taxids: str | None = None      # -taxids: search only the sequences of these taxids ('9606,562')
    negative_taxids: str | None = None     # -negative_taxids: all but those
    taxidlist: str | None = None   # -taxidlist: the taxids in a file, one a line
    negative_taxidlist: str | None = None  # -negative_taxidlist: all but those
    db_soft_mask: int | None = None  # -db_soft_mask: the database's masking algorithm whose
                                     # ranges the scan skips (makeblastdb -mask_data)
    db_hard_mask: int | None = None  # -db_hard_mask: ... whose ranges nothing aligns across
    template_length: int = 0       # discontiguous words: the template's letters (0: contiguous words)
    template_type: str = ""        # ... and its kind, one of TEMPLATE_TYPES
    window_size: int = 0           # -window_size: the two-hit window (0: one hit starts an extension)
    culling_limit: int = 0         # -culling_limit: HSPs dominating one that delete it (0: no culling)
    best_hit_overhang: float = 0.0     # -best_hit_overhang (0: the best-hit filter off)
    best_hit_score_edge: float = 0.0   # -best_hit_score_edge (0: the best-hit filter off)
    subject_besthit: bool = False  # -subject_besthit: one HSP per query range of a subject
    query_loc: tuple = ()          # -query_loc: 0-based first and last letters searched (): all

    @property
    def greedy(self) -> bool:
        """Megablast extends with the greedy aligner unless -no_greedy; the other tasks with
        X-drop DP."""
        return self.task == "megablast" and not self.no_greedy


_PRESETS = {
    # megablast's ungapped X-drop is 0 ("use the ungapped cutoff"): blastn's options start
    # zeroed and only the other tasks set the 20-bit default
    "megablast": dict(word_size=28, reward=1, penalty=-2, gapopen=0, gapextend=0,
                      xdrop_ungap=0.0, xdrop_gap=25.0, min_diag_separation=6),
    # discontiguous megablast: blastn's scoring and DP, megablast's containment separation
    "dc-megablast": dict(word_size=11, reward=2, penalty=-3, gapopen=5, gapextend=2,
                         xdrop_gap=30.0, min_diag_separation=6, template_length=18,
                         template_type="coding", window_size=40),
    "blastn": dict(word_size=11, reward=2, penalty=-3, gapopen=5, gapextend=2,
                   xdrop_gap=30.0, min_diag_separation=50),
    # the task itself turns DUST off, but blastn's -dust argument (default "20 64 1") is
    # always applied on top, so from the command line blastn-short does dust its queries
    "blastn-short": dict(word_size=7, reward=1, penalty=-3, gapopen=5, gapextend=2,
                         xdrop_gap=30.0, min_diag_separation=50),
}

def parse_dust(value: str | None) -> DustOptions | None:
    """`-dust yes|no|"level window linker"`."""
    if value is None:
        return DustOptions()
    text = value.strip().lower()
    if text == "yes":
        return DustOptions()
    if text == "no":
        return None
    parts = text.split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise OptionsError(f"invalid -dust value {value!r}: use yes, no, or 'level window linker'")
    level, window, linker = (int(p) for p in parts)
    # out-of-range values fall back to the defaults, as CSymDustMasker does
    return DustOptions(level if 2 <= level <= 64 else 20,
                       window if 8 <= window <= 64 else 64,
                       linker if 1 <= linker <= 32 else 1, (level, window, linker))


def task_defaults(task: str) -> SearchOptions:
    """The options of `task` when none is given (blastn 2.12's defaults for it)."""
    return replace(SearchOptions(task=task), **_PRESETS[task])


def option_names() -> tuple:
    """The keyword of every search option, task first."""
    return tuple(f.name for f in fields(SearchOptions))


def check_option_names(names) -> None:
    """OptionsError naming the first name that is no option, and the closest that is."""
    import difflib

    valid = option_names()
    for name in names:
        if name not in valid:
            closest = difflib.get_close_matches(name, valid, n=1, cutoff=0.0)
            raise OptionsError(f"unknown option {name!r}: did you mean {closest[0]!r}?")


def describe_defaults() -> str:
    """One line per option with its default, and where a task's differs, that task's
    (the text the Python API's documentation shows)."""
    first, *others = (task_defaults(task) for task in TASKS)
    lines = []
    for name in option_names():
        line = f"    {name}={_shown(getattr(first, name))}"
        differing = [f"{o.task}: {_shown(getattr(o, name))}" for o in others
                     if getattr(o, name) != getattr(first, name)]
        if name == "task":
            line += f"  ({', '.join(repr(task) for task in TASKS)})"
        elif differing:
            line += f"  ({'; '.join(differing)})"
        lines.append(line)
    return "\n".join(lines)


def task_default_text(name: str) -> str:
    """blastn -help's default line of option `name`, with each task's value where the tasks
    differ: "Default = `28' (megablast), `11' (dc-megablast, blastn), `7' (blastn-short)"."""
    tasks_of: dict = {}
    for task in TASKS:
        tasks_of.setdefault(_typed_default(getattr(task_defaults(task), name)), []).append(task)
    if len(tasks_of) == 1:
        return f"Default = `{next(iter(tasks_of))}'"
    return "Default = " + ", ".join(f"`{value}' ({', '.join(tasks)})"
                                    for value, tasks in tasks_of.items())


def _typed_default(value) -> str:
    """A default as the command line takes it."""
    if isinstance(value, DustOptions):
        return f"{value.level} {value.window} {value.linker}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return _typed(value)
    return str(value)


def _shown(value) -> str:
    if isinstance(value, DustOptions):
        return f"'{value.level} {value.window} {value.linker}'"
    return repr(value)


def parse_location(text: str, what: str) -> tuple:
    """A -query_loc or -subject_loc value ("from-to", 1-based) as 0-based (first, last),
    checked as blastn checks it (ParseSequenceRange), in its words."""
    def refuse(reason: str):
        raise OptionsError(f"Invalid specification of {what} location ({reason})")

    parts = text.split("-")
    if len(parts) != 2 or not all(re.fullmatch(r"\+?\d+", part) for part in parts):
        refuse("Format: start-stop")
    first, last = (int(part) for part in parts)
    if max(first, last) > LARGEST_INTEGER:
        refuse("Format: start-stop")
    if first <= 0 or last <= 0:
        refuse("range elements cannot be less than or equal to 0")
    if first == last:
        refuse("range cannot be empty")
    if first > last:
        refuse("start cannot be larger than stop")
    return first - 1, last - 1


def make_options(task: str = "megablast", **overrides) -> SearchOptions:
    """Build validated options from a task preset and overrides (None means 'not given')."""
    if task not in TASKS:
        raise OptionsError(f"unknown task {task!r}: choose one of {', '.join(TASKS)}")
    check_option_names(overrides)
    given = {k: v for k, v in overrides.items() if v is not None}
    if "dust" in given and isinstance(given["dust"], str):
        given["dust"] = parse_dust(given["dust"])
    if "window_masker_db" in given:
        given["window_masker_db"] = _file_name("window_masker_db", given["window_masker_db"])
    given = _checked_hsp_filters(given)
    if isinstance(given.get("query_loc"), str):
        given["query_loc"] = parse_location(given["query_loc"], "query")
    options = task_defaults(task)
    try:
        options = replace(options, **given)
    except TypeError as exc:
        raise OptionsError(str(exc)) from None
    _validate(options)
    return options


def _file_name(name: str, value) -> str:
    """A file option given as a string or a path, as a string."""
    import os

    try:
        return os.fspath(value)
    except TypeError:
        raise OptionsError(f"{name} is a file name, not {value!r}") from None


def _checked_hsp_filters(given: dict) -> dict:
    """blastn's checks of the HSP filters' values, in its words, and the best-hit filter's
    two values: giving one turns the filter on with the other's default."""
    max_hsps = given.get("max_hsps")
    if max_hsps is not None and max_hsps < 1:  # 0, the default, stands for no limit
        raise OptionsError(f'Argument "max_hsps". Illegal value, expected >=1:  `{max_hsps}\'')
    culling = given.get("culling_limit")
    if culling is not None and culling < 0:
        raise OptionsError(f'Argument "culling_limit". Illegal value, expected >=0:  '
                           f"`{culling}'")
    best_hit = [name for name in BEST_HIT_OPTIONS if name in given]
    for name in best_hit:
        if not 0 < given[name] < 0.5:
            raise OptionsError(f'Argument "{name}". Illegal value, expected (>0 and <0.5):  '
                               f"`{_typed(given[name])}'")
    if culling is not None and best_hit:
        raise OptionsError(f'Argument "culling_limit". Incompatible with argument:  '
                           f"`{best_hit[0]}'")
    if best_hit:
        given = {**{name: BEST_HIT_DEFAULT for name in BEST_HIT_OPTIONS}, **given}
    return given


def _typed(value: float) -> str:
    """A number as it was most likely typed: 0, not 0.0."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _validate_words(o: SearchOptions) -> None:
    """blastn's checks of discontiguous words (s_DiscWordOptionsValidate, in its order), and
    what gblastn takes of them: templates with megablast's table only (as blastn), and the
    two-hit window only with discontiguous words."""
    if o.template_length:
        if o.word_size not in (11, 12):
            raise OptionsError("Invalid discontiguous template parameters: word size must be "
                               "either 11 or 12")
        if o.template_length not in TEMPLATE_LENGTHS:
            raise OptionsError("Invalid discontiguous template parameters: template length "
                               "must be 16, 18, or 21")
        if o.template_type not in TEMPLATE_TYPES:
            raise OptionsError(f"invalid template type {o.template_type!r}: use "
                               f"{', '.join(TEMPLATE_TYPES)}")
        if o.task in ("blastn", "blastn-short"):
            # these tasks' word sizes choose their own tables, never the discontiguous one
            raise OptionsError("Invalid lookup table type for discontiguous Mega BLAST")
    if o.window_size < 0:
        raise OptionsError("-window_size must be at least 0")
    if o.window_size and not o.template_length:
        raise OptionsError("-window_size above 0 (two hits per extension) is supported only "
                           "with discontiguous words (-task dc-megablast)")


SUBSET_OPTIONS = ("seqidlist", "negative_seqidlist", "taxids", "negative_taxids", "taxidlist",
                  "negative_taxidlist")
# what a search needs the whole database in one process for (not a cluster's shards)
LOCAL_ONLY_OPTIONS = SUBSET_OPTIONS + ("db_soft_mask", "db_hard_mask")
# the options that restrict the database, pairwise exclusive: each pair as blastn names it
# when both are given (the first named is the one that refuses the other)
_EXCLUSIVE_SUBSETS = (
    ("seqidlist", "negative_seqidlist"), ("taxids", "negative_taxids"),
    ("taxids", "taxidlist"), ("taxids", "negative_taxidlist"), ("taxids", "seqidlist"),
    ("taxids", "negative_seqidlist"), ("taxidlist", "negative_taxids"),
    ("taxidlist", "negative_taxidlist"), ("taxidlist", "seqidlist"),
    ("taxidlist", "negative_seqidlist"), ("negative_taxids", "negative_taxidlist"),
    ("seqidlist", "negative_taxids"), ("negative_taxids", "negative_seqidlist"),
    ("seqidlist", "negative_taxidlist"), ("negative_taxidlist", "negative_seqidlist"))


def _check_one_subset(o: SearchOptions) -> None:
    """blastn's refusal of two options that each restrict the database, in its words."""
    for first, second in _EXCLUSIVE_SUBSETS:
        if getattr(o, first) is not None and getattr(o, second) is not None:
            raise OptionsError(f'Argument "{first}". Incompatible with argument:  '
                               f"`{second}'")


def _check_mask_options(o: SearchOptions) -> None:
    if o.db_soft_mask is not None and o.db_hard_mask is not None:
        raise OptionsError('Argument "db_soft_mask". Incompatible with argument:  '
                           "`db_hard_mask'")
    for name in ("db_soft_mask", "db_hard_mask"):
        value = getattr(o, name)
        if value is not None and type(value) is not int:
            raise OptionsError(f"{name} is a masking algorithm's id (an integer), not "
                               f"{value!r}")


def _validate(o: SearchOptions) -> None:
    # every task takes any word size from 4 up, as blastn does (a word longer than a query
    # finds no hit in it)
    if not 4 <= o.word_size <= LARGEST_INTEGER:
        raise OptionsError(f"word size {o.word_size} out of range: must be between 4 and "
                           f"{LARGEST_INTEGER}")
    for name in _REAL_FIELDS:
        if not math.isfinite(getattr(o, name)):
            raise OptionsError(f"{name} must be a finite number, not {getattr(o, name)}")
    if o.reward <= 0:
        raise OptionsError("the match reward must be positive")
    if o.penalty >= 0:
        raise OptionsError("the mismatch penalty must be negative")
    if not o.greedy and o.gapopen == 0 and o.gapextend == 0:
        # blastn's words: DP has no linear gap costs (megablast's 0/0 default)
        raise OptionsError("Greedy extension must be used if gap existence and extension "
                           "options are zero")
    _validate_words(o)
    if o.gapextend == 0 and o.gapopen > 0:
        raise OptionsError("a gap extension cost of 0 is only allowed with a gap opening cost of 0")
    if o.evalue <= 0:
        raise OptionsError("the E-value threshold must be positive")
    if o.strand not in ("both", "plus", "minus"):
        raise OptionsError(f"invalid strand {o.strand!r}: use both, plus or minus")
    if o.max_target_seqs < 1:
        raise OptionsError("-max_target_seqs must be at least 1")
    if o.max_hsps < 0:
        raise OptionsError("-max_hsps must be at least 1")
    if not 0 <= o.perc_identity <= 100:
        raise OptionsError("-perc_identity must be between 0 and 100")
    if not 0 <= o.qcov_hsp_perc <= 100:
        raise OptionsError("-qcov_hsp_perc must be between 0 and 100")
    if o.searchsp < 0:
        raise OptionsError("-searchsp must be at least 0")
    _check_one_subset(o)
    _check_mask_options(o)
    if o.num_threads < 1:
        raise OptionsError("-num_threads must be at least 1")
    # the reward/penalty/gap set must be one BLAST supports (spec §7.2)
    # (an ungapped search needs no table: blastn takes any scores with -ungapped)
    from .scoring import check_supported_scoring
    if not o.ungapped:
        check_supported_scoring(o.reward, o.penalty, o.gapopen, o.gapextend)
