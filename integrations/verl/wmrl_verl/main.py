"""``python -m wmrl_verl.main <verl overrides>``: verl's ``main_ppo`` with WMRL's trainer,
advantage estimator and reward manager registered in every Ray worker of the run
(:func:`wmrl_verl.registration.with_worker_registration`; docs/integrations.md)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig
from verl.trainer.main_ppo import main as verl_main

from wmrl_verl.registration import with_worker_registration


@hydra.main(config_path="pkg://verl.trainer.config", config_name="ppo_trainer", version_base=None)
def main(config: DictConfig) -> None:
    verl_main(with_worker_registration(config))  # hydra passes a given config straight to verl's main


if __name__ == "__main__":
    main()
