"""The grader, the metrics and the reward extractor (pure Python: no container needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from wmrl_autoresearch.grading.grader import grade_predictions
from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward, make_reward_extractor
from wmrl_autoresearch.sandbox.result import CappedBuffer
from wmrl_autoresearch.tasks.task import to_wmrl_task
from wmrl_autoresearch.tasks.task_metrics import METRICS, get_metric, normalized_score

from wmrl_core.types import Outcome, Task


def _csv(header: str, values) -> bytes:
    return (header + "\n" + "".join(f"{v}\n" for v in values)).encode()


def test_ar_grader_accepts_id_prediction_in_any_order(tiny_classification):
    truth = list(tiny_classification.y_test)
    rows = [f"{i},{y}" for i, y in enumerate(truth)][::-1]
    assert grade_predictions(tiny_classification, _csv("id,prediction", rows)).score == 1.0


def test_ar_grader_accepts_single_column_and_float_labels(tiny_classification):
    values = [f"{float(y):.1f}" for y in tiny_classification.y_test]  # 1.0 is the label 1
    assert grade_predictions(tiny_classification, _csv("label", values)).score == 1.0


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "empty"),
        (b"\x00\x01\x02binary", "binary"),
        (b"\xff\xfe\xfa not utf8", "UTF-8"),
        (b"a,b,c\n1,2,3\n", "header"),
        (b"id,prediction\n0,1\n0,1\n", "twice"),
        (b"id,prediction\n99,1\n", "not a test id"),
        (b"id,prediction\nx,1\n", "not an integer"),
    ],
)
def test_ar_grader_rejects_bad_files_with_a_reason(tiny_classification, data, reason):
    grade = grade_predictions(tiny_classification, data)
    assert grade.score is None and reason in grade.error


def test_ar_grader_rejects_nan_inf_and_text_in_regression(tiny_regression):
    n = tiny_regression.n_test
    for bad in ("nan", "inf", "-inf", "abc"):
        grade = grade_predictions(tiny_regression, _csv("prediction", [bad] * n))
        assert grade.score is None, bad
    assert grade_predictions(tiny_regression, None).error.startswith("no predictions")


def test_ar_grader_scores_regression_exactly(tiny_regression):
    y = tiny_regression.y_test
    grade = grade_predictions(tiny_regression, _csv("prediction", [repr(float(v) + 1.0) for v in y]))
    assert grade.score == pytest.approx(1.0)  # RMSE of a constant offset of 1


def test_ar_metric_directions_and_values():
    y = np.array(["a", "a", "b", "b"], dtype=object)
    p = np.array(["a", "b", "b", "b"], dtype=object)
    assert get_metric("accuracy")(y, p) == 0.75
    assert get_metric("balanced_accuracy")(y, p) == 0.75
    assert get_metric("macro_f1")(y, p) == pytest.approx((2 / 3 + 0.8) / 2)
    yt, yp = np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0])
    assert get_metric("rmse")(yt, yp) == pytest.approx(math.sqrt(1 / 3))
    assert get_metric("mae")(yt, yp) == pytest.approx(1 / 3)
    assert get_metric("r2")(yt, yp) == pytest.approx(0.5)
    assert {m.name for m in METRICS.values() if not m.higher_is_better} == {"rmse", "mae"}
    with pytest.raises(ValueError, match="unknown metric"):
        get_metric("auc")


def test_ar_normalized_score_is_direction_aware_and_bounded():
    rmse = get_metric("rmse")
    assert normalized_score(rmse, 0.0, baseline=2.0) == 1.0
    assert normalized_score(rmse, 2.0, baseline=2.0) == 0.0
    assert normalized_score(rmse, 1e9, baseline=2.0) == -1.0
    assert normalized_score(rmse, 1.0, baseline=2.0) > normalized_score(rmse, 1.5, baseline=2.0)
    assert normalized_score(get_metric("r2"), -50.0) == -1.0
    with pytest.raises(ValueError, match="baseline"):
        normalized_score(rmse, 1.0, baseline=None)


def test_ar_reward_for_real_and_predicted_outcomes(tiny_classification, tiny_regression):
    reward = make_reward_extractor(env=None)
    task = to_wmrl_task(tiny_classification)
    assert reward(task, Outcome("ok", 0.8)) == pytest.approx(0.8)
    assert reward(task, 0.8) == pytest.approx(0.8)  # a world model's bare prediction
    reg = to_wmrl_task(tiny_regression)
    better, worse = reward(reg, Outcome("ok", 0.5)), reward(reg, Outcome("ok", 1.0))
    assert better > worse  # lower RMSE, higher reward
    for value in (float("nan"), float("inf"), -float("inf"), None):
        r = reward(reg, Outcome("ok", value))
        assert r == -1.0, value
    assert reward(reg, 1e300) == -1.0 and reward(reg, -1e300) == 1.0


@pytest.mark.parametrize("status", ["timeout", "oom", "crashed", "invalid_output", "missing_output"])
def test_ar_reward_penalizes_failures(tiny_classification, status):
    task = to_wmrl_task(tiny_classification)
    assert AutoResearchScoreReward()(task, Outcome(status, None)) == -1.0
    assert AutoResearchScoreReward(penalty=-0.25)(task, Outcome(status, 0.9)) == -0.25
    assert AutoResearchScoreReward(penalties={status: -0.5})(task, Outcome(status, None)) == -0.5


def test_ar_reward_gives_no_reward_where_the_solution_is_not_at_fault(tiny_classification):
    task = to_wmrl_task(tiny_classification)
    assert AutoResearchScoreReward()(task, Outcome("sandbox_error", None)) is None
    assert AutoResearchScoreReward()(task, Outcome("no_prediction", None)) is None
    assert AutoResearchScoreReward()(task, Outcome("invalid_solution", None)) == -1.0
    with pytest.raises(ValueError, match=r"penalties for \['sandbox_error'\].*infrastructure failed"):
        AutoResearchScoreReward(penalties={"sandbox_error": -1.0})
    with pytest.raises(ValueError, match="unknown outcome status 'crash'"):
        AutoResearchScoreReward(penalties={"crash": -1.0})


def test_ar_reward_rejects_bad_configuration_and_foreign_tasks():
    with pytest.raises(ValueError, match="finite"):
        AutoResearchScoreReward(penalty=float("nan"))
    with pytest.raises(TypeError, match="AutoResearchTask"):
        AutoResearchScoreReward()(Task(id="other"), Outcome("ok", 1.0))


def test_ar_capped_buffer_keeps_head_and_tail():
    buf = CappedBuffer(10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrstuvwxyz"):
        buf.write(chunk)
    assert buf.total == 26 and buf.truncated
    text = buf.text()
    assert text.startswith("abcde") and text.endswith("vwxyz") and "16 bytes omitted" in text
    small = CappedBuffer(100)
    small.write(b"hello")
    assert small.text() == "hello" and not small.truncated


@pytest.mark.parametrize("numeral", ["١", "１", "٣.٥", "1_0", "𝟏"])
def test_ar_grader_refuses_numbers_not_written_in_ascii(tiny_classification, tiny_regression, numeral):
    """Python's float() reads Arabic-Indic, full-width and mathematical digits and underscores; the grader does not."""
    float(numeral)  # the hole: Python accepts it
    n = tiny_regression.n_test
    grade = grade_predictions(tiny_regression, _csv("prediction", [numeral] * n))
    assert grade.score is None and "ASCII digits" in grade.error and "test row 0" in grade.error
    labels = [numeral if i == 0 else str(y) for i, y in enumerate(tiny_classification.y_test)]
    grade = grade_predictions(tiny_classification, _csv("label", labels))
    assert grade.score is None and "ASCII digits" in grade.error
    rows = [f"{numeral if i == 0 else i},{y}" for i, y in enumerate(tiny_classification.y_test)]
    grade = grade_predictions(tiny_classification, _csv("id,prediction", rows))
    assert grade.score is None and "line 2: id" in grade.error and "ASCII digits" in grade.error


def test_ar_grader_still_reads_every_ascii_spelling(tiny_classification, tiny_regression):
    y = tiny_regression.y_test
    spellings = [f"{v:+.6e}" if i % 2 else f" {v:.12f} " for i, v in enumerate(y)]
    assert grade_predictions(tiny_regression, _csv("prediction", spellings)).score == pytest.approx(0.0, abs=1e-5)
    labels = [f"{float(v):.1f}" if i % 2 else str(v) for i, v in enumerate(tiny_classification.y_test)]
    rows = [f"{i}.0,{label}" for i, label in enumerate(labels)]
    assert grade_predictions(tiny_classification, _csv("id,prediction", rows)).score == 1.0
    text_labels = make_text_label_task()
    assert grade_predictions(text_labels, _csv("label", ["état", "中"] * (text_labels.n_test // 2))).score == 1.0


def make_text_label_task():
    from wmrl_autoresearch.tasks.task import AutoResearchTask

    x = np.arange(8, dtype=float).reshape(4, 2)
    return AutoResearchTask.create(
        id="text-labels",
        kind="classification",
        metric="accuracy",
        split="train",
        columns=["a", "b"],
        x_train=x,
        y_train=np.array(["état", "中", "état", "中"]),
        x_test=x,
        y_test=np.array(["état", "中", "état", "中"]),
        time_limit_s=5.0,
        memory_mb=128,
    )
