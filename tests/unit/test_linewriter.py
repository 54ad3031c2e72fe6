"""The compiled line writer prints every column as the Python formats do (property tests over
integers, percentages, bit scores, E-values and texts), and qcovhsp as coverage_percent."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gblastn.output.linewriter import LineColumns
from gblastn.output.tabular import (_coverage_percents, coverage_percent, format_bitscore,
                                    format_evalue, format_percent)

ALIGNED = st.integers(min_value=0, max_value=10**7).flatmap(
    lambda length: st.tuples(st.integers(min_value=0, max_value=length), st.just(length)))
BITS = st.one_of(st.floats(min_value=-50, max_value=2e7, allow_nan=False),
                 st.sampled_from([99.9, 99.95, 100.0, 99999.0, 99999.5, 0.05, 0.15, 0.25,
                                  9.95, 10.05, -0.04, 0.0]),
                 st.integers(min_value=0, max_value=100000).map(lambda v: v / 100))
EVALUES = st.one_of(st.floats(min_value=0, max_value=1e4, allow_nan=False),
                    st.integers(min_value=-300, max_value=3).map(lambda e: 1.7 * 10.0 ** e))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=-2**62, max_value=2**62), ALIGNED, BITS,
                          EVALUES, st.sampled_from(["plus", "minus", "q é"])),
                min_size=1, max_size=40),
       st.sampled_from(["\t", ",", "<->"]))
def test_lines_as_python_formats_them(rows, delimiter):
    numbers, aligned, bits, evalues, texts = zip(*rows)
    nident = np.array([a for a, _ in aligned], dtype=np.int64)
    length = np.array([b for _, b in aligned], dtype=np.int64)
    percent = np.where(length > 0, (nident / np.maximum(length, 1)) * 100, 0.0)
    names = sorted(set(texts))
    lines = LineColumns(len(rows), 6)
    lines.add_int(numbers)
    lines.add_fixed(percent, 3)
    lines.add_fixed(percent, 2)
    lines.add_bitscore(bits, format_bitscore)
    lines.add_formatted(evalues, format_evalue)
    lines.add_text(names, [names.index(text) for text in texts])
    expected = "".join(delimiter.join([
        str(n), format_percent(a, b, 3), format_percent(a, b, 2), format_bitscore(bit),
        format_evalue(e), text]) + "\n"
        for n, (a, b), bit, e, text in zip(numbers, aligned, bits, evalues, texts))
    assert lines.write(delimiter) == expected


def test_repeated_texts_and_no_rows():
    lines = LineColumns(5, 2)
    lines.add_repeated_text(["s1", "subject two"], [2, 3])
    lines.add_int([1, -2, 30, 0, 5])
    assert lines.write("\t") == "s1\t1\ns1\t-2\nsubject two\t30\nsubject two\t0\nsubject two\t5\n"
    assert LineColumns(0, 1).write("\t") == ""


def test_lines_cut_into_parts():
    lines = LineColumns(5, 2)
    lines.add_repeated_text(["s1", "subject é"], [2, 3])
    lines.add_int([1, -2, 30, 0, 5])
    whole = lines.write("\t").splitlines(keepends=True)
    assert lines.write_parts("\t", [0, 2, 0, 3, 0]) == [
        "", "".join(whole[:2]), "", "".join(whole[2:]), ""]
    assert LineColumns(0, 1).write_parts("\t", [0, 0]) == ["", ""]


@given(st.integers(min_value=1, max_value=10**6).flatmap(
    lambda qlen: st.tuples(st.just(qlen), st.lists(st.integers(min_value=0, max_value=qlen),
                                                   min_size=1, max_size=30))))
def test_coverage_percents(case):
    qlen, covered = case
    assert _coverage_percents(np.array(covered), qlen).tolist() == \
        [coverage_percent(c, qlen) for c in covered]
