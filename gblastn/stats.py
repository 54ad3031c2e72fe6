"""Karlin-Altschul statistics: lambda/K/H, length adjustment, cutoffs, E-values, bit scores.

Everything here reproduces NCBI BLAST+ 2.12 (blast_stat.c, blast_parameters.c, blast_setup.c)
to the last bit where an integer result (a cutoff, an X-drop, a length adjustment) or a
printed value could change: the same formulas in the same floating-point order, the same
iteration limits and the same special cases.

Per query context (one strand of one query):

* the **ungapped** block comes from the context's letter composition (N excluded) against a
  uniform subject; it sets the ungapped X-drop and the gap trigger;
* the **gapped** block is a row of BLAST's tables for (reward, penalty, gapopen, gapextend),
  or, for gap costs in the "infinite" regime, a copy of the ungapped block;
* the gapped block, alpha and beta give the length adjustment, the effective search space,
  the gapped E-value cutoff, the E-values and the bit scores.

The small numeric kernels are numba functions; the orchestration is plain Python because it
runs once per query batch.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np

from .alphabet import score_matrix
from .errors import OptionsError
from .scoring import check_supported_scoring, find_row, is_infinite_regime, scoring_system
from .numba_start import njit

LN2 = 0.69314718055994530941723212145818   # NCBIMATH_LN2

SCORE_MIN = -(2 ** 15)      # BLAST_SCORE_MIN (INT2_MIN): matrix entries at or below are ignored
SCORE_MAX = 2 ** 15 - 1     # BLAST_SCORE_MAX (INT2_MAX)
INT4_MAX = 2 ** 31 - 1

LAMBDA_START = 0.5          # BLAST_KARLIN_LAMBDA0_DEFAULT
LAMBDA_TOLERANCE = 1.0e-5   # BLAST_KARLIN_LAMBDA_ACCURACY_DEFAULT
LAMBDA_MAX_STEPS = 20       # itmax passed to NlmKarlinLambdaNR
LAMBDA_MAX_NEWTON = 20 + 17  # maxNewton: 20 + BLAST_KARLIN_LAMBDA_ITER_DEFAULT
K_SUM_LIMIT = 0.0001        # BLAST_KARLIN_K_SUMLIMIT_DEFAULT
K_MAX_TERMS = 100           # BLAST_KARLIN_K_ITER_MAX
EVALUE_EQUAL_BELOW = 1.0e-180  # E-values below this compare equal when ordering
SMALLEST_EVALUE = 1.0e-297  # BlastKarlinEtoS_simple keeps log() finite with this floor

NUCLEOTIDE_N = 14           # blastna N and gap: left out of the query composition
NUCLEOTIDE_GAP = 15


@dataclass
class KarlinBlock:
    """Karlin-Altschul parameters: lambda, K, ln K and the relative entropy H."""

    lambda_: float
    k: float
    log_k: float
    h: float


# --------------------------------------------------------------------------------------------
# Ungapped parameters from a score distribution (numba kernels; probabilities are indexed by
# score - low, so index 0 is the lowest observed score).

@njit(cache=True, nogil=True)
def _expm1(x):
    """BLAST_Expm1: a 13-term series near zero, exp(x) - 1 elsewhere."""
    absx = abs(x)
    if absx > .33:
        return math.exp(x) - 1.
    if absx < 1.e-16:
        return x
    return x * (1. + x * (1. / 2. + x * (1. / 6. + x * (1. / 24. + x * (
        1. / 120. + x * (1. / 720. + x * (1. / 5040. + x * (1. / 40320. + x * (
            1. / 362880. + x * (1. / 3628800. + x * (1. / 39916800. + x * (
                1. / 479001600. + x / 6227020800.))))))))))))


@njit(cache=True, nogil=True)
def _powi(x, n):
    """BLAST_Powi: x**n by repeated squaring (bit-exact with BLAST's order)."""
    if n == 0:
        return 1.
    if x == 0.:
        if n < 0:
            return math.inf
        return 0.
    if n < 0:
        x = 1. / x
        n = -n
    y = 1.
    while n > 0:
        if n & 1:
            y *= x
        n //= 2
        x *= x
    return y


@njit(cache=True, nogil=True)
def _score_lattice(probs, low, high):
    """Greatest common divisor of the scores that occur (the lattice step), from -low."""
    d = -low
    i = 1
    while i <= high - low and d > 1:
        if probs[i] != 0.0:
            d = math.gcd(d, i)
        i += 1
    return d


@njit(cache=True, nogil=True)
def _lambda_newton(probs, d, low, high, lambda0, tolx, itmax, max_newton):
    """NlmKarlinLambdaNR: safeguarded Newton on x = exp(-lambda) for
    sum_s p(s) exp(lambda s) = 1, bisecting whenever Newton misbehaves."""
    a = 0.
    b = 1.
    f = 4.
    is_newton = False
    x0 = math.exp(-lambda0)
    x = x0 if (0. < x0 and x0 < 1.) else .5
    for k in range(itmax):
        fold = f
        was_newton = is_newton
        is_newton = False
        # Horner's rule for the polynomial and its derivative
        g = 0.
        f = probs[0]
        i = low + d
        while i < 0:
            g = x * g + f
            f = f * x + probs[i - low]
            i += d
        g = x * g + f
        f = f * x + probs[-low] - 1
        i = d
        while i <= high:
            g = x * g + f
            f = f * x + probs[i - low]
            i += d
        if f > 0:
            a = x
        elif f < 0:
            b = x
        else:
            break
        if b - a < 2 * a * (1 - b) * tolx:
            x = (a + b) / 2
            break
        if k >= max_newton or (was_newton and abs(f) > .9 * abs(fold)) or g >= 0:
            x = (a + b) / 2
        else:
            p = -f / g
            y = x + p
            if y <= a or y >= b:
                x = (a + b) / 2
            else:
                is_newton = True
                x = y
                if abs(p) < tolx * x * (1 - x):
                    break
    return -math.log(x) / d


@njit(cache=True, nogil=True)
def _entropy(probs, low, high, lam):
    """BlastKarlinLtoH: H = lambda * sum_s s p(s) exp(lambda s), evaluated by Horner."""
    etonlam = math.exp(-lam)
    total = low * probs[0]
    for score in range(low + 1, high + 1):
        total = score * probs[score - low] + etonlam * total
    scale = _powi(etonlam, high)
    if scale > 0.0:
        return lam * total / scale
    return lam * math.exp(lam * high + math.log(total))


@njit(cache=True, nogil=True)
def _karlin_k(probs, low, high, score_avg, lam, h):
    """BlastKarlinLHtoK: closed forms when the extreme scores are +-1, otherwise the series
    over P(score, length) truncated at K_SUM_LIMIT or K_MAX_TERMS terms."""
    if lam <= 0. or h <= 0.:
        return -1.
    if score_avg >= 0.0:
        return -1.
    rng = high - low
    divisor = -low
    i = 1
    while i <= rng and divisor > 1:
        if probs[i] != 0.0:
            divisor = math.gcd(divisor, i)
        i += 1
    high = high // divisor
    low = -((-low) // divisor)
    lam *= divisor
    rng = high - low
    first_term = h / lam
    exp_minus_lambda = math.exp(-lam)
    if low == -1 and high == 1:
        p_low = probs[low * divisor - (low * divisor)]   # the lowest score's probability
        p_high = probs[high * divisor - (low * divisor)]
        return (p_low - p_high) * (p_low - p_high) / p_low
    if low == -1 or high == 1:
        if high != 1:
            avg = score_avg / divisor
            first_term = (avg * avg) / first_term
        return first_term * (1.0 - exp_minus_lambda)

    # P(i, j) for alignments of j letters, kept in place from the highest score down.
    # As in BLAST, the score probabilities are read from the lowest observed score with the
    # lattice-reduced range.
    prob = np.zeros(K_MAX_TERMS * rng + 1)
    outer_sum = 0.
    low_score = 0
    high_score = 0
    prob[0] = 1.
    inner_sum = 1.
    terms = 0
    while terms < K_MAX_TERMS and inner_sum > K_SUM_LIMIT:
        first = rng
        last = rng
        low_score += low
        high_score += high
        pos = high_score - low_score
        while pos >= 0:
            p1 = pos - first
            p1_end = pos - last
            p2 = first
            inner_sum = 0.
            while p1 >= p1_end:
                inner_sum += prob[p1] * probs[p2]
                p1 -= 1
                p2 += 1
            if first:
                first -= 1
            if pos <= rng:
                last -= 1
            prob[pos] = inner_sum
            pos -= 1
        pos = 0
        inner_sum = prob[pos]
        i = low_score + 1
        while i < 0:
            pos += 1
            inner_sum = prob[pos] + inner_sum * exp_minus_lambda
            i += 1
        inner_sum *= exp_minus_lambda
        while i <= high_score:
            pos += 1
            inner_sum += prob[pos]
            i += 1
        terms += 1
        inner_sum /= terms
        outer_sum += inner_sum
    return -math.exp(-2.0 * outer_sum) / (first_term * _expm1(-lam))


@njit(cache=True, nogil=True)
def _score_distribution(matrix, query_prob, subject_prob, loscore, hiscore):
    """BlastScoreFreqCalc: p(s) over [loscore, hiscore], normalised over observed scores.
    Returns (probs indexed by s - loscore, obs_min, obs_max, score_avg)."""
    sprob = np.zeros(hiscore - loscore + 1)
    n = matrix.shape[0]
    for i in range(n):
        for j in range(n):
            score = matrix[i, j]
            if score >= loscore:
                sprob[score - loscore] += query_prob[i] * subject_prob[j]
    score_sum = 0.
    obs_min = SCORE_MIN
    obs_max = SCORE_MIN
    for score in range(loscore, hiscore + 1):
        if sprob[score - loscore] > 0.:
            score_sum += sprob[score - loscore]
            obs_max = score
            if obs_min == SCORE_MIN:
                obs_min = score
    score_avg = 0.0
    if score_sum > 0.0001 or score_sum < -0.0001:
        for score in range(obs_min, obs_max + 1):
            sprob[score - loscore] /= score_sum
            score_avg += score * sprob[score - loscore]
    return sprob, obs_min, obs_max, score_avg


@njit(cache=True, nogil=True)
def _ungapped_from_distribution(sprob, loscore, obs_min, obs_max, score_avg):
    """Blast_KarlinBlkUngappedCalc: (lambda, K, H), or lambda -1 when they do not exist."""
    if score_avg >= 0. or obs_min >= 0 or obs_max <= 0:
        return -1., -1., -1.
    probs = sprob[obs_min - loscore:obs_max - loscore + 1]
    d = _score_lattice(probs, obs_min, obs_max)
    lam = _lambda_newton(probs, d, obs_min, obs_max, LAMBDA_START, LAMBDA_TOLERANCE,
                         LAMBDA_MAX_STEPS, LAMBDA_MAX_NEWTON)
    if lam < 0.:
        return -1., -1., -1.
    h = _entropy(probs, obs_min, obs_max, lam)
    if h < 0.:
        return -1., -1., -1.
    k = _karlin_k(probs, obs_min, obs_max, score_avg, lam, h)
    if k < 0.:
        return -1., -1., -1.
    return lam, k, h


def _matrix_score_range(matrix: np.ndarray) -> tuple[int, int]:
    """BlastScoreBlkMaxScoreSet: extreme matrix scores, sentinel entries excluded."""
    usable = matrix[(matrix > SCORE_MIN) & (matrix < SCORE_MAX)]
    return int(usable.min()), int(usable.max())


_SUBJECT_PROB = np.zeros(16)
_SUBJECT_PROB[:4] = 25.0 / 100.0   # nt_prob, normalised: 25 % each of A, C, G, T


@njit(cache=True, nogil=True)
def _probabilities(counts):
    """Blast_ResFreqString: letter frequencies from a context's 16 blastna letter counts, N
    and gap not counted. BLAST sums the integer counts into a double one by one, which is
    exact, as is the integer sum here."""
    total = 0
    for letter in range(16):
        if letter != NUCLEOTIDE_N and letter != NUCLEOTIDE_GAP:
            total += counts[letter]
    probabilities = np.zeros(16)
    if total == 0:
        return probabilities
    for letter in range(16):
        if letter != NUCLEOTIDE_N and letter != NUCLEOTIDE_GAP:
            probabilities[letter] = counts[letter] / np.float64(total)
    return probabilities


@njit(cache=True, nogil=True)
def _letter_counts(sequence, offsets, lengths):
    """[contexts, 16] counts of each blastna letter (low four bits) in every context."""
    counts = np.zeros((offsets.size, 16), dtype=np.int64)
    local = np.zeros(16, dtype=np.int64)
    for c in range(offsets.size):
        local[:] = 0
        for p in range(offsets[c], offsets[c] + lengths[c]):
            local[sequence[p] & 0x0F] += 1
        counts[c, :] = local
    return counts


@njit(cache=True, nogil=True)
def _ungapped_params(matrix, query_prob, subject_prob, loscore, hiscore):
    """(lambda, K, H) from the query's letter frequencies, lambda -1 when they do not exist."""
    sprob, obs_min, obs_max, score_avg = _score_distribution(matrix, query_prob, subject_prob,
                                                             loscore, hiscore)
    return _ungapped_from_distribution(sprob, loscore, obs_min, obs_max, score_avg)


class _UngappedCalculator:
    """Ungapped Karlin blocks for one (reward, penalty), from letter counts."""

    def __init__(self, reward: int, penalty: int):
        matrix = score_matrix(reward, penalty)
        self.loscore, self.hiscore = _matrix_score_range(matrix)
        self.matrix = matrix.astype(np.int64)

    def block(self, counts: np.ndarray) -> KarlinBlock | None:
        return self.blocks(np.asarray(counts, dtype=np.int64).reshape(1, 16))[0]

    def blocks(self, compositions: np.ndarray) -> list:
        """The block of each row of [contexts, 16] letter counts, None where there is none:
        one compiled call for all (a batch of short reads has tens of thousands)."""
        lam, k, h = _ungapped_params_each(self.matrix, compositions, _SUBJECT_PROB,
                                          self.loscore, self.hiscore)
        return [None if lam_c < 0. else KarlinBlock(lam_c, k_c, math.log(k_c), h_c)
                for lam_c, k_c, h_c in zip(lam.tolist(), k.tolist(), h.tolist())]


@njit(cache=True, nogil=True)
def _ungapped_params_each(matrix, compositions, subject_prob, loscore, hiscore):
    """_ungapped_params of each row of letter counts: (lambda, K, H) arrays."""
    contexts = compositions.shape[0]
    lam, k, h = np.empty(contexts), np.empty(contexts), np.empty(contexts)
    for c in range(contexts):
        lam[c], k[c], h[c] = _ungapped_params(matrix, _probabilities(compositions[c]),
                                              subject_prob, loscore, hiscore)
    return lam, k, h


def ungapped_karlin(codes: np.ndarray, reward: int, penalty: int) -> KarlinBlock | None:
    """Ungapped lambda, K, H for one context's blastna letters against a uniform subject;
    None when they do not exist (no valid letter: BLAST marks the context invalid)."""
    counts = np.bincount(np.asarray(codes, dtype=np.uint8) & 0x0F, minlength=16)[:16]
    return _calculator(reward, penalty).block(counts)


def ungapped_blocks(reward: int, penalty: int, compositions: np.ndarray) -> list:
    """The ungapped Karlin block of each row of [contexts, 16] letter counts, None where
    there is none (BLAST marks that context invalid)."""
    return _calculator(reward, penalty).blocks(compositions)


@functools.lru_cache(maxsize=16)
def _calculator(reward: int, penalty: int) -> _UngappedCalculator:
    return _UngappedCalculator(reward, penalty)


def _ungapped_beta(reward: int, penalty: int) -> float:
    """s_GetUngappedBeta, on the scores as given (not gcd-reduced)."""
    return -2.0 if (reward, penalty) in ((1, -1), (2, -3)) else 0.0


def gapped_params(reward: int, penalty: int, gapopen: int, gapextend: int,
                  ungapped: KarlinBlock) -> tuple[KarlinBlock, float, float, bool]:
    """(gapped Karlin block, alpha, beta, round_down) for a gapped search
    (Blast_KarlinBlkNuclGappedCalc and Blast_GetNuclAlphaBeta)."""
    system = scoring_system(reward, penalty)
    row = find_row(system, gapopen, gapextend)
    if row is not None:
        block = KarlinBlock(row[2], row[3], math.log(row[3]), row[4])
        return block, row[5], row[6], system.round_down
    if not is_infinite_regime(system, gapopen, gapextend):
        check_supported_scoring(reward, penalty, gapopen, gapextend)  # raises
    block = KarlinBlock(ungapped.lambda_, ungapped.k, ungapped.log_k, ungapped.h)
    alpha = ungapped.lambda_ / ungapped.h
    return block, alpha, _ungapped_beta(reward, penalty), system.round_down


def length_adjustment(kbp: KarlinBlock, alpha_over_lambda: float, beta: float,
                      query_length: int, db_length: int, db_num_seqs: int) -> int:
    """BLAST_ComputeLengthAdjustment: the largest integer ell (found by a bounded
    iteration) below the fixed point of beta + (alpha/lambda)(ln K + ln((m-ell)(n-N ell))),
    kept small enough that K (m-ell)(n-N ell) > max(m, n)."""
    m = float(query_length)
    n = float(db_length)
    big_n = float(db_num_seqs)
    log_k = kbp.log_k
    a = big_n
    mb = m * big_n + n
    c = n * m - max(m, n) / kbp.k
    if c < 0:
        return 0
    ell_max = 2 * c / (mb + math.sqrt(mb * mb - 4 * a * c))
    ell_min = 0.
    ell_next = 0.
    converged = False
    for i in range(1, 21):
        ell = ell_next
        ss = (m - ell) * (n - big_n * ell)
        ell_bar = alpha_over_lambda * (log_k + math.log(ss)) + beta
        if ell_bar >= ell:
            ell_min = ell
            if ell_bar - ell_min <= 1.0:
                converged = True
                break
            if ell_min == ell_max:
                break
        else:
            ell_max = ell
        if ell_min <= ell_bar <= ell_max:
            ell_next = ell_bar
        else:
            ell_next = ell_max if i == 1 else (ell_min + ell_max) / 2
    result = int(ell_min)
    if converged:
        ell = math.ceil(ell_min)
        if ell <= ell_max:
            ss = (m - ell) * (n - big_n * ell)
            if alpha_over_lambda * (log_k + math.log(ss)) + beta >= ell:
                result = int(ell)
    return result


def evalue_cutoff_score(kbp: KarlinBlock, searchsp: int, evalue: float) -> int:
    """BLAST_Cutoffs without sum statistics: the lowest raw score whose E-value is at most
    `evalue`, never below 1 (BlastKarlinEtoS_simple)."""
    if kbp.lambda_ < 0. or kbp.k < 0. or kbp.h < 0.:
        return 1
    if searchsp <= 0:  # log(0): C's conversion of -inf to Int4, as below
        return 1
    e = max(evalue, SMALLEST_EVALUE)
    score = math.log(kbp.k * float(searchsp) / e) / kbp.lambda_
    if not -INT4_MAX - 1 <= score <= INT4_MAX:
        # K * searchsp / E past the largest double (a tiny -evalue in a huge search space):
        # C's conversion to Int4 gives its smallest value, and the cutoff stays at 1
        return 1
    return max(math.ceil(score), 1)


# --------------------------------------------------------------------------------------------
# Everything the search needs per context, computed once per query batch and database.

@dataclass
class SearchStatistics:
    """Per-context statistics (arrays of length num_contexts) and the batch-wide X-drops.

    Invalid contexts (strand not searched, no valid letter) have valid False, None blocks,
    length adjustment 0, search space 0 and cutoffs INT4_MAX, so nothing passes them.
    """

    valid: np.ndarray               # bool
    query_length: np.ndarray        # int64, length of the context
    kbp_ungapped: list              # KarlinBlock | None: from the query composition
    kbp_gapped: list                # KarlinBlock | None: used for E-values and bit scores
                                    # (None in an ungapped search, which uses kbp_ungapped)
    alpha: np.ndarray               # float64, for the length adjustment
    beta: np.ndarray                # float64
    length_adjustment: np.ndarray   # int64
    eff_searchsp: np.ndarray        # int64, BLAST's effective search space
    ungapped_xdrop: np.ndarray      # int32, raw X-drop of the ungapped extension
    ungapped_cutoff: np.ndarray     # int32, min(gap trigger, gapped E-value cutoff); in an
                                    # ungapped search min(_ungapped_search_cutoff, that cutoff)
    reduced_cutoff: np.ndarray      # int32, (int)(0.8 * ungapped_cutoff): exact re-extension
    gapped_cutoff: np.ndarray       # int32, E-value cutoff (hit saving)
    gap_xdrop: int                  # raw X-drop of the preliminary gapped extension
    gap_xdrop_final: int            # raw X-drop of the traceback
    round_down: bool                # odd scores use the even score below for E-values
    lambdas: np.ndarray             # float64, E-values' lambda per context (0 if invalid)
    log_ks: np.ndarray              # float64, E-values' ln K per context (0 if invalid)


def context_compositions(batch, options) -> np.ndarray:
    """[contexts, 16] letter counts of the query as searched, the composition BLAST takes:
    hard-masked letters are already N when masking is not only for the lookup table."""
    source = batch.unmasked_sequence if options.soft_masking else batch.sequence
    return _letter_counts(np.ascontiguousarray(source, dtype=np.uint8),
                          np.asarray(batch.context_offset, dtype=np.int64),
                          np.asarray(batch.context_length, dtype=np.int64))


def prepare_statistics(batch, db_letters: int, db_num_seqs: int, options) -> SearchStatistics:
    """Karlin blocks, length adjustments, search spaces, cutoffs and X-drops for a batch
    against a database of `db_letters` letters in `db_num_seqs` sequences, or of -dbsize
    letters in as many sequences when it is given (BLAST_CalcEffLengths)."""
    # an ungapped search's word cutoffs take the average subject (BlastSeqSrcGetAvgSeqLen)
    average_subject = db_letters // max(db_num_seqs, 1)
    if options.dbsize > 0:
        db_letters = options.dbsize
    n_ctx = batch.num_contexts
    valid = np.zeros(n_ctx, dtype=bool)
    query_length = np.asarray(batch.context_length, dtype=np.int64).copy()
    kbp_ungapped, kbp_gapped = [None] * n_ctx, [None] * n_ctx
    alpha, beta = np.zeros(n_ctx), np.zeros(n_ctx)
    ell = np.zeros(n_ctx, dtype=np.int64)
    searchsp = np.zeros(n_ctx, dtype=np.int64)
    ungapped_xdrop = np.zeros(n_ctx, dtype=np.int32)
    ungapped_cutoff = np.full(n_ctx, INT4_MAX, dtype=np.int32)
    reduced_cutoff = np.full(n_ctx, INT4_MAX, dtype=np.int32)
    gapped_cutoff = np.full(n_ctx, INT4_MAX, dtype=np.int32)
    lambdas, log_ks = np.zeros(n_ctx), np.zeros(n_ctx)
    # ungapped scores are never rounded down (Blast_HSPListAdjustOddBlastnScores)
    round_down = not options.ungapped and \
        scoring_system(options.reward, options.penalty).round_down
    blocks = ungapped_blocks(options.reward, options.penalty,
                             context_compositions(batch, options))
    # the gapped block of a tabulated scoring system does not depend on the query
    system = scoring_system(options.reward, options.penalty)
    fixed = None if options.ungapped or find_row(system, options.gapopen,
                                                 options.gapextend) is None else \
        gapped_params(options.reward, options.penalty, options.gapopen, options.gapextend, None)
    # the length adjustment and what follows from it, worked out once for each block and
    # context length: a batch of reads has tens of thousands of contexts of a few lengths
    by_length = {}

    for c in range(n_ctx):
        ungapped = blocks[c]
        if query_length[c] <= 0 or ungapped is None:
            continue
        valid[c] = True
        kbp_ungapped[c] = ungapped
        if options.ungapped:
            # E-values, bit scores and length adjustments from the ungapped block
            evaluated = ungapped
            alpha[c], beta[c] = ungapped.lambda_ / ungapped.h, \
                _ungapped_beta(options.reward, options.penalty)
        else:
            evaluated, alpha[c], beta[c], round_down = fixed or gapped_params(
                options.reward, options.penalty, options.gapopen, options.gapextend, ungapped)
            kbp_gapped[c] = evaluated
        lambdas[c], log_ks[c] = evaluated.lambda_, evaluated.log_k
        length = int(query_length[c])
        key = (evaluated.lambda_, evaluated.k, evaluated.h, float(alpha[c]), float(beta[c]),
               length)
        if key not in by_length:
            by_length[key] = _length_dependent(evaluated, alpha[c], beta[c], length,
                                               db_letters, db_num_seqs, average_subject,
                                               options)
        ell[c], searchsp[c], gapped_cutoff[c], search_cutoff = by_length[key]
        ungapped_xdrop[c] = _raw_xdrop("-xdrop_ungap", options.xdrop_ungap,
                                       math.ceil(options.xdrop_ungap * LN2 / ungapped.lambda_))
        if options.ungapped:
            ungapped_cutoff[c] = min(search_cutoff, int(gapped_cutoff[c]))
        else:
            trigger = int((options.gap_trigger * LN2 + ungapped.log_k) / ungapped.lambda_)
            ungapped_cutoff[c] = min(trigger, int(gapped_cutoff[c]))
        if ungapped_xdrop[c] == 0:
            ungapped_xdrop[c] = ungapped_cutoff[c]
        reduced_cutoff[c] = int(0.8 * int(ungapped_cutoff[c]))

    gap_xdrop, gap_xdrop_final = 0, 0
    if valid.any() and not options.ungapped:
        # BLAST keeps one gapped X-drop per search, from the smallest gapped lambda
        min_lambda = min(kbp_gapped[c].lambda_ for c in range(n_ctx) if valid[c])
        gap_xdrop = _raw_xdrop("-xdrop_gap", options.xdrop_gap,
                               options.xdrop_gap * LN2 / min_lambda)
        gap_xdrop_final = _raw_xdrop("-xdrop_gap_final", options.xdrop_gap_final,
                                     max(options.xdrop_gap_final * LN2 / min_lambda, gap_xdrop))

    return SearchStatistics(valid, query_length, kbp_ungapped, kbp_gapped, alpha, beta, ell,
                            searchsp, ungapped_xdrop, ungapped_cutoff, reduced_cutoff,
                            gapped_cutoff, gap_xdrop, gap_xdrop_final, bool(round_down),
                            lambdas, log_ks)


def _length_dependent(evaluated: KarlinBlock, alpha: float, beta: float, length: int,
                      db_letters: int, db_num_seqs: int, average_subject: int,
                      options) -> tuple:
    """(length adjustment, search space, gapped cutoff, an ungapped search's cutoff) of a
    context of `length` letters whose E-values take `evaluated`. Subjects without a letter
    (and no -dbsize or -searchsp) leave both at 0, as BLAST_CalcEffLengths does."""
    if db_letters == 0 and not options.searchsp:
        return 0, 0, evalue_cutoff_score(evaluated, 0, options.evalue), 0
    ell = length_adjustment(evaluated, alpha / evaluated.lambda_, beta, length, db_letters,
                            db_num_seqs)
    searchsp = options.searchsp or _search_space(db_letters, db_num_seqs, ell, length)
    # -min_raw_gapped_score replaces the cutoff that -evalue gives
    # (BlastHitSavingParametersUpdate); the E-value test still follows it
    gapped_cutoff = (options.min_raw_gapped_score if options.min_raw_gapped_score > 0
                     else evalue_cutoff_score(evaluated, int(searchsp), options.evalue))
    search_cutoff = _ungapped_search_cutoff(evaluated, length, average_subject) \
        if options.ungapped else 0
    return ell, searchsp, gapped_cutoff, search_cutoff


UNGAPPED_CUTOFF_EVALUE = 0.05  # CUTOFF_E_BLASTN


def _ungapped_search_cutoff(kbp: KarlinBlock, query_length: int, subject_length: int) -> int:
    """BlastInitialWordParametersUpdate's cutoff for keeping an ungapped alignment in an
    ungapped search: the score of E-value CUTOFF_E_BLASTN in the space of one subject of
    the average length against the query's two strands (no gap trigger for blastn)."""
    space = min(subject_length, 2 * query_length) * subject_length
    # a database of empty sequences has no space to take a logarithm of, nor any hit
    return evalue_cutoff_score(kbp, max(space, 1), UNGAPPED_CUTOFF_EVALUE)


def _search_space(db_letters: int, db_num_seqs: int, ell: int, query_length: int) -> int:
    """The effective search space of a context: the effective database length (at least 1)
    times the effective query length."""
    eff_db = db_letters - db_num_seqs * ell
    return max(eff_db, 1) * (query_length - ell)


RAW_SCORE_MAX = 2**31 - 1  # BLAST keeps raw scores in 32-bit integers


def _raw_xdrop(flag: str, bits: float, raw: float) -> int:
    """An X-drop in raw score units (truncated, as BLAST's cast does); one that a 32-bit
    score cannot hold is refused, where BLAST's conversion would overflow."""
    if raw > RAW_SCORE_MAX:
        raise OptionsError(f"{flag} {bits:g} is too large: its raw score does not fit "
                           "BLAST's 32-bit scores")
    return int(raw)


def evalues(scores: np.ndarray, contexts: np.ndarray, stats: SearchStatistics) -> np.ndarray:
    """E = searchsp * exp(-lambda S' + ln K) per HSP (BLAST_KarlinStoE_simple), S' the raw
    score rounded down to even when the scoring system asks for it."""
    return _scores_to(scores, contexts, stats)[0]


def bit_scores(scores: np.ndarray, contexts: np.ndarray, stats: SearchStatistics) -> np.ndarray:
    """Bit score (S lambda - ln K) / ln 2 on the raw score, gapped parameters."""
    return _scores_to(scores, contexts, stats)[1]


def _scores_to(scores, contexts, stats: SearchStatistics) -> tuple:
    """(E-values, bit scores) of raw scores in their contexts."""
    return _evalues_and_bits(np.ascontiguousarray(scores, dtype=np.int64),
                             np.ascontiguousarray(contexts, dtype=np.int64),
                             np.ascontiguousarray(stats.lambdas, dtype=np.float64),
                             np.ascontiguousarray(stats.log_ks, dtype=np.float64),
                             np.ascontiguousarray(stats.eff_searchsp, dtype=np.int64),
                             bool(stats.round_down))


@njit(cache=True, nogil=True)
def _evalues_and_bits(scores, contexts, lambdas, log_ks, searchsp, round_down):
    evalue = np.empty(scores.size, dtype=np.float64)
    bits = np.empty(scores.size, dtype=np.float64)
    for i in range(scores.size):
        evalue[i], bits[i] = evalue_and_bits(scores[i], contexts[i], lambdas, log_ks,
                                             searchsp, round_down)
    return evalue, bits


@njit(cache=True, nogil=True)
def evalue_and_bits(score, context, lambdas, log_ks, searchsp, round_down):
    """One HSP's E-value and bit score. numba's exp is the C library's, as BLAST's is, so
    printed values agree to the last digit."""
    lam = lambdas[context]
    s = score & ~1 if round_down else score
    evalue = np.float64(searchsp[context]) * math.exp(-lam * s + log_ks[context])
    return evalue, (score * lam - log_ks[context]) / LN2
