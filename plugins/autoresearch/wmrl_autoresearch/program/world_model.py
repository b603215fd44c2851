r"""The learned world model of the program policy's outcomes (registered ``program-world-model``).

The default model (:class:`~.outcome_model.OutcomeModel`) reads the
task's meta-features and the program's decisions and predicts, separately, the probability that
running the program fails and its normalized score (``autoresearch-score`` scale: 1 = perfect,
0 = constant baseline) if it succeeds; their mixture gives the expected reward
:math:`E[r] = -p + (1-p)\mu_s` and a standard deviation per prediction. It is fitted on the
shipped execution corpus of the **training tasks only** (``data/corpus.jsonl.gz``, :mod:`~.corpus`)
at first use, in seconds, and cached on disk (:func:`shipped_outcome_model`; a fitted ensemble
is megabytes, the corpus kilobytes). A ``.pkl`` checkpoint (``python -m
wmrl_autoresearch.program.build --out DIR``) is loaded instead; a ``.pt`` checkpoint selects the
ridge baseline (:class:`RewardModel`, ``hidden=0``, ``data/world_model.pt``; main effects of each
decision only, so it ranks a task's new programs worse: ``build.py --report`` scores both):

.. math:: \hat r = \operatorname{clip}(w^\top [\,(x-\mu_x)/\sigma_x,\ \operatorname{onehot}(d)\,] + b, -1, 1)

All rollouts of a step go through one batched prediction.

In a run the model can keep learning from the anchors it is paid with
(:meth:`LearnedWorldModel.learn_from_anchors`): the fitted model stays the prior, and each task
learns a correction of its residuals on the program's decisions (:class:`TaskCorrections`),
shrunk towards 0 (the global model) less and less as the task's executions accumulate. The prediction is returned as
an :class:`~wmrl_core.types.Outcome` holding the raw metric value that would give
:math:`\hat r`, so the same reward extractor serves real and predicted outcomes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from wmrl_autoresearch.grading.rewards import AutoResearchScoreReward
from wmrl_autoresearch.program.grammar import ONE_HOT_SIZE, Program, programs_of
from wmrl_autoresearch.program.outcome_model import design_matrix
from wmrl_core.contracts import is_rewarded
from wmrl_core.types import CostModel, Outcome, Task

__all__ = [
    "RewardModel",
    "LearnedWorldModel",
    "TaskCorrections",
    "fit_reward_model",
    "raw_score_for_reward",
    "SHIPPED_CHECKPOINT",
    "RIDGE_BASELINE_CHECKPOINT",
    "load_outcome_model",
    "save_outcome_model",
    "shipped_outcome_model",
]

SHIPPED_CHECKPOINT = "outcome_model.pkl"
"""File name of a fitted outcome model written by ``build.py``."""
RIDGE_BASELINE_CHECKPOINT = "world_model.pt"
"""File name of the shipped ridge baseline (a torch state dict of :class:`RewardModel`)."""


class RewardModel(nn.Module):
    """``hidden=0``: a linear (ridge) model, main effects of each decision plus task features;
    ``hidden>0``: an MLP with two hidden layers of that width."""

    def __init__(self, n_features: int, hidden: int = 64):
        super().__init__()
        n_in = n_features + ONE_HOT_SIZE
        self.net = (
            nn.Linear(n_in, 1)
            if hidden == 0
            else nn.Sequential(
                nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1)
            )
        )
        self.register_buffer("mu", torch.zeros(n_features))
        self.register_buffer("sigma", torch.ones(n_features))

    def forward(self, features: torch.Tensor, one_hot: torch.Tensor) -> torch.Tensor:
        x = (features - self.mu) / self.sigma
        return self.net(torch.cat([x, one_hot], dim=-1)).squeeze(-1)


def fit_reward_model(
    features: np.ndarray,
    one_hot: np.ndarray,
    rewards: np.ndarray,
    *,
    hidden: int = 64,
    epochs: int = 400,
    lr: float = 3e-3,
    weight_decay: float = 1e-3,
    ridge: float = 30.0,
    seed: int = 0,
) -> RewardModel:
    r"""``hidden=0``: closed-form ridge, :math:`w = (X^TX + \lambda I)^{-1} X^T (y - \bar y)` on
    standardized inputs. ``hidden>0``: full-batch Adam on MSE (hundreds of runs: full batch is exact)."""
    if not (len(features) == len(one_hot) == len(rewards)) or len(rewards) < 2:
        raise ValueError(f"need >= 2 aligned examples, got {len(features)}, {len(one_hot)}, {len(rewards)}")
    torch.manual_seed(seed)
    model = RewardModel(features.shape[1], hidden)
    f = torch.as_tensor(features, dtype=torch.float32)
    model.mu.copy_(f.mean(0))
    model.sigma.copy_(f.std(0).clamp_min(1e-3))
    oh = torch.as_tensor(one_hot, dtype=torch.float32)
    y = torch.as_tensor(rewards, dtype=torch.float32)
    if hidden == 0:
        x = torch.cat([(f - model.mu) / model.sigma, oh], dim=-1).double()
        x_mean = x.mean(0)
        xc, yc = x - x_mean, (y - y.mean()).double()
        w = torch.linalg.solve(xc.T @ xc + ridge * torch.eye(x.shape[1], dtype=torch.float64), xc.T @ yc)
        with torch.no_grad():
            model.net.weight.copy_(w.float().unsqueeze(0))
            model.net.bias.copy_((y.mean() - x_mean.float() @ w.float()).reshape(1))
        return model.eval()
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.mean((model(f, oh) - y) ** 2)
        loss.backward()
        opt.step()
    return model.eval()


def raw_score_for_reward(task: Any, reward: float) -> float:
    """Invert ``normalized_score``: the raw metric value whose normalized reward is ``reward``."""
    metric = task.metric_spec
    if metric.higher_is_better:
        return float(reward)
    return float((1.0 - reward) * task.baseline)


class TaskCorrections:
    r"""Per-task ridge corrections of a global model's residuals, from sufficient statistics.

    Task :math:`t` has seen programs with one-hot decisions :math:`z_i` and residuals
    :math:`e_i = r_i - \hat r^{\,prior}_i` (real reward minus the global model's prediction).
    Its correction is the posterior mean of :math:`\beta_t \sim \mathcal N(0, \tau^2 I)`,
    :math:`e_i = z_i^\top \beta_t + \varepsilon_i`, :math:`\varepsilon_i \sim \mathcal N(0, \sigma^2)`:

    .. math:: \beta_t = (Z_t^\top Z_t + \lambda I)^{-1} Z_t^\top e_t, \qquad \lambda = \sigma^2 / \tau^2

    so a task with no executions is predicted by the global model (:math:`\beta_t = 0`), and the
    fixed penalty :math:`\lambda` weighs less against :math:`Z_t^\top Z_t` as the task's
    executions accumulate (a decision option seen :math:`n` times alone keeps about
    :math:`n / (n + \lambda)` of its mean residual). Only :math:`Z_t^\top Z_t`,
    :math:`Z_t^\top e_t` and the count are kept, so learning is order-free and resumes exactly.

    :param dim: the length of :math:`z` (``ONE_HOT_SIZE``).
    :param shrinkage: :math:`\lambda > 0`, in executions.
    """

    def __init__(self, dim: int, shrinkage: float):
        if not (math.isfinite(shrinkage) and shrinkage > 0):
            raise ValueError(f"shrinkage must be a finite number > 0 (executions' worth of prior), got {shrinkage}")
        self.dim, self.shrinkage = int(dim), float(shrinkage)
        self.gram: dict[str, np.ndarray] = {}
        self.moment: dict[str, np.ndarray] = {}
        self.count: dict[str, int] = {}

    def add(self, task_id: str, z: np.ndarray, residual: float) -> None:
        z = np.asarray(z, dtype=np.float64)
        if task_id not in self.gram:
            self.gram[task_id], self.moment[task_id], self.count[task_id] = (
                np.zeros((self.dim, self.dim)),
                np.zeros(self.dim),
                0,
            )
        self.gram[task_id] += np.outer(z, z)
        self.moment[task_id] += residual * z
        self.count[task_id] += 1

    def coefficients(self, task_id: str) -> np.ndarray:
        r""":math:`\beta_t`; zeros for a task never seen."""
        if task_id not in self.gram:
            return np.zeros(self.dim)
        return np.linalg.solve(self.gram[task_id] + self.shrinkage * np.eye(self.dim), self.moment[task_id])

    def correction(self, task_ids: Sequence[str], z: np.ndarray) -> np.ndarray:
        r""":math:`z_i^\top \beta_{t_i}` for each row."""
        betas = {t: self.coefficients(t) for t in set(task_ids)}
        return np.array([np.asarray(row, dtype=np.float64) @ betas[t] for t, row in zip(task_ids, z)])

    def state_dict(self) -> dict[str, Any]:
        return {
            "shrinkage": self.shrinkage,
            "tasks": {
                t: {
                    "gram": torch.from_numpy(self.gram[t].copy()),
                    "moment": torch.from_numpy(self.moment[t].copy()),
                    "count": self.count[t],
                }
                for t in self.gram
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.shrinkage = float(state["shrinkage"])
        tasks = state["tasks"]
        self.gram = {t: v["gram"].numpy().astype(np.float64) for t, v in tasks.items()}
        self.moment = {t: v["moment"].numpy().astype(np.float64) for t, v in tasks.items()}
        self.count = {t: int(v["count"]) for t, v in tasks.items()}


def save_outcome_model(model: Any, path: str | Path, info: dict[str, Any]) -> None:
    """Pickle a fitted :class:`~.outcome_model.OutcomeModel` with the scikit-learn version that made it."""
    import pickle

    import sklearn

    with open(path, "wb") as f:
        pickle.dump({"model": model, "sklearn": sklearn.__version__, "info": info}, f, protocol=4)


def load_outcome_model(path: str | Path) -> tuple[Any, dict[str, Any]]:
    """(model, info) of a :func:`save_outcome_model` file. A file pickled by another scikit-learn
    version is not trusted (its trees may load wrongly): the model is refitted from the corpus
    and settings recorded in its info, which takes seconds."""
    import pickle
    import warnings

    import sklearn

    with open(path, "rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # InconsistentVersionWarning: handled below
        state = pickle.load(f)
    if not isinstance(state, dict) or "model" not in state:
        raise ValueError(
            f"{path} is not a file written by save_outcome_model (found {type(state).__name__}); "
            "write one with `python -m wmrl_autoresearch.program.build --out DIR`"
        )
    if state.get("sklearn") == sklearn.__version__:
        return _fitted_outcome_model(state["model"], path), state.get("info", {})
    from wmrl_autoresearch.program.fitting import fit_outcome_model

    info = state.get("info", {})
    warnings.warn(
        f"{path} was fitted with scikit-learn {state.get('sklearn')}, this is {sklearn.__version__}: "
        "refitting it from the shipped corpus (seconds)",
        stacklevel=2,
    )
    return fit_outcome_model(**info.get("fit", {})), info


def _fitted_outcome_model(model: Any, path: str | Path) -> Any:
    """``model`` if it is a fitted :class:`~.outcome_model.OutcomeModel`, else a ``ValueError`` saying how to
    rebuild the file."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from wmrl_autoresearch.program.outcome_model import OutcomeModel

    try:
        if not isinstance(model, OutcomeModel):
            raise NotFittedError(f"it holds a {type(model).__name__}, not an OutcomeModel")
        check_is_fitted(model, "classifiers_")
    except NotFittedError as exc:
        raise ValueError(
            f"{path} holds no fitted outcome model ({exc}); rebuild it with "
            "`python -m wmrl_autoresearch.program.build --out DIR`"
        ) from None
    return model


def _cache_dir() -> Path:
    return Path(os.environ.get("WMRL_CACHE_DIR") or Path.home() / ".cache" / "wmrl") / "world_model"


def shipped_outcome_model(families: Sequence[str] | None = None) -> tuple[Any, dict[str, Any]]:
    """The default model: fitted on the shipped corpus with ``fitting.OUTCOME_SETTINGS`` at first
    use and cached under ``$WMRL_CACHE_DIR`` (default ``~/.cache/wmrl``), keyed by the sha256 of
    the corpus, the settings and the scikit-learn version (so a new corpus or version refits).

    :param families: fit on these families' executions only (``["W"]``: the world-model families of
        :mod:`wmrl_autoresearch.tasks.families`, so the model never saw R or E); ``None``: every row.
    """
    import hashlib
    import json

    import sklearn

    from wmrl_autoresearch.program.corpus import CORPUS_PATH
    from wmrl_autoresearch.program.fitting import OUTCOME_SETTINGS, excluded_tasks, fit_outcome_model
    from wmrl_autoresearch.tasks.task import FEATURE_NAMES

    digest = hashlib.sha256(CORPUS_PATH.read_bytes()).hexdigest()
    fit = {} if families is None else {"families": sorted(families)}
    # the feature layout and the tasks the pool dropped change the fit as much as the corpus does
    key_parts = [digest, OUTCOME_SETTINGS, sklearn.__version__, list(FEATURE_NAMES), sorted(excluded_tasks())]
    if fit:  # the key of the model fitted on every row stays what it is, so its caches stay valid
        key_parts.append(fit)
    key = hashlib.sha256(json.dumps(key_parts).encode()).hexdigest()[:16]
    path = _cache_dir() / f"outcome_model-{key}.pkl"
    if path.is_file():
        try:
            return load_outcome_model(path)
        except Exception:  # a damaged cache file is refitted, never trusted
            path.unlink(missing_ok=True)
    info = {"corpus": CORPUS_PATH.name, "corpus_sha256": digest, "fit": fit}
    model = fit_outcome_model(**fit)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    save_outcome_model(model, tmp, info)
    os.replace(tmp, path)  # atomic: concurrent runs each write a whole file
    return model, info


class LearnedWorldModel:
    r"""Registered as ``program-world-model``.

    :param env: the AutoResearch environment (unused; factory contract).
    :param checkpoint: ``None`` (default): the outcome model fitted on the shipped corpus
        (:func:`shipped_outcome_model`); a ``.pkl`` written by ``build.py --out``; or a ``.pt``
        checkpoint of the ridge baseline (``data/world_model.pt``, :class:`RewardModel`).
    :param cost_per_call_s: declared cost of one batched call (``None``: wall time is charged).
    :param learn_from_anchors: learn per-task corrections from the run's anchor executions
        (:class:`TaskCorrections`). Off by default: replayed on the shipped corpus
        (``wmrl experiment wm-online-update``, a prior that never saw the task) it
        lowered the within-task Spearman on a task's unseen programs at every shrinkage tried (8, 32;
        2-128 with the ridge baseline as the prior), with at most 8 programs per task to learn from;
        ``world_model.kwargs.learn_from_anchors=true`` turns it on.
    :param shrinkage: :math:`\lambda` of :class:`TaskCorrections`, in executions' worth of prior.
    :param fit_families: without a checkpoint, fit the default model on these families' executions
        of the shipped corpus only (``[W]``: the world-model families, so it never saw the RL training
        families R nor the held-out E; :mod:`wmrl_autoresearch.tasks.families`); ``None``: every family.
    :param failure_reward: the reward a failed execution teaches (the ``autoresearch-score`` penalty).
    :param validation: ``{"rank_correlation": r, "groups": n}``, a within-task rank correlation measured
        on executions the model was not fitted on (e.g. program-grouped cross-validation on its own
        families), declared to the default fusion's gate as capped pseudo-evidence; ``None``: none.
    """

    def __init__(
        self,
        env: Any = None,
        *,
        checkpoint: str | None = None,
        cost_per_call_s: float | None = None,
        learn_from_anchors: bool = False,
        shrinkage: float = 32.0,
        failure_reward: float = -1.0,
        fit_families: Sequence[str] | None = None,
        validation: dict[str, Any] | None = None,
    ):
        self.model: Any
        self.validation = dict(validation) if validation is not None else None
        path = Path(checkpoint) if checkpoint else None
        if path is not None and not path.is_file():
            raise FileNotFoundError(
                f"world-model checkpoint {path} not found; build one with "
                "`python -m wmrl_autoresearch.program.build --out DIR`, or leave world_model.kwargs.checkpoint unset"
            )
        if path is not None and fit_families is not None:
            raise ValueError(
                "world_model.kwargs: set checkpoint or fit_families, not both (a checkpoint is already fitted; "
                "build one on some families with `wmrl-autoresearch build-world-model --families W --out DIR`)"
            )
        if path is None:
            self.model, self.info = shipped_outcome_model(None if fit_families is None else list(fit_families))
        elif str(path).endswith(".pt"):  # the ridge baseline (a torch state dict)
            state = torch.load(str(path), weights_only=False)
            self.model = RewardModel(state["n_features"], state["hidden"])
            self.model.load_state_dict(state["model"])
            self.model.eval()
            self.info = state.get("info", {})
        else:
            self.model, self.info = load_outcome_model(str(path))
        self.cost = CostModel(per_call_s=cost_per_call_s) if cost_per_call_s is not None else None
        self.learns = bool(learn_from_anchors)
        self.corrections = TaskCorrections(ONE_HOT_SIZE, shrinkage)
        self.reward = AutoResearchScoreReward(penalty=failure_reward)

    def _prior(self, tasks: Sequence[Task], programs: Sequence[Program]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The fitted (global) model's expected reward in ``[-1, 1]``, and its other outputs."""
        features = np.stack([np.asarray(t.features, dtype=np.float32) for t in tasks])
        if isinstance(self.model, RewardModel):
            with torch.no_grad():
                one_hot = torch.as_tensor(np.stack([p.one_hot() for p in programs]))
                pred = self.model(torch.as_tensor(features), one_hot).clamp(-1.0, 1.0).numpy()
            return pred.astype(np.float64), {}
        x = design_matrix(features, np.array([p.choices for p in programs]))
        out = self.model.predict_outcome(x, [t.id for t in tasks])
        extra = {"p_fail": out.p_fail, "predicted_score": out.score, "reward_std": out.reward_std}
        return np.clip(out.reward, -1.0, 1.0), extra

    def prior_rewards(self, tasks: Sequence[Task], programs: Sequence[Program]) -> np.ndarray:
        """The fitted (global) model's expected reward, in ``[-1, 1]``."""
        return self._prior(tasks, programs)[0]

    def predict_rewards(self, tasks: Sequence[Task], programs: Sequence[Program]) -> np.ndarray:
        r""":math:`\operatorname{clip}(\hat r^{\,prior} + z^\top \beta_t, -1, 1)` (:class:`TaskCorrections`)."""
        return self._predict(tasks, programs)[0]

    def _predict(self, tasks: Sequence[Task], programs: Sequence[Program]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        prior, extra = self._prior(tasks, programs)
        z = np.stack([p.one_hot() for p in programs])
        return np.clip(prior + self.corrections.correction([t.id for t in tasks], z), -1.0, 1.0), extra

    def learn_from_anchors(self, tasks: Sequence[Task], solutions: Sequence[Any], outcomes: Sequence[Outcome]) -> None:
        """Add each rewarded real outcome of a program (normalized reward; failures
        ``failure_reward``) to its task's corrections; ``sandbox_error``/``no_prediction`` and
        non-programs teach nothing."""
        if not self.learns:
            return
        programs = programs_of(solutions)
        keep = [i for i, (p, o) in enumerate(zip(programs, outcomes)) if p is not None and is_rewarded(o.status)]
        if not keep:
            return
        prior = self.prior_rewards([tasks[i] for i in keep], [programs[i] for i in keep])
        for i, r_prior in zip(keep, prior):
            reward = self.reward(tasks[i], outcomes[i])
            if reward is not None:
                self.corrections.add(tasks[i].id, programs[i].one_hot(), reward - r_prior)

    def state_dict(self) -> dict[str, Any]:
        return {"corrections": self.corrections.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.corrections.load_state_dict(state["corrections"])

    def predict(self, tasks: Sequence[Task], solutions: Sequence[Any]) -> list[Outcome]:
        programs = programs_of(solutions)
        known = [i for i, p in enumerate(programs) if p is not None]
        outcomes = [
            Outcome(status="invalid_solution", score=None, info={"reason": "not a program-policy script"})
            for _ in solutions
        ]
        if known:
            rewards, extra = self._predict([tasks[i] for i in known], [programs[i] for i in known])
            for j, (i, r) in enumerate(zip(known, rewards.tolist())):
                score = raw_score_for_reward(tasks[i].data, r)
                info = {"predicted_reward": r, **{k: float(v[j]) for k, v in extra.items()}}
                outcomes[i] = Outcome(status="ok", score=score if math.isfinite(score) else None, info=info)
        return outcomes
