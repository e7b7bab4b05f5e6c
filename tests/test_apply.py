"""Lazy-snippet apply: the snippet builder, the request, and the apply workloads (bench/apply.py)."""

from __future__ import annotations

import pytest

from quickdraft.bench import apply, workloads
from quickdraft.bench.apply import MARKER, lazy_snippet, marker_line
from quickdraft.prompts import apply_request, edit_request, fence, merged_guess

FILE = "\n".join(f"line{i}" for i in range(20))  # line0 .. line19


def _edit(text: str, i: int, new: str) -> str:
    lines = text.splitlines()
    lines[i] = new
    return "\n".join(lines)


def test_unchanged_regions_become_one_marker_each_with_context_around_the_change():
    snippet = lazy_snippet(FILE, _edit(FILE, 10, "CHANGED"), "a.py", context=2)
    assert snippet.splitlines() == ["# ... existing code ...", "line8", "line9", "CHANGED", "line11", "line12",
                                    "# ... existing code ..."]
    assert lazy_snippet(FILE, _edit(FILE, 10, "CHANGED"), "a.py", context=3).splitlines()[1:-1] == [
        "line7", "line8", "line9", "CHANGED", "line11", "line12", "line13"]


def test_two_changes_far_apart_have_a_marker_between_and_near_ones_share_a_hunk():
    far = lazy_snippet(FILE, _edit(_edit(FILE, 3, "A"), 15, "B"), "a.py", context=1)
    assert far.splitlines() == ["# ... existing code ...", "line2", "A", "line4", "# ... existing code ...",
                                "line14", "B", "line16", "# ... existing code ..."]
    near = lazy_snippet(FILE, _edit(_edit(FILE, 3, "A"), 5, "B"), "a.py", context=1)
    assert near.count(MARKER) == 2 and "line4" in near.splitlines()


def test_a_one_line_or_blank_gap_is_shown_not_elided():
    snippet = lazy_snippet(FILE, _edit(FILE, 1, "X"), "a.py", context=0)
    assert snippet.splitlines()[:2] == ["line0", "X"]  # one line before the change: no marker for it
    assert lazy_snippet("x\n\n\n\ny", "X\n\n\n\nY", "a.py", context=0) == "X\n\n\n\nY"  # blank lines between


def test_deleted_lines_are_absent_and_the_context_says_where():
    edited = "\n".join(line for i, line in enumerate(FILE.splitlines()) if i not in (9, 10))
    snippet = lazy_snippet(FILE, edited, "a.py", context=2).splitlines()
    assert snippet == ["# ... existing code ...", "line7", "line8", "line11", "line12", "# ... existing code ..."]


def test_no_change_is_the_marker_alone_and_all_change_is_the_whole_file():
    assert lazy_snippet(FILE, FILE, "a.py") == "# ... existing code ..."
    other = "\n".join(f"new{i}" for i in range(5))
    assert lazy_snippet(FILE, other, "a.py") == other


def test_the_marker_takes_the_comment_form_of_the_language():
    assert marker_line("a.py") == "# ... existing code ..."
    assert marker_line("a.ts") == marker_line("main.rs") == marker_line("x.cpp") == "// ... existing code ..."
    assert marker_line("q.sql") == "-- ... existing code ..."
    assert marker_line("page.html") == "<!-- ... existing code ... -->"
    assert marker_line("code", language="Go") == "// ... existing code ..."  # the data's language field wins
    assert marker_line("a.py", language="rust") == "// ... existing code ..."
    js = lazy_snippet(FILE, _edit(FILE, 10, "X"), "app.js")
    assert js.splitlines()[0] == "// ... existing code ..."


def test_the_marker_is_indented_as_the_code_it_stands_for():
    original = "def f(x):\n" + "".join(f"    y{i} = x\n" for i in range(8)) + "    return y0\n"
    edited = original.replace("    return y0", "    return y7")
    snippet = lazy_snippet(original, edited, "f.py", context=1).splitlines()
    assert snippet[0] == "# ... existing code ..."  # elides `def f` too: column 0
    code = "class A:\n    def f(self):\n" + "".join(f"        a{i} = 1\n" for i in range(8)) + "        return 0\n"
    body = lazy_snippet(code, code.replace("return 0", "return 1"), "a.py", context=1).splitlines()
    assert body[0] == "# ... existing code ..."
    inner = code.replace("a0 = 1", "a0 = 2").replace("return 0", "return 1")
    assert "        # ... existing code ..." in lazy_snippet(code, inner, "a.py", context=1).splitlines()


def test_line_edits_round_trip():
    edited = _edit(_edit(FILE, 3, "A"), 15, "B") + "\nextra\n"
    edits = apply.line_edits(FILE, edited)
    assert apply.apply_line_edits(FILE, edits) == edited
    assert apply.line_edits(FILE, FILE) == []


def _insert(text: str, i: int, new: str) -> str:
    lines = text.splitlines()
    return "\n".join(lines[:i] + [new] + lines[i:])


def _delete(text: str, i: int) -> str:
    lines = text.splitlines()
    return "\n".join(lines[:i] + lines[i + 1:])


@pytest.mark.parametrize("edited", [
    _edit(FILE, 10, "X"), _edit(FILE, 0, "X"), _edit(FILE, 19, "X"), _edit(_edit(FILE, 3, "X"), 15, "Y"),
    _insert(FILE, 8, "NEW"), _insert(FILE, 0, "NEW"), _delete(FILE, 12), _delete(FILE, 0), _delete(FILE, 19)])
@pytest.mark.parametrize("context", [1, 2])
def test_the_merged_guess_is_the_edit_a_lazy_snippet_describes(edited, context):
    snippet = lazy_snippet(FILE, edited, context=context)
    assert MARKER in snippet
    assert merged_guess(FILE, snippet) == edited


def test_a_snippet_that_cannot_be_placed_has_no_guess_and_the_prediction_is_the_file():
    snippet = "# ... existing code ...\nnot in the file\nline5\n# ... existing code ..."
    assert merged_guess(FILE, snippet) is None
    out_of_order = "# ... existing code ...\nline9\nline10\n# ... existing code ...\nline3\nline4\n# ... existing code ..."
    assert merged_guess(FILE, out_of_order) is None
    assert apply_request(FILE, snippet)[1] == fence(FILE)


def test_apply_request_predicts_the_merge():
    original = "def f():\n    x = 1\n    y = 2\n    z = 3\n    return x\n"
    snippet = "# ... existing code ...\n    y = 2\n    z = 4\n    return x"
    message, prediction = apply_request(original, snippet, "f.py")
    assert prediction == "```python\ndef f():\n    x = 1\n    y = 2\n    z = 4\n    return x\n```"
    assert message.startswith(fence(original, "f.py"))


def test_apply_request_puts_the_file_first_and_the_instruction_last():
    original = "def f():\n    return 1\n"
    snippet = "# ... existing code ...\n    return 2"  # its one line is not in the file: the prediction is the file
    message, prediction = apply_request(original, snippet, "f.py")
    assert prediction == edit_request("x", original, "f.py")[1] == "```python\ndef f():\n    return 1\n```"
    assert message.startswith(prediction)
    assert f"```python\n{snippet}\n```" in message
    assert message.rstrip().endswith("Reply with the complete merged file in one code block, nothing else.")
    assert message.index(prediction) < message.index(snippet)


# -- the workloads, from the shared data ----------------------------------------------------------------

@pytest.fixture(scope="module")
def data():
    return workloads.data_dir()  # ../shared/data is always beside the checkout (CI too): missing data must fail


def test_apply_edit_eval_tasks(data):
    tasks = list(workloads.WORKLOADS["apply_edit_eval"].load(data, None))
    assert len(tasks) == 82  # the EditEval rows whose snippet elides something
    assert workloads.WORKLOADS["apply_edit_eval"].has_prediction
    cases = list(apply.edit_eval_cases(data))
    assert [t.id for t in tasks] == [c.id for c in cases]
    for c, t in zip(cases, tasks):
        content = t.messages[0]["content"]
        assert t.id.startswith("apply-EditEval/") and content.startswith(fence(c.original, c.filename))
        assert "# ... existing code ..." in content.split(fence(c.original, c.filename), 1)[1]
        assert t.prediction == fence(merged_guess(c.original, c.snippet) or c.original, c.filename)
    assert [t.id for t in workloads.apply_edit_eval(data, 3)] == [t.id for t in tasks[:3]]
    assert all(c.original != c.edited and MARKER in c.snippet for c in cases)
    # the guess is the intended file (up to blank lines at its end) for nearly every snippet
    right = [c for c in cases if (merged_guess(c.original, c.snippet) or "").rstrip() == c.edited.rstrip()]
    assert len(right) >= 0.9 * len(cases)


def test_apply_refactor_tasks(data):
    cases = list(apply.refactor_cases(data))
    assert len(cases) == APPLY_REFACTOR_TASKS
    tasks = list(workloads.WORKLOADS["apply_refactor"].load(data, None))
    assert [t.id for t in tasks] == [c.id for c in cases]
    for c, t in zip(cases, tasks):
        assert t.prediction == fence(merged_guess(c.original, c.snippet) or c.original, c.filename)
        assert t.messages[0]["content"].startswith(fence(c.original, c.filename))
        assert MARKER in c.snippet and len(c.snippet) < len(c.edited)


APPLY_REFACTOR_TASKS = 35  # 10 whole-file answers recorded in apply_refactor_edits.jsonl (38 tried), 25 moved


SHAPES = """import math


class Shape:
    scale = 2

    def area(self, r):
        return math.pi * r * r

    @staticmethod
    def unit():
        return 1

    @classmethod
    def make(cls):
        return cls()

    @property
    def size(self):
        return self.area(self.unit()) * Shape.unit() + self.scale

    def both(self):
        return self.area(1) + self.make().scale
"""


def test_move_method_out():
    """The refactor done by moving lines: the method after the class, de-indented, its calls rewritten; a property
    or a method referenced without a call is not moved."""
    moved = apply.move_method_out(SHAPES, "Shape", "area")
    assert "    def area" not in moved and "\n\n\ndef area(self, r):\n    return math.pi * r * r\n" in moved
    assert "return area(self, unit()) * Shape.unit()" not in moved  # only area's calls change
    assert "return area(self, self.unit()) * Shape.unit() + self.scale" in moved
    assert "return area(self, 1) + self.make().scale" in moved and moved.endswith("return math.pi * r * r\n")
    unit = apply.move_method_out(SHAPES, "Shape", "unit")
    assert "staticmethod" not in unit and "\ndef unit():\n    return 1\n" in unit
    assert "self.area(unit()) * unit() + self.scale" in unit
    make = apply.move_method_out(SHAPES.replace("self.make()", "Shape.make()"), "Shape", "make")
    assert "\ndef make(cls):\n    return cls()\n" in make and "classmethod" not in make
    assert "return self.area(1) + make(Shape).scale" in make
    assert apply.move_method_out(SHAPES, "Shape", "make") is None  # called through self: left to a person
    assert apply.move_method_out(SHAPES, "Shape", "size") is None  # a property
    assert apply.move_method_out(SHAPES.replace("self.area(1)", "self.area"), "Shape", "area") is None
    assert apply.move_method_out(SHAPES, "Shape", "missing") is None and apply.move_method_out(SHAPES, "Nope", "area") is None
