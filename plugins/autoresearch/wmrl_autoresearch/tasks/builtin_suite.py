"""The built-in task suite: 17 tasks from offline data (scikit-learn's bundled datasets and
seeded synthetic generators), split into a training suite (10) and a held-out suite (7).

Every task is deterministic: the same seed gives the same data and the same train/test
split on every machine. The table in ``plugins/autoresearch/README.md`` lists them; keep
it in sync with :data:`SUITE` (a test checks the ids).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from wmrl_autoresearch.tasks.task import AutoResearchTask, to_wmrl_task

__all__ = ["SuiteEntry", "SUITE", "load_builtin_suite", "builtin_tasks"]

TEST_FRACTION = 0.3


@dataclass(frozen=True)
class SuiteEntry:
    """One built-in task: ``make(seed)`` returns ``(columns, X, y, summary, source)``."""

    id: str
    kind: str
    metric: str
    split: str
    make: Callable[[int], tuple]
    seed: int = 0
    time_limit_s: float = 60.0
    memory_mb: int = 1024


def _numeric(x: np.ndarray, prefix: str = "x") -> list[str]:
    return [f"{prefix}{j}" for j in range(x.shape[1])]


def _sk(name: str, summary: str):
    def make(seed: int):
        import sklearn.datasets as ds

        bunch = getattr(ds, name)()
        columns = [str(c).replace(" ", "_").replace("(", "").replace(")", "") for c in bunch.feature_names]
        return columns, bunch.data, bunch.target, summary, f"sklearn.datasets.{name} (bundled with scikit-learn)"

    return make


def _iris(seed):
    return _sk("load_iris", "Iris flowers: predict the species from four sepal and petal measurements (cm).")(seed)


def _wine(seed):
    return _sk("load_wine", "Italian wines: predict the cultivar (3 classes) from 13 chemical measurements.")(seed)


def _breast_cancer(seed):
    return _sk(
        "load_breast_cancer",
        "Breast-mass cell nuclei from images: predict malignant (0) or benign (1) from 30 features.",
    )(seed)


def _digits(seed):
    return _sk("load_digits", "Handwritten digits: predict the digit 0-9 from 8x8 grey-level images (64 pixels, 0-16).")(
        seed
    )


def _diabetes(seed):
    return _sk(
        "load_diabetes",
        "Diabetes patients: predict disease progression one year after baseline from 10 standardized measurements.",
    )(seed)


def _friedman1(seed):
    from sklearn.datasets import make_friedman1

    x, y = make_friedman1(n_samples=1000, n_features=10, noise=1.0, random_state=seed)
    return _numeric(x), x, y, "Friedman #1 regression: a smooth non-linear function of 5 of the 10 uniform inputs, " \
        "plus noise.", "sklearn.datasets.make_friedman1(n_samples=1000, noise=1.0)"


def _friedman2(seed):
    from sklearn.datasets import make_friedman2

    x, y = make_friedman2(n_samples=800, noise=50.0, random_state=seed)
    return _numeric(x), x, y, "Friedman #2 regression: impedance-like non-linear function of 4 inputs, noisy.", \
        "sklearn.datasets.make_friedman2(n_samples=800, noise=50)"


def _friedman3(seed):
    from sklearn.datasets import make_friedman3

    x, y = make_friedman3(n_samples=800, noise=0.1, random_state=seed)
    return _numeric(x), x, y, "Friedman #3 regression: phase-angle-like arctan function of 4 inputs, noisy.", \
        "sklearn.datasets.make_friedman3(n_samples=800, noise=0.1)"


def _imbalanced(seed):
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=1500, n_features=20, n_informative=6, n_redundant=4, weights=[0.85, 0.15],
                               flip_y=0.02, class_sep=0.8, random_state=seed)
    return _numeric(x), x, y, "Imbalanced binary classification (15% positives) with 20 features, 6 informative.", \
        "sklearn.datasets.make_classification(n_samples=1500, weights=[0.85, 0.15])"


def _moons(seed):
    from sklearn.datasets import make_moons

    x, y = make_moons(n_samples=1000, noise=0.3, random_state=seed)
    return _numeric(x), x, y, "Two interleaving half-moons in 2-D with heavy noise.", \
        "sklearn.datasets.make_moons(n_samples=1000, noise=0.3)"


def _circles(seed):
    from sklearn.datasets import make_circles

    x, y = make_circles(n_samples=1000, noise=0.15, factor=0.5, random_state=seed)
    return _numeric(x), x, y, "Two concentric noisy circles in 2-D: not linearly separable.", \
        "sklearn.datasets.make_circles(n_samples=1000, noise=0.15, factor=0.5)"


def _hastie(seed):
    from sklearn.datasets import make_hastie_10_2

    x, y = make_hastie_10_2(n_samples=2000, random_state=seed)
    return _numeric(x), x, y.astype(int), "Hastie et al. 10.2: label +1 when the sum of squares of 10 Gaussian " \
        "inputs exceeds 9.34, else -1.", "sklearn.datasets.make_hastie_10_2(n_samples=2000)"


def _blobs(seed):
    from sklearn.datasets import make_blobs

    x, y = make_blobs(n_samples=1200, n_features=10, centers=5, cluster_std=3.0, random_state=seed)
    return _numeric(x), x, y, "Five overlapping Gaussian clusters in 10-D: predict the cluster.", \
        "sklearn.datasets.make_blobs(n_samples=1200, centers=5, cluster_std=3.0)"


def _sparse_regression(seed):
    from sklearn.datasets import make_regression

    x, y = make_regression(n_samples=600, n_features=100, n_informative=5, noise=5.0, random_state=seed)
    return _numeric(x), x, y, "Linear regression with 100 features of which only 5 matter, plus noise.", \
        "sklearn.datasets.make_regression(n_samples=600, n_features=100, n_informative=5, noise=5)"


def _sparse_uncorrelated(seed):
    from sklearn.datasets import make_sparse_uncorrelated

    x, y = make_sparse_uncorrelated(n_samples=800, n_features=12, random_state=seed)
    return _numeric(x), x, y, "12 independent Gaussian features; the target depends linearly on only 4 of them.", \
        "sklearn.datasets.make_sparse_uncorrelated(n_samples=800, n_features=12)"


def _churn(seed):
    """Mixed-type customer table with categorical columns and missing values (synthetic)."""
    rng = np.random.default_rng(seed)
    n = 1500
    plan = rng.choice(["basic", "plus", "premium"], size=n, p=[0.5, 0.3, 0.2])
    region = rng.choice(["north", "south", "east", "west"], size=n)
    tenure = rng.gamma(2.0, 12.0, size=n)
    monthly = np.where(plan == "basic", 20, np.where(plan == "plus", 45, 80)) + rng.normal(0, 8, size=n)
    tickets = rng.poisson(1.5, size=n).astype(float)
    logit = -1.0 - 0.05 * tenure + 0.6 * tickets + 0.02 * (monthly - 40) + (plan == "basic") * 0.8 + (
        region == "south") * 0.5
    churn = rng.random(n) < 1 / (1 + np.exp(-logit))
    monthly_missing = rng.random(n) < 0.08
    x = np.empty((n, 5), dtype=object)
    x[:, 0], x[:, 1] = plan, region
    x[:, 2], x[:, 3] = np.round(tenure, 1), np.where(monthly_missing, np.nan, np.round(monthly, 2))
    x[:, 4] = tickets
    y = np.where(churn, "yes", "no")
    return ["plan", "region", "tenure_months", "monthly_charge", "support_tickets"], x, y, \
        "Synthetic telecom customers: predict whether a customer churns (yes/no) from plan, region, tenure, " \
        "charges (some missing) and support tickets.", "seeded synthetic generator (wmrl_autoresearch.tasks.builtin_suite)"


def _house_prices(seed):
    """Mixed-type housing table with a categorical neighbourhood and missing values (synthetic)."""
    rng = np.random.default_rng(seed)
    n = 1200
    hood = rng.choice(["old-town", "riverside", "suburbs", "industrial"], size=n, p=[0.2, 0.2, 0.45, 0.15])
    area = rng.lognormal(4.6, 0.35, size=n)
    rooms = np.clip(np.round(area / 25 + rng.normal(0, 0.8, size=n)), 1, 10)
    age = rng.uniform(0, 100, size=n)
    base = {"old-town": 4200, "riverside": 5200, "suburbs": 3000, "industrial": 1900}
    price = np.array([base[h] for h in hood]) * area * (1 - 0.003 * age) + 8000 * rooms + rng.normal(0, 25000, n)
    age_missing = rng.random(n) < 0.1
    x = np.empty((n, 4), dtype=object)
    x[:, 0], x[:, 1] = hood, np.round(area, 1)
    x[:, 2], x[:, 3] = rooms, np.where(age_missing, np.nan, np.round(age, 0))
    return ["neighbourhood", "area_m2", "rooms", "age_years"], x, price / 1000.0, \
        "Synthetic house sales: predict the price (thousands) from neighbourhood, area, rooms and age (some " \
        "missing).", "seeded synthetic generator (wmrl_autoresearch.tasks.builtin_suite)"


SUITE: tuple[SuiteEntry, ...] = (
    # ------------------------------------------------------------------ training suite
    SuiteEntry("iris-species", "classification", "accuracy", "train", _iris),
    SuiteEntry("wine-cultivar", "classification", "macro_f1", "train", _wine),
    SuiteEntry("breast-cancer-diagnosis", "classification", "macro_f1", "train", _breast_cancer),
    SuiteEntry("digits-8x8", "classification", "accuracy", "train", _digits),
    SuiteEntry("diabetes-progression", "regression", "rmse", "train", _diabetes),
    SuiteEntry("friedman1-nonlinear", "regression", "r2", "train", _friedman1),
    SuiteEntry("imbalanced-binary", "classification", "macro_f1", "train", _imbalanced),
    SuiteEntry("noisy-moons", "classification", "accuracy", "train", _moons),
    SuiteEntry("sparse-linear-regression", "regression", "mae", "train", _sparse_regression),
    SuiteEntry("telecom-churn", "classification", "balanced_accuracy", "train", _churn),
    # ------------------------------------------------------------------ held-out suite
    SuiteEntry("hastie-10-2", "classification", "accuracy", "heldout", _hastie),
    SuiteEntry("concentric-circles", "classification", "accuracy", "heldout", _circles),
    SuiteEntry("overlapping-blobs", "classification", "macro_f1", "heldout", _blobs),
    SuiteEntry("friedman2-impedance", "regression", "rmse", "heldout", _friedman2),
    SuiteEntry("friedman3-phase", "regression", "r2", "heldout", _friedman3),
    SuiteEntry("sparse-uncorrelated", "regression", "mae", "heldout", _sparse_uncorrelated),
    SuiteEntry("house-prices", "regression", "rmse", "heldout", _house_prices),
)


def build_task(entry: SuiteEntry, test_fraction: float = TEST_FRACTION) -> AutoResearchTask:
    """Generate/load the data of ``entry`` and split it (stratified for classification)."""
    from sklearn.model_selection import train_test_split

    columns, x, y, summary, source = entry.make(entry.seed)
    x = np.asarray(x, dtype=object)
    y = np.asarray(y)
    stratify = y if entry.kind == "classification" else None
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_fraction, random_state=entry.seed,
                                              stratify=stratify)
    return AutoResearchTask.create(
        id=entry.id, kind=entry.kind, metric=entry.metric, split=entry.split, columns=columns,
        x_train=x_tr, y_train=y_tr, x_test=x_te, y_test=y_te, time_limit_s=entry.time_limit_s,
        memory_mb=entry.memory_mb, source=source, summary=summary,
    )


@lru_cache(maxsize=1)
def load_builtin_suite() -> tuple[AutoResearchTask, ...]:
    """All built-in tasks, train suite first (cached: built once per process, ~1 s)."""
    return tuple(build_task(entry) for entry in SUITE)


def builtin_tasks(split: str | None = None, environment: str = "autoresearch", **_: Any) -> list:
    """Task-set entry point of the built-in suite (:data:`SUITE`).

    :param split: ``"train"``, ``"heldout"`` or ``None`` for both.
    :param environment: passed by the registry; ignored.
    :return: ``list[wmrl_core.types.Task]`` whose ``data`` is an :class:`AutoResearchTask`.
    """
    return [to_wmrl_task(t) for t in load_builtin_suite() if split is None or t.split == split]
