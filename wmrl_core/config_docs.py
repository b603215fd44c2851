"""The configuration reference, generated from the field metadata of :class:`~wmrl_core.config.TrainConfig`.

``wmrl train --help`` prints :func:`help_text`; ``docs/configuration.md`` is :func:`markdown`::

    python -m wmrl_core.config_docs > docs/configuration.md

(``tests/test_configuration_docs.py`` fails when the committed file is stale). Both list every
setting under its dotted key with its type, default, choices (:func:`wmrl_core.config.choices`)
and help (``metadata["help"]``), and every registered fusion method with the settings of its own
dataclass (``fusion.kwargs.KEY``): ``--help`` the installed plugins' methods, the committed
reference WMRL's own, so that it does not depend on what is installed.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import textwrap
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import MISSING

from wmrl_core.config import TrainConfig, choices

if TYPE_CHECKING:
    from wmrl_core.registry import FuserTable

__all__ = ["Setting", "Section", "FusionMethod", "sections", "fusion_methods", "help_text", "markdown"]


@dataclass(frozen=True)
class Setting:
    """One leaf of the config.

    :param key: its dotted key (``fusion.method``).
    :param type: its type as a user writes it (``int``, ``float or null``, ``mapping``).
    :param default: its default as written in YAML (``null``, ``true``, ``required``).
    :param choices: the values it may take, or ``None`` for any of its type.
    :param help: its help text (reStructuredText literals as ````x````).
    """

    key: str
    type: str
    default: str
    choices: tuple[str, ...] | None
    help: str


@dataclass(frozen=True)
class Section:
    """A top-level section of the config (``key=""``: the run-level settings)."""

    key: str
    help: str
    default: str | None
    settings: list[Setting]


@dataclass(frozen=True)
class FusionMethod:
    """A registered fusion method, as ``fusion.method`` names it.

    :param settings: its settings dataclass's fields, under ``fusion.kwargs.``.
    """

    name: str
    description: str
    plugin: str
    needs_anchors_every_step: bool
    settings: list[Setting]


def _optional(hint: Any) -> tuple[Any, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Union and type(None) in args:
        return next(a for a in args if a is not type(None)), True
    return hint, False


def _type_name(hint: Any) -> str:
    hint, optional = _optional(hint)
    origin = typing.get_origin(hint)
    if origin is dict:
        name = "mapping"
    elif origin is list:
        name = f"list of {_type_name(typing.get_args(hint)[0])}"
    else:
        name = getattr(hint, "__name__", str(hint))
    return f"{name} or null" if optional else name


def _yaml(value: Any) -> str:
    """``value`` as it is written in a YAML file or a ``KEY=VALUE`` override."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if value == MISSING:
        return "required"
    if isinstance(value, (dict, list)):
        return repr(value)
    return str(value)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _settings(cls: type, prefix: str) -> list[Setting]:
    hints = typing.get_type_hints(cls)
    return [
        Setting(
            key=f"{prefix}{f.name}",
            type=_type_name(hints[f.name]),
            default=_yaml(_default(f)),
            choices=None if (c := choices(f)) is None else tuple(str(v) for v in c),
            help=f.metadata.get("help", ""),  # a plugin's settings may lack it; the config's are tested
        )
        for f in dataclasses.fields(cls)
    ]


def sections() -> list[Section]:
    """The run-level settings, then one :class:`Section` per section of :class:`TrainConfig`, in
    the order of its fields."""
    hints = typing.get_type_hints(TrainConfig)
    run_level = {s.key: s for s in _settings(TrainConfig, "")}
    top = Section("", "Settings of the run as a whole.", None, [])
    out = [top]
    for f in dataclasses.fields(TrainConfig):
        cls, _ = _optional(hints[f.name])
        if isinstance(cls, type) and dataclasses.is_dataclass(cls):
            default = None if f.default_factory is not dataclasses.MISSING else _yaml(f.default)
            out.append(Section(f.name, f.metadata["help"], default, _settings(cls, f"{f.name}.")))
        else:
            top.settings.append(run_level[f.name])
    return out


def fusion_methods(fusers: FuserTable | None = None) -> list[FusionMethod]:
    """Every method of ``fusers`` (default: those the installed plugins register) with its settings."""
    from wmrl_core.fusion.methods import registered_fusers

    return [
        FusionMethod(
            spec.name,
            spec.description,
            spec.plugin,
            spec.needs_anchors_every_step,
            _settings(spec.settings_class(), "fusion.kwargs."),
        )
        for spec in (fusers if fusers is not None else registered_fusers())
    ]


def _builtin_fusers() -> FuserTable:
    from wmrl_core.fusion.methods import registered_fusers
    from wmrl_core.plugins import get_plugin_manager

    return registered_fusers(get_plugin_manager(entry_points=False))


def _plain(text: str) -> str:
    return text.replace("``", "")


def _help_lines(settings: list[Setting], indent: int, width: int) -> list[str]:
    lines = []
    for s in settings:
        one_of = f"; one of {', '.join(s.choices)}" if s.choices else ""
        lines.append(f"{' ' * indent}{s.key} = {s.default}  ({s.type}{one_of})")
        pad = " " * (indent + 4)
        lines += textwrap.wrap(_plain(s.help), width, initial_indent=pad, subsequent_indent=pad)
    return lines


def help_text(width: int = 100, fusers: FuserTable | None = None) -> str:
    """Every setting with its type, default, choices and help, and every fusion method of
    ``fusers`` (default: the installed plugins') with its settings, for ``wmrl train --help``."""
    lines = ["settings (KEY=VALUE on the command line or KEY: VALUE in the YAML; docs/configuration.md too):"]
    for section in sections():
        title = section.key or "run"
        null = " (default null: none)" if section.default == "null" else ""
        lines += ["", *textwrap.wrap(f"{title}{null}: {_plain(section.help)}", width)]
        lines += _help_lines(section.settings, 2, width)
        if section.key == "fusion":
            lines += ["", "  fusion methods (fusion.method=NAME; its settings as fusion.kwargs.KEY=VALUE):"]
            for m in fusion_methods(fusers):
                anchors = " Needs an anchor group every step." if m.needs_anchors_every_step else ""
                lines += textwrap.wrap(
                    f"{m.name} (from {m.plugin}): {_plain(m.description)}.{anchors}",
                    width,
                    initial_indent="    ",
                    subsequent_indent="      ",
                )
                lines += _help_lines(m.settings, 6, width) or ["      (no settings)"]
    return "\n".join(lines)


def _md(text: str) -> str:
    """reStructuredText literals as Markdown code, pipes escaped for a table cell."""
    return re.sub(r"``(.+?)``", r"`\1`", text).replace("|", "\\|")


def markdown(fusers: FuserTable | None = None) -> str:
    """``docs/configuration.md``: a table per section; the fusion methods of ``fusers`` (default:
    WMRL's own) each with a table of its settings."""
    out = [
        "# Configuration",
        "",
        "<!-- Generated by `python -m wmrl_core.config_docs > docs/configuration.md` from the field metadata",
        "of `wmrl_core/config.py`; edit the help there, not here (tests/test_configuration_docs.py). -->",
        "",
        "Every setting of `wmrl train`, under its dotted key. Set it in the YAML file (`grpo: {lr: 0.01}`) or on",
        "the command line (`wmrl train configs/synthetic/wmrl.yaml grpo.lr=0.01`); `wmrl train --help` prints",
        "this reference too. An unknown key, a mistyped value or a value outside a setting's choices is an",
        "error that names the key. The sections `denoise` and `debias` are still read as `fusion` and",
        "`calibration`, with a warning.",
    ]
    for section in sections():
        title = f"`{section.key}`" if section.key else "The run"
        out += ["", f"## {title}", "", _md(section.help)]
        if section.default == "null":
            out[-1] += f" Default: `null` (no `{section.key}`)."
        out += _table(section.settings)
        if section.key == "fusion":
            out += _fusion_methods_markdown(fusers if fusers is not None else _builtin_fusers())
    return "\n".join(out) + "\n"


def _table(settings: list[Setting]) -> list[str]:
    out = ["", "| key | type | default | description |", "| --- | --- | --- | --- |"]
    for s in settings:
        kind = ", ".join(f"`{c}`" for c in s.choices) if s.choices else s.type
        out.append(f"| `{s.key}` | {kind} | `{s.default}` | {_md(s.help)} |")
    return out


def _fusion_methods_markdown(fusers: FuserTable) -> list[str]:
    out = [
        "",
        "### Fusion methods",
        "",
        "What `fusion.method` may name: the methods registered through the `wmrl_register_fusers` hook (WMRL's",
        "own below; `wmrl train --help` lists those of the installed plugins too). Each reads its own settings",
        "from `fusion.kwargs`; the flat keys of earlier versions (`fusion.lambda_window`...) are still read as",
        "`fusion.kwargs.KEY`, with a warning.",
    ]
    for m in fusion_methods(fusers):
        anchors = " Needs an anchor group every step." if m.needs_anchors_every_step else ""
        description = m.description[:1].upper() + m.description[1:]
        out += ["", f"#### `{m.name}`", "", f"{_md(description)}.{anchors}"]
        out += _table(m.settings) if m.settings else ["", "No settings: `fusion.kwargs` stays empty."]
    return out


if __name__ == "__main__":
    sys.stdout.write(markdown())
