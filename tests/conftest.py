from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = ROOT / "configs" / "synthetic" / "wmrl.yaml"


@pytest.fixture
def synthetic_config():
    return SYNTHETIC
