"""A sandbox backend that lives outside the AutoResearch plugin, as a user's package would ship
one (``tests/test_ar_sandbox_plugin.py`` installs it under the ``wmrl`` entry-point group and
executes and trains through it)."""
