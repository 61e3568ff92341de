"""The domain interface: lost tasks and scores, declared splits, one admissible read per state, domain_class."""

from __future__ import annotations

import gymnasium as gym
import pytest

import sage_envs
from sage_envs import SageChainEnv, StepResult
from sage_envs.error import InvalidConfigError, NoDomainError

from .toy_domain import RiskyToyDomain, ToyChainEnv, ToyDomain, ToyGame

BIN_ON_LOSS = """skill risky(item):
    smash bin
    go to box 1"""


def test_a_lost_task_ends_failed_and_the_chain_moves_on_with_its_score():
    env = SageChainEnv(RiskyToyDomain(), split="dev", chain_length=3)
    _, info = env.reset(options={"chain": 0})  # household 0: the key in box 1, the coin in box 2, the pen in box 3
    assert (info["task_id"], info["task_score"], info["task_lost"]) == ("dev/h0/key", 0.0, False)
    env.step("go to box 1")
    _, _, _, _, info = env.step("take key from box 1")
    assert (info["task_score"], info["task_lost"], info["new_task"]) == (50.0, False, False)

    _, reward, terminated, _, info = env.step("smash bin")
    assert (reward, terminated, info["task_success"], info["task_lost"]) == (0.0, False, False, True)
    assert info["new_task"] and info["task_index"] == 0 and info["chain_successes"] == [False]
    assert info["task_score"] == 0.0  # the lost task's final score, reported on the step that ended it
    assert info["previous_observation"] == "The bin smashes. You lost."

    _, _, _, _, info = env.step("look")  # the next task of the chain, unscored so far
    assert (info["task_index"], info["task_id"], info["task_score"], info["task_lost"]) == (
        1,
        "dev/h0/coin",
        0.0,
        False,
    )


def test_a_won_task_reports_its_full_score_and_a_loss_inside_a_skill_stops_the_program():
    env = SageChainEnv(RiskyToyDomain(), split="train", chain_length=2)
    env.reset(options={"chain": 0})
    for command in ("go to box 1", "take key from box 1", "put key in bin"):
        _, reward, _, _, info = env.step(command)
    assert (reward, info["task_success"], info["task_score"], info["task_lost"]) == (1.0, True, 100.0, False)
    assert info["task_index"] == 0 and info["new_task"]

    _, reward, terminated, _, info = env.step(BIN_ON_LOSS + "\ncall risky(coin)")
    assert info["action_kind"] == "define" and info["task_lost"] and not info["task_success"]
    assert info["primitive_steps"] == 1  # the loss stopped the program: "go to box 1" never ran
    assert terminated and reward == 0.0 and info["chain_successes"] == [True, False]


def test_an_unscored_domain_has_no_task_score_key():
    _, info = SageChainEnv(ToyDomain()).reset(options={"chain": 0})
    assert "task_score" not in info and info["task_lost"] is False


def test_step_result_is_won_or_lost_not_both():
    assert StepResult("x", won=False, lost=True).done and StepResult("x", won=True).done
    assert not StepResult("x", won=False).done
    with pytest.raises(ValueError, match="won or lost, not both"):
        StepResult("x", won=True, lost=True)


def test_split_is_checked_against_the_domains_declared_splits():
    with pytest.raises(
        InvalidConfigError, match=r"split='tset' is not a split of domain 'risky-toy'.*Did you mean 'test'"
    ):
        SageChainEnv(RiskyToyDomain(), split="tset")
    with pytest.raises(InvalidConfigError, match=r"\('train', 'dev', 'test'\)"):
        SageChainEnv(RiskyToyDomain(), split="valid_seen")  # ALFWorld's name, not this domain's
    assert SageChainEnv(RiskyToyDomain(), split="test").split == "test"
    assert SageChainEnv(ToyDomain(), split="valid_unseen").split == "valid_unseen"  # the default splits
    with pytest.raises(InvalidConfigError, match="is not one of"):
        sage_envs.domain_class("SageChain-ALFWorld-v0")().tasks("dev")


class CountingGame(ToyGame):
    """The toy game counting the env's admissible-list reads (what a Java-bridged engine pays per call)."""

    reads = 0

    def admissible_commands(self) -> list[str]:
        CountingGame.reads += 1
        return super().admissible_commands()

    def step(self, command: str) -> StepResult:
        reads = CountingGame.reads
        result = super().step(command)
        CountingGame.reads = reads  # the toy game checks a command against its own list: not a read by the env
        return result


class CountingDomain(ToyDomain):
    def load(self, task):
        return CountingGame(task.extra["item"], task.extra["box"])


def test_the_admissible_list_is_read_at_most_once_per_step():
    env = SageChainEnv(CountingDomain(), chain_length=2, max_steps_per_task=6, skills="program")
    CountingGame.reads = 0
    env.reset(options={"chain": 0})  # household 0: the key in box 1, then the coin in box 2
    assert CountingGame.reads == 1  # the opening state, for info
    tour = "skill tour():\n    go to box 2\n    go to box 3\ncall tour()"
    # (action, reads): one read of the state after a step that ran the engine, and none for one that did not
    # (the state, and so its cached list, is unchanged); the next command is checked against that same list.
    plan = [("go to box 1", 1), ("not a command", 1), ("call nothing()", 0), (tour, 1), ("go to box 1", 1)]
    plan += [("take key from box 1", 1), ("put key in bin", 1), ("go to box 2", 1)]
    for action, reads in plan:
        before = CountingGame.reads
        _, _, _, _, info = env.step(action)
        assert CountingGame.reads - before == reads, action
    assert info["task_index"] == 1 and CountingGame.reads == 1 + len(plan) - 1


def test_domain_class_resolves_a_registered_env_and_says_why_not():
    assert sage_envs.domain_class("SageChain-ALFWorld-v0").splits == ("train", "valid_seen", "valid_unseen")
    with pytest.raises(InvalidConfigError, match="Did you mean 'SageChain-ALFWorld-v0'"):
        sage_envs.domain_class("SageChain-ALFWorld-v9")
    gym.register("SageChain-ToyClass-v0", entry_point=ToyChainEnv)
    gym.register("SageChain-ToyLambda-v0", entry_point=lambda **kwargs: SageChainEnv(ToyDomain(), **kwargs))
    try:
        assert sage_envs.domain_class("SageChain-ToyClass-v0") is ToyDomain
        with pytest.raises(NoDomainError, match="names no domain class"):
            sage_envs.domain_class("SageChain-ToyLambda-v0")
    finally:
        del gym.registry["SageChain-ToyClass-v0"], gym.registry["SageChain-ToyLambda-v0"]


def test_the_evaluation_split_is_the_last_split_unless_a_domain_names_one():
    assert ToyDomain.eval_split == "valid_unseen" == sage_envs.domain_class("SageChain-ALFWorld-v0").eval_split
    assert RiskyToyDomain.eval_split == "test"  # its own splits, not the eval split it inherits from ToyDomain

    class DevEvaluated(RiskyToyDomain):
        eval_split = "dev"

    class Renamed(DevEvaluated):
        splits = ("fit", "holdout")

    assert DevEvaluated.eval_split == "dev" and Renamed.eval_split == "holdout"
    with pytest.raises(InvalidConfigError, match=r"Bad.eval_split='valid' is not one of its splits \('train', 'dev'"):

        class Bad(RiskyToyDomain):
            eval_split = "valid"
