from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("CI") == "true":  # CI installs the integration: a missing TRL is a failure there
    import trl  # noqa: F401
else:
    pytest.importorskip("trl", reason="the TRL integration's tests need `pip install -e integrations/trl`")


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory) -> Path:
    from wmrl_core.vowels import make_tiny_qwen2

    return make_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2"))
