"""Discontiguous megablast's own parts against slow references written from the spec: the
templates' table index, the table and its scan (every window whose kept letters match, in
BLAST's order), the two-hit window of the diagonal stage (array and hash alike), and the
options' and command line's refusals."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.errors import OptionsError
from gblastn.lookup import TEMPLATES, build_lookup, template_index, template_runs
from gblastn.options import make_options
from gblastn.scan.cpu import find_seeds, find_seeds_from
from gblastn.ungapped import DiagonalHash, extend_seeds

from golden import gblastn
from test_scan import make_case, pack_chunks


def kept_letters_index(letters, template: str) -> int:
    """The index as the spec defines it: the kept letters, packed in order."""
    index = 0
    for letter, keep in zip(letters, template):
        if keep == "1":
            index = (index << 2) | int(letter)
    return index


@pytest.mark.parametrize("key", sorted(TEMPLATES))
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_template_index_keeps_the_templates_letters(key, data):
    template = TEMPLATES[key]
    letters = data.draw(st.lists(st.integers(0, 3), min_size=len(template),
                                 max_size=len(template)))
    window = 0
    for letter in letters:
        window = (window << 2) | letter
    shifts, masks = template_runs(template)
    assert template.count("1") == key[0]
    assert template_index(np.int64(window), shifts[None, :], masks[None, :], 0) == \
        kept_letters_index(letters, template)


def reference_seeds(batch, table, options, subjects):
    """Every subject window against every indexed query window: a seed where the template's
    letters agree, per subject offset the first template's (decreasing query offset), then
    the second's."""
    kinds = (("coding", "optimal") if options.template_type == "coding_and_optimal"
             else (options.template_type,))
    templates = [TEMPLATES[(options.word_size, options.template_length, kind)]
                 for kind in kinds]
    length, seq = options.template_length, batch.sequence
    windows = [p for a, b in batch.lookup_segments for p in range(a, b - length + 1)
               if (seq[p:p + length] < 4).all()]
    found = []
    for c, subject in enumerate(subjects):
        for s in range(subject.size - length + 1):
            for template in templates:
                index = kept_letters_index(subject[s:s + length], template)
                for q in sorted(windows, reverse=True):
                    if kept_letters_index(seq[q:q + length], template) == index:
                        found.append((c, q, s))
    return found


@pytest.mark.parametrize("word_size, length, kind", [(11, 18, "coding"), (12, 16, "optimal"),
                                                     (11, 21, "coding_and_optimal")])
def test_scan_finds_every_discontiguous_word_in_blast_order(word_size, length, kind):
    rng = np.random.default_rng(length)
    batch, options, subjects = make_case(rng, [150, 90], [400, 30, 260], "dc-megablast",
                                         word_size=word_size, template_length=length,
                                         template_type=kind)
    table = build_lookup(batch, options)
    seeds = find_seeds(table, *pack_chunks(subjects))
    got = list(zip(seeds.chunk.tolist(), seeds.q_off.tolist(), seeds.s_off.tolist()))
    assert got == reference_seeds(batch, table, options, subjects)
    assert len(got) > 20
    assert np.array_equal(seeds.s_first, seeds.s_off) and np.array_equal(seeds.hit_s,
                                                                          seeds.s_off)


@pytest.mark.parametrize("length, kind, budget", [(18, "coding", 3),
                                                  (21, "coding_and_optimal", 1)])
def test_scan_stopped_at_a_budget_goes_on_where_it_stopped(length, kind, budget):
    """find_seeds_from on a discontiguous table, a few seeds at a time (the CPU search's
    slices): find_seeds' seeds, in order, none repeated or lost; a window's seeds are
    never split, and one with more than the budget (two templates' at budget 1) is taken
    whole."""
    rng = np.random.default_rng(length)
    batch, options, subjects = make_case(rng, [150, 90], [400, 30, 260], "dc-megablast",
                                         template_length=length, template_type=kind)
    table = build_lookup(batch, options)
    packed, offsets, lengths = pack_chunks(subjects)
    whole = find_seeds(table, packed, offsets, lengths)
    taken, first, position = [], 0, 0
    while True:
        seeds, stop = find_seeds_from(table, packed, offsets[first:], lengths[first:],
                                      position, budget)
        taken.append(np.stack([seeds.chunk + first, seeds.q_off, seeds.s_off]))
        if stop is None:
            break
        first, position = first + stop[0], stop[1]
    assert len(taken) > 5
    assert np.array_equal(np.concatenate(taken, axis=1),
                          np.stack([whole.chunk, whole.q_off, whole.s_off]))


def two_hit_case():
    """One query and a subject that holds it: three seeds on one diagonal, at 0, 30 (a
    second hit within 40 letters of the first's end) and, on another diagonal, one alone."""
    rng = np.random.default_rng(3)
    batch, options, subjects = make_case(rng, [200], [600], "dc-megablast", n_plants=0)
    subject = subjects[0]
    subject[100:300] = batch.sequence[1:201]
    table = build_lookup(batch, options)
    packed, byte_offset, lengths = pack_chunks([subject])
    return batch, options, table, packed, byte_offset, lengths


def extend(table, seeds, packed, byte_offset, lengths, window, diag_hash=None):
    contexts = table.context_offset.size
    return extend_seeds(seeds, table, packed, byte_offset, lengths,
                        np.full(contexts, 22, np.int32), np.full(contexts, 25, np.int32),
                        np.full(contexts, 20, np.int32), 2, -3, diag_hash=diag_hash,
                        window=window)


def seeds_at(pairs):
    from gblastn.scan import Seeds

    q, s = (np.array(v, dtype=np.int32) for v in zip(*pairs))
    return Seeds(np.zeros(q.size, np.int32), q, s, s.copy(), s.copy())


@pytest.mark.parametrize("hashed", [False, True])
def test_two_hit_window_extends_only_a_second_hit_within_the_window(hashed):
    batch, options, table, packed, byte_offset, lengths = two_hit_case()
    first, near, alone = (11, 110), (41, 140), (151, 150)  # diagonal 99, 99 and -1
    state = DiagonalHash(1, 40) if hashed else None
    if hashed:
        table.context_offset[-1] += 9000  # past 8,000 letters: the diagonal hash

    def hits(pairs, window=40, state=None):
        return extend(table, seeds_at(pairs), packed, byte_offset, lengths, window, state)

    assert len(hits([first], state=state)) == 0                # a first hit only
    assert len(hits([first, near], state=DiagonalHash(1, 40) if hashed else None)) == 1
    assert len(hits([first, alone])) == 0                      # another diagonal
    assert len(hits([first, (first[0] + 60, first[1] + 60)])) == 0  # beyond the window
    assert len(hits([first], window=0)) == 1                   # one hit per extension


@pytest.mark.parametrize("extra, message", [
    ({"word_size": 13}, "word size must be either 11 or 12"),
    ({"template_length": 17}, "template length must be 16, 18, or 21"),
    ({"template_type": "best"}, "invalid template type"),
    ({"window_size": -1}, "-window_size must be at least 0"),
])
def test_bad_discontiguous_options(extra, message):
    with pytest.raises(OptionsError, match=message):
        make_options("dc-megablast", **extra)


def test_templates_are_refused_where_blastn_refuses_them():
    with pytest.raises(OptionsError, match="Invalid lookup table type"):
        make_options("blastn", template_length=18, template_type="coding")
    with pytest.raises(OptionsError, match="word size must be either 11 or 12"):
        make_options("megablast", template_length=18, template_type="coding")
    with pytest.raises(OptionsError, match="only with discontiguous words"):
        make_options("blastn", window_size=40)


def test_dc_megablast_defaults_are_blastns():
    o = make_options("dc-megablast")
    assert (o.word_size, o.template_length, o.template_type, o.window_size) == \
        (11, 18, "coding", 40)
    assert (o.reward, o.penalty, o.gapopen, o.gapextend) == (2, -3, 5, 2)
    assert (o.xdrop_ungap, o.xdrop_gap, o.xdrop_gap_final) == (20, 30, 100)
    assert o.min_diag_separation == 6 and not o.greedy


@pytest.mark.parametrize("args, wording", [
    (["-template_type", "optimal"], 'Argument "template_length". Must be specified'),
    (["-template_length", "16"], 'Argument "template_type". Must be specified'),
    (["-template_length", "x16", "-template_type", "coding"], "is not an integer"),
    (["-word_size", "10"], "word size must be either 11 or 12"),
])
def test_command_line_refusals_are_one_line(tmp_path, args, wording):
    query = tmp_path / "q.fa"
    query.write_text(">q\nACGTACGTACGTACGTACGTACGT\n")
    done = gblastn("search", "-task", "dc-megablast", "-subject", str(query), "-query",
                   str(query), "-device", "cpu", *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("gblastn: error:") == 1 and wording in done.stderr
    assert "Traceback" not in done.stderr
