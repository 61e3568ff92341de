"""Add a plug-in agent: define a class with ``act``/``reset``, register it, and evaluate it like a built-in one.

    python examples/plugin_agent.py --num-chains 3

An agent is any object with ``act(observation, info) -> str`` (the action text for ``env.step``) and, if it keeps
state, ``reset(seed=None)`` (called at each chain start); optional attributes are read by the evaluator:
``model_id`` (the leaderboard's model), ``given`` (what it is handed, in words), ``tokens_generated`` (else its
actions' words are counted). See sage_agents/registry.py and docs/agents.md.

Agents are found through the entry-point group ``sage_agents.agents``. A package of yours declares its factory in
its own ``pyproject.toml`` and is then available to ``sage eval``, ``python -m leaderboard.evaluate`` and
``sage agents`` once installed (``pip install -e .``), with no change to this project::

    [project.entry-points."sage_agents.agents"]
    keyword = "plugin_agent:make_keyword_agent"   # factory(**kwargs) -> agent

Without installing anything, this script does in-process what ``pip install`` would: it writes that same
declaration as package metadata (a ``*.dist-info`` folder with ``entry_points.txt``) into a temporary folder on
``sys.path``, where ``importlib.metadata``, and so the registry, finds it.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from leaderboard.evaluate import EvalConfig, evaluate
from sage_agents.registry import ENTRY_POINT_GROUP, list_agents, make_agent


class KeywordAgent:
    """Picks the admissible command that shares the most words with the task; else goes somewhere not yet seen.

    A baseline a user might write in ten minutes: no model, no skills, no training.
    """

    model_id = "keyword-overlap-v1"
    """Recorded as the summary's ``model``."""
    given = "the admissible commands (ranked by words shared with the task)"
    """What the agent is handed, in words (the leaderboard's "given" column)."""

    def __init__(self, avoid_repeats: bool = True):
        """Create the agent; ``avoid_repeats`` never sends the same command twice in a task when it can help it."""
        self.avoid_repeats = avoid_repeats
        self.sent: set[str] = set()

    def reset(self, seed: int | None = None) -> None:
        """Start a chain (the evaluator calls this with a per-chain ``seed``; this agent is deterministic)."""
        self.sent = set()

    def act(self, observation: dict[str, str], info: dict[str, Any]) -> str:
        """The next command: most words in common with the task, ties broken towards unsent commands."""
        if info.get("new_task"):
            self.sent = set()
        task = set(re.findall(r"[a-z]+", observation["task"].lower()))
        commands = [c for c in info.get("admissible_commands") or ["look"] if c not in ("look", "inventory")]
        fresh = [c for c in commands if c not in self.sent] if self.avoid_repeats else commands
        best = max(fresh or commands or ["look"], key=lambda c: len(task & set(c.split())))
        self.sent.add(best)
        return best


def make_keyword_agent(avoid_repeats: bool = True) -> KeywordAgent:
    """The entry-point factory: the registry calls it with the ``--agent-kwargs`` of an evaluation."""
    return KeywordAgent(avoid_repeats=avoid_repeats)


def register_in_process(name: str, target: str) -> Path:
    """Declare ``name = target`` in the entry-point group as installed package metadata would, on ``sys.path``.

    ``target`` is ``module:factory``; the module must be importable (this script's folder is on ``sys.path``
    when it runs). Returns the folder put on ``sys.path``.
    """
    site = Path(tempfile.mkdtemp(prefix="plugin-agent-"))
    info = site / "sage_plugin_example-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sage-plugin-example\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{name} = {target}\n")
    sys.path.append(str(site))
    return site


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-chains", type=int, default=3)
    parser.add_argument("--split", default="valid_seen", choices=["train", "valid_seen", "valid_unseen"])
    parser.add_argument("--output", default=None, help="results folder (default: a fresh temporary one)")
    args = parser.parse_args()

    register_in_process("keyword", "plugin_agent:make_keyword_agent")
    print(f"registered agents: {', '.join(list_agents())}")
    agent = make_agent("keyword", avoid_repeats=True)  # what the evaluator does with the name
    print(f"make_agent('keyword') -> {type(agent).__name__} ({agent.model_id})")

    config = EvalConfig(
        agent="keyword", split=args.split, num_chains=args.num_chains, seeds=[0],
        env_kwargs={"chain_length": 2, "max_steps_per_task": 30, "skills": "none"},
        output=args.output or tempfile.mkdtemp(prefix="plugin_agent-"),
    )  # fmt: skip
    summary = evaluate(config)
    print(f"keyword on {summary['n_chains']} chains ({summary['n_tasks']} tasks) of {summary['split']}: "
          f"TGC {100 * summary['tgc']:.1f}%, SGC {100 * summary['sgc']:.1f}%, {summary['mean_steps']:.1f} turns "
          f"and {summary['mean_tokens']:.1f} {summary.get('token_unit', 'tokens')} per task; model "
          f"{summary['model']}")  # fmt: skip
    print(f"summary: {Path(config.output) / (config.run_name + '.json')}")


if __name__ == "__main__":
    main()
