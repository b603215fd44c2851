"""The plugin module registers both components, and the registry can make them."""

from __future__ import annotations

import pluggy
import pytest
from wmrl_autoresearch.experiments import config_path
from wmrl_autoresearch.llm import plugin

from wmrl_core import hookspecs
from wmrl_core.plugins import build_registry


def registry():
    pm = pluggy.PluginManager("wmrl")
    pm.add_hookspecs(hookspecs)
    pm.register(plugin, name="autoresearch_llm")
    pm.check_pending()  # every hookimpl matches a hook spec
    return build_registry(pm)


def test_components_are_registered_lazily():
    reg = registry()
    spec = reg.policies.get("llm-code-agent")
    assert spec.entry_point == "wmrl_autoresearch.llm.policy:LLMCodeAgent"
    assert spec.plugin == "autoresearch_llm" and spec.description
    wm = reg.world_models.get("llm-world-model")
    assert wm.entry_point == "wmrl_autoresearch.llm.world_model:LLMWorldModel" and wm.description


def test_entry_points_resolve_to_the_classes():
    pytest.importorskip("transformers")
    from wmrl_autoresearch.llm.policy import LLMCodeAgent
    from wmrl_autoresearch.llm.world_model import LLMWorldModel

    reg = registry()
    assert reg.policies.get("llm-code-agent").load() is LLMCodeAgent
    assert reg.world_models.get("llm-world-model").load() is LLMWorldModel


def test_made_through_the_registry_with_env_none(tmp_path):
    pytest.importorskip("transformers")
    from wmrl_autoresearch.llm.testing import make_tiny_causal_lm

    path = str(make_tiny_causal_lm(tmp_path / "m"))
    reg = registry()
    policy = reg.policies.make("llm-code-agent", env=None, model=path, device="cpu", max_new_tokens=4)
    # the engine's way: the world-model factory declares `policy`, so it receives the run's policy
    from wmrl_core.components import make_with_env

    wm = make_with_env(
        reg.world_models, "llm-world-model", None, {"share_policy": True, "max_new_tokens": 4}, policy=policy
    )
    assert wm.backend is policy.backend
    from wmrl_core.types import Task

    r = policy.generate([Task("t", "hello")], 2)
    assert len(wm.predict(r.tasks, r.solutions)) == 2


GPU_CONFIGS = config_path("quickstart.yaml").parent / "gpu"
CONFIGS = sorted(GPU_CONFIGS.glob("*.yaml"))


def test_gpu_configs_are_found():
    """An empty glob would skip the check below silently (it did once the folder moved)."""
    assert len(CONFIGS) == 3, (GPU_CONFIGS, CONFIGS)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_gpu_configs_only_use_known_kwargs(path):
    """The GPU example configs cannot be run here; at least their keys must exist."""
    import inspect

    yaml = pytest.importorskip("yaml")
    pytest.importorskip("transformers")
    from wmrl_autoresearch.llm.policy import LLMCodeAgent
    from wmrl_autoresearch.llm.world_model import LLMWorldModel

    cfg = yaml.safe_load(path.read_text())
    assert cfg["mode"] == "wmrl" and cfg["environment"]["name"] == "autoresearch"
    assert cfg["policy"]["name"] == "llm-code-agent" and cfg["world_model"]["name"] == "llm-world-model"
    for section, cls in (("policy", LLMCodeAgent), ("world_model", LLMWorldModel)):
        kwargs = cfg[section]["kwargs"]
        params = inspect.signature(cls.__init__).parameters
        assert set(kwargs) <= set(params), f"{path.name}: unknown {section} kwargs {set(kwargs) - set(params)}"
    lora = cfg["policy"]["kwargs"].get("lora")
    if lora:
        peft = pytest.importorskip("peft")
        peft.LoraConfig(**lora, task_type="CAUSAL_LM")  # raises on unknown fields
    assert set(cfg["rollout"]) == {"batch_tasks", "group_size"} and "fraction" in cfg["anchors"]
    header = path.read_text().split("\n", 1)[0]
    assert header.startswith("#") and "Resources" in path.read_text()
