"""MLE-bench-format competitions (issue 56): built here in MLE-bench's two-place layout from datasets
that ship inside scikit-learn, then listed, vetted, executed in the Docker sandbox, graded outside it by
their own ``grade.py`` against ``prepared/private``, rewarded by leaderboard percentile, and trained on.

Each competition has a registry entry ``registry/<id>/`` (``config.yaml``, ``description.md``,
``grade.py``, ``prepare.py``, ``leaderboard.csv`` for two of them) and prepared data
``data/<id>/prepared/{public,private}/`` written by running its own ``prepare.py`` on the raw table.
"""

from __future__ import annotations

import importlib.util
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from sklearn import datasets
from wmrl_autoresearch.grading.submission import grade_submission
from wmrl_autoresearch.tasks.mlebench import leaderboard_percentile
from wmrl_autoresearch.vetting.competitions import load_competitions

TARGETS = {"iris-species": "species", "wine-cultivar": "cultivar", "diabetes-progression": "progression"}
LEADERBOARDS = {
    "iris-species": [1.0, 0.978, 0.978, 0.956, 0.956, 0.933, 0.911, 0.889, 0.667, 0.333],  # accuracy, best first
    "diabetes-progression": [48.0, 51.5, 53.0, 54.2, 56.0, 58.8, 61.0, 66.0, 72.5, 79.0],  # rmse, best first
}

GRADE_PY = '''\
"""Grader of {cid}: {metric} of `{target}` against the answers, rows matched by `id`."""
import numpy as np
import pandas as pd


class InvalidSubmissionError(Exception):
    """The submission cannot be graded."""


def grade(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    expected = ["id", "{target}"]
    if list(submission.columns) != expected:
        raise InvalidSubmissionError(f"submission columns are {{list(submission.columns)}}, expected {{expected}}")
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"submission has {{len(submission)}} rows, the answers {{len(answers)}}")
    merged = answers.merge(submission, on="id", how="left", suffixes=("", "_submitted"))
    predicted = merged["{target}_submitted"]
    if predicted.isna().any():
        raise InvalidSubmissionError("submission misses some ids")
    truth = merged["{target}"]
    {score}
'''
SCORES = {
    "accuracy": "return float((truth.astype(str) == predicted.astype(str)).mean())",
    "rmse": "return float(np.sqrt(np.mean((truth - predicted.astype(float)) ** 2)))",
}

PREPARE_PY = '''\
"""Prepares {cid}: 30 % of the rows become the test set; their targets go to prepared/private only."""
import shutil
from pathlib import Path

import pandas as pd

TARGET = "{target}"


def prepare(raw: Path, public: Path, private: Path) -> None:
    df = pd.read_csv(raw / "data.csv")
    df.insert(0, "id", range(len(df)))
    test = df.sample(frac=0.3, random_state={seed})
    train = df.drop(test.index)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=[TARGET]).to_csv(public / "test.csv", index=False)
    constant = train[TARGET].mode()[0] if {classification} else train[TARGET].mean()
    test[["id"]].assign(**{{TARGET: constant}}).to_csv(public / "sample_submission.csv", index=False)
    test[["id", TARGET]].to_csv(private / "answers.csv", index=False)
    shutil.copy(Path(__file__).parent / "description.md", public / "description.md")
'''

CONFIG_YAML = """\
id: {cid}
name: {name}
competition_type: simple
description: mlebench/competitions/{cid}/description.md
dataset:
  answers: {cid}/prepared/private/answers.csv
  sample_submission: {cid}/prepared/public/sample_submission.csv
grader:
  name: {metric}
  grade_fn: mlebench.competitions.{cid}.grade:grade
preparer: mlebench.competitions.{cid}.prepare:prepare
"""


def _raw_table(dataset: str, target: str, rename: dict | None = None):
    loader = {"iris": datasets.load_iris, "wine": datasets.load_wine, "diabetes": datasets.load_diabetes}[dataset]
    df = loader(as_frame=True).frame.rename(columns={"target": target, **(rename or {})})
    df.columns = [c.replace(" (cm)", "").replace(" ", "_") for c in df.columns]
    return df


def build_competition(
    registry: Path,
    data: Path,
    cid: str,
    dataset: str,
    *,
    target: str,
    metric: str,
    leaderboard: list[float] | None = None,
    seed: int = 0,
    grade_py: str | None = None,
    prepare: bool = True,
    rename: dict | None = None,
) -> None:
    """One competition in both places; ``prepare`` runs its own ``prepare.py`` on the raw table."""
    entry = registry / cid
    entry.mkdir(parents=True)
    name = cid.replace("-", " ").title()
    (entry / "config.yaml").write_text(CONFIG_YAML.format(cid=cid, name=name, metric=metric))
    (entry / "description.md").write_text(
        f"# {name}\n\nPredict `{target}` for every row of test.csv from the other columns. Submissions are "
        f"scored by {metric}.\n"
    )
    (entry / "grade.py").write_text(
        grade_py or GRADE_PY.format(cid=cid, metric=metric, target=target, score=SCORES[metric])
    )
    classification = metric == "accuracy"
    (entry / "prepare.py").write_text(
        PREPARE_PY.format(cid=cid, target=target, seed=seed, classification=classification)
    )
    if leaderboard is not None:
        rows = "\n".join(f"team-{i},{s}" for i, s in enumerate(leaderboard))
        (entry / "leaderboard.csv").write_text(f"teamName,score\n{rows}\n")
    if not prepare:
        return
    raw, public, private = (data / cid / "raw", data / cid / "prepared" / "public", data / cid / "prepared" / "private")
    for d in (raw, public, private):
        d.mkdir(parents=True)
    _raw_table(dataset, target, rename).to_csv(raw / "data.csv", index=False)
    spec = importlib.util.spec_from_file_location(f"prepare_{cid.replace('-', '_')}", entry / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.prepare(raw, public, private)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, Path]:
    """iris (leaderboard, higher is better) and wine (no leaderboard) for training; diabetes held out
    (leaderboard, lower is better)."""
    root = tmp_path_factory.mktemp("mlebench")
    registry, data = root / "mlebench" / "competitions", root / "data"
    for cid, dataset, metric in (
        ("iris-species", "iris", "accuracy"),
        ("wine-cultivar", "wine", "accuracy"),
        ("diabetes-progression", "diabetes", "rmse"),
    ):
        build_competition(
            registry, data, cid, dataset, target=TARGETS[cid], metric=metric, leaderboard=LEADERBOARDS.get(cid)
        )
    extra = data / "iris-species" / "prepared" / "public" / "extra"  # public data may hold folders (images ...)
    extra.mkdir()
    (extra / "notes.txt").write_text("measured by Edgar Anderson\n")
    return registry, data


@pytest.fixture(scope="module")
def competitions(folder):
    registry, data = folder
    return {"registry": str(registry), "data": str(data), "heldout": ["diabetes-progression"]}


@pytest.fixture(scope="module")
def loaded(competitions):
    return load_competitions(competitions)


def _task(loaded, cid):
    return next(t for t in loaded.tasks if t.id == cid)


# ------------------------------------------------------------------ listing, rewards, prompts (no Docker)


def test_ar_mlebench_lists_prepared_competitions_with_their_rewards(loaded):
    assert {t.id: t.split for t in loaded.tasks} == {
        "diabetes-progression": "heldout",
        "iris-species": "train",
        "wine-cultivar": "train",
    }
    assert loaded.rejected == [] and loaded.cross_split == []
    iris, wine, diabetes = (_task(loaded, c) for c in ("iris-species", "wine-cultivar", "diabetes-progression"))
    assert (iris.kind, iris.higher_is_better, iris.direction_source) == ("classification", True, "leaderboard order")
    assert (diabetes.kind, diabetes.higher_is_better) == ("regression", False)
    assert wine.leaderboard is None and wine.direction_source == "grader name `accuracy`"
    assert iris.reward_basis == "leaderboard percentile (10 entries)"
    assert wine.reward_basis == "normalised score (no leaderboard.csv)"
    # the sample submission (a constant) graded by the competition's own grader
    assert 0.2 < iris.sample_score < 0.5 and diabetes.sample_score > 60
    assert iris.program_policy_note == "applies (target `species`, id `id`)"
    assert (
        iris.n_test == 45
        and iris.n_train == 105
        and iris.columns
        == (
            "sepal_length",
            "sepal_width",
            "petal_length",
            "petal_width",
        )
    )
    features = iris.meta_features()
    assert features.shape == (18,) and np.isfinite(features).all()


def test_ar_mlebench_cli_lists_competitions_and_decisions(competitions, capsys):
    from wmrl_autoresearch.cli import main

    args = ["tasks", "--competitions", competitions["registry"], competitions["data"]]
    assert main([*args, "--heldout", "diabetes-progression"]) == 0
    out = capsys.readouterr().out
    iris = next(line for line in out.splitlines() if line.startswith("iris-species"))
    assert "train" in iris and "leaderboard percentile (10 entries)" in iris and "program policy applies" in iris
    wine = next(line for line in out.splitlines() if line.startswith("wine-cultivar"))
    assert "normalised score (no leaderboard.csv)" in wine
    assert "heldout" in next(line for line in out.splitlines() if line.startswith("diabetes-progression"))
    assert "3 competition(s); 0 decision(s)" in out


def test_ar_leaderboard_percentile_by_hand():
    board = [0.9, 0.8, 0.8, 0.5]
    # beats 0.5, ties both 0.8s: (1 + 0.5 * 2) / 4
    assert leaderboard_percentile(0.8, board, higher_is_better=True) == 0.5
    assert leaderboard_percentile(1.0, board, higher_is_better=True) == 1.0
    assert leaderboard_percentile(0.1, board, higher_is_better=True) == 0.0
    assert leaderboard_percentile(0.85, board, higher_is_better=True) == 0.75
    # lower is better: 2 beats 4 and ties 2 twice
    assert leaderboard_percentile(2.0, [1.0, 2.0, 2.0, 4.0], higher_is_better=False) == 0.5
    assert leaderboard_percentile(0.5, [1.0, 2.0, 2.0, 4.0], higher_is_better=False) == 1.0
    # the order of the leaderboard does not matter
    assert leaderboard_percentile(0.8, board[::-1], higher_is_better=True) == 0.5
    with pytest.raises(ValueError, match="empty"):
        leaderboard_percentile(0.8, [], higher_is_better=True)


def test_ar_mlebench_rewards_are_percentiles_or_normalised_scores(loaded):
    from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward
    from wmrl_autoresearch.tasks.task import to_wmrl_task

    from wmrl_core.types import Outcome

    reward = AutoResearchScoreReward()
    iris, wine, diabetes = (_task(loaded, c) for c in ("iris-species", "wine-cultivar", "diabetes-progression"))
    # 0.956 ties two of ten entries and beats five: (5 + 1) / 10
    assert reward(to_wmrl_task(iris), Outcome("ok", 0.956)) == pytest.approx(0.6)
    # rmse 55 beats 54.2? no: lower is better; it beats 56 .. 79 (6 entries)
    assert reward(to_wmrl_task(diabetes), Outcome("ok", 55.0)) == pytest.approx(0.6)
    assert reward(to_wmrl_task(wine), Outcome("ok", 0.9)) == pytest.approx(0.9)
    assert reward(to_wmrl_task(iris), Outcome("invalid_output", None)) == -1.0


def test_ar_mlebench_grader_refuses_a_malformed_submission_with_its_message(loaded):
    iris = _task(loaded, "iris-species")
    grade = grade_submission(iris, b"id,label\n0,1\n")
    assert grade.score is None
    assert "InvalidSubmissionError: submission columns are ['id', 'label'], expected ['id', 'species']" in grade.error
    assert "not a readable CSV" in grade_submission(iris, b'"unclosed\n').error
    assert grade_submission(iris, None).error.startswith("no predictions.csv")
    sample = (iris.entry.public_dir / "sample_submission.csv").read_bytes()
    assert grade_submission(iris, sample).score == iris.sample_score


def test_ar_mlebench_prompt_holds_description_and_public_files_only(loaded):
    from wmrl_autoresearch.llm.prompts import POLICY_TEMPLATE, fill
    from wmrl_autoresearch.tasks.task import to_wmrl_task

    prompt = fill(POLICY_TEMPLATE, to_wmrl_task(_task(loaded, "iris-species")))
    assert "Predict `species` for every row of test.csv" in prompt  # description.md
    for name in ("train.csv", "test.csv", "sample_submission.csv", "description.md", "extra/notes.txt"):
        assert f"- {name} (" in prompt
    assert "answers" not in prompt and "private" not in prompt
    assert "$OUTPUT_DIR/predictions.csv" in prompt and "(id, species)" in prompt
    assert "share of the public leaderboard's 10 entries" in prompt


# ------------------------------------------------------------------ vetting and hygiene (no Docker)


@pytest.fixture(scope="module")
def vetting_folder(tmp_path_factory) -> tuple[Path, Path]:
    """A training competition and its held-out twin (the same rows under other column names),
    a grader that refuses every submission, an entry whose data is not prepared, and a competition
    with two targets (valid, but not for the program policy)."""
    root = tmp_path_factory.mktemp("mlebench-vetting")
    registry, data = root / "competitions", root / "data"
    build_competition(registry, data, "iris-species", "iris", target="species", metric="accuracy")
    build_competition(
        registry,
        data,
        "iris-twin",
        "iris",
        target="kind",
        metric="accuracy",
        rename={"sepal length (cm)": "a", "sepal width (cm)": "b", "petal length (cm)": "c", "petal width (cm)": "d"},
    )
    refusing = GRADE_PY.format(
        cid="broken-grader", metric="accuracy", target="label", score=SCORES["accuracy"]
    )  # expects `label`; the sample submission has `cultivar`
    build_competition(registry, data, "broken-grader", "wine", target="cultivar", metric="accuracy", grade_py=refusing)
    build_competition(registry, data, "not-prepared", "wine", target="cultivar", metric="accuracy", prepare=False)
    build_competition(registry, data, "two-targets", "wine", target="cultivar", metric="accuracy")
    public = data / "two-targets" / "prepared" / "public"
    sample = (public / "sample_submission.csv").read_text().splitlines()
    (public / "sample_submission.csv").write_text(
        "\n".join([sample[0] + ",alcohol"] + [row + ",13.0" for row in sample[1:]]) + "\n"
    )
    (registry / "two-targets" / "grade.py").write_text(
        "def grade(submission, answers):\n    return float(len(submission) == len(answers))\n"
    )
    return registry, data


def test_ar_mlebench_vetting_rejects_with_reasons_and_drops_the_training_twin(vetting_folder):
    registry, data = vetting_folder
    found = load_competitions({"registry": str(registry), "data": str(data), "heldout": ["iris-twin"]})
    rejected = dict(found.rejected)
    assert set(rejected) == {"broken-grader", "not-prepared"}
    assert rejected["broken-grader"].startswith("the sample submission does not grade: the competition's grader")
    assert "submission columns are ['id', 'cultivar'], expected ['id', 'label']" in rejected["broken-grader"]
    assert rejected["not-prepared"].startswith("data not prepared: prepared/public")
    assert "mlebench prepare -c not-prepared" in rejected["not-prepared"]
    # the held-out twin shares rows with the training competition under other column names: the training one goes
    (decision,) = found.cross_split
    assert (decision["task_id"], decision["twin"], decision["rule"]) == ("iris-species", "iris-twin", "rows")
    assert {t.id for t in found.tasks} == {"iris-twin", "two-targets"}
    assert _task(found, "two-targets").program_policy_note.startswith("skipped: sample_submission.csv has 3 columns")
    lines = found.report()
    assert any(line.startswith("rejected broken-grader: the sample submission does not grade") for line in lines)
    assert any(line.startswith("dropped iris-species (train): same data as iris-twin (heldout)") for line in lines)

    tabular = load_competitions(
        {"registry": str(registry), "data": str(data), "heldout": ["iris-twin"], "tabular_only": True}
    )
    assert [t.id for t in tabular.tasks] == ["iris-twin"]
    assert tabular.skipped == [
        ("two-targets", "sample_submission.csv has 3 columns (id, cultivar, alcohol), not `id,target`")
    ]
    assert "skipped two-targets (tabular_only, program policy)" in "\n".join(tabular.report())


def test_ar_mlebench_program_policy_names_the_competition_it_cannot_solve(vetting_folder):
    from wmrl_autoresearch.program.policy import ProgramPolicy
    from wmrl_autoresearch.tasks.task import to_wmrl_task

    registry, data = vetting_folder
    found = load_competitions({"registry": str(registry), "data": str(data), "include": ["two-targets"]})
    with pytest.raises(ValueError, match="cannot solve competition two-targets: sample_submission.csv has 3 columns"):
        ProgramPolicy().generate([to_wmrl_task(found.tasks[0])], 1)


def test_ar_mlebench_source_errors_name_the_fix(folder):
    registry, data = folder
    with pytest.raises(ValueError, match="Did you mean `heldout`"):
        load_competitions({"registry": str(registry), "data": str(data), "held_out": ["x"]})
    with pytest.raises(ValueError, match="Did you mean diabetes-progression"):
        load_competitions({"registry": str(registry), "data": str(data), "heldout": ["diabetes-progresion"]})
    with pytest.raises(ValueError, match="not a folder"):
        load_competitions({"registry": str(registry / "nowhere"), "data": str(data)})


# ------------------------------------------------------------------ Docker: execution, grading, training

PROBE = textwrap.dedent(
    """\
    import json, os, shutil
    found = []
    for root, dirs, files in os.walk("/"):
        if root in ("/proc", "/sys", "/dev"):
            dirs[:] = []
            continue
        found += [os.path.join(root, f) for f in files if f == "answers.csv"]
    try:
        open({private!r}).read()
        host = "read"
    except OSError as exc:
        host = type(exc).__name__
    data = sorted(os.listdir("/data")) + sorted(os.listdir("/data/extra"))
    print(json.dumps({{"data": data, "found": found, "host": host}}))
    shutil.copy("/data/sample_submission.csv", os.path.join(os.environ["OUTPUT_DIR"], "predictions.csv"))
    """
)

MALFORMED = textwrap.dedent(
    """\
    import os
    import pandas as pd
    test = pd.read_csv("/data/test.csv")
    pd.DataFrame({"id": test["id"], "label": 0}).to_csv(os.path.join(os.environ["OUTPUT_DIR"], "predictions.csv"))
    """
)


def test_ar_mlebench_executes_in_docker_graded_outside_without_the_answers(docker_ready, competitions, tmp_path):
    from wmrl_autoresearch.environment import AutoResearchEnvironment
    from wmrl_autoresearch.program.grammar import Program
    from wmrl_autoresearch.program.policy import ProgramPolicy

    env = AutoResearchEnvironment(
        competitions=competitions, max_parallel=2, gpus="none", limits={"timeout_s": 30}, workdir=str(tmp_path)
    )
    try:
        iris = env.task("iris-species")
        private = iris.data.entry.answers
        policy = ProgramPolicy(seed=0)
        program = str(policy.generate([iris], 1).solutions[0])
        names = Program.parse(program).names
        assert 'y = train.pop("species")' in program and names["model"]
        outcomes = env.execute([iris] * 3, [PROBE.format(private=str(private)), program, MALFORMED])
    finally:
        env.close()
    probe, solved, malformed = outcomes
    # the sandbox saw prepared/public and nothing else: no answers file anywhere, the host path unreachable
    assert probe.status == "ok", probe.info
    seen = json.loads(probe.info["logs"]["stdout"].strip().splitlines()[-1])
    assert seen == {
        "data": ["description.md", "extra", "sample_submission.csv", "test.csv", "train.csv", "notes.txt"],
        "found": [],
        "host": "FileNotFoundError",
    }
    assert probe.score == iris.data.sample_score  # the copied sample submission, graded by grade.py
    # a program of the program policy, graded by the competition's grader, rewarded by leaderboard percentile
    assert solved.status == "ok", solved.info["logs"]
    assert 0.5 < solved.score <= 1.0
    assert solved.info["raw_score"] == solved.score
    board = np.array(LEADERBOARDS["iris-species"])
    assert solved.info["leaderboard_percentile"] == leaderboard_percentile(solved.score, board, higher_is_better=True)
    assert solved.info["normalized_score"] == solved.info["leaderboard_percentile"]
    assert solved.info["reward_basis"] == "leaderboard percentile (10 entries)"
    # a malformed submission: a failed outcome carrying the grader's own message
    assert malformed.status == "invalid_output" and malformed.score is None
    assert "submission columns are ['Unnamed: 0', 'id', 'label'], expected ['id', 'species']" in malformed.info["error"]


def test_ar_mlebench_wmrl_train_two_steps(docker_ready, competitions, tmp_path):
    from wmrl_core.config import load_config
    from wmrl_core.trainer import train

    run_dir = tmp_path / "run"
    cfg = load_config(
        base={
            "mode": "real",
            "steps": 2,
            "seed": 0,
            "run_dir": str(run_dir),
            "environment": {
                "name": "autoresearch",
                "kwargs": {
                    "sandbox": "docker",
                    "competitions": competitions,
                    "max_parallel": 2,
                    "gpus": "none",
                    "limits": {"timeout_s": 30},
                },
            },
            "policy": {"name": "program-policy", "kwargs": {"seed": 0}},
            "reward": {"name": "autoresearch-score"},
            "rollout": {"batch_tasks": 2, "group_size": 2, "task_split": "train"},
            "eval": {"every": 0},
            "checkpoint": {"every": 0},
            "logging": {"progress": False, "tensorboard": False},
        }
    )
    train(cfg)
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1, 2]  # the start, then two policy updates
    assert records[-1]["compute/execution_items"] == 2 * 2 * 2  # every rollout executed in a sandbox
    rewards = [r["reward/real_mean"] for r in records[1:]]
    assert all(-1.0 <= r <= 1.0 for r in rewards), rewards  # percentiles in [0, 1], failures -1
