"""The training configuration: one structured config, every field documented.

YAML files and dotted command-line overrides (``grpo.lr=0.01``) are merged onto
:class:`TrainConfig` with OmegaConf; unknown keys and mistyped values fail with the key,
the problem and the fix.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from wmrl_core.errors import ConfigError

__all__ = ["TrainConfig", "load_config", "MODES"]

MODES = ("real", "world_model", "wmrl")
FUSION_METHODS = ("rectified", "inverse_variance")
LAMBDA_MOMENTS = ("solution", "rollout")
BACKENDS = ("local", "ray")


@dataclass
class ComponentConfig:
    name: str = MISSING
    """Registered component name (``wmrl plugins`` lists them)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments passed to the component's factory, over its registered defaults."""


@dataclass
class EnvironmentConfig(ComponentConfig):
    cache: Optional[str] = None
    """Path of an execution cache (JSONL, shared across runs and seeds): a (task, solution)
    executed before replays its recorded outcome and is charged its recorded cost, counted in
    ``execution/replayed``. For benchmarks (``wmrl_core/execution_cache.py``); ``None``: off."""


@dataclass
class RewardConfig:
    name: Optional[str] = None
    """Reward extractor; ``None`` asks the environment's plugin for its default."""
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolloutConfig:
    batch_tasks: int = 16
    """B: tasks (= groups) per step."""
    group_size: int = 8
    """G: rollouts per task."""
    task_split: str = "train"
    """Which split of the environment's tasks training samples from."""


@dataclass
class AnchorConfig:
    fraction: float = 0.1
    """rho: share of groups executed for real in ``wmrl`` mode."""
    min_groups: int = 1
    """At least this many anchor groups per step."""


@dataclass
class DebiasConfig:
    enabled: bool = True
    """Calibrate world-model rewards with the isotonic map fitted on anchors."""
    window: Optional[int] = None
    """Keep only the last ``window`` anchor pairs (``None``: all)."""
    calibrator: str = "isotonic"
    """``isotonic`` (step function) or ``smoothed`` (isotonic levels joined strictly monotonically,
    so calibration never ties scores the world model ranks apart; see ``wmrl_core/debias.py``)."""
    slope: float = 0.01
    """Tilt of the ``smoothed`` calibrator, in real-reward sds per world-model-score sd."""


@dataclass
class DenoiseConfig:
    enabled: bool = True
    """Fuse the streams by ``method``; ``False`` pools both streams by their share of samples."""
    method: str = "rectified"
    """``rectified``: anchor gradient plus lambda times (calibrated gradient over all groups minus
    over the anchor groups), unbiased for any lambda (``wmrl_core/rectified.py``);
    ``inverse_variance``: convex combination weighted by the explained variance (``wmrl_core/fusion.py``)."""
    min_pairs: int = 4
    """``inverse_variance``: anchor pairs needed before the world model gets any weight."""
    lambda_window: int = 20
    """``rectified``: lambda is power-tuned on earlier steps' anchor groups, back to the
    ``lambda_window``-th most recent group whose calibrated advantages are not all zero."""
    lambda_moments: str = "solution"
    """``rectified``: ``solution`` sums the advantages of a group's rollouts with equal solutions
    (equal score vectors) before the moments that tune lambda; ``rollout`` treats every rollout
    as distinct (see ``wmrl_core/rectified.py``)."""


@dataclass
class GRPOConfig:
    lr: float = 1e-3
    """Adam learning rate."""
    clip_eps: float = 0.2
    """PPO clip range."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the initial policy (0 disables it and the reference copy)."""
    entropy_coef: float = 0.0
    """Weight :math:`\\beta_H` of the entropy bonus :math:`-\\beta_H \\operatorname{agg}(H)` (see
    ``wmrl_core.grpo.entropy_bonus``): keeps the policy from collapsing onto one answer when
    rewards are mostly noise. Needs a policy with the optional ``entropy(rollouts)`` method; 0 disables it."""
    loss_aggregation: str = "token_mean"
    """``token_mean`` or ``sequence_mean`` (see ``wmrl_core.grpo``)."""
    epochs: int = 1
    """Optimizer passes over each step's rollouts."""
    scale_advantages: bool = True
    """Divide advantages by the group's standard deviation."""
    max_grad_norm: Optional[float] = 1.0
    """Gradient clipping (``None`` disables)."""


@dataclass
class EvalConfig:
    every: int = 5
    """Evaluate every N steps (and before the first and after the last); 0 disables."""
    split: str = "heldout"
    """Tasks to evaluate on (falls back to ``train`` when the environment has no such split)."""
    samples_per_task: int = 16
    """Solutions sampled per task for evaluation."""
    max_tasks: Optional[int] = None
    """Evaluate on at most this many tasks of the split, evenly spaced in the environment's order
    (``None``: all), so that a large held-out split can be sampled within a budget."""
    common_random_numbers: bool = False
    """Sample every evaluation of a run with the same seed (``seed * 100003``), not a new one
    per step: runs of one seed that evaluate similar policies then draw mostly the same
    solutions, so differences between evaluations (over steps and between arms) are not
    buried in sampling noise, and an execution cache replays most of them. Each evaluation is
    still an unbiased sample of its policy; seeds keep independent draws."""


@dataclass
class LoggingConfig:
    tensorboard: bool = True
    progress: bool = True
    """Show a progress bar."""
    wandb_project: Optional[str] = None
    """Log to wandb under this project when set (needs ``pip install wandb``)."""


@dataclass
class CheckpointConfig:
    every: int = 10
    """Save a checkpoint every N steps and at the end; 0 saves only at the end."""


@dataclass
class DistributedConfig:
    backend: str = "local"
    """``local`` (execution in this process) or ``ray`` (real execution, training and
    evaluation, spread over Ray workers; see ``wmrl_core/distributed.py``)."""
    num_workers: int = 2
    """Ray actors, each with its own environment instance (``ray`` only)."""
    address: Optional[str] = None
    """``None`` starts a local Ray; ``auto`` joins the cluster this machine belongs to;
    ``ray://host:10001`` a remote one (``ray`` only)."""
    worker_cpus: float = 1.0
    """CPUs Ray reserves per worker; fractional or 0 for execution that waits on a sandbox."""


@dataclass
class TrainConfig:
    mode: str = "wmrl"
    """``real`` (GRPO, every group executed), ``world_model`` (no execution), ``wmrl``."""
    steps: int = 50
    """Policy updates."""
    seed: int = 0
    run_dir: str = "runs/default"
    """Where config.yaml, metrics.jsonl, summary.json, checkpoints/ and tensorboard/ go."""
    resume: bool = False
    """Continue from the newest readable checkpoint in ``run_dir/checkpoints`` (``last.pt``, else
    the newest ``step_*.pt``)."""
    world_model_timeout_s: Optional[float] = None
    """Seconds one world-model ``predict`` call may take; past it the call is abandoned and its
    rewards dropped (counted in ``faults/world_model_timeouts``). ``None`` waits forever."""
    environment: EnvironmentConfig = field(default_factory=EnvironmentConfig)
    policy: ComponentConfig = field(default_factory=ComponentConfig)
    world_model: Optional[ComponentConfig] = None
    """Required in ``world_model`` and ``wmrl`` modes."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    anchors: AnchorConfig = field(default_factory=AnchorConfig)
    debias: DebiasConfig = field(default_factory=DebiasConfig)
    denoise: DenoiseConfig = field(default_factory=DenoiseConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)


def validate(cfg: TrainConfig) -> None:
    """Semantic checks that types alone cannot express."""
    if cfg.mode not in MODES:
        raise ConfigError(f"mode={cfg.mode!r} is unknown; use one of {', '.join(MODES)}")
    if cfg.mode != "real" and cfg.world_model is None:
        raise ConfigError(f"mode={cfg.mode} needs a world model: set world_model.name (or use mode=real)")
    if cfg.eval.max_tasks is not None and cfg.eval.max_tasks < 1:
        raise ConfigError(f"eval.max_tasks must be >= 1 or null (all tasks), got {cfg.eval.max_tasks}")
    if cfg.steps < 0:
        raise ConfigError(f"steps must be >= 0, got {cfg.steps}")
    if cfg.rollout.batch_tasks < 1 or cfg.rollout.group_size < 2:
        raise ConfigError("rollout.batch_tasks must be >= 1 and rollout.group_size >= 2 (GRPO compares within a group)")
    if cfg.grpo.loss_aggregation not in ("token_mean", "sequence_mean"):
        raise ConfigError(f"grpo.loss_aggregation={cfg.grpo.loss_aggregation!r}; use token_mean or sequence_mean")
    if not 0.0 <= cfg.anchors.fraction <= 1.0:
        raise ConfigError(f"anchors.fraction={cfg.anchors.fraction} must be in [0, 1]")
    if cfg.world_model_timeout_s is not None and not cfg.world_model_timeout_s > 0:
        raise ConfigError(
            f"world_model_timeout_s must be > 0 seconds (or null to wait forever), got {cfg.world_model_timeout_s}"
        )
    if cfg.denoise.method not in FUSION_METHODS:
        raise ConfigError(f"denoise.method={cfg.denoise.method!r} is unknown; use one of {', '.join(FUSION_METHODS)}")
    if cfg.denoise.lambda_moments not in LAMBDA_MOMENTS:
        raise ConfigError(
            f"denoise.lambda_moments={cfg.denoise.lambda_moments!r} is unknown; use one of {', '.join(LAMBDA_MOMENTS)}"
        )
    if cfg.denoise.lambda_window < 2:
        raise ConfigError(
            f"denoise.lambda_window must be >= 2 informative anchor groups (a slope's variance needs two), "
            f"got {cfg.denoise.lambda_window}"
        )
    if cfg.debias.calibrator not in ("isotonic", "smoothed"):
        raise ConfigError(f"debias.calibrator={cfg.debias.calibrator!r} is unknown; use isotonic or smoothed")
    if cfg.debias.slope < 0:
        raise ConfigError(f"debias.slope must be >= 0, got {cfg.debias.slope}")
    if (
        cfg.mode == "wmrl"
        and cfg.denoise.enabled
        and cfg.denoise.method == "rectified"
        and max(cfg.anchors.min_groups, round(cfg.anchors.fraction * cfg.rollout.batch_tasks)) < 1
    ):
        raise ConfigError(
            "denoise.method=rectified needs at least one anchor group per step: raise anchors.fraction "
            "or set anchors.min_groups >= 1 (or use denoise.method=inverse_variance)"
        )
    if cfg.grpo.epochs < 1:
        raise ConfigError(f"grpo.epochs must be >= 1, got {cfg.grpo.epochs}")
    if not cfg.grpo.lr > 0:
        raise ConfigError(f"grpo.lr must be > 0, got {cfg.grpo.lr}")
    for name in ("kl_coef", "entropy_coef"):
        if not getattr(cfg.grpo, name) >= 0:
            raise ConfigError(f"grpo.{name} must be >= 0 (0 disables it), got {getattr(cfg.grpo, name)}")
    dist = cfg.distributed
    if dist.backend not in BACKENDS:
        raise ConfigError(f"distributed.backend={dist.backend!r} is unknown; use one of {', '.join(BACKENDS)}")
    if dist.num_workers < 1 or dist.worker_cpus < 0:
        raise ConfigError(
            f"distributed.num_workers must be >= 1 and distributed.worker_cpus >= 0, "
            f"got {dist.num_workers} and {dist.worker_cpus}"
        )
    if dist.backend == "ray" and importlib.util.find_spec("ray") is None:
        raise ConfigError(
            "distributed.backend=ray needs Ray, which is not installed: pip install 'wmrl[ray]' "
            "(or use distributed.backend=local)"
        )


def load_config(path: str | Path | None = None, overrides: Sequence[str] = (), base: dict | None = None) -> TrainConfig:
    """Merge YAML file and ``key=value`` overrides onto the schema, then validate.

    :raises ConfigError: for unknown keys, wrong types, missing required values.
    """
    try:
        schema = OmegaConf.structured(TrainConfig)
        layers: list[DictConfig | ListConfig] = [schema]
        if base:
            layers.append(OmegaConf.create(base))
        if path is not None:
            path = Path(path)
            if not path.is_file():
                raise ConfigError(f"config file {path} does not exist; pass a YAML file (see configs/)")
            layers.append(OmegaConf.load(path))
        bad = [o for o in overrides if "=" not in o]
        if bad:
            raise ConfigError(f"overrides must look like key=value, got {bad}")
        layers.append(OmegaConf.from_dotlist(list(overrides)))
        merged = OmegaConf.merge(*layers)
        OmegaConf.resolve(merged)
        missing = sorted(OmegaConf.missing_keys(merged))
        if missing:
            raise ConfigError(
                f"required config values are missing: {', '.join(missing)}; set them in the YAML or as key=value"
            )
        cfg: TrainConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None)
        raise ConfigError(
            f"invalid config{f' at `{key}`' if key else ''}: {str(exc).splitlines()[0]}. "
            "Check the key's spelling and type against `wmrl_core/config.py` (TrainConfig)."
        ) from None
    validate(cfg)
    return cfg


def to_yaml(cfg: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
