"""Resolve the POLICY argument of ``wmrl-libero eval`` to a controller factory."""

from __future__ import annotations

from wmrl_libero.controllers import ControllerFactory, simple_factory

__all__ = ["controller_factory"]


def controller_factory(spec: str) -> ControllerFactory:
    """``expert``, ``zero``, ``random``, ``small-vla:CHECKPOINT`` or ``hf-vla:MODEL_DIR``."""
    kind, _, arg = spec.partition(":")
    if kind in ("zero", "random"):
        return simple_factory(kind)
    if kind == "expert":
        from wmrl_libero.expert import expert_factory

        return expert_factory()
    if kind == "small-vla":
        from wmrl_libero.policies.small_vla import load_controller_factory

        return load_controller_factory(arg)
    if kind == "hf-vla":
        from wmrl_libero.policies.hf_vla import load_controller_factory

        return load_controller_factory(arg)
    raise ValueError(f"unknown policy {spec!r}; use expert, zero, random, small-vla:CHECKPOINT or hf-vla:MODEL_DIR")
