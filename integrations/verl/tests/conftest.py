"""Fixtures shared by the verl tests: verl's own config composed with overrides, and the vowels
run of ``gpu_fit.py`` (a tiny Qwen2, its tasks as parquet files, the WMRL config) on disk."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

# verl is imported inside the fixtures: each test module skips without verl (outside CI), and a
# conftest that raised Skipped would stop pytest instead
HERE = Path(__file__).resolve().parent


def load_gpu_fit() -> ModuleType:
    """``integrations/verl/gpu_fit.py``, the shipped launch recipe (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("wmrl_verl_gpu_fit", HERE.parent / "gpu_fit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def gpu_fit() -> ModuleType:
    return load_gpu_fit()


@pytest.fixture(scope="session")
def compose_verl():
    """``compose_verl(overrides)``: verl's ``ppo_trainer`` config with Hydra overrides, as
    ``verl.trainer.main_ppo`` composes it from the command line."""
    from hydra import compose, initialize_config_dir
    from verl.trainer import main_ppo

    config_dir = str(Path(main_ppo.__file__).parent / "config")

    def compose_verl(overrides: list[str]):
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            return compose("ppo_trainer", overrides=list(overrides))

    return compose_verl


def write_vowels_run(root: Path, gpu_fit: ModuleType, anchors: str) -> Path:
    """The files of ``gpu_fit.py``'s run under ``root``; returns the model folder."""
    from wmrl_core.vowels import make_tiny_qwen2

    model = make_tiny_qwen2(root / "qwen2")
    gpu_fit.write_tasks(root / "train.parquet", "train")
    gpu_fit.write_tasks(root / "val.parquet", "heldout")
    (root / "wmrl.yaml").write_text(
        "environment: {name: vowels}\npolicy: {name: verl-actor}\nworld_model: {name: vowels-biased}\n"
        f"anchors: {anchors}\n"
    )
    return model


@pytest.fixture(scope="session")
def vowels_run(tmp_path_factory, gpu_fit) -> tuple[Path, Path]:
    """``(root, model)`` of the vowels run, with ``anchors.fraction=0.1`` and ``anchors.min_groups=2``:
    with 8 groups per step, round(0.8) = 1 anchor group unless ``min_groups`` is honoured."""
    root = tmp_path_factory.mktemp("vowels-run")
    return root, write_vowels_run(root, gpu_fit, "{fraction: 0.1, min_groups: 2}")


@pytest.fixture(scope="session")
def run_config(compose_verl, gpu_fit, vowels_run):
    """``run_config(*extra)``: the shipped recipe's config for the vowels run, with 8 prompts per
    step, the world model's actor on no CPU of its own, and ``extra`` overrides."""
    root, model = vowels_run

    def run_config(*extra: str):
        return compose_verl(
            [
                *gpu_fit.recipe(root, model),
                "data.train_batch_size=8",
                "+wmrl.world_model_worker.num_cpus=0",
                "data.dataloader_num_workers=0",
                *extra,
            ]
        )

    return run_config
