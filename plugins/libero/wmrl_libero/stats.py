"""Confidence intervals for success rates: the core's Wilson interval (``wmrl_core.experiments.stats``)."""

from __future__ import annotations

from wmrl_core.experiments.stats import wilson_interval

__all__ = ["wilson_interval"]
