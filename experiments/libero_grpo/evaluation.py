"""Success of a small-VLA policy on LIBERO init states, with evaluation noise shared across arms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def evaluation_noise_seed(seed: int) -> int:
    """The shared evaluation noise of experiment seed ``seed`` (every arm of a seed draws the same)."""
    return 1_000_003 * seed + 11


def success_counts(
    env: Any,
    policy: Any,
    seed: int,
    label: str,
    *,
    split: str = "train",
    inits: Sequence[int] | None = None,
    samples: int = 1,
) -> dict[str, Any]:
    """``samples`` sampled episodes of ``policy`` from every init state of ``split`` (those in ``inits``
    when given) of the environment's tasks, drawn from :func:`evaluation_noise_seed`; successes in all and
    per task, and the episodes the simulator could not run (left out of both counts)."""
    import torch

    tasks = [t for t in env.tasks(split) if inits is None or t.data["init_state"] in set(inits)]
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(evaluation_noise_seed(seed))
        rollouts = policy.generate(tasks, samples)
    outcomes = env.execute(rollouts.tasks, rollouts.solutions)
    ok = [(o, t) for o, t in zip(outcomes, rollouts.tasks) if o.status == "ok"]
    task_ids = sorted({t.data["task_index"] for t in tasks})
    per_task = {str(i): [int(o.score) for o, t in ok if t.data["task_index"] == i] for i in task_ids}
    out = {
        "successes": int(sum(o.score for o, _ in ok)),
        "episodes": len(ok),
        "infrastructure_failures": len(outcomes) - len(ok),
        "per_task": {k: [sum(v), len(v)] for k, v in per_task.items()},
    }
    print(f"  eval {label} ({split}): {out['successes']}/{out['episodes']}", flush=True)
    return out
