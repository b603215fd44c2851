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


def _enumerated_fields(cls=None, prefix=""):
    """(dotted key, field) of every config field with ``choices`` metadata."""
    import dataclasses

    from wmrl_core.config import TrainConfig, choices

    cls = cls or TrainConfig
    found = []
    for f in dataclasses.fields(cls):
        value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(value):
            found += _enumerated_fields(type(value), f"{prefix}{f.name}.")
        elif choices(f) is not None:
            found.append((f"{prefix}{f.name}", f))
    return found


ENUMERATED = _enumerated_fields()


def test_the_enumerations_are_the_ones_their_modules_define():
    from wmrl_core.config import MODES, choices
    from wmrl_core.debias import CALIBRATORS
    from wmrl_core.fusion.methods import FUSION_METHODS
    from wmrl_core.fusion.rectified import LAMBDA_MOMENTS
    from wmrl_core.fusion.shrinkage import SHRINKAGE_TARGETS

    vocabularies = {key: choices(f) for key, f in ENUMERATED}
    assert vocabularies == {
        "mode": MODES,
        "calibration.calibrator": CALIBRATORS,
        "fusion.method": tuple(FUSION_METHODS),
        "fusion.lambda_moments": LAMBDA_MOMENTS,
        "fusion.shrinkage_toward": SHRINKAGE_TARGETS,
        "fusion.loss": ("exact", "effective"),
        "grpo.loss_aggregation": ("token_mean", "sequence_mean"),
        "distributed.backend": ("local", "ray"),
    }


@pytest.mark.parametrize("key", [key for key, _ in ENUMERATED])
def test_a_misspelt_choice_is_named_with_the_closest_one_and_all_of_them(key):
    from wmrl_core.config import choices

    allowed = choices(dict(ENUMERATED)[key])
    typo = allowed[-1][:-1] + "x"  # one letter off the last choice
    with pytest.raises(ConfigError) as err:
        load_config(None, [*BASE, "world_model.name=x", f"{key}={typo}"])
    assert str(err.value) == (
        f"{key}={typo!r} is unknown (did you mean {allowed[-1]}?); use one of {', '.join(allowed)}"
    )


def test_the_check_reads_the_fusion_table_when_it_runs(monkeypatch):
    """A method added to FUSION_METHODS is valid without touching the config module."""
    from wmrl_core.fusion import methods

    monkeypatch.setitem(methods.FUSION_METHODS, "averaged", methods.FUSION_METHODS["pooled"])
    cfg = load_config(None, [*BASE, "world_model.name=x", "fusion.method=averaged"])
    assert cfg.fusion.method == "averaged"


def test_a_wrong_type_names_the_key_and_where_the_settings_are_listed():
    with pytest.raises(ConfigError, match=r"at `steps`.*`wmrl train --help` lists every setting"):
        load_config(None, [*BASE, "steps=many"])
