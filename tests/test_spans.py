"""The prediction's spans in the answer (spans.py): kept, inserted and dropped character ranges.

Worked cases on a scripted target (its greedy output is a fixed text, one byte per token) against a diff of the texts
(difflib): on text without repeats the drafter's alignment is the diff's. Every run, whatever the policy, drafter,
stop strings or sampling, gives a valid alignment (spans.check), and the pieces streamed with the chunks add up to
the result's spans.
"""

from __future__ import annotations

import difflib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import save_char_model

import quickdraft
from quickdraft.api import Generator
from quickdraft.runners import ScriptedRunner
from quickdraft.sampling import SamplingParams
from quickdraft.spans import PredictionSpans, check
from quickdraft.tokenizer import ByteTokenizer

# distinct lines, long enough for the openai policy to find its place again (32 agreeing tokens)
CODE = ("def area(width, height):\n    return width * height\n\n"
        "def perimeter(width, height):\n    return 2 * (width + height)\n\n"
        "print(area(3, 4), perimeter(3, 4))\n")


def scripted(output: str) -> Generator:
    tok = ByteTokenizer()
    return Generator(ScriptedRunner(tok.encode(output), 257, tok.eos, max_context=4096), tok)


def run(output: str, prediction: str, **options) -> tuple[quickdraft.api.Result, list]:
    stream = scripted(output).stream("hi", prediction=prediction, max_new_tokens=1000, **options)
    chunks = list(stream)
    return stream.result, chunks


def diff(prediction: str, output: str) -> PredictionSpans:
    """difflib's alignment of the two texts in the same shape."""
    spans = PredictionSpans()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, prediction, output, autojunk=False).get_opcodes():
        if tag == "equal":
            spans.kept.append((i1, i2, j1, j2))
        if tag in ("replace", "delete"):
            spans.dropped.append((i1, i2))
        if tag in ("replace", "insert"):
            spans.inserted.append((j1, j2))
    return spans


def streamed(chunks: list) -> PredictionSpans:
    """The pieces the chunks carried, joined, kept ranges that touch merged (as the result's are)."""
    spans = PredictionSpans()
    for chunk in chunks:
        if chunk.prediction_spans is not None:
            spans.join(chunk.prediction_spans)
    return spans


def test_an_insertion_against_the_diff():
    """A line inserted before "    return" (at 25): the diff puts it before the newline that ends the line above,
    the drafter's alignment after the indentation that starts both lines (the prediction's 4 spaces, then "#" departs
    from it); the same 15 characters inserted either way."""
    output, prediction = CASES["insertion"]
    result, _ = run(output, prediction)
    assert diff(prediction, output) == PredictionSpans(kept=[(0, 24, 0, 24), (24, 150, 39, 165)], inserted=[(24, 39)])
    assert result.prediction_spans == PredictionSpans(kept=[(0, 29, 0, 29), (29, 150, 44, 165)], inserted=[(29, 44)])


CASES = {
    "equal": (CODE, CODE),
    "insertion": (CODE.replace("    return width * height\n", "    # the area\n    return width * height\n"), CODE),
    "deletion": (CODE.replace("print(area(3, 4), perimeter(3, 4))\n", ""), CODE),
    "replacement": (CODE.replace("width", "w").replace("height", "h"), CODE),
    "renamed": (CODE.replace("width", "wIdth"), CODE),  # i -> I learned, then dropped at "perimeter" and relearned
    "longer": (CODE + "print('done')\n", CODE),
    "shorter": (CODE[: CODE.index("def perimeter")], CODE),
    "no overlap": ("SELECT 1;", "xyz\n"),
    "multi-byte": (CODE.replace("area", "aréa"), CODE.replace("area", "arèa")),
}


@pytest.mark.parametrize("policy", ["default", "openai"])
@pytest.mark.parametrize("case", CASES)
def test_worked_cases_are_the_diff_of_the_texts(case, policy):
    output, prediction = CASES[case]
    result, chunks = run(output, prediction, policy=policy)
    assert result.text == output
    spans = result.prediction_spans
    assert check(spans, prediction, output) is None
    if case == "multi-byte":  # "é" / "è" share their first byte, a kept token: the whole character goes to the diff
        assert (spans.inserted[0], spans.dropped[0]) == ((6, 7), (6, 7))
    assert kept(spans) == LESS_KEPT.get((case, policy), kept(diff(prediction, output)))  # the diff's, or shifted
    assert streamed(chunks) == spans


# Where the alignment keeps less than the diff. "width" -> "w", "height" -> "h": the diff keeps ", " and the h of
# "height" too, runs shorter than CONFIRM (4) tokens after a re-entry; the openai policy finds its place again only
# after 32 agreeing tokens, which the replacements 10 to 20 characters apart never leave until the last line (nor
# "wIdth"'s, 27 to 32 apart).
LESS_KEPT = {("replacement", "default"): 108, ("replacement", "openai"): 48, ("renamed", "openai"): 60}


def kept(spans: PredictionSpans) -> int:
    return sum(pe - ps for ps, pe, _, _ in spans.kept)


def test_kept_is_the_alignment_not_the_accepted_drafts():
    """openai policy, right prediction: drafts of 16 leave a bonus token after each, generated (not accepted), but
    the output follows the prediction throughout: one kept range over everything."""
    result, _ = run(CODE, CODE, policy="openai")
    assert result.stats.accepted_prediction_tokens < len(CODE.encode())
    assert result.prediction_spans == PredictionSpans(kept=[(0, len(CODE), 0, len(CODE))])


def test_worked_example_of_the_module_docstring():
    result, chunks = run("abcXefgh", "abcdefgh")
    assert result.prediction_spans == PredictionSpans(kept=[(0, 3, 0, 3), (4, 8, 4, 8)], inserted=[(3, 4)],
                                                      dropped=[(3, 4)])
    assert [c.prediction_spans for c in chunks if c.prediction_spans] == [
        PredictionSpans(kept=[(0, 3, 0, 3)]),  # pass 1; pass 2 re-enters, which pass 3 confirms
        PredictionSpans(kept=[(4, 8, 4, 8)], inserted=[(3, 4)], dropped=[(3, 4)])]


def test_a_stop_string_cuts_the_spans_with_the_text():
    result, chunks = run(CODE, CODE, stop=["perimeter"])
    cut = CODE.index("perimeter")
    assert result.text == CODE[:cut]
    assert result.prediction_spans == PredictionSpans(kept=[(0, cut, 0, cut)], dropped=[(cut, len(CODE))])
    assert streamed(chunks) == result.prediction_spans


def test_no_spans_without_a_prediction_or_where_the_prediction_does_not_decode_back(tiny_folder):
    """tiny_folder's tokenizer decodes "abc" as "a b c" (no decoder joins its characters)."""
    result, chunks = run(CODE, None)
    assert result.prediction_spans is None and all(c.prediction_spans is None for c in chunks)
    gen = quickdraft.load(str(tiny_folder), progress=False)
    greedy = SamplingParams(temperature=0.0)
    assert gen.generate("abc", chat=False, prediction="abc", max_new_tokens=8, sampling=greedy).prediction_spans is None


@pytest.fixture(scope="module")
def joined_folder(tmp_path_factory):
    """A tiny char-level model whose tokenizer joins its characters back (printable ASCII)."""
    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    return save_char_model(tmp_path_factory.mktemp("tiny-joined"), chars, decoder=True)


def test_a_real_tokenizer(joined_folder):
    """A transformers tokenizer (one character per token): a prediction with a few characters changed."""
    gen = quickdraft.load(str(joined_folder), progress=False)
    greedy = SamplingParams(temperature=0.0)
    plain = gen.generate("ab cd", chat=False, max_new_tokens=40, sampling=greedy).text
    prediction = plain[:10] + "zz" + plain[14:]
    stream = gen.stream("ab cd", chat=False, prediction=prediction, max_new_tokens=40, sampling=greedy)
    chunks = list(stream)
    result = stream.result
    assert result.text == plain
    assert check(result.prediction_spans, prediction, plain) is None
    assert sum(pe - ps for ps, pe, _, _ in result.prediction_spans.kept) >= len(plain) - 8
    assert streamed(chunks) == result.prediction_spans


ALPHABET = "abcde é€😀\n"


@st.composite
def edits(draw):
    text = draw(st.text(ALPHABET, max_size=60))
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 6)))
        text = text[:i] + draw(st.text(ALPHABET, max_size=6)) + text[j:]
    return text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(output=edits(), prediction=edits(), policy=st.sampled_from(["default", "openai"]),
       drafter=st.sampled_from(["prediction", "prediction+lookup"]), max_new_tokens=st.sampled_from([1000, 20]),
       stop=st.sampled_from([[], ["é"], ["ab", "\n"], ["@@@@@"]]), temperature=st.sampled_from([0.0, 1.0]))
def test_every_run_gives_a_valid_alignment(output, prediction, policy, drafter, max_new_tokens, stop, temperature):
    stream = scripted(output).stream("hi", prediction=prediction, policy=policy, drafter=drafter, stop=stop,
                                     max_new_tokens=max_new_tokens, sampling=SamplingParams(temperature, seed=1))
    chunks = list(stream)
    result = stream.result
    assert check(result.prediction_spans, prediction, result.text) is None
    assert streamed(chunks) == result.prediction_spans
    released = 0
    for chunk in chunks:  # a chunk's ranges lie within the text released so far
        released += len(chunk.text)
        if chunk.prediction_spans:
            assert all(end <= released for *_, end in chunk.prediction_spans.kept + chunk.prediction_spans.inserted)
