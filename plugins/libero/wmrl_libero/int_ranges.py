"""Index lists as the ``wmrl-libero`` commands take them: ``"0-4,7"`` -> ``[0, 1, 2, 3, 4, 7]``.

One module that the command-line entry (:mod:`wmrl_libero.cli`) and the world-model sub-commands
(:mod:`wmrl_libero.world_models.commands`) both import, so neither imports the other.
"""

from __future__ import annotations

__all__ = ["parse_int_ranges"]


def parse_int_ranges(text: str) -> list[int]:
    """Comma-separated integers and inclusive ranges ``a-b`` (``a <= b``), in the order written;
    empty parts are ignored. Anything else is a ``ValueError`` that quotes the text."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, dash, hi = part.partition("-")
        try:
            a, b = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise ValueError(
                f"{text!r}: {part!r} is not an integer or a range a-b; write indices like '0-4,7'"
            ) from None
        if b < a:
            raise ValueError(f"{text!r}: the range {part!r} runs backwards; write it low-high ('{b}-{a}')")
        out.extend(range(a, b + 1))
    return out
