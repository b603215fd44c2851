"""A fusion method that lives outside ``wmrl_core``, as a user's package would ship it
(``tests/test_fuser_plugin.py`` registers it and trains with it)."""
