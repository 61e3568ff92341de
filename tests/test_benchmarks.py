"""Every benchmark script imports, with the names it takes from the packages (running them is minutes each).

A renamed or removed package function breaks a benchmark only when someone runs it; importing each one here catches
that in the default test run (``benchmarks/option_scoring.py`` imported a config helper that no longer existed).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("*.py")), ids=lambda path: path.stem)
def test_benchmark_imports_and_has_a_main(path):
    spec = importlib.util.spec_from_file_location(f"benchmark_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # its imports run; main() is left alone (guarded by __name__)
    assert callable(module.main)
