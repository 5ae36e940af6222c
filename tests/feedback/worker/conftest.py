"""The `kit` fixture of the worker's tests (helpers live in workerkit.py: a unique module name,
since several test folders have a conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from workerkit import Kit  # noqa: E402


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return Kit(tmp_path)
