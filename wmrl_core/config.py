"""The training configuration: one structured config, every field documented.

YAML files and dotted command-line overrides (``grpo.lr=0.01``) are merged onto
:class:`TrainConfig` with OmegaConf; unknown keys and mistyped values fail with the key,
the problem and the fix, and a YAML syntax error with its file, line and column.

Every field carries its help as ``metadata["help"]`` (the way HF's and TRL's dataclasses do):
``wmrl train --help`` and the generated ``docs/configuration.md`` read it
(:mod:`wmrl_core.config_docs`). An enumerated field carries its vocabulary as
``metadata["choices"]``: a ``Literal``, or ``"module:NAME"``, the table where the values are
defined (``CALIBRATORS``...), imported when checked. :func:`check_choices`
checks every one of them, with a close-match suggestion. The fields are annotated ``str``, not
with the ``Literal``, because OmegaConf before 2.4 (which hydra, and so verl, pins) rejects
``Literal`` annotations.

Switching a component on the command line (``world_model.name=noise`` over a file that names
another world model) drops the file's ``world_model.kwargs``, as Hydra does when a config group
is switched: they belong to the other component. ``world_model.kwargs.KEY=VALUE`` on the same
command line still applies to the new one; ``world_model.kwargs={}`` (or ``=null``) drops the
file's kwargs without switching. The same holds for ``fusion.method`` and ``fusion.kwargs``: the
fusion method's own settings, a dataclass it registers (``wmrl_register_fusers``), which
:func:`validate` builds from them. The settings that were flat keys of ``fusion`` before
(:data:`LEGACY_FUSION_KEYS`) are still read, with a warning naming ``fusion.kwargs.KEY``.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional, get_args, get_origin, get_type_hints

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from wmrl_core.errors import ConfigError, close_match_hint

if TYPE_CHECKING:
    import pluggy

    from wmrl_core.registry import FuserTable

__all__ = ["TrainConfig", "load_config", "MODES", "COMPONENT_KEYS", "flatten", "choices", "check_choices"]

Mode = Literal["real", "world_model", "wmrl"]
MODES: tuple[str, ...] = get_args(Mode)
FusionLoss = Literal["exact", "effective"]
Backend = Literal["local", "ray"]
LEGACY_SECTIONS = {"denoise": "fusion", "debias": "calibration"}
"""Old section names, still read (with a warning naming the new one)."""
COMPONENT_KEYS = ("environment", "policy", "world_model", "reward")
"""Config sections that name a component (``KEY.name``) and its factory's ``KEY.kwargs``."""
LEGACY_FUSION_KEYS = (
    "min_pairs",
    "lambda_window",
    "lambda_moments",
    "lambda_level",
    "lambda_min_groups",
    "shrinkage_toward",
    "shrinkage_window",
)
"""Settings of the built-in fusion methods that were flat keys of ``fusion`` before each method had
its own settings; ``fusion.KEY`` is still read as ``fusion.kwargs.KEY``, with a warning."""


@dataclass
class ComponentConfig:
    name: str = field(default=MISSING, metadata={"help": "Registered component name (``wmrl plugins`` lists them)."})
    kwargs: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Keyword arguments passed to the component's factory, over its registered defaults."},
    )


@dataclass
class EnvironmentConfig(ComponentConfig):
    cache: Optional[str] = field(
        default=None,
        metadata={
            "help": "Path of an execution cache (JSONL, shared across runs and seeds): a (task, solution) "
            "executed before replays its recorded outcome and is charged its recorded cost, counted in "
            "``execution/replayed``. For benchmarks (``wmrl_core/execution_cache.py``); ``None``: off."
        },
    )
    execute_timeout_s: Optional[float] = field(
        default=None,
        metadata={
            "help": "Seconds one ``execute`` call may take before the run stops with an error naming the "
            "environment (the hung call is abandoned; the last checkpoint is kept). ``None``: the "
            "environment's own ``timeout_s(n_solutions)`` if it declares one, else 3600 s "
            "(``wmrl_core/waits.py``); ``.inf``: no deadline (``execute`` then runs on the calling thread)."
        },
    )


@dataclass
class RewardConfig:
    name: Optional[str] = field(
        default=None, metadata={"help": "Reward extractor; ``None`` asks the environment's plugin for its default."}
    )
    kwargs: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Keyword arguments passed to the reward extractor's factory, over its registered defaults."},
    )


@dataclass
class RolloutConfig:
    batch_tasks: int = field(default=16, metadata={"help": "B: tasks (= groups) per step."})
    group_size: int = field(default=8, metadata={"help": "G: rollouts per task."})
    task_split: str = field(
        default="train", metadata={"help": "Which split of the environment's tasks training samples from."}
    )


@dataclass
class AnchorConfig:
    fraction: float = field(default=0.1, metadata={"help": "rho: share of groups executed for real in ``wmrl`` mode."})
    min_groups: int = field(default=1, metadata={"help": "At least this many anchor groups per step."})


@dataclass
class CalibrationConfig:
    enabled: bool = field(
        default=True, metadata={"help": "Calibrate world-model rewards with the isotonic map fitted on anchors."}
    )
    window: Optional[int] = field(
        default=None, metadata={"help": "Keep only the last ``window`` anchor pairs (``None``: all)."}
    )
    calibrator: str = field(
        default="smoothed",
        metadata={
            "help": "``isotonic`` (step function), ``smoothed`` (isotonic levels joined strictly monotonically, "
            "so calibration never ties scores the world model ranks apart) or ``ranked`` (isotonic levels, ties "
            "broken by the raw order within each group); see ``wmrl_core/calibration.py``.",
            "choices": "wmrl_core.config_choices:CALIBRATORS",
        },
    )
    slope: float = field(
        default=0.01,
        metadata={
            "help": "Tilt of the ``smoothed`` calibrator, in real-reward sds per world-model-score sd; spread of the "
            "``ranked`` calibrator's tie-breaks, in real within-group sds."
        },
    )
    advantage_scale: str = field(
        default="own",
        metadata={
            "help": "With ``grpo.scale_advantages``, what the calibrated stream's group advantages are divided by: "
            "``own`` (each group's own spread, as GRPO does) or ``real`` (the real rewards' pooled within-group "
            "spread on earlier anchors, so a weak world model's advantages stay small; "
            "``wmrl_core/fusion/engine.py``).",
            "choices": "wmrl_core.config_choices:ADVANTAGE_SCALES",
        },
    )


@dataclass
class FusionConfig:
    enabled: bool = field(
        default=True,
        metadata={
            "help": "Fuse the streams by ``method``; ``False`` is ``method=pooled`` (both streams by their share "
            "of samples)."
        },
    )
    method: str = field(
        default="mse_weighted",
        metadata={
            "help": "How the streams are fused: a method registered through ``wmrl_register_fusers`` (WMRL's own "
            "are one module each in ``wmrl_core/fusion/``). Every registered method is listed below with its settings "
            "(``wmrl train --help`` lists those of the installed plugins; ``wmrl plugins`` names them)."
        },
    )
    kwargs: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "The settings of ``method`` (its settings dataclass, listed with each method below), over "
            "their defaults, e.g. ``fusion.kwargs.lambda_window=10``. Validated with the config and written out "
            "in full, so ``config.yaml`` records every setting the method used. Switching ``method`` on the "
            "command line drops the file's ``fusion.kwargs``, as for a component's kwargs."
        },
    )
    gradient_sketch_dim: Optional[int] = field(
        default=None,
        metadata={
            "help": "Per-group gradients (``shrinkage``, ``fusion.kwargs.lambda_moments=gradient``): ``None`` keeps "
            "them whole (small policies); an int projects each onto this many fixed random directions (a sketch "
            "that keeps inner products in expectation), for large policies."
        },
    )
    loss: str = field(
        default="exact",
        metadata={
            "help": "``exact``: the fused loss as its sum of GRPO terms (``wmrl_core/fusion/base.py``), exact at "
            "any probability ratio; ``effective``: on the first pass over a batch (on-policy) one GRPO "
            "loss on the effective advantages, what TRL or verl would compute, with the same gradient "
            "(later passes, ``grpo.epochs > 1``, use the exact sum). The two differ in float rounding, "
            "which Adam can amplify where a gradient component is rounding noise, so runs of the two are "
            "not bit-identical.",
            "choices": FusionLoss,
        },
    )


@dataclass
class GRPOConfig:
    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate."})
    clip_eps: float = field(default=0.2, metadata={"help": "PPO clip range."})
    kl_coef: float = field(
        default=0.0,
        metadata={"help": "Weight of the KL penalty to the initial policy (0 disables it and the reference copy)."},
    )
    entropy_coef: float = field(
        default=0.0,
        metadata={
            "help": "Weight beta_H of the entropy bonus -beta_H * agg(H) (see ``wmrl_core.grpo.entropy_bonus``): "
            "keeps the policy from collapsing onto one answer when rewards are mostly noise. Needs a policy "
            "with the optional ``entropy(rollouts)`` method; 0 disables it."
        },
    )
    loss_aggregation: str = field(
        default="token_mean",
        metadata={
            "help": "``token_mean`` or ``sequence_mean`` (see ``wmrl_core.grpo``).",
            "choices": "wmrl_core.config_choices:LossAggregation",
        },
    )
    epochs: int = field(default=1, metadata={"help": "Optimizer passes over each step's rollouts."})
    minibatches: int = field(
        default=1,
        metadata={
            "help": "Optimizer steps per pass: each pass deals the step's groups, shuffled, into this many "
            "minibatches of whole groups and steps on each (verl's ``ppo_mini_batch_size``, TRL's "
            "``steps_per_generation``). After the first step the policy has moved, so every later minibatch "
            "is clipped against the sampling policy. Each minibatch scores the whole batch and masks the rows "
            "outside it: a minibatch costs a full forward and backward pass. At most ``rollout.batch_tasks``."
        },
    )
    drop_uninformative_groups: bool = field(
        default=False,
        metadata={
            "help": "Leave groups whose fused advantages are all 0 (every rollout scored alike) out of the update, "
            "as DAPO's dynamic sampling and SimpleVLA-RL do (without re-sampling): the loss is normalized over "
            "the informative groups, minibatches deal only them, and a step with none takes no optimizer step "
            "(Adam would otherwise move the policy on its momentum alone)."
        },
    )
    scale_advantages: bool = field(
        default=True, metadata={"help": "Divide advantages by the group's standard deviation."}
    )
    max_grad_norm: Optional[float] = field(default=1.0, metadata={"help": "Gradient clipping (``None`` disables)."})


@dataclass
class EvalConfig:
    every: int = field(
        default=5, metadata={"help": "Evaluate every N steps (and before the first and after the last); 0 disables."}
    )
    split: str = field(
        default="heldout",
        metadata={
            "help": "Tasks to evaluate on. The default ``heldout`` falls back to ``train`` when the environment "
            "has no such split; any other name the environment does not have is an error listing its "
            "splits."
        },
    )
    samples_per_task: int = field(default=16, metadata={"help": "Solutions sampled per task for evaluation."})
    max_tasks: Optional[int] = field(
        default=None,
        metadata={
            "help": "Evaluate on at most this many tasks of the split, evenly spaced in the environment's order "
            "(``None``: all), so that a large held-out split can be sampled within a budget."
        },
    )
    common_random_numbers: bool = field(
        default=False,
        metadata={
            "help": "Sample every evaluation of a run with the same seed (``seed * 100003``), not a new one per "
            "step: runs of one seed that evaluate similar policies then draw mostly the same solutions, "
            "so differences between evaluations (over steps and between arms) are not buried in sampling "
            "noise, and an execution cache replays most of them. Each evaluation is still an unbiased "
            "sample of its policy; seeds keep independent draws."
        },
    )


@dataclass
class LoggingConfig:
    tensorboard: bool = field(
        default=True, metadata={"help": "Write TensorBoard event files to ``run_dir/tensorboard``."}
    )
    progress: bool = field(
        default=True, metadata={"help": "Show progress: a bar on a terminal, a line per step in a log file."}
    )
    update_diagnostics: bool = field(
        default=True,
        metadata={
            "help": "After each update, one more ``log_probs`` call (no grad) for ``policy/approx_kl``, "
            "``policy/clip_fraction`` and the policy's ``update_metrics``: cheap for small policies, a forward "
            "pass over the batch for a language model (``false`` skips it)."
        },
    )
    wandb_project: Optional[str] = field(
        default=None, metadata={"help": "Log to wandb under this project when set (needs ``pip install wandb``)."}
    )
    caveat: Optional[str] = field(
        default=None,
        metadata={
            "help": "One line printed with the run's final summary by ``wmrl train``: what the run does and does "
            "not show (e.g. that one short run is not evidence of learning)."
        },
    )


@dataclass
class CheckpointConfig:
    every: int = field(
        default=10, metadata={"help": "Save a checkpoint every N steps and at the end; 0 saves only at the end."}
    )
    at_steps: list[int] = field(
        default_factory=list,
        metadata={
            "help": "Also save a checkpoint at each of these steps (0: the initial policy, before any update), "
            "e.g. ``[0, 8, 16]`` for evaluating the kept policies offline afterwards; every checkpoint's "
            "``step_XXXXXX.pt`` is kept."
        },
    )


@dataclass
class DistributedConfig:
    backend: str = field(
        default="local",
        metadata={
            "help": "``local`` (execution in this process) or ``ray`` (real execution, training and evaluation, "
            "spread over Ray workers; see ``wmrl_core/distributed.py``).",
            "choices": Backend,
        },
    )
    num_workers: int = field(
        default=2, metadata={"help": "Ray actors, each with its own environment instance (``ray`` only)."}
    )
    address: Optional[str] = field(
        default=None,
        metadata={
            "help": "``None`` starts a local Ray; ``auto`` joins the cluster this machine belongs to; "
            "``ray://host:10001`` a remote one (``ray`` only)."
        },
    )
    worker_cpus: float = field(
        default=1.0,
        metadata={"help": "CPUs Ray reserves per worker; fractional or 0 for execution that waits on a sandbox."},
    )


@dataclass
class TrainConfig:
    mode: str = field(
        default="wmrl",
        metadata={
            "help": "``real`` (GRPO, every group executed), ``world_model`` (no execution), ``wmrl``.",
            "choices": Mode,
        },
    )
    steps: int = field(default=50, metadata={"help": "Policy updates."})
    seed: int = field(
        default=0,
        metadata={
            "help": "Seeds the policy's initialisation, the task draws, the anchor groups and the evaluations' "
            "sampling."
        },
    )
    run_dir: str = field(
        default="runs/default",
        metadata={
            "help": "Where config.yaml, metrics.jsonl, anchor_pairs.jsonl, summary.json, checkpoints/, plots/ and "
            "tensorboard/ go."
        },
    )
    resume: bool = field(
        default=False,
        metadata={
            "help": "Continue from the newest readable checkpoint in ``run_dir/checkpoints`` (``last.pt``, else "
            "the newest ``step_*.pt``) of the run that last started fresh in ``run_dir``. The changed "
            "settings are listed; those that break an exact continuation (``seed``, ``grpo.lr``, the "
            "components...) are refused unless named in ``resume_allow_changes``."
        },
    )
    resume_allow_changes: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Settings that ``resume=true`` may change although the result is then no longer an exact "
            "continuation, e.g. ``resume_allow_changes=[grpo.lr]``."
        },
    )
    world_model_timeout_s: Optional[float] = field(
        default=None,
        metadata={
            "help": "Seconds one world-model ``predict`` call may take; past it the call is abandoned and its "
            "rewards dropped (counted in ``faults/world_model_timeouts``). ``None``: the world model's own "
            "``timeout_s(n_solutions)`` if it declares one, else 1800 s; ``.inf``: no deadline."
        },
    )
    heartbeat_s: float = field(
        default=30.0,
        metadata={
            "help": "Seconds between progress lines while the run waits on one component call (``generate``, "
            "``execute``, ``predict``): what it waits on, for how long, and the deadline. ``0``: none."
        },
    )
    environment: EnvironmentConfig = field(
        default_factory=EnvironmentConfig, metadata={"help": "The environment: tasks and real execution."}
    )
    policy: ComponentConfig = field(default_factory=ComponentConfig, metadata={"help": "The policy being trained."})
    world_model: Optional[ComponentConfig] = field(
        default=None, metadata={"help": "Required in ``world_model`` and ``wmrl`` modes."}
    )
    reward: RewardConfig = field(
        default_factory=RewardConfig, metadata={"help": "The reward extractor: outcome to reward."}
    )
    rollout: RolloutConfig = field(default_factory=RolloutConfig, metadata={"help": "Tasks and rollouts per step."})
    anchors: AnchorConfig = field(
        default_factory=AnchorConfig, metadata={"help": "Groups executed for real in ``wmrl`` mode."}
    )
    calibration: CalibrationConfig = field(
        default_factory=CalibrationConfig,
        metadata={
            "help": "How world-model rewards are calibrated on the anchors (read from ``debias`` too, with a warning)."
        },
    )
    fusion: FusionConfig = field(
        default_factory=FusionConfig,
        metadata={
            "help": "How the real and world-model streams are fused (read from ``denoise`` too, with a warning)."
        },
    )
    grpo: GRPOConfig = field(default_factory=GRPOConfig, metadata={"help": "The GRPO update."})
    eval: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "Evaluation of the policy during training."})
    logging: LoggingConfig = field(
        default_factory=LoggingConfig, metadata={"help": "Where metrics go besides ``metrics.jsonl``."}
    )
    checkpoint: CheckpointConfig = field(
        default_factory=CheckpointConfig, metadata={"help": "How often the loop's state is saved."}
    )
    distributed: DistributedConfig = field(
        default_factory=DistributedConfig, metadata={"help": "Where real execution, training and evaluation run."}
    )


def choices(f: dataclasses.Field) -> tuple[Any, ...] | None:
    """The values the config field ``f`` may take (``None``: any of its type): its ``choices``
    metadata, a ``Literal`` or ``"module:NAME"`` naming a ``Literal``, a tuple or a dict (its keys)."""
    spec = f.metadata.get("choices")
    if spec is None:
        return None
    if isinstance(spec, str):
        module, _, name = spec.partition(":")
        spec = getattr(importlib.import_module(module), name)
    return tuple(get_args(spec)) if get_origin(spec) is Literal else tuple(spec)


def check_choices(node: Any, prefix: str = "") -> None:
    """Every enumerated field of the config dataclass ``node`` and of its sections holds one of
    its :func:`choices`.

    :raises ConfigError: naming the key, the value, the closest choice and all of them.
    """
    for f in dataclasses.fields(node):
        value, key = getattr(node, f.name), f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            check_choices(value, f"{key}.")
            continue
        allowed = choices(f)
        if allowed is not None and value not in allowed:
            close = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
            raise ConfigError(
                f"{key}={value!r} is unknown{f' (did you mean {close[0]}?)' if close else ''}; "
                f"use one of {', '.join(map(str, allowed))}"
            )


def validate(cfg: TrainConfig, fusers: FuserTable | None = None) -> None:
    """The enumerations (:func:`check_choices`), then what types alone cannot express; the fusion
    method's settings are built from ``fusion.kwargs`` and written back in full.

    :param fusers: the registered fusion methods (default: the installed plugins' and WMRL's own).
    """
    check_choices(cfg)
    if cfg.mode != "real" and cfg.world_model is None:
        raise ConfigError(f"mode={cfg.mode} needs a world model: set world_model.name (or use mode=real)")
    if cfg.eval.max_tasks is not None and cfg.eval.max_tasks < 1:
        raise ConfigError(f"eval.max_tasks must be >= 1 or null (all tasks), got {cfg.eval.max_tasks}")
    if cfg.steps < 0:
        raise ConfigError(f"steps must be >= 0, got {cfg.steps}")
    if cfg.rollout.batch_tasks < 1 or cfg.rollout.group_size < 2:
        raise ConfigError("rollout.batch_tasks must be >= 1 and rollout.group_size >= 2 (GRPO compares within a group)")
    if not 0.0 <= cfg.anchors.fraction <= 1.0:
        raise ConfigError(f"anchors.fraction={cfg.anchors.fraction} must be in [0, 1]")
    for key, seconds in (
        ("environment.execute_timeout_s", cfg.environment.execute_timeout_s),
        ("world_model_timeout_s", cfg.world_model_timeout_s),
    ):
        if seconds is not None and not seconds > 0:
            raise ConfigError(
                f"{key} must be > 0 seconds (.inf for no deadline, null for the component's own), got {seconds}"
            )
    if cfg.heartbeat_s < 0:
        raise ConfigError(f"heartbeat_s must be >= 0 seconds (0 turns the progress lines off), got {cfg.heartbeat_s}")
    bad = [s for s in cfg.checkpoint.at_steps if not 0 <= s <= cfg.steps]
    if bad:
        raise ConfigError(
            f"checkpoint.at_steps must lie in [0, steps={cfg.steps}] (a checkpoint after the last step is never "
            f"written), got {bad}; drop them or raise steps"
        )
    _validate_calibration_and_fusion(cfg, fusers)
    _validate_resume_allow_changes(cfg)
    if cfg.grpo.epochs < 1:
        raise ConfigError(f"grpo.epochs must be >= 1, got {cfg.grpo.epochs}")
    if not 1 <= cfg.grpo.minibatches <= cfg.rollout.batch_tasks:
        raise ConfigError(
            f"grpo.minibatches must be between 1 and rollout.batch_tasks={cfg.rollout.batch_tasks} (a minibatch "
            f"holds whole groups), got {cfg.grpo.minibatches}"
        )
    if not cfg.grpo.lr > 0:
        raise ConfigError(f"grpo.lr must be > 0, got {cfg.grpo.lr}")
    for name in ("kl_coef", "entropy_coef"):
        if not getattr(cfg.grpo, name) >= 0:
            raise ConfigError(f"grpo.{name} must be >= 0 (0 disables it), got {getattr(cfg.grpo, name)}")
    dist = cfg.distributed
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


def _validate_resume_allow_changes(cfg: TrainConfig) -> None:
    """Each name in ``resume_allow_changes`` is a setting or a section of this config (or lies under a
    component's free-form ``kwargs``): a misspelt one would otherwise allow nothing, silently."""
    keys = list(flatten(cfg))
    for name in cfg.resume_allow_changes:
        if any(k == name or k.startswith(name + ".") for k in keys) or ".kwargs." in name:
            continue
        raise ConfigError(
            f"resume_allow_changes names `{name}`, which is not a setting of this config."
            f"{close_match_hint(name, keys)} Name a dotted key (grpo.lr) or a section (grpo)"
        )


def _validate_calibration_and_fusion(cfg: TrainConfig, fusers: FuserTable | None) -> None:
    """The ranges of the ``calibration`` and ``fusion`` sections, the fusion method's settings
    (``fusion.kwargs``, then written out in full) and the anchors the method needs."""
    from wmrl_core.fusion.methods import fuser_settings, fusion_method_spec, registered_fusers

    fusion, calibration = cfg.fusion, cfg.calibration
    if fusion.gradient_sketch_dim is not None and fusion.gradient_sketch_dim < 1:
        raise ConfigError(
            f"fusion.gradient_sketch_dim must be a positive int or null (whole gradients), got {fusion.gradient_sketch_dim}"
        )
    if calibration.slope < 0:
        raise ConfigError(f"calibration.slope must be >= 0, got {calibration.slope}")
    fusers = fusers if fusers is not None else registered_fusers()
    spec = fusion_method_spec(fusion.method, fusers)
    # in full, defaults included: config.yaml and the checkpoint's record then hold every value the
    # fuser used, so a resume compares settings, not spellings, and a changed default shows
    fusion.kwargs = dataclasses.asdict(fuser_settings(spec, fusion.kwargs))
    if (
        cfg.mode == "wmrl"
        and fusion.enabled
        and spec.needs_anchors_every_step
        and max(cfg.anchors.min_groups, round(cfg.anchors.fraction * cfg.rollout.batch_tasks)) < 1
    ):
        others = [s.name for s in fusers if not s.needs_anchors_every_step]
        raise ConfigError(
            f"fusion.method={fusion.method} needs at least one anchor group per step: raise anchors.fraction "
            f"or set anchors.min_groups >= 1{f' (or use fusion.method={others[0]})' if others else ''}"
        )


def _rename_legacy_sections(layer: DictConfig | ListConfig) -> None:
    """Move the old sections (:data:`LEGACY_SECTIONS`) of ``layer`` to their new names, warning
    with the new one; a key given under both names takes the new name's value."""
    if not isinstance(layer, DictConfig):
        return
    for old, new in LEGACY_SECTIONS.items():
        if old not in layer:
            continue
        warnings.warn(
            f"config section `{old}` is now called `{new}`: write `{new}.KEY` (`{old}.KEY` is still read)",
            FutureWarning,
            stacklevel=4,
        )
        section = layer.pop(old)
        if new in layer and isinstance(section, DictConfig) and isinstance(layer[new], DictConfig):
            section = OmegaConf.merge(section, layer[new])
        layer[new] = section


def _move_legacy_fusion_keys(layer: DictConfig | ListConfig) -> set[str]:
    """Move the flat ``fusion.KEY`` of ``layer`` that are now a method's settings
    (:data:`LEGACY_FUSION_KEYS`) to ``fusion.kwargs.KEY``, warning with the new spelling; a key
    given both ways takes ``fusion.kwargs.KEY``. Returns the keys moved."""
    section = layer.get("fusion") if isinstance(layer, DictConfig) else None
    if not isinstance(section, DictConfig):
        return set()
    moved = [key for key in LEGACY_FUSION_KEYS if key in section]
    if not moved:
        return set()
    warnings.warn(
        f"fusion settings are now the method's, under `fusion.kwargs`: write "
        f"{', '.join(f'`fusion.kwargs.{key}`' for key in moved)} (`fusion.KEY` is still read)",
        FutureWarning,
        stacklevel=4,
    )
    kwargs = section.get("kwargs")
    kwargs = kwargs if isinstance(kwargs, DictConfig) else OmegaConf.create({})
    for key in moved:
        value = section.pop(key)
        if key not in kwargs:
            kwargs[key] = value
    section["kwargs"] = kwargs
    return set(moved)


def _drop_legacy_keys_the_method_lacks(fusion: FusionConfig, legacy: set[str], fusers: FuserTable) -> None:
    """Drop the keys of the old spelling (``legacy``) that ``fusion.method`` does not read: a saved
    ``config.yaml`` holds every one of them, and each method read only its own and ignored the rest."""
    if fusion.method not in fusers:
        return  # validate names the unknown method
    known = {f.name for f in dataclasses.fields(fusers.get(fusion.method).settings_class())}
    fusion.kwargs = {k: v for k, v in fusion.kwargs.items() if k in known or k not in legacy}


def load_config(
    path: str | Path | None = None,
    overrides: Sequence[str] = (),
    base: dict | None = None,
    *,
    plugin_manager: pluggy.PluginManager | None = None,
) -> TrainConfig:
    """Merge YAML file and ``key=value`` overrides onto the schema, then validate.

    :param plugin_manager: whose plugins' fusion methods ``fusion.method`` may name (default: the
        installed plugins' and WMRL's own); pass the one given to :func:`wmrl_core.trainer.train`.
    :raises ConfigError: for unknown keys, wrong types, missing required values.
    """
    legacy: set[str] = set()
    try:
        schema = OmegaConf.structured(TrainConfig)
        layers: list[DictConfig | ListConfig] = [schema]
        if base:
            layers.append(OmegaConf.create(base))
        if path is not None:
            layers.append(_load_yaml(Path(path)))
        bad = [o for o in overrides if "=" not in o]
        if bad:
            raise ConfigError(f"overrides must look like key=value, got {bad}")
        command_line = OmegaConf.from_dotlist(list(overrides))
        for layer in (*layers[1:], command_line):
            _refuse_values_for_sections(layer)
            _rename_legacy_sections(layer)
            legacy |= _move_legacy_fusion_keys(layer)
        for layer in layers[1:]:
            _drop_kwargs_of_switched_components(layer, command_line)
        layers.append(command_line)
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
            "Check the key's spelling and type: `wmrl train --help` lists every setting with its type and default."
        ) from None
    from wmrl_core.fusion.methods import registered_fusers  # the plugins: once the file and overrides parse

    fusers = registered_fusers(plugin_manager)
    if legacy:
        _drop_legacy_keys_the_method_lacks(cfg.fusion, legacy, fusers)
    validate(cfg, fusers)
    return cfg


def _refuse_values_for_sections(layer: DictConfig | ListConfig) -> None:
    """A clear error for a section given a single value (``rollout=5``), or a list setting given one
    (``resume_allow_changes=seed``), which OmegaConf's merge reports without naming the key."""
    if not isinstance(layer, DictConfig):
        return
    for name, hint in get_type_hints(TrainConfig).items():
        value = layer.get(name) if name in layer else None
        if value is None or isinstance(value, (DictConfig, ListConfig)):
            continue
        section = next((t for t in (hint, *get_args(hint)) if dataclasses.is_dataclass(t)), None)
        if section is not None:
            example = dataclasses.fields(section)[0].name
            raise ConfigError(
                f"`{name}` is a section, not a value (got {value!r}): set its keys, e.g. {name}.{example}=..."
            )
        if get_origin(hint) is list:
            raise ConfigError(f"`{name}` is a list (got {value!r}): write {name}=[{value}]")


def _load_yaml(path: Path) -> DictConfig:
    """The YAML mapping in ``path``; a syntax error names the file, line and column."""
    import yaml

    if path.is_dir():
        raise ConfigError(f"config file {path} is a directory; pass a YAML file in it (see configs/)")
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass a YAML file (see configs/)")
    try:
        root = yaml.compose(path.read_text(encoding="utf-8"))  # the top level's kind, before OmegaConf builds it
        if root is not None and not isinstance(root, yaml.MappingNode):
            kind = "a list" if isinstance(root, yaml.SequenceNode) else f"the value `{root.value}`"
            raise ConfigError(f"{path}: the top level must be a mapping of keys (mode: ..., steps: ...), got {kind}")
        loaded = OmegaConf.load(path)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); pass a YAML file") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        what = "; ".join(str(m) for m in (exc.context, exc.problem) if m)
        raise ConfigError(f"{where}: YAML syntax error: {what}. Fix the file at that line") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: YAML error: {exc}. Fix the file") from None
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"{path}: the top level must be a mapping of keys (mode: ..., steps: ...), got a list")
    return loaded


def _drop_kwargs_of_switched_components(layer: DictConfig | ListConfig, command_line: DictConfig) -> None:
    """Remove ``KEY.kwargs`` from ``layer`` where the command line names another component at
    ``KEY.name`` (another fusion method at ``fusion.method``; those kwargs were written for the one
    the file names), or sets ``KEY.kwargs={}`` or ``KEY.kwargs=null`` (meaning: none of the file's)."""
    named_by = {**{key: ("name", None) for key in COMPONENT_KEYS}, "fusion": ("method", FusionConfig.method)}
    for key, (name, default) in named_by.items():
        new = OmegaConf.select(command_line, f"{key}.{name}", default=None)
        old = OmegaConf.select(layer, f"{key}.{name}", default=default)
        given = command_line.get(key)
        cleared = isinstance(given, DictConfig) and "kwargs" in given and not given["kwargs"]
        if cleared:
            given["kwargs"] = {}  # null means none, like {}
        section = layer.get(key) if isinstance(layer, DictConfig) else None
        switched = new is not None and new != old
        if (switched or cleared) and isinstance(section, DictConfig) and "kwargs" in section:
            del section["kwargs"]


def flatten(cfg: TrainConfig) -> dict[str, Any]:
    """``{"grpo.lr": 0.001, ...}``: every leaf of the config under its dotted key."""
    out: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict) and (node or not prefix):
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        else:
            out[prefix] = node

    walk(OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True), "")
    return out


def unread_settings(cfg: TrainConfig) -> tuple[str, ...]:
    """The config sections a run of ``cfg`` never reads: the fusion method and its settings outside
    ``wmrl`` mode or with fusion off (every group's advantages are then its own rewards'). Two runs that
    differ only there computed the same thing, so a resume or a study's check of finished runs ignores them.
    """
    return ("fusion.method", "fusion.kwargs") if cfg.mode != "wmrl" or not cfg.fusion.enabled else ()


def to_yaml(cfg: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
