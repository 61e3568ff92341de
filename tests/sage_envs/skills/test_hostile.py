"""The hostile corpus: every turn stops, invalid, with a message, within one per-turn budget, library unchanged."""

from __future__ import annotations

import time

import pytest

from sage_envs import SageChainEnv
from sage_envs.skills import Limits

from ..toy_domain import ToyDomain, ToyGame
from .hostile_corpus import HostileTurn, hostile_turns

SHELVES = tuple(f"shelf {i}" for i in range(60))


class ShelfGame(ToyGame):
    """The toy game with a 60-item collection, so that nested loops have something to multiply."""

    def entities(self):
        return {**super().entities(), "shelves": list(SHELVES)}


class ShelfDomain(ToyDomain):
    def load(self, task):
        return ShelfGame(task.extra["item"], task.extra["box"])


def library_state(env: SageChainEnv) -> list[tuple[str, int, str, int]]:
    """What a turn may not change: names, latest versions, sources and history lengths (uses may grow)."""
    return [(s.name, s.version, s.source, len(env.library.history(s.name))) for s in env.library]


@pytest.mark.parametrize("turn", hostile_turns("shelves"), ids=lambda turn: turn.name)
def test_hostile_turn_stops_within_one_budget(turn: HostileTurn) -> None:
    limits = Limits()
    env = SageChainEnv(ShelfDomain(), max_steps_per_task=100)
    env.reset(options={"chain": 0})
    for action in turn.setup:
        _, _, _, _, info = env.step(action)
        assert info["action_kind"] == "define" and info["action_valid"], info["message"]
    before = library_state(env)

    start = time.perf_counter()
    obs, reward, _, _, info = env.step(turn.attack)
    seconds = time.perf_counter() - start

    assert not info["action_valid"] and info["action_kind"] == "invalid"
    assert turn.stops_with in info["message"], info["message"]
    assert reward == 0.0 and info["skills_created"] == []
    assert 0 <= info["primitive_steps"] <= limits.max_primitive_steps_per_call
    # The trace is kept: every command that ran is listed, then the error.
    assert obs["observation"].count("> look\n") == info["primitive_steps"]
    assert obs["observation"].rstrip().endswith(info["message"])
    assert library_state(env) == before
    if turn.attack.startswith("skill "):  # a definition whose calls stopped is not stored
        assert "was not stored: a call failed" in obs["observation"]
    assert seconds < 1.0, f"{turn.name} took {seconds:.3f} s"  # generous here; benchmarks/hostile_turns.py: < 50 ms
