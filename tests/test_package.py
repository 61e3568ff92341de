"""Project-wide rules: light imports, no global randomness in the envs, documented config fields (one-way imports:
tests/test_imports.py)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_sage_envs_loads_no_torch_transformers_or_trl():
    code = "import sys, sage_envs; print(sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_sage_envs_draws_no_global_randomness():
    for path in (ROOT / "sage_envs").rglob("*.py"):
        source = path.read_text()
        assert "np.random.rand" not in source and "import random" not in source, path


def _config_classes():
    from leaderboard.evaluate import EvalConfig

    classes = [EvalConfig]
    try:
        from sage_agents.config import TrainConfig

        classes.append(TrainConfig)
    except ImportError:
        pass
    return classes


@pytest.mark.parametrize("config_cls", _config_classes(), ids=lambda c: c.__name__)
def test_every_config_field_has_a_docstring_below_it(config_cls):
    tree = ast.parse(inspect.getsource(config_cls))
    body = tree.body[0].body
    documented = set()
    for node, following in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(following, ast.Expr):
            if isinstance(following.value, ast.Constant) and isinstance(following.value.value, str):
                documented.add(node.target.id)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    assert fields <= documented, f"fields without a docstring: {sorted(fields - documented)}"
