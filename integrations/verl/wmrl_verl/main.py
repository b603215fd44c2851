"""``python -m wmrl_verl.main <verl overrides>``: verl's ``main_ppo`` with WMRL's reward manager,
advantage estimator and trainer registered in this process (docs/integrations.md)."""

from verl.trainer.main_ppo import main

import wmrl_verl  # noqa: F401  (registers the reward manager and the estimator)
import wmrl_verl.trainer  # noqa: F401  (registers trainer.v1.trainer_mode=wmrl)

if __name__ == "__main__":
    main()
