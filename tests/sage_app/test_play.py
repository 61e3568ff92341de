"""`sage play` driven through a pseudo-terminal: completion, a skill definition, an invalid action, Ctrl-D."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

import sage_envs  # noqa: F401  (registers the env ids)
from sage_app.play import HumanPlayer, completions, read_action

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")
HINT = "Tab completes"  # printed once per turn, just before the prompt


class Terminal:
    """A child process on a pseudo-terminal: what it printed (ANSI codes out) and what to type."""

    def __init__(self, argv: list[str]):
        self.master, slave = pty.openpty()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "TERM": "xterm"}
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env,
                                        close_fds=True, start_new_session=True)  # fmt: skip
        os.close(slave)
        self.raw = b""

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                self.raw += os.read(self.master, 65536)
            except OSError:  # the child closed the terminal
                pass

    def wait_for(self, done, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while not done(self.text):
            if (
                time.monotonic() > end
                or self.process.poll() is not None
                and not select.select([self.master], [], [], 0)[0]
            ):
                raise AssertionError(f"timed out; the terminal shows:\n{self.text[-3000:]}")
            self._read(0.2)

    def turn(self, lines: list[str], hints_seen: int) -> int:
        """Type one action (a block one line per prompt) once turn ``hints_seen + 1`` shows; returns hints now."""
        self.wait_for(lambda t: t.count(HINT) > hints_seen and t.rstrip(" ").endswith(">"))
        for number, line in enumerate(lines):
            if number:
                self.wait_for(lambda t, n=number: t.count("... ") >= self.blocks + n)
            os.write(self.master, line.encode() + (b"" if line.endswith("\x04") else b"\n"))
        if len(lines) > 1:
            self.blocks += len(lines) - 1
        return hints_seen + 1

    blocks = 0  # continuation prompts seen so far


def _expert_actions(split: str, chain: int) -> list[list[str]]:
    """The expert's actions per task on ``chain`` (program skills: multi-line definitions with calls)."""
    from sage_agents.evaluation import play_chain
    from sage_agents.registry import make_agent

    env = gym.make("SageChain-ALFWorld-v0", split=split, skills="program")
    try:
        record = play_chain(env, make_agent("expert"), chain, 0)
    finally:
        env.close()
    assert all(record["success"]), record["success"]
    return record["actions"]


def test_play_through_a_pty_saves_a_leaderboard_entry(tmp_path):
    from leaderboard.evaluate import resummarize
    from leaderboard.render import main as render_main

    first, second = _expert_actions("valid_seen", 0), _expert_actions("valid_seen", 1)
    term = Terminal([sys.executable, "-m", "sage_app", "play", "--split", "valid_seen", "--chains", "0,1",
                     "--seed", "0", "--output", str(tmp_path)])  # fmt: skip
    try:
        term.turn(["?"], 0)  # lists the admissible commands, not a turn of the env (the same prompt again)
        term.wait_for(lambda t: "look\n>" in t)
        hints = term.turn(["inv\t"], 0)  # Tab completes "inventory", the one admissible command so begun
        hints = term.turn(["fly to the moon"], hints)
        for action in [a for task in first for a in task]:
            hints = term.turn(action.split("\n") + ([""] if "\n" in action else []), hints)
        hints = term.turn(second[0][0].split("\n") + [""], hints)  # chain 1: one action, then Ctrl-D
        term.turn(["\x04"], hints)
        assert term.process.wait(timeout=120) == 0, term.text[-3000:]
        term.wait_for(lambda t: "summary:" in t, timeout=5)
    finally:
        if term.process.poll() is None:
            term.process.kill()
        os.close(term.master)
    shown = term.text
    assert "Invalid action: 'fly to the moon' is not an admissible command." in shown
    assert "Task 1 completed." in shown and "chain 0 · task 2/2 · turn 1/50" in shown
    assert "skill library" in shown and "heat_then_place(obj, microwave, place)" in shown  # defined in task 1
    assert "Chain 0: 2/2 tasks completed." in shown

    stem = "human__SageChain-ALFWorld-v0__valid_seen__default"
    records = [json.loads(line) for line in (tmp_path / f"{stem}.episodes.jsonl").read_text().splitlines()]
    assert [r["chain"] for r in records] == [0, 1]
    full, quit_ = records
    assert full["success"] == [True, True] and "agent_error" not in full
    assert full["actions"][0][:2] == ["inventory", "fly to the moon"] and full["invalid_actions"] == [1, 0]
    assert [full["actions"][0][2:], full["actions"][1]] == first  # multi-line definitions arrive whole
    assert full["skills_created"][0] and full["skill_calls"][1] >= 1
    assert quit_["actions"] == [[second[0][0]], []] and quit_["steps"] == [1, 0]
    assert quit_["agent_error"]["type"] == "Quit" and quit_["success"] == [False, False]

    summary = json.loads((tmp_path / f"{stem}.json").read_text())
    assert (summary["agent"], summary["model"], summary["n_chains"], summary["agent_errors"]) == (
        "human",
        "human",
        2,
        1,
    )
    assert summary["tgc"] == 0.5 and summary["sgc"] == 0.5 and summary["token_unit"] == "words"
    again = resummarize(tmp_path / f"{stem}.json", write=False)  # the leaderboard recomputes the same figures
    assert {k: again[k] for k in ("tgc", "sgc", "mean_steps", "ci95")} == {
        k: summary[k] for k in ("tgc", "sgc", "mean_steps", "ci95")
    }
    render_main(["--results", str(tmp_path), "--output", str(tmp_path / "site"), "--no-plots"])
    assert "| human |" in (tmp_path / "site" / "LEADERBOARD.md").read_text()


def test_read_action_joins_a_block_until_an_empty_line():
    lines = iter(["skill go(r):", "    go to {r}", "call go(desk 1)", "", "look"])
    prompts = []

    def read_line(prompt):
        prompts.append(prompt)
        return next(lines)

    assert read_action(read_line) == "skill go(r):\n    go to {r}\ncall go(desk 1)"
    assert read_action(read_line) == "look"
    assert prompts == ["> ", "... ", "... ", "... ", "> "]
    ended = iter(["skill go(r):", "    go to {r}"])  # Ctrl-D inside a block ends the block

    def eof_after(prompt):
        try:
            return next(ended)
        except StopIteration:
            raise EOFError from None

    assert read_action(eof_after) == "skill go(r):\n    go to {r}"


def test_completions_offer_admissible_commands_and_program_calls():
    info = {
        "admissible_commands": ["go to desk 1", "go to drawer 1", "look"],
        "skill_library": [{"name": "grab", "kind": "program"}, {"name": "hint", "kind": "guidance"}],
    }
    assert completions("go to d", info) == ["go to desk 1", "go to drawer 1"]
    assert completions("call ", info) == ["call grab("]  # a guidance skill cannot be called
    assert completions("q", info) == ["quit"]
    assert completions("", info)[:2] == ["?", "call grab("]


@pytest.mark.parametrize("typed", ["quit", "\x04"])
def test_a_quit_before_any_action_records_nothing(tmp_path, typed):
    from rich.console import Console

    from sage_app.play import play

    lines = iter(["quit"]) if typed == "quit" else iter(())

    def read_line(prompt):
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    console = Console(file=open(os.devnull, "w"))  # noqa: SIM115
    assert play(split="valid_seen", chains=[0], output=tmp_path, console=console, read_line=read_line) == {}
    assert not list(tmp_path.glob("*.json"))  # no summary of nothing


def test_a_chain_outside_the_split_is_refused(tmp_path):
    from typer.testing import CliRunner

    from sage_app.cli import app

    result = CliRunner().invoke(
        app, ["play", "--split", "valid_seen", "--chains", "0,100000", "--output", str(tmp_path)]
    )
    assert result.exit_code != 0 and "chains [100000] are not in 'valid_seen'" in result.output
    bad = CliRunner().invoke(app, ["play", "--chains", "zero"])
    assert bad.exit_code != 0 and "not a comma-separated list" in bad.output


def test_human_player_shows_an_invalid_actions_message(tmp_path):
    from rich.console import Console

    console = Console(record=True, width=120, file=open(os.devnull, "w"))  # noqa: SIM115
    player = HumanPlayer([3], 50, console, read_line=lambda prompt: "look")
    player.reset()
    obs = {"observation": "Nothing happens.", "task": "put a mug on the desk", "skills": ""}
    info = {
        "task_index": 0,
        "chain_length": 2,
        "turn": 4,
        "action_valid": False,
        "message": "'fly' is not an admissible command.",
    }
    assert player.act(obs, info) == "look"
    text = console.export_text()
    assert "Invalid action: 'fly' is not an admissible command." in text and "chain 3 · task 1/2 · turn 5/50" in text
