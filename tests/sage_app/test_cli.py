"""`sage eval`: a saved local model plays chains greedily with the prompt options it was trained with."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from typer.testing import CliRunner

from sage_app.cli import app
from tests.sage_agents.fake_env import FakeChainEnv

FAKE_ID = "SageChain-FakeCli-v0"


@pytest.fixture(autouse=True, scope="module")
def fake_env_id():
    if FAKE_ID not in gym.registry:
        gym.register(FAKE_ID, entry_point=lambda split, **kwargs: FakeChainEnv(**kwargs))
    yield


def test_eval_passes_prompt_options_and_prints_metrics(tiny, tmp_path, monkeypatch):
    from sage_agents import policy as policy_module

    model, tokenizer = tiny
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    seen = {}
    original_init = policy_module.LLMPolicy.__init__

    def recording_init(self, *args, **kwargs):
        seen.update(kwargs)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(policy_module.LLMPolicy, "__init__", recording_init)
    result = CliRunner().invoke(app, [
        "eval", str(tmp_path / "model"), "--env-id", FAKE_ID, "--split", "train", "--num-chains", "2",
        "--env-kwargs", '{"chain_length": 2, "max_steps_per_task": 3}', "--history-turns", "1",
        "--earlier-actions", "0", "--no-show-admissible",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert 0.0 <= metrics["env/task_success"] <= 1.0
    assert 1.0 <= metrics["env/steps_per_task"] <= 3.0  # max_steps_per_task=3
    assert seen["earlier_actions"] == 0 and seen["history_turns"] == 1 and seen["show_admissible"] is False
