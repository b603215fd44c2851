"""The configuration reference, generated from the field metadata of :class:`~wmrl_core.config.TrainConfig`.

``wmrl train --help`` prints :func:`help_text`; ``docs/configuration.md`` is :func:`markdown`::

    python -m wmrl_core.config_docs > docs/configuration.md

(``tests/test_configuration_docs.py`` fails when the committed file is stale). Both list every
setting under its dotted key with its type, default, choices (:func:`wmrl_core.config.choices`)
and help (``metadata["help"]``).
"""

from __future__ import annotations

import dataclasses
import re
import sys
import textwrap
import typing
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from wmrl_core.config import TrainConfig, choices

__all__ = ["Setting", "Section", "sections", "help_text", "markdown"]


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
            help=f.metadata["help"],
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


def _plain(text: str) -> str:
    return text.replace("``", "")


def help_text(width: int = 100) -> str:
    """Every setting with its type, default, choices and help, for ``wmrl train --help``."""
    lines = ["settings (KEY=VALUE on the command line or KEY: VALUE in the YAML; docs/configuration.md too):"]
    for section in sections():
        title = section.key or "run"
        null = " (default null: none)" if section.default == "null" else ""
        lines += ["", *textwrap.wrap(f"{title}{null}: {_plain(section.help)}", width)]
        for s in section.settings:
            one_of = f"; one of {', '.join(s.choices)}" if s.choices else ""
            lines.append(f"  {s.key} = {s.default}  ({s.type}{one_of})")
            lines += textwrap.wrap(_plain(s.help), width, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


def _md(text: str) -> str:
    """reStructuredText literals as Markdown code, pipes escaped for a table cell."""
    return re.sub(r"``(.+?)``", r"`\1`", text).replace("|", "\\|")


def markdown() -> str:
    """``docs/configuration.md``: a table per section."""
    from wmrl_core.fusion.methods import describe_methods

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
        if section.key == "fusion":
            out += ["", "The fusion methods (`fusion.method`, `wmrl_core/fusion/methods.py`):", ""]
            out += [f"- {_md(line.strip())}" for line in describe_methods().splitlines()]
        out += ["", "| key | type | default | description |", "| --- | --- | --- | --- |"]
        for s in section.settings:
            kind = ", ".join(f"`{c}`" for c in s.choices) if s.choices else s.type
            out.append(f"| `{s.key}` | {kind} | `{s.default}` | {_md(s.help)} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
