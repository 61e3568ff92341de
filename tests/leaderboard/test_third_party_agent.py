"""A third-party package adds an agent through the entry-point group, with no change to this project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from leaderboard.evaluate import evaluate, parse_args

from .test_evaluate import TOY_ID, toy_env_id  # noqa: F401  (registers the toy env id)


@pytest.fixture
def installed_plugin(tmp_path):
    package = tmp_path / "plugin"
    (package / "sage_plugin_demo").mkdir(parents=True)
    (package / "pyproject.toml").write_text(
        textwrap.dedent("""
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "sage-plugin-demo"
        version = "0.0.1"
        [project.entry-points."sage_agents.agents"]
        always_look = "sage_plugin_demo:make"
    """)
    )
    (package / "sage_plugin_demo" / "__init__.py").write_text(
        textwrap.dedent("""
        class AlwaysLook:
            model_id = "always-look-v1"
            def act(self, observation, info):
                return "look"
        def make(**kwargs):
            return AlwaysLook()
    """)
    )
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


BAD_AGENTS = textwrap.dedent('''
    class RaisesOnChain3:
        """Looks, but raises on chain 3 (the evaluator's reset seed is seed * 1_000_003 + chain)."""
        model_id = "raises-on-chain-3"
        def reset(self, seed=None):
            self.chain = seed % 1_000_003
        def act(self, observation, info):
            if self.chain == 3:
                raise RuntimeError("agent bug on chain 3")
            return "look"
    class Huge:
        """Answers a 10 MB action every turn."""
        def act(self, observation, info):
            return "look " * 2_000_000
    def make_raiser():
        return RaisesOnChain3()
    def make_huge():
        return Huge()
    def make_clash(**kwargs):
        return Huge()
''')


def plugin_on_path(root, entry_points: dict[str, str], name="sage_bad_agents"):
    """An installed-looking distribution under ``root`` (a package and its dist-info), nothing pip-installed."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(BAD_AGENTS)
    info = root / f"{name}-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.1\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[sage_agents.agents]\n{lines}")
    return root


def test_a_plugin_that_takes_a_registered_name_is_refused_naming_both(tmp_path, monkeypatch):
    from sage_agents.registry import AgentNameTakenError, make_agent

    monkeypatch.syspath_prepend(str(plugin_on_path(tmp_path, {"random": "sage_bad_agents:make_clash"})))
    with pytest.raises(AgentNameTakenError) as error:
        make_agent("random")
    message = str(error.value)
    assert "'random'" in message and "sage_agents.baselines:make_random" in message
    assert "sage_bad_agents:make_clash" in message and "'sage_bad_agents'" in message


def test_unknown_agent_kwargs_are_an_error_naming_the_accepted_ones():
    from sage_agents.registry import UnknownAgentKwargsError, make_agent

    with pytest.raises(UnknownAgentKwargsError, match=r"\['sed'\].*'seed'.*accepts: \['seed'\]"):
        make_agent("random", sed=1)
    with pytest.raises(UnknownAgentKwargsError, match=r"use_skill.*'skills', 'skills_path', 'use_skills'"):
        make_agent("expert", use_skill=False)
    with pytest.raises(UnknownAgentKwargsError, match=r"constraind.*'constrained'.*'history_turns'"):
        make_agent("policy", model_path="unused", constraind=True)  # checked before the model is loaded
    assert make_agent("random", seed=3).seed == 3


def test_bad_plugin_agents_are_recorded_and_the_run_goes_on(tmp_path):
    """``python -m leaderboard.evaluate`` with an agent that raises on chain 3 and one that answers 10 MB."""
    site = plugin_on_path(
        tmp_path / "site", {"raiser": "sage_bad_agents:make_raiser", "huge": "sage_bad_agents:make_huge"}
    )
    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(root)])}
    summaries = {}
    for agent in ("raiser", "huge"):
        out = tmp_path / agent
        # the toy env id is registered by this test module; the subprocess registers it the same way
        code = (
            "import gymnasium as gym, sys; from tests.leaderboard.test_evaluate import TOY_ID, _make_toy; "
            "gym.register(TOY_ID, entry_point=_make_toy); from leaderboard.evaluate import main; main(sys.argv[1:])"
        )
        argv = ["--agent", agent, "--env", TOY_ID, "--split", "train", "--num-chains", "4",
                "--env-kwargs", '{"max_steps_per_task": 3}', "--output", str(out)]  # fmt: skip
        run = subprocess.run([sys.executable, "-c", code, *argv], cwd=root, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        summaries[agent] = json.loads(next(out.glob("*.json")).read_text())
        log = next(out.glob("*.episodes.jsonl"))
        assert log.stat().st_size < 4 * 8_192 * 3 * 2 * 2  # capped actions: far below the 10 MB of one turn
        print(agent, json.dumps({k: v for k, v in summaries[agent].items() if k not in ("versions", "agent_kwargs")}))
    raiser = summaries["raiser"]
    assert raiser["n_chains"] == 4 and raiser["agent_errors"] == 1 and raiser["model"] == "raises-on-chain-3"
    records = [json.loads(line) for line in next((tmp_path / "raiser").glob("*.jsonl")).read_text().splitlines()]
    assert [r["chain"] for r in records if "agent_error" in r] == [3]
    huge = summaries["huge"]
    assert huge["n_chains"] == 4 and huge["agent_errors"] == 0 and huge["token_unit"] == "words"
    assert huge["mean_tokens"] <= 8_192  # words of the capped text, not 2,000,000 a turn
