"""LIBERO for WMRL."""
