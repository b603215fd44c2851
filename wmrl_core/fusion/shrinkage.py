"""Shrinkage between the rectified update and a lower-variance one (being written)."""

SHRINKAGE_TARGETS = ("inverse_variance", "calibrated")
