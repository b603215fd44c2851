"""Index lists as the ``wmrl-libero`` commands take them: ``"0-4,7"`` -> ``[0, 1, 2, 3, 4, 7]``.

The parser is the experiment kit's (:func:`wmrl_core.experiments.report.parse_int_ranges`), the
one every study uses; the command-line entry (:mod:`wmrl_libero.cli`) and the world-model
sub-commands (:mod:`wmrl_libero.world_models.commands`) import it from here.
"""

from __future__ import annotations

from wmrl_core.experiments.report import parse_int_ranges

__all__ = ["parse_int_ranges"]
