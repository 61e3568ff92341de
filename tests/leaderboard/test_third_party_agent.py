"""A third-party package adds an agent through the entry-point group, with no change to this project."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from leaderboard.evaluate import evaluate, parse_args

from .test_evaluate import TOY_ID, toy_env_id  # noqa: F401  (registers the toy env id)


@pytest.fixture
def installed_plugin(tmp_path):
    package = tmp_path / "plugin"
    (package / "sage_plugin_demo").mkdir(parents=True)
    (package / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "sage-plugin-demo"
        version = "0.0.1"
        [project.entry-points."sage_agents.agents"]
        always_look = "sage_plugin_demo:make"
    """))
    (package / "sage_plugin_demo" / "__init__.py").write_text(textwrap.dedent("""
        class AlwaysLook:
            model_id = "always-look-v1"
            def act(self, observation, info):
                return "look"
        def make(**kwargs):
            return AlwaysLook()
    """))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", str(package)], check=True)
    yield "always_look"
    subprocess.run([*pip, "uninstall", "-y", "sage-plugin-demo"], check=True)


def test_installed_plugin_agent_is_evaluated(installed_plugin, tmp_path):
    config = parse_args(["--agent", installed_plugin, "--env", TOY_ID, "--num-chains", "2", "--split", "train",
                         "--env-kwargs", '{"max_steps_per_task": 3}', "--output", str(tmp_path / "out")])  # fmt: skip
    summary = evaluate(config)
    assert summary["agent"] == "always_look" and summary["model"] == "always-look-v1"
    assert summary["tgc"] == 0.0 and summary["mean_steps"] == 3.0  # "look" never wins: every task times out
