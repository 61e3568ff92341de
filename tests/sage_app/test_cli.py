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
        "--earlier-actions", "0", "--no-show-admissible", "--untried-commands", "go to ",
        "--skip-repeated-actions",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert 0.0 <= metrics["env/task_success"] <= 1.0
    assert 1.0 <= metrics["env/steps_per_task"] <= 3.0  # max_steps_per_task=3
    assert seen["earlier_actions"] == 0 and seen["history_turns"] == 1 and seen["show_admissible"] is False
    assert seen["untried_commands"] == "go to " and seen["skip_repeated_actions"] is True


def _help(*command: str) -> str:
    """``sage COMMAND --help`` on a terminal wide enough that no option or default is wrapped."""
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.replace("│", " ").split())  # rich's table borders and line breaks out


@pytest.mark.parametrize("command, cls", [("train", "TrainConfig"), ("demo", "DemoConfig")])
def test_help_lists_every_config_field_with_its_default_and_docstring(command, cls):
    import dataclasses

    from sage_agents.config import TrainConfig
    from sage_app.cli import field_docs
    from sage_app.demo import DemoConfig

    config = {"TrainConfig": TrainConfig, "DemoConfig": DemoConfig}[cls]
    text, docs = _help(command), field_docs(config)
    for field in dataclasses.fields(config):
        value = field.default_factory() if field.default is dataclasses.MISSING else field.default
        shown = value if isinstance(value, str) else "None" if value is None else json.dumps(value)
        option = "--" + field.name.replace("_", "-")
        assert f" {option} " in text, option
        assert f"{docs[field.name]} [default: {shown}]" in text, field.name


def test_field_docs_reads_each_docstring_as_plain_text():
    from sage_agents.config import TrainConfig
    from sage_app.cli import field_docs
    from sage_app.demo import DemoConfig

    docs = field_docs(TrainConfig)
    assert docs["lr"] == "AdamW learning rate (SAGE: 1e-6; a tiny CPU model needs ~1e-4, see docs/agents.md)."
    assert docs["algo"].startswith("sage (skill-integrated reward, chains), grpo (outcome reward)")
    assert field_docs(DemoConfig)["sft_lr"] == "SFT learning rate (a from-scratch tiny model wants ~1e-3)."
    assert "\n" not in field_docs(DemoConfig)["expert_skills"]  # a multi-line docstring on one line


def test_options_set_fields_over_config_and_set(tmp_path, monkeypatch):
    import sage_agents.trainer

    seen = []

    class Recorder:
        def __init__(self, cfg):
            seen.append(cfg)

        def train(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(sage_agents.trainer, "Trainer", Recorder)
    (tmp_path / "cfg.json").write_text(json.dumps({"lr": 0.5, "group_size": 4, "seed": 7}))
    result = CliRunner().invoke(app, [
        "train", "--config", str(tmp_path / "cfg.json"), "--set", "seed=3", "--lr", "1e-4", "--algo", "grpo",
        "--scale-std", "--no-progress", "--env-kwargs", '{"chain_length": 3}', "--report-to", '["jsonl"]',
        "--no-action-penalty", "-0.5",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    [cfg] = seen
    assert (cfg.lr, cfg.algo, cfg.scale_std, cfg.progress) == (1e-4, "grpo", True, False)
    assert cfg.env_kwargs == {"chain_length": 3} and cfg.report_to == ["jsonl"] and cfg.no_action_penalty == -0.5
    assert (cfg.group_size, cfg.seed) == (4, 3)  # from the file and --set, which the options left alone
    assert cfg.constrained is False and cfg.total_steps == 100  # options not given keep the dataclass default


def test_an_option_and_a_set_of_one_field_and_bad_json_are_refused():
    both = CliRunner().invoke(app, ["train", "--set", "lr=0.1", "--lr", "0.2"])
    assert both.exit_code != 0 and "['lr'] given both by --set and by its own option" in both.output
    bad = CliRunner().invoke(app, ["train", "--env-kwargs", "{chain_length: 3}"], env={"COLUMNS": "400"})
    assert bad.exit_code != 0 and "is not JSON" in bad.output


def test_demo_options_reach_demo_config(monkeypatch):
    import sage_app.demo

    seen = []
    monkeypatch.setattr(sage_app.demo, "run_demo", seen.append)
    result = CliRunner().invoke(app, ["demo", "--quick", "--rl-steps", "2", "--arms", '["grpo", "sage"]'])
    assert result.exit_code == 0, result.output
    assert (seen[0].quick, seen[0].rl_steps, seen[0].arms, seen[0].output_dir) == (
        True,
        2,
        ["grpo", "sage"],
        "runs/demo",
    )


def test_agents_prints_each_agent_with_its_description_and_a_dash_without_one(tmp_path, monkeypatch):
    from tests.leaderboard.test_third_party_agent import plugin_on_path

    monkeypatch.syspath_prepend(str(plugin_on_path(tmp_path, {"huge": "sage_bad_agents:make_huge"})))
    result = CliRunner().invoke(app, ["agents"])
    assert result.exit_code == 0, result.output
    rows = dict(line.split(maxsplit=1) for line in result.output.splitlines())
    assert rows["huge"] == "-"  # make_huge has no docstring
    # the docstring's :class:`RandomAgent` shown plain
    assert rows["random"] == "A random admissible command each turn (the floor of every table; RandomAgent)."
    assert {"expert", "sage", "reskill", "react", "memory"} <= set(rows)


def _commands(group, path=()):
    """Every command path under a (typer) click group, the group itself included."""
    yield path
    for name, command in getattr(group, "commands", {}).items():
        yield from _commands(command, (*path, name))


def test_no_help_shows_rest_markup():
    import typer

    paths = list(_commands(typer.main.get_command(app)))
    assert ("leaderboard", "render") in paths and ("train",) in paths
    for path in paths:
        text = CliRunner().invoke(app, [*path, "--help"]).output
        assert "Usage" in text or "usage" in text, path
        assert "``" not in text and ":class:" not in text, path
