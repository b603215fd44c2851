"""The imagination world model's noise control draws from the core's noise stream."""

import numpy as np
import torch
from wmrl_libero.world_models.checkpoint import WorldModelBundle, save_bundle
from wmrl_libero.world_models.dynamics import fit_dynamics
from wmrl_libero.world_models.features import Episode
from wmrl_libero.world_models.imagination import ImaginationWorldModel
from wmrl_libero.world_models.scorer import fit_scorer

from wmrl_core.experiments.noise import UniformNoise
from wmrl_core.types import Task

OBJ, D = 8, 16 + 8


def _bundle():
    rng = np.random.default_rng(0)
    eps = []
    for i in range(4):
        s = np.cumsum(rng.uniform(-0.05, 0.05, (11, D)), axis=0).astype(np.float32)
        a = rng.uniform(-1, 1, (10, 7)).astype(np.float32)
        eps.append(Episode(task_index=0, init_state=i, success=i % 2 == 0, states=s, actions=a, object_len=6))
    torch.manual_seed(0)
    dyn = fit_dynamics(eps, chunk=2, members=2, hidden=8, iterations=5, batch_size=8, log=lambda m: None)
    scorer = fit_scorer(eps, hidden=8, iterations=5, batch_size=8, log=lambda m: None)
    bundle = WorldModelBundle(dyn, scorer, OBJ, initial_states={(0, e.init_state): e.states[0] for e in eps})
    return eps, bundle


def test_noise_scores_are_the_core_noise_stream_and_resume_it(tmp_path):
    eps, bundle = _bundle()
    path = str(save_bundle(bundle, tmp_path / "wm.pt"))
    tasks = [Task(id=f"t/0/{e.init_state}", data={"task_index": 0, "init_state": e.init_state}) for e in eps]
    wm = ImaginationWorldModel(checkpoint=path, horizon=6, max_disagreement=1e9, noise_scores=True, seed=11)
    stream = UniformNoise(seed=11)
    first = [o.score for o in wm.predict(tasks, [e.actions for e in eps])]
    assert first == stream.draw(len(tasks)).tolist()
    state = wm.state_dict()
    second = [o.score for o in wm.predict(tasks, [e.actions[::-1] for e in eps])]  # other solutions
    assert second == stream.draw(len(tasks)).tolist()  # the scores ignore the solutions
    resumed = ImaginationWorldModel(checkpoint=path, horizon=6, max_disagreement=1e9, noise_scores=True, seed=0)
    resumed.load_state_dict(state)
    assert [o.score for o in resumed.predict(tasks, [e.actions for e in eps])] == second
