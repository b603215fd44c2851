"""Embodied policies for LIBERO: the VLA interface and its implementations."""
