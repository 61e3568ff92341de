"""Test-wide set-up: point $ALFWORLD_DATA at ../shared/alfworld when it exists (tests needing it skip otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

SHARED_ALFWORLD = Path(__file__).resolve().parents[1].parent / "shared" / "alfworld"

if "ALFWORLD_DATA" not in os.environ and (SHARED_ALFWORLD / "json_2.1.1").is_dir():
    os.environ["ALFWORLD_DATA"] = str(SHARED_ALFWORLD)
