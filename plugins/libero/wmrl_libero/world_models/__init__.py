"""Learned LIBERO world models (physics-state observations: proprio 16-d + object state).

- :class:`~.imagination.ImaginationWorldModel` (``libero-imagination``): an ensemble of
  small networks predicts the state change over an action chunk; the solution's controller
  acts in the imagined states for a whole episode (many episodes per forward pass) and a
  success scorer judges the imagined episode. No MuJoCo stepping.
- :class:`~.progress.TrajectoryProgressWorldModel` (``libero-progress``): scores an
  *executed* trajectory with a learned progress predictor, potential-style (mean progress
  of the last k subsampled states minus the first k), the paper's LIBERO setup.

Both are trained by ``wmrl-libero train-wm`` into one checkpoint and checked by
``wmrl-libero wm-report`` on held-out init states (40-49).
"""
