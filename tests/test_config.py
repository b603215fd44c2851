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
        ("fusion.kwargs.lambda_window=1", "fusion.kwargs.lambda_window"),
        ("calibration.calibrator=spline", "calibration.calibrator"),
        ("eval.max_tasks=0", "eval.max_tasks"),
        ("grpo.minibatches=0", "grpo.minibatches"),
        ("grpo.minibatches=1000", "grpo.minibatches"),
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
    from wmrl_core.calibration import CALIBRATORS
    from wmrl_core.config import MODES, choices
    from wmrl_core.fusion.engine import ADVANTAGE_SCALES

    vocabularies = {key: choices(f) for key, f in ENUMERATED}
    assert vocabularies == {
        "mode": MODES,
        "calibration.calibrator": CALIBRATORS,
        "calibration.advantage_scale": ADVANTAGE_SCALES,
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


def test_fusion_method_and_its_settings_are_read_from_the_registry():
    """``fusion.method`` names a registered method and ``fusion.kwargs`` fill its settings
    dataclass, written back in full; there is no flat key per setting any more."""
    cfg = load_config(None, [*BASE, "world_model.name=x", "fusion.method=shrinkage", "fusion.kwargs.min_pairs=6"])
    assert cfg.fusion.kwargs == {
        "lambda_window": 20,
        "lambda_moments": "solution",
        "lambda_level": 0.999,
        "lambda_min_groups": 2,
        "shrinkage_toward": "inverse_variance",
        "shrinkage_window": 20,
        "min_pairs": 6,
    }
    assert load_config(None, [*BASE, "mode=real", "fusion.method=pooled"]).fusion.kwargs == {}


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "fusion.kwargs.lambda_windw=5",
            "fusion.kwargs.lambda_windw is not a setting of fusion.method=rectified. Did you mean `lambda_window`? "
            "Its settings: lambda_window, lambda_moments, lambda_level, lambda_min_groups",
        ),
        ("fusion.kwargs.lambda_window=many", "invalid fusion.kwargs.lambda_window for fusion.method=rectified: Value "),
        ("fusion.kwargs.lambda_level=1.5", "fusion.kwargs.lambda_level must be in [0.5, 1) or null"),
        ("fusion.kwargs.lambda_min_groups=30", "fusion.kwargs.lambda_min_groups must be in [2, lambda_window=20]"),
        ("fusion.kwargs.lambda_moments=rollouts", "fusion.kwargs.lambda_moments='rollouts' is unknown (did you mean "),
    ],
)
def test_a_bad_fusion_setting_names_its_key_and_the_method(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [*BASE, "world_model.name=x", "fusion.method=rectified", override])
    assert str(err.value).startswith(message)


def test_a_method_without_settings_refuses_any_and_a_shrinkage_window_is_checked():
    with pytest.raises(ConfigError, match=r"fusion.kwargs.min_pairs is not a setting of fusion.method=pooled.*none"):
        load_config(None, [*BASE, "mode=real", "fusion.method=pooled", "fusion.kwargs.min_pairs=3"])
    with pytest.raises(ConfigError, match=r"fusion.kwargs.shrinkage_window must be >= 3"):
        load_config(None, [*BASE, "mode=real", "fusion.method=shrinkage", "fusion.kwargs.shrinkage_window=2"])


def test_the_old_flat_fusion_keys_are_read_with_a_warning_naming_the_new_spelling():
    with pytest.warns(FutureWarning, match=r"write `fusion.kwargs.min_pairs`, `fusion.kwargs.lambda_window`"):
        cfg = load_config(
            None, [*BASE, "mode=real", "fusion.method=rectified", "fusion.lambda_window=7", "fusion.min_pairs=9"]
        )
    # rectified reads lambda_window; min_pairs, which it never read, is dropped as it was ignored
    assert cfg.fusion.kwargs["lambda_window"] == 7 and "min_pairs" not in cfg.fusion.kwargs
    with pytest.warns(FutureWarning):  # both spellings: the new one wins
        cfg = load_config(
            None,
            [*BASE, "mode=real", "fusion.method=rectified", "fusion.lambda_window=7", "fusion.kwargs.lambda_window=5"],
        )
    assert cfg.fusion.kwargs["lambda_window"] == 5


def test_a_saved_config_of_the_old_spelling_loads_and_compares_equal_to_its_new_spelling(tmp_path):
    """A run's config.yaml from before the fusion methods had their own settings (every flat key,
    whatever the method) loads, with the same settings as the new spelling; an old checkpoint's
    record compares equal to the config it resumes with."""
    from wmrl_core.checkpoint import _changed
    from wmrl_core.config import flatten

    old = (
        "environment: {name: synthetic-bandit}\npolicy: {name: tabular-softmax}\nmode: real\n"
        "fusion: {method: inverse_variance, min_pairs: 3, lambda_window: 20, lambda_moments: solution, "
        "lambda_level: 0.999, lambda_min_groups: 2, shrinkage_toward: inverse_variance, shrinkage_window: 20}\n"
    )
    (tmp_path / "config.yaml").write_text(old)
    with pytest.warns(FutureWarning, match="fusion.kwargs"):
        cfg = load_config(tmp_path / "config.yaml")
    assert cfg.fusion.kwargs == {"min_pairs": 3}
    new = load_config(None, [*BASE, "mode=real", "fusion.method=inverse_variance", "fusion.kwargs.min_pairs=3"])
    assert flatten(cfg) == flatten(new)
    record = {k: v for k, v in flatten(new).items() if not k.startswith("fusion.kwargs")}
    record |= {"fusion.min_pairs": 3, "fusion.lambda_window": 20, "fusion.shrinkage_toward": "inverse_variance"}
    assert _changed(record, flatten(new)) == {}
    assert _changed({**record, "fusion.min_pairs": 4}, flatten(new)) == {"fusion.kwargs.min_pairs": (4, 3)}


def test_switching_the_fusion_method_on_the_command_line_drops_the_files_kwargs(tmp_path):
    (tmp_path / "c.yaml").write_text(
        "environment: {name: synthetic-bandit}\npolicy: {name: tabular-softmax}\nmode: real\n"
        "fusion: {method: rectified, kwargs: {lambda_window: 5}}\n"
    )
    assert load_config(tmp_path / "c.yaml").fusion.kwargs["lambda_window"] == 5
    assert load_config(tmp_path / "c.yaml", ["fusion.method=pooled"]).fusion.kwargs == {}
    cfg = load_config(tmp_path / "c.yaml", ["fusion.method=shrinkage", "fusion.kwargs.shrinkage_window=4"])
    assert cfg.fusion.kwargs["lambda_window"] == 20 and cfg.fusion.kwargs["shrinkage_window"] == 4


def test_a_wrong_type_names_the_key_and_where_the_settings_are_listed():
    with pytest.raises(ConfigError, match=r"at `steps`.*`wmrl train --help` lists every setting"):
        load_config(None, [*BASE, "steps=many"])
