"""The direction of one update: completions with positive advantage become more likely, negative ones less likely.

Every other trainer test would pass with the advantages' sign flipped (weights still change, losses are still
finite, gradient accumulation still matches one big batch). These tests run the trainer's own update
(:meth:`Trainer.update` on hand-made rows, and :meth:`Trainer.train_step` from rollouts to update) and measure
``log pi(completion | prompt)`` before and after.

The hand-made completions share no token with each other or with the prompt, and are 3 to 6 tokens long. With a
shared prefix the loss legitimately trades completions off against each other (a negative "go to box 3\nlook"
pulled a positive "go to box 1" down under dr_grpo); the tiny models tie their input and output embeddings, so a
token also in the prompt would change how the prompt is read; and under dr_grpo / dapo a 2-token completion
carries a twelfth of the batch's weight, so its own push lost to the others' for 1-3 of 100 model seeds. Without
these effects every test below held for each of 100 model seeds (hidden size 32), every move above 0.01 nats.
"""

import copy

import pytest
import torch

from sage_agents.algos.grpo import LOSS_TYPES
from sage_agents.config import TrainConfig
from sage_agents.policy import completion_logprobs
from sage_agents.trainer import Trainer
from tests.sage_agents.fake_env import FAST_TRAIN, FakeChainEnv

PROMPT = "Task: take the book 1 from the drawer\nObservation: You are in the middle of a room.\nAction:"
COMPLETIONS = (
    "examine sofa",
    "look at desk",
    "open fridge 2",
    "go to cabinet 4",
    "heat potato 7 with microwave",
    "clean mug 5",
)
ADVANTAGES = (1.0, -1.0, 1.0, -1.0, 1.0, -1.0)
LR = 1e-3
"""AdamW's first step moves every weight by about lr: the sequence log-probs then move by ~0.05-1 nats."""
MIN_CHANGE = 1e-3
"""A change of a sequence log-prob that counts as a move (float32 noise on these sums is ~1e-6)."""


def make_trainer(tiny, tmp_path, **overrides):
    model, tokenizer = tiny
    cfg = TrainConfig(**{**FAST_TRAIN, "output_dir": str(tmp_path / "run"), "lr": LR, **overrides})
    return Trainer(cfg, model=copy.deepcopy(model), tokenizer=tokenizer, env_fn=lambda: FakeChainEnv(easy=True))


def sequence_logprobs(model, prompt_ids, completions, pad_id, temperature=1.0):
    """(N,) ``log pi(completion | prompt)`` and (N, T) per-token log-probs, without gradients, in eval mode."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        token_logp, _, _ = completion_logprobs(
            model, [prompt_ids] * len(completions), completions, temperature=temperature, pad_id=pad_id
        )  # (N, T), zero on padding
    model.train(was_training)
    return token_logp.sum(1), token_logp


def one_update(tiny, tmp_path, advantages, **overrides):
    """One :meth:`Trainer.update` on rows of PROMPT + each of COMPLETIONS; return the (N,) log-prob changes.

    The rows are what :meth:`Trainer.build_rows` makes of a rollout: the sampling-time log-probs are the current
    policy's (the first PPO epoch is on-policy) and every row is its own trajectory.
    """
    trainer = make_trainer(tiny, tmp_path, **overrides)
    model, tokenizer, pad_id = trainer.policy.model, trainer.tokenizer, trainer.policy.pad_id
    prompt = trainer.policy.encode(PROMPT)
    completions = [trainer.policy.encode(c) + [tokenizer.eos_token_id] for c in COMPLETIONS]
    tokens = [set(prompt), *(set(c[:-1]) for c in completions)]
    assert all(not (a & b) for i, a in enumerate(tokens) for b in tokens[:i]), "a token is in two of these texts"
    assert tokenizer.unk_token_id not in set().union(*tokens), "every word must be in the tiny vocabulary"
    before, token_logp = sequence_logprobs(model, prompt, completions, pad_id, trainer.config.temperature)
    rows = [
        {
            "prompt_ids": prompt,
            "completion_ids": c,
            "old_logp": token_logp[i, : len(c)].tolist(),
            "adv": float(a),
            "seq": (i, 0),
        }
        for i, (c, a) in enumerate(zip(completions, advantages, strict=True))
    ]
    stats = trainer.update(rows)
    after, _ = sequence_logprobs(model, prompt, completions, pad_id, trainer.config.temperature)
    trainer.close()
    return after - before, stats


def assert_moves_with_advantage(change, advantages):
    for text, delta, adv in zip(COMPLETIONS, change.tolist(), advantages, strict=True):
        if adv > 0:
            assert delta > MIN_CHANGE, f"{text!r} has advantage {adv} but its log-prob moved by {delta:+.4f}"
        else:
            assert delta < -MIN_CHANGE, f"{text!r} has advantage {adv} but its log-prob moved by {delta:+.4f}"


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_one_update_raises_positive_and_lowers_negative_advantage_completions(tiny, tmp_path, loss_type):
    change, _ = one_update(tiny, tmp_path, ADVANTAGES, loss_type=loss_type)
    assert_moves_with_advantage(change, ADVANTAGES)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_flipping_the_advantages_sign_flips_every_completions_move(tiny, tmp_path, loss_type):
    # Every completion is tried with both signs from the same weights: the move follows the advantage, not
    # something about the completion itself (its length, its tokens' frequency).
    flipped = tuple(-a for a in ADVANTAGES)
    change, _ = one_update(tiny, tmp_path, ADVANTAGES, loss_type=loss_type)
    change_flipped, _ = one_update(tiny, tmp_path, flipped, loss_type=loss_type)
    assert_moves_with_advantage(change_flipped, flipped)
    assert torch.all(change * change_flipped < 0), (change, change_flipped)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_clipped_epochs_with_kl_keep_the_direction(tiny, tmp_path, loss_type):
    # After the first (on-policy) epoch the ratio leaves 1: later epochs take the clipped branch and the KL to the
    # reference (the initial weights) pulls back; neither may turn a completion against its advantage.
    change, stats = one_update(
        tiny, tmp_path, ADVANTAGES, loss_type=loss_type, ppo_epochs=3, beta=0.1, eps_low=0.05, eps_high=0.05
    )
    assert stats["losses/clip_ratio"] > 0 and stats["losses/kl"] > 0, stats  # both terms were really exercised
    assert_moves_with_advantage(change, ADVANTAGES)


# ---------------------------------------------------------------------------------------- the whole trainer
REWARDED_LETTERS = frozenset("abcdefghijklm")


def rewarded(action: str) -> bool:
    """The fixed rule of :class:`OneTokenEnv`: an action whose first letter is a-m completes the task."""
    return action[:1] in REWARDED_LETTERS


class OneTokenEnv(FakeChainEnv):
    """One chain of one task with one turn; reward 1 when the action is :func:`rewarded`, else 0.

    An untrained tiny model generating one token picks a rewarded word about as often as not, so a group of
    rollouts holds both outcomes without any training.
    """

    def __init__(self):
        super().__init__(chain_length=1, max_steps_per_task=1, num_chains=1)

    def _command(self, cmd: str) -> tuple[str, bool]:
        return "Nothing happens.", rewarded(cmd)


@pytest.mark.parametrize("algo", ["grpo", "sage"])
def test_one_trainer_step_makes_the_rewarded_actions_more_likely(tiny, tmp_path, algo):
    """Rollout, rewards, advantages and update as in training; the expectation comes from the env's reward alone.

    Rewards are the outcome (grpo) or skill-integrated (sage, no skills here) ones; the test's expectation uses
    none of the trainer's advantage code. With one-token completions every loss type weighs every row alike, so
    loss types are the hand-made tests' business.

    The check is on the group's means: the rewarded words gained, the others lost. Word by word it does not hold
    reliably: eight words sampled from an 8k vocabulary have random output embeddings, the shared last hidden
    state moves toward the rewarded ones, and a word whose embedding overlaps theirs can rise though unrewarded
    (for 3 to 17 of 100 seeds, with SGD or AdamW, at hidden sizes 32 to 256). The means moved the right way by
    more than 0.01 nats for each of 100 seeds at hidden sizes 32 and 64.
    """
    model, tokenizer = tiny
    cfg = TrainConfig(
        **{
            **FAST_TRAIN,
            "output_dir": str(tmp_path / "run"),
            "algo": algo,
            "lr": LR,
            "group_size": 8,
            "constrained": False,  # free generation: the env's reward sees exactly the sampled token
            "max_new_tokens": 1,
            "no_action_penalty": None,  # rewards stay the env's 0 / 1, which this test compares against
            "total_steps": 1,
        }
    )
    trainer = Trainer(cfg, model=copy.deepcopy(model), tokenizer=tokenizer, env_fn=OneTokenEnv)
    start = copy.deepcopy(trainer.policy.model)
    trainer.train_step()
    turns = [ro.turns[0] for ro in trainer.last_rollouts]
    prompt = turns[0].prompt_ids
    assert all(t.prompt_ids == prompt for t in turns)  # one group: every rollout saw the same prompt
    wins = [t.reward == 1.0 for t in turns]
    assert any(wins) and not all(wins), f"the group needs both outcomes to carry a signal, got {wins}"
    completions = [t.completion_ids for t in turns]
    before, _ = sequence_logprobs(start, prompt, completions, trainer.policy.pad_id)
    after, _ = sequence_logprobs(trainer.policy.model, prompt, completions, trainer.policy.pad_id)
    change = after - before  # (G,)
    won = torch.tensor(wins)
    gained, lost = change[won].mean(), change[~won].mean()
    assert gained > MIN_CHANGE and lost < -MIN_CHANGE, (
        float(gained),
        float(lost),
        list(zip(wins, change.tolist(), strict=True)),
    )
    trainer.close()
