"""WMRL example domain: open-loop plans for gymnasium's CartPole-v1 (``plugin`` registers it)."""
