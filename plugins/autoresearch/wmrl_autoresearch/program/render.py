"""Rendering a :class:`~.grammar.Program` into a complete, readable scikit-learn script.

The script follows the sandbox contract: it reads ``$DATA_DIR/train.csv`` (features plus
``target``) and ``$DATA_DIR/test.csv`` (``id`` plus features) and writes
``$OUTPUT_DIR/predictions.csv`` with ``id,prediction``. A tabular competition names its own
columns (:class:`ScriptColumns`): its target, its id, and the submission's header ``id,target``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from wmrl_autoresearch.program.grammar import Program, ProgramScript

__all__ = ["ScriptColumns", "render_script"]


@dataclass(frozen=True)
class ScriptColumns:
    """The column names a rendered script reads and writes (the sandbox contract's by default).

    :param target: the target column of ``train.csv``.
    :param id: the id column of ``test.csv``, written first in ``predictions.csv``.
    :param prediction: the header of the predictions column.
    :param drop: columns of ``train.csv`` that are not features (a competition's id).
    """

    target: str = "target"
    id: str = "id"
    prediction: str = "prediction"
    drop: tuple[str, ...] = ()


def _q(name: str) -> str:
    """A column name as a double-quoted Python string literal."""
    return json.dumps(name)


_SCALERS = {
    "none": None,
    "standard": "StandardScaler()",
    "robust": "RobustScaler()",
    "quantile": "QuantileTransformer(n_quantiles=100, output_distribution='normal', random_state=0)",
}
_FEATURES = {
    "none": None,
    "poly2": "PolynomialFeatures(degree=2, include_bias=False)",
    "pca": "PCA(n_components=0.95, random_state=0)",
    "select_half": "SelectPercentile({score}, percentile=50)",
}
_BUDGET = {"fast": 0.3, "balanced": 1.0, "thorough": 2.0}
_COMPLEXITY = {"low": 0, "medium": 1, "high": 2}
_REG = {"weak": 0, "default": 1, "strong": 2}


def _model(name: str, classification: bool, complexity: int, reg: int, budget: float) -> tuple[str, str]:
    """(import line, constructor) of the estimator."""
    trees = max(10, int(100 * budget))
    iters = max(30, int(100 * budget))
    kind = "Classifier" if classification else "Regressor"
    if name == "linear":
        c = (10.0, 1.0, 0.1)[reg]
        if classification:
            return (
                "from sklearn.linear_model import LogisticRegression",
                f"LogisticRegression(C={c}, max_iter={iters * 5})",
            )
        return "from sklearn.linear_model import Ridge", f"Ridge(alpha={1 / c})"
    if name == "knn":
        k = (25, 10, 3)[complexity]
        return (
            f"from sklearn.neighbors import KNeighbors{kind}",
            f"KNeighbors{kind}(n_neighbors={k}, weights='distance')",
        )
    if name == "tree":
        depth = (3, 8, None)[complexity]
        leaf = (1, 5, 20)[reg]
        return (
            f"from sklearn.tree import DecisionTree{kind}",
            f"DecisionTree{kind}(max_depth={depth}, min_samples_leaf={leaf}, random_state=0)",
        )
    if name in ("random_forest", "extra_trees"):
        cls = ("RandomForest" if name == "random_forest" else "ExtraTrees") + kind
        depth = (6, 16, None)[complexity]
        leaf = (1, 3, 10)[reg]
        return (
            f"from sklearn.ensemble import {cls}",
            f"{cls}(n_estimators={trees}, max_depth={depth}, min_samples_leaf={leaf}, n_jobs=1, random_state=0)",
        )
    if name == "hist_gb":
        lr = (0.05, 0.1, 0.2)[complexity]
        l2 = (0.0, 1.0, 10.0)[reg]
        return (
            f"from sklearn.ensemble import HistGradientBoosting{kind}",
            f"HistGradientBoosting{kind}(learning_rate={lr}, max_iter={iters}, l2_regularization={l2}, random_state=0)",
        )
    if name == "mlp":
        width = (16, 64, 256)[complexity]
        alpha = (1e-5, 1e-4, 1e-2)[reg]
        return (
            f"from sklearn.neural_network import MLP{kind}",
            f"MLP{kind}(hidden_layer_sizes=({width}, {width}), alpha={alpha}, max_iter={iters}, early_stopping=True, random_state=0)",
        )
    if name == "svm":
        c = (0.1, 1.0, 10.0)[2 - reg]
        gamma = ("'scale'", "'scale'", "'auto'")[complexity]
        est = "SVC" if classification else "SVR"
        return f"from sklearn.svm import {est}", f"{est}(C={c}, gamma={gamma})"
    raise ValueError(f"unknown model family {name!r}")


def render_script(program: Program, *, classification: bool, columns: ScriptColumns = ScriptColumns()) -> ProgramScript:
    d = program.names
    budget = _BUDGET[d["budget"]]
    model_import, model = _model(
        d["model"], classification, _COMPLEXITY[d["complexity"]], _REG[d["regularization"]], budget
    )
    imports = [
        "import os",
        "",
        "import numpy as np",
        "import pandas as pd",
        "from sklearn.compose import ColumnTransformer",
        "from sklearn.impute import SimpleImputer",
        "from sklearn.pipeline import Pipeline",
        "from sklearn.preprocessing import OneHotEncoder",
        model_import,
    ]
    numeric_steps = [f'("impute", SimpleImputer(strategy="{d["impute"]}"))']
    if _SCALERS[d["scale"]]:
        imports.append(f"from sklearn.preprocessing import {_SCALERS[d['scale']].split('(')[0]}")
        numeric_steps.append(f'("scale", {_SCALERS[d["scale"]]})')
    steps = ['("preprocess", preprocess)']
    if _FEATURES[d["features"]]:
        feature = _FEATURES[d["features"]].format(score="f_classif" if classification else "f_regression")
        if d["features"] == "poly2":
            imports.append("from sklearn.preprocessing import PolynomialFeatures")
        elif d["features"] == "pca":
            imports.append("from sklearn.decomposition import PCA")
        else:
            imports.append(
                f"from sklearn.feature_selection import SelectPercentile, {'f_classif' if classification else 'f_regression'}"
            )
        steps.append(f'("features", {feature})')
    if d["ensemble"] == "bagging":
        kind = "Classifier" if classification else "Regressor"
        imports.append(f"from sklearn.ensemble import Bagging{kind}")
        model = f"Bagging{kind}({model}, n_estimators=5, random_state=0)"
    steps.append(f'("model", {model})')
    target = f"y = train.pop({_q(columns.target)}).astype({'str' if classification else 'float'})"
    drop = [f"train = train.drop(columns=[{', '.join(_q(c) for c in columns.drop)}])"] if columns.drop else []
    lines = [
        program.header(),
        f'"""A {"classification" if classification else "regression"} experiment written by the WMRL program policy."""',
        *imports,
        "",
        'train = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "train.csv"))',
        'test = pd.read_csv(os.path.join(os.environ["DATA_DIR"], "test.csv"))',
        target,
        *drop,
        f"ids = test.pop({_q(columns.id)})",
        'categorical = train.select_dtypes(exclude="number").columns.tolist()',
        "numeric = [c for c in train.columns if c not in categorical]",
        "",
        "preprocess = ColumnTransformer([",
        f'    ("num", Pipeline([{", ".join(numeric_steps)}]), numeric),',
        '    ("cat", Pipeline([("impute", SimpleImputer(strategy="most_frequent")),',
        '                       ("onehot", OneHotEncoder(handle_unknown="ignore", sparse_output=False))]), categorical),',
        "])",
        "pipeline = Pipeline([",
        *[f"    {s}," for s in steps],
        "])",
        "pipeline.fit(train, y)",
        "predictions = pipeline.predict(test)",
        f"pd.DataFrame({{{_q(columns.id)}: ids, {_q(columns.prediction)}: predictions}}).to_csv(",
        '    os.path.join(os.environ["OUTPUT_DIR"], "predictions.csv"), index=False)',
        "",
    ]
    return ProgramScript("\n".join(lines), program)
