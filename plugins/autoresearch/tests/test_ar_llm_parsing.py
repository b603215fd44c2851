"""Fenced-block extraction and world-model answer parsing (pure functions, no model)."""

from __future__ import annotations

import pytest
from wmrl_autoresearch.llm.parsing import extract_script, parse_number, parse_prediction
from wmrl_autoresearch.llm.solution import InvalidSolution, is_invalid_solution

# ----------------------------------------------------------------------------- extraction


def test_extracts_the_python_block_and_ignores_prose():
    text = "Here is my plan.\n```python\nimport math\nprint(math.pi)\n```\nThat prints pi."
    assert extract_script(text) == "import math\nprint(math.pi)\n"


@pytest.mark.parametrize("tag", ["python", "py", "Python3", "python title=run.py"])
def test_accepts_python_tag_variants(tag):
    assert extract_script(f"```{tag}\nx = 1\n```") == "x = 1\n"


def test_which_block_when_there_are_several():
    text = "```python\na = 1\n```\nbetter:\n```python\nb = 2\nc = 3\n```"
    assert extract_script(text, which="first") == "a = 1\n"
    assert extract_script(text, which="last") == "b = 2\nc = 3\n"
    assert extract_script(text, which="longest") == "b = 2\nc = 3\n"
    with pytest.raises(ValueError, match="which"):
        extract_script(text, which="middle")


def test_non_python_blocks_are_skipped():
    text = "```bash\npip install x\n```\n```python\nimport x\n```"
    assert extract_script(text) == "import x\n"


def test_think_blocks_are_removed_before_extraction():
    text = "<think>maybe ```python\nwrong = 1\n```</think>\n```python\nright = 2\n```"
    assert extract_script(text) == "right = 2\n"
    # a model that never stops thinking has no answer
    assert is_invalid_solution(extract_script("<think>```python\nx = 1\n```"))


@pytest.mark.parametrize(
    "text, reason",
    [
        ("just prose, no code", "no fenced"),
        ("```\nx = 1\n```", "no fenced"),  # untagged by default
        ("```python\nx = [1, 2\n", "unterminated"),  # cut off by max_new_tokens
        ("```python\n\n   \n```", "empty"),
        ("```python\ndef f(:\n    pass\n```", "syntax error"),
        ("", "no fenced"),
    ],
)
def test_malformed_answers_become_invalid_solutions(text, reason):
    sol = extract_script(text)
    assert isinstance(sol, InvalidSolution) and not isinstance(sol, str)
    assert is_invalid_solution(sol)
    assert reason in sol.reason
    assert sol.raw_text == text


def test_untagged_blocks_and_syntax_check_are_options():
    assert extract_script("```\nx = 1\n```", allow_untagged=True) == "x = 1\n"
    assert extract_script("```python\ndef f(:\n```", check_syntax=False) == "def f(:\n"


def test_scripts_are_not_invalid_and_markers_duck_type():
    assert not is_invalid_solution("print(1)\n")

    class Foreign:
        wmrl_invalid = True

    assert is_invalid_solution(Foreign())
    assert "no code" in str(InvalidSolution("no code"))


# ----------------------------------------------------------------------------- scores


@pytest.mark.parametrize(
    "token, value",
    [("0.87", 0.87), ("87%", 0.87), ("87 %", 0.87), ("1e-2", 0.01), ("-3", -3.0), (".5", 0.5), ("2.5E3", 2500.0)],
)
def test_parse_number_formats(token, value):
    assert parse_number(token) == pytest.approx(value)


@pytest.mark.parametrize("token", ["abc", "", "1.2.3", "nan", "inf", "1e999", "--1"])
def test_parse_number_rejects_junk(token):
    assert parse_number(token) is None


def test_percent_can_stay_a_percentage():
    assert parse_number("87%", percent_as_fraction=False) == pytest.approx(87.0)


@pytest.mark.parametrize(
    "answer, status, score",
    [
        ("status: ok\nscore: 0.87", "ok", 0.87),
        ("Status: OK\nScore: 87%", "ok", 0.87),
        ("score = 1e-2", None, 0.01),
        ("**score**: **0.93**.", None, 0.93),
        ("The accuracy is 0.91 after 3 epochs", None, 0.91),
        ("status: crash\nscore: none", "crashed", None),
        ("status: timed out", "timeout", None),
        ("status: out of memory", "oom", None),
        ("Status: OOM\nscore: none", "oom", None),
        ("status: missing output", "missing_output", None),
        ("status: timeout\nscore: 0.2", "timeout", 0.2),
        ("I think it gets about 0.7", None, 0.7),  # no key: first number anywhere
        ("status: ok\nit runs 3 epochs\nscore: 0.5", "ok", 0.5),  # the key wins over earlier numbers
        ("<think>score: 0.1</think>score: 0.6", None, 0.6),
        ("no idea", None, None),
        ("score: high", None, None),
        ("", None, None),
    ],
)
def test_parse_prediction(answer, status, score):
    got_status, got_score = parse_prediction(answer)
    assert got_status == status
    if score is None:
        assert got_score is None
    else:
        assert got_score == pytest.approx(score)


def test_require_key_ignores_stray_numbers():
    assert parse_prediction("it runs 3 epochs", require_key=True) == (None, None)
    assert parse_prediction("it runs 3 epochs") == (None, 3.0)
    assert parse_prediction("loss: 0.3", score_keys=("loss",), require_key=True) == (None, pytest.approx(0.3))
