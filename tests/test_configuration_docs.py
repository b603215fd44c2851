"""The configuration reference stays where users look: ``docs/configuration.md`` is generated from
the config's field metadata (a stale copy fails here), and ``wmrl train --help`` shows every setting
with its help and default."""

import dataclasses
from pathlib import Path

import pytest

from wmrl_core import cli
from wmrl_core.config import ComponentConfig, TrainConfig, flatten
from wmrl_core.config_docs import fusion_methods, help_text, markdown, sections

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = "python -m wmrl_core.config_docs > docs/configuration.md"


def _every_key() -> list[str]:
    """Every leaf key of the config, the world-model section included (it is null by default)."""
    return list(flatten(TrainConfig(world_model=ComponentConfig(name="x"))))


def _config_dataclasses(cls: type = TrainConfig) -> list[type]:
    found = [cls]
    for f in dataclasses.fields(cls):
        value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(value):
            found += _config_dataclasses(type(value))
    return found + ([ComponentConfig] if cls is TrainConfig else [])


def test_the_committed_configuration_reference_is_the_generated_one():
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == markdown(), f"docs/configuration.md is stale: regenerate it with `{REGENERATE}`"


def test_every_field_has_help_in_its_metadata():
    from wmrl_core.fusion import registered_fusers

    settings = [spec.settings_class() for spec in registered_fusers()]  # the fusion methods' settings
    for cls in [*_config_dataclasses(), *settings]:
        for f in dataclasses.fields(cls):
            assert len(f.metadata.get("help", "")) > 10, f"{cls.__name__}.{f.name} has no help in its metadata"


def test_the_reference_lists_every_key_once_with_its_default():
    documented = [s.key for section in sections() for s in section.settings]
    assert sorted(documented) == sorted(_every_key())
    text = markdown()
    rectified = next(m for m in fusion_methods() if m.name == "rectified")
    level = next(s for s in rectified.settings if s.key == "fusion.kwargs.lambda_level")
    assert level.default == "0.999" and level.type == "float or null"
    assert "#### `rectified`" in text
    assert "| `fusion.kwargs.lambda_level` | float or null | `0.999` | lambda is 0 unless" in text
    assert "| `mode` | `real`, `world_model`, `wmrl` | `wmrl` |" in text
    assert "| `environment.name` | str | `required` |" in text


def test_train_help_shows_every_setting_with_its_help_and_default(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    assert help_text() in out
    for section in sections():
        for s in section.settings:
            assert f"  {s.key} = {s.default}  ({s.type}" in out, s.key
            assert " ".join(s.help.replace("``", "").split()) in flat, f"`wmrl train --help` lacks the help of {s.key}"
    assert "  fusion.method = mse_weighted  (str)" in out
    for method in fusion_methods():  # the installed plugins' and WMRL's own, each with its settings
        assert f"    {method.name} (from {method.plugin}): " in out
        for s in method.settings:
            assert f"      {s.key} = {s.default}  ({s.type}" in out, (method.name, s.key)
