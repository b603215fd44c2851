"""A fusion method added by a plugin outside ``wmrl_core`` (``tests/fuser_plugin``) is validated,
documented and trained with through the ``wmrl_register_fusers`` hook, with no edit of ``wmrl_core``."""

import json

import pytest

from tests.fuser_plugin import halves
from wmrl_core.config import load_config
from wmrl_core.config_docs import help_text
from wmrl_core.errors import ConfigError
from wmrl_core.fusion import registered_fusers
from wmrl_core.plugins import get_plugin_manager
from wmrl_core.trainer import train

STEPS = 3


def _pm():
    return get_plugin_manager(entry_points=False, extra_plugins=[halves])


def test_a_plugins_fusion_method_trains_with_its_own_settings(synthetic_config, tmp_path):
    overrides = [
        f"run_dir={tmp_path}",
        f"steps={STEPS}",
        "eval.every=0",
        "fusion.method=halves",
        "fusion.kwargs.world_model_weight=0.25",
    ]
    cfg = load_config(synthetic_config, overrides, plugin_manager=_pm())
    assert cfg.fusion.kwargs == {"world_model_weight": 0.25}
    train(cfg, plugin_manager=_pm())
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    weights = [r["fusion/w_world_model"] for r in records if "fusion/w_world_model" in r]
    assert weights == [0.25] * STEPS
    assert "world_model_weight: 0.25" in (tmp_path / "config.yaml").read_text()


def test_a_plugins_fusion_settings_are_checked_and_documented():
    pm = _pm()
    base = ["environment.name=synthetic-bandit", "policy.name=tabular-softmax", "mode=real", "fusion.method=halves"]
    with pytest.raises(ConfigError) as err:
        load_config(None, [*base, "fusion.kwargs.world_model_wieght=0.3"], plugin_manager=pm)
    assert str(err.value) == (
        "fusion.kwargs.world_model_wieght is not a setting of fusion.method=halves. Did you mean "
        "`world_model_weight`? Its settings: world_model_weight"
    )
    with pytest.raises(ConfigError, match=r"fusion.kwargs.world_model_weight must be in \[0, 1\], got 2"):
        load_config(None, [*base, "fusion.kwargs.world_model_weight=2"], plugin_manager=pm)
    with pytest.raises(ConfigError, match="fusion.method='halves' is unknown"):
        load_config(None, base)  # without the plugin
    text = help_text(fusers=registered_fusers(pm))
    assert "halves (from " in text and "fusion.kwargs.world_model_weight = 0.5  (float)" in text
