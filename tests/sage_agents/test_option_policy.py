"""A policy over whole options (``option_sampling``): what it samples, what it records, what the trainer trains.

Each option of a constrained choice is scored by its tokens' full-vocabulary log-likelihood and the policy is the
softmax of the scores over the choice. The references below score each option by its own uncached forward
(:func:`option_scores`), so they share no code with the tree-attention forward under test.
"""

import copy

import pytest
import torch

from sage_agents import decoding
from sage_agents.algos.grpo import LOSS_TYPES
from sage_agents.config import ConfigError, TrainConfig
from sage_agents.decoding import Choice, call_plan, choice_logprobs, trained_tokens
from sage_agents.policy import LLMPolicy, argument_options
from sage_agents.trainer import Trainer
from tests.sage_agents.fake_env import FAST_TRAIN, FakeChainEnv
from tests.sage_agents.test_policy import OBS, SKILLS_OBS
from tests.sage_agents.test_update_direction import COMPLETIONS, PROMPT, make_trainer

ADM = ["open box 2", "take coin 1", "examine box 2", "close box 3"]
"""Commands of one length in tokens: an untrained model's whole-option scores fall by ~log(vocabulary size) a
token, so among commands of different lengths the shortest would take nearly all the probability."""
INFO = {"admissible_commands": ADM}


@torch.no_grad()
def option_scores(model, prefix, options):
    """(K,) each option's summed full-vocabulary log-probs after ``prefix``, one uncached forward per option."""
    scores = []
    for tokens in options:
        logits = model(input_ids=torch.tensor([[*prefix, *tokens]])).logits[0, len(prefix) - 1 : -1]
        scores.append(torch.log_softmax(logits.float(), -1)[torch.arange(len(tokens)), tokens].sum())
    return torch.stack(scores)


def test_option_sampling_follows_the_softmax_over_whole_option_likelihoods(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True, option_sampling=True)
    torch.manual_seed(0)
    outs = policy.act_batch([OBS] * 400, [INFO] * 400, [[]] * 400)  # no skills: one choice among the commands
    eos = tok.eos_token_id
    log_pi = torch.log_softmax(option_scores(model, outs[0].prompt_ids, [[*policy.encode(a), eos] for a in ADM]), -1)
    assert {o.text for o in outs} == set(ADM)
    for action, expected in zip(ADM, log_pi.tolist(), strict=True):
        taken = [o for o in outs if o.text == action]
        p = float(torch.tensor(expected).exp())
        assert abs(len(taken) / len(outs) - p) < 4 * (p * (1 - p) / len(outs)) ** 0.5 + 1e-3, (action, p)
        for out in taken:  # log pi(option) at the option's first token, 0 at its others
            assert out.logprobs[0] == pytest.approx(expected, abs=1e-4) and not any(out.logprobs[1:])
            [choice] = out.choices
            assert choice.start == 0 and choice.options[choice.taken] == out.completion_ids


def test_option_sampling_implies_whole_option_greedy(tiny):
    model, tok = tiny
    eos = tok.eos_token_id
    sampler = LLMPolicy(model, tok, constrained=True, option_sampling=True)
    [out] = sampler.act_batch([OBS], [INFO], [[]], greedy=True)
    scores = option_scores(model, out.prompt_ids, [[*sampler.encode(a), eos] for a in ADM])
    assert out.text == ADM[int(scores.argmax())]
    greedy = LLMPolicy(model, tok, constrained=True, option_greedy=True)
    assert out.text == greedy.act_batch([OBS], [INFO], [[]], greedy=True)[0].text


@pytest.mark.parametrize("way", ["tree attention", "whole paths", "trie pieces"])
def test_the_trainers_choice_logprobs_are_the_sampled_ones(tiny, way, monkeypatch):
    """Turns of several choices (a call, then its two arguments) and prompts of different lengths, in one batch."""
    model, tok = tiny
    if way == "whole paths":  # as under an attention that takes no custom mask
        monkeypatch.setattr(decoding, "TREE_ATTENTION", ())
    if way == "trie pieces":  # each trie scored in pieces of at most 4 nodes, each after its own copy of the prefix
        monkeypatch.setattr(decoding, "MAX_TRIE_NODES", 4)
    policy = LLMPolicy(model, tok, constrained=True, option_sampling=True)
    torch.manual_seed(3)
    histories = [[], [("you see a very long list of things " * 3, "look")]] * 8
    outs = policy.act_batch([SKILLS_OBS] * 8 + [OBS] * 8, [INFO] * 16, histories)  # OBS: commands only
    assert {o.action.kind for o in outs} == {"command", "call"} and len({len(o.prompt_ids) for o in outs}) > 1
    with torch.no_grad():
        logp, mask, entropy = choice_logprobs(
            model, [o.prompt_ids for o in outs], [o.completion_ids for o in outs], [o.choices for o in outs],
            with_entropy=True,
        )  # fmt: skip
    values = argument_options(OBS["task"], OBS["observation"], ADM)
    for i, out in enumerate(outs):
        n = len(out.completion_ids)
        trained = trained_tokens(out.completion_ids, out.allowed, out.choices)
        assert mask[i, :n].tolist() == [float(t) for t in trained] and not mask[i, n:].any()
        torch.testing.assert_close(logp[i, :n], torch.tensor(out.logprobs), atol=1e-5, rtol=0)
        assert (entropy[i, :n] > 0).tolist() == trained
        if out.action.kind == "call":  # the call's opening, then one choice per argument
            assert [len(c.options) for c in out.choices if len(c.options) > 1] == [len(ADM) + 1, len(values)] + [
                len(values)
            ]
        for choice in out.choices:  # each choice against options scored one by one after its own prefix
            if len(choice.options) == 1:
                continue
            prefix = [*out.prompt_ids, *out.completion_ids[: choice.start]]
            expected = torch.log_softmax(option_scores(model, prefix, choice.options), -1)[choice.taken]
            assert float(logp[i, choice.start]) == pytest.approx(float(expected), abs=1e-4)


def test_choice_logprobs_gradient_is_the_same_by_tree_attention_whole_paths_and_trie_pieces(tiny, monkeypatch):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True, option_sampling=True)
    torch.manual_seed(5)
    outs = policy.act_batch([SKILLS_OBS] * 6, [INFO] * 6, [[]] * 3 + [[("x", "look")]] * 3)
    grads = {}
    whole = decoding.MAX_TRIE_NODES
    for way, tree, trie_nodes in [("tree", True, whole), ("paths", False, whole), ("pieces", True, 4)]:
        monkeypatch.setattr(decoding, "TREE_ATTENTION", ("sdpa", "eager") if tree else ())
        monkeypatch.setattr(decoding, "MAX_TRIE_NODES", trie_nodes)
        trained = copy.deepcopy(model).train()
        logp, _, _ = choice_logprobs(
            trained, [o.prompt_ids for o in outs], [o.completion_ids for o in outs], [o.choices for o in outs]
        )
        (logp * torch.arange(1.0, 1.0 + logp.shape[1])).sum().backward()  # a loss that weighs every choice
        grads[way] = torch.cat([p.grad.flatten() for p in trained.parameters()])
    torch.testing.assert_close(grads["tree"], grads["paths"], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(grads["tree"], grads["pieces"], atol=1e-5, rtol=1e-4)
    assert grads["tree"].abs().max() > 1e-3  # a gradient that could differ


def option_rows(trainer, advantages):
    """Trainer rows of one choice among COMPLETIONS after PROMPT, taking each in turn, sampling-time log-probs."""
    policy = trainer.policy
    prompt = policy.encode(PROMPT)
    options = [[*policy.encode(c), policy.eos_id] for c in COMPLETIONS]
    choices = [[Choice(0, options, k)] for k in range(len(options))]
    rows = [
        {"prompt_ids": prompt, "completion_ids": options[k], "choices": choices[k], "adv": float(a), "seq": (k, 0)}
        for k, a in enumerate(advantages)
    ]
    return rows, option_logpi(trainer, rows)


def option_logpi(trainer, rows):
    """(N,) each row's ``log pi(option taken)`` under the trainer's model (eval mode, no gradient)."""
    model = trainer.policy.model
    model.eval()
    with torch.no_grad():
        logp, _, _ = choice_logprobs(
            model, [r["prompt_ids"] for r in rows], [r["completion_ids"] for r in rows], [r["choices"] for r in rows]
        )
    return logp.sum(1)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_one_update_moves_each_options_probability_with_its_advantage(tiny, tmp_path, loss_type):
    advantages = (1.0, -1.0, 1.0, -1.0, 1.0, -1.0)
    trainer = make_trainer(tiny, tmp_path, loss_type=loss_type, option_sampling=True)
    rows, before = option_rows(trainer, advantages)
    for row, old in zip(rows, before.tolist(), strict=True):
        row["old_logp"] = [old] + [0.0] * (len(row["completion_ids"]) - 1)
    trainer.update(rows)
    change = option_logpi(trainer, rows) - before
    trainer.close()
    for text, delta, adv in zip(COMPLETIONS, change.tolist(), advantages, strict=True):
        assert delta * adv > 1e-3, f"{text!r} has advantage {adv} but its log pi moved by {delta:+.4f}"


class BoxesEnv(FakeChainEnv):
    """:class:`FakeChainEnv` without ``look``: its "go to" commands are of one length, so untrained sampling by whole
    options explores them (with ``look`` among them, ``look``, one token, would take nearly all the probability)."""

    def admissible(self) -> list[str]:
        return [c for c in super().admissible() if c != "look"]


@pytest.mark.parametrize("lora", [{}, {"lora_r": 4}], ids=["full", "lora"])
def test_a_trainer_step_samples_and_trains_whole_options(tiny, tmp_path, lora):
    model, tok = tiny
    fields = {**FAST_TRAIN, "output_dir": str(tmp_path / "run"), "option_sampling": True, "total_steps": 1, **lora}
    cfg = TrainConfig(**fields)
    trainer = Trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=lambda: BoxesEnv(easy=True))
    start = copy.deepcopy(trainer.policy.model)
    metrics = trainer.train_step()
    turns = [turn for ro in trainer.last_rollouts for turn in ro.turns]
    assert turns and all(turn.choices for turn in turns)
    rows, _ = trainer.build_rows(trainer.last_rollouts)
    logp, _, _ = choice_logprobs(
        start.eval(), [r["prompt_ids"] for r in rows], [r["completion_ids"] for r in rows],
        [r["choices"] for r in rows],
    )  # fmt: skip
    for i, row in enumerate(rows):  # the first epoch is on-policy: the recorded log-probs are the start model's
        torch.testing.assert_close(logp[i, : len(row["old_logp"])], torch.tensor(row["old_logp"]), atol=1e-5, rtol=0)
    assert metrics["losses/grad_norm"] > 0
    moved = zip(start.parameters(), trainer.policy.model.parameters(), strict=True)
    assert any(not torch.equal(a, b) for a, b in moved)
    trainer.close()


@pytest.mark.parametrize(
    "fields, name",
    [({"constrained": False}, "option_sampling"), ({"backend": "trl"}, "option_sampling")],
)
def test_option_sampling_needs_constrained_decoding_and_the_native_trainer(tmp_path, fields, name):
    with pytest.raises(ConfigError, match=name):
        TrainConfig(**{"output_dir": str(tmp_path), "constrained": True, "option_sampling": True, **fields})


def test_option_sampling_reaches_the_policy_only_when_on(tmp_path):
    assert "option_sampling" not in TrainConfig(output_dir=str(tmp_path)).policy_kwargs
    on = TrainConfig(output_dir=str(tmp_path), constrained=True, option_sampling=True).policy_kwargs
    assert on["option_sampling"] is True


def test_call_plan_choices_are_recorded_whole(tiny):
    """Forced texts are choices of one option: recorded, never trained."""
    model, tok = tiny
    encode = lambda text: tok(text, add_special_tokens=False).input_ids  # noqa: E731
    [out] = decoding.decode_options(
        model, [encode("look")], [call_plan([], [("call fetch(", [["coin 1"], ["box 2", "box 3"]])])], encode=encode,
        eos_id=tok.eos_token_id,
    )  # fmt: skip
    assert [len(c.options) for c in out.choices] == [1, 1, 2]  # the opening and the first argument are forced
    assert trained_tokens(out.completion_ids, out.allowed, out.choices).count(True) == 1
    assert sum(out.logprobs[: out.choices[2].start]) == 0.0
