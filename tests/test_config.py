import pytest

from wmrl_core.config import load_config
from wmrl_core.errors import ConfigError

BASE = ["environment.name=synthetic-bandit", "policy.name=tabular-softmax"]


def test_yaml_and_overrides_merge(synthetic_config):
    cfg = load_config(synthetic_config, ["grpo.lr=0.5", "mode=real", "seed=7"])
    assert cfg.grpo.lr == 0.5 and cfg.mode == "real"
    assert cfg.environment.kwargs["seed"] == 7  # interpolation resolved
    assert cfg.run_dir.endswith("real-seed7")


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("grpo.lrr=1", "grpo.lrr"),
        ("grpo.lr=abc", "grpo.lr"),
        ("mode=turbo", "turbo"),
        ("anchors.fraction=2", "anchors.fraction"),
        ("rollout.group_size=1", "group_size"),
        ("grpo.loss_aggregation=sum", "loss_aggregation"),
        ("fusion.method=average", "fusion.method"),
        ("fusion.lambda_window=1", "lambda_window"),
        ("calibration.calibrator=spline", "calibration.calibrator"),
        ("eval.max_tasks=0", "eval.max_tasks"),
    ],
)
def test_bad_values_name_the_key(override, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        load_config(None, [*BASE, "world_model.name=x", override])


def test_missing_required_and_world_model_checks(tmp_path):
    with pytest.raises(ConfigError, match="environment.name"):
        load_config(None, ["mode=real"])
    with pytest.raises(ConfigError, match="world_model"):
        load_config(None, [*BASE, "mode=wmrl"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, [*BASE, "mode"])


def test_rectified_fusion_needs_an_anchor_group_every_step():
    with pytest.raises(ConfigError, match="at least one anchor group"):
        load_config(None, [*BASE, "world_model.name=x", "anchors.min_groups=0", "anchors.fraction=0.01"])
    cfg = load_config(
        None,
        [
            *BASE,
            "world_model.name=x",
            "anchors.min_groups=0",
            "anchors.fraction=0.01",
            "fusion.method=inverse_variance",
        ],
    )
    assert cfg.fusion.method == "inverse_variance"
