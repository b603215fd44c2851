r"""Policy evaluation with a world model: do the intervals cover the truth?

Estimate :math:`\theta = \frac1T\sum_t\sum_a \pi(a\mid t)\,\mu_{t,a}`, the mean true reward of a
fixed policy :math:`\pi` on the synthetic bandit, from

* :math:`n` anchors: rollouts of :math:`\pi` executed for real, :math:`y = \mu + \sigma\varepsilon`,
  each with its world-model prediction;
* :math:`N` further rollouts of :math:`\pi` with world-model predictions only;
* a calibrator :math:`\hat f` fitted by isotonic regression on ``n_calibration`` earlier anchor
  pairs drawn under another policy :math:`\pi_0` (uniform): the situation of a training run,
  whose calibrator was fitted on earlier steps' anchors while the policy moved on.

Three estimators with nominal 95% normal intervals (:math:`z = 1.96`):

* ``anchors``: :math:`\bar y_n \pm z\,s_y/\sqrt n`.
* ``calibrated_world_model``: :math:`\bar f_N \pm z\,s_f/\sqrt N`, :math:`f = \hat f(w)`; treats the
  calibrated predictions as truth. Under the policy shift :math:`E_\pi[\hat f(w)] \ne \theta` (the
  calibrator averages the best arm and the decoy with :math:`\pi_0`'s mixture), so its narrow
  interval is centred on the wrong value.
* ``rectified`` (PPI++, Angelopoulos et al., 2023):
  :math:`\hat\theta = \bar y_n + \lambda(\bar f_N - \bar f_n)`, with the power-tuned
  :math:`\hat\lambda = \operatorname{clip}(\widehat{\operatorname{Cov}}(y, f) / ((1 + n/N)\widehat{\operatorname{Var}} f), 0, 1)`
  and :math:`\widehat{\operatorname{Var}}\hat\theta = \widehat{\operatorname{Var}}(y - \lambda f)/n + \lambda^2\widehat{\operatorname{Var}}(f)/N`.
  Unbiased for any fixed :math:`\lambda` whatever :math:`\hat f` is, since
  :math:`E[\bar f_N - \bar f_n] = 0`.

Each replication draws its own bandit instance, calibration pairs, anchors and predictions.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.isotonic import IsotonicRegression

from wmrl_core.synthetic.bandit import SyntheticBanditEnvironment
from wmrl_core.synthetic.world_model import SyntheticWorldModel

__all__ = [
    "ppi_mean",
    "classical_mean",
    "PolicyEvaluationResult",
    "run_policy_evaluation",
    "markdown_table",
    "write_policy_evaluation",
]

Z95 = 1.959963984540054


def classical_mean(values: np.ndarray) -> tuple[float, float]:
    """:math:`(\\bar x, s/\\sqrt n)`: the sample mean and its standard error."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


def ppi_mean(y: np.ndarray, f_labeled: np.ndarray, f_unlabeled: np.ndarray) -> tuple[float, float, float]:
    """PPI++ mean: :math:`(\\hat\\theta, \\widehat{se}, \\hat\\lambda)` with
    :math:`\\hat\\theta = \\bar y + \\hat\\lambda(\\bar f_N - \\bar f_n)`,
    :math:`\\hat\\lambda = \\operatorname{clip}(\\operatorname{Cov}(y,f)/((1+n/N)\\operatorname{Var}f), 0, 1)`,
    :math:`\\widehat{se}^2 = \\operatorname{Var}(y-\\hat\\lambda f)/n + \\hat\\lambda^2\\operatorname{Var}(f_N)/N`."""
    y, f_n, f_big = (np.asarray(a, dtype=np.float64) for a in (y, f_labeled, f_unlabeled))
    n, big_n = y.size, f_big.size
    if n < 2 or big_n < 2:
        raise ValueError(f"need at least 2 labelled and 2 unlabelled values, got {n} and {big_n}")
    var_f = float(np.var(f_n, ddof=1))
    cov = float(np.cov(y, f_n, ddof=1)[0, 1])
    lam = float(np.clip(cov / ((1.0 + n / big_n) * var_f), 0.0, 1.0)) if var_f > 1e-12 else 0.0
    theta = float(y.mean() + lam * (f_big.mean() - f_n.mean()))
    var = float(np.var(y - lam * f_n, ddof=1) / n + lam**2 * np.var(f_big, ddof=1) / big_n)
    return theta, float(np.sqrt(var)), lam


def _policy(truth, best_share: float, decoy_share: float) -> np.ndarray:
    """(T, A) probabilities: ``best_share`` on the best arm, ``decoy_share`` on the decoy, the rest spread."""
    T, A = truth.mu.shape
    p = np.full((T, A), (1.0 - best_share - decoy_share) / (A - 2))
    p[np.arange(T), truth.best] = best_share
    p[np.arange(T), truth.decoy] = decoy_share
    return p


def _sample(env, probs: np.ndarray, n: int, rng: np.random.Generator) -> tuple[list, list]:
    tasks = env.tasks()
    t = rng.integers(len(tasks), size=n)
    # Inverse-CDF draws, one uniform per sample: what ``rng.choice(A, p=probs[i])`` does, all rows at once.
    cdf = np.cumsum(probs, axis=1)
    cdf /= cdf[:, -1:]
    arms = (cdf[t] <= rng.random(n)[:, None]).sum(axis=1)
    return [tasks[i] for i in t], [int(a) for a in arms]


@dataclass
class PolicyEvaluationResult:
    estimator: str
    coverage: float
    mean_width: float
    bias: float
    rmse: float
    replications: int


def run_policy_evaluation(
    *,
    replications: int = 500,
    n_anchors: int = 32,
    n_world_model: int = 1600,
    n_calibration: int = 160,
    quality: str = "miscalibrated",
    best_share: float = 0.6,
    decoy_share: float = 0.1,
    seed: int = 0,
) -> list[PolicyEvaluationResult]:
    """Coverage, mean interval width, bias and RMSE of the three estimators over ``replications``."""
    errors: dict[str, list[float]] = {"anchors": [], "calibrated_world_model": [], "rectified": []}
    covered: dict[str, list[bool]] = {k: [] for k in errors}
    widths: dict[str, list[float]] = {k: [] for k in errors}
    for rep in range(replications):
        rng = np.random.default_rng([seed, rep, 0x9E])
        env = SyntheticBanditEnvironment(truth_seed=int(rng.integers(2**31)), seed=int(rng.integers(2**31)))
        wm = SyntheticWorldModel(env, quality=quality, seed=int(rng.integers(2**31)))
        pi = _policy(env.truth, best_share, decoy_share)
        theta = float((pi * env.truth.mu).sum(axis=1).mean())
        uniform = np.full_like(pi, 1.0 / pi.shape[1])

        cal_tasks, cal_arms = _sample(env, uniform, n_calibration, rng)
        iso = IsotonicRegression(out_of_bounds="clip")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            iso.fit(wm.predict(cal_tasks, cal_arms), [o.score for o in env.execute(cal_tasks, cal_arms)])

        a_tasks, a_arms = _sample(env, pi, n_anchors, rng)
        y = np.array([o.score for o in env.execute(a_tasks, a_arms)])
        f_n = iso.predict(wm.predict(a_tasks, a_arms))
        u_tasks, u_arms = _sample(env, pi, n_world_model, rng)
        f_big = iso.predict(wm.predict(u_tasks, u_arms))

        estimates = {
            "anchors": classical_mean(y),
            "calibrated_world_model": classical_mean(f_big),
            "rectified": ppi_mean(y, f_n, f_big)[:2],
        }
        for name, (est, se) in estimates.items():
            errors[name].append(est - theta)
            covered[name].append(abs(est - theta) <= Z95 * se)
            widths[name].append(2 * Z95 * se)
    return [
        PolicyEvaluationResult(
            name,
            float(np.mean(covered[name])),
            float(np.mean(widths[name])),
            float(np.mean(errors[name])),
            float(np.sqrt(np.mean(np.square(errors[name])))),
            replications,
        )
        for name in errors
    ]


def markdown_table(results: list[PolicyEvaluationResult]) -> str:
    lines = ["| estimator | coverage of 95% intervals | mean interval width | bias | RMSE |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| {r.estimator} | {r.coverage:.1%} ({r.replications} replications) | {r.mean_width:.3f} | "
            f"{r.bias:+.4f} | {r.rmse:.4f} |"
        )
    return "\n".join(lines)


def write_policy_evaluation(path: str | Path, *, replications: int = 500, seed: int = 0) -> str:
    """Run the experiment for the ``miscalibrated`` and ``confident_decoy`` world models and write
    one markdown table per world model to ``path``; returns the text."""
    parts = [
        (
            f"# Policy evaluation: 95% intervals for a fixed policy's mean true reward\n\n"
            f"{replications} replications, each its own bandit; 32 anchors, 1600 world-model predictions, "
            f"calibrator fitted on 160 earlier anchor pairs under the uniform policy; target policy puts 0.6 "
            f"on the best arm and 0.1 on the decoy (`experiments/synthetic/policy_evaluation.py`).\n"
        )
    ]
    for quality in ("miscalibrated", "confident_decoy"):
        results = run_policy_evaluation(replications=replications, quality=quality, seed=seed)
        parts.append(f"\n## world model: {quality}\n\n{markdown_table(results)}\n")
    text = "".join(parts)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
    return text
