import copy
import dataclasses

import pytest
import torch

from sage_agents.policy import LLMPolicy, completion_logprobs
from sage_agents.rollout import rollout_chains, rollout_stats
from sage_agents.sft import (
    PlanExpert,
    collect_expert_pairs,
    full_logits_fit,
    guidance_skill,
    reweight_pairs,
    sft_warm_start,
    shown_guidance,
    unscored_line_labels,
)
from sage_envs.domain import Advice
from tests.sage_agents.fake_env import FETCH_SKILL, FakeChainEnv, SkillExpert


def nll(policy, pairs):
    prompts = [policy.encode(p["prompt"]) for p in pairs]
    completions = [policy.encode(p["completion"]) + [policy.eos_id] for p in pairs]
    with torch.no_grad():
        logp, mask, _ = completion_logprobs(policy.model, prompts, completions, pad_id=policy.pad_id)
    return float(-(logp * mask).sum() / mask.sum())


def test_collect_expert_pairs_uses_the_policy_prompt(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, history_turns=2)
    pairs = collect_expert_pairs(FakeChainEnv(expert_plan=True), PlanExpert(), policy, chains=[0, 1])
    assert len(pairs) == 8  # 2 chains x 2 tasks x (go to, take)
    assert pairs[0]["completion"].startswith("go to box") and pairs[1]["completion"].startswith("take ")
    assert pairs[0]["prompt"].startswith("Task: ") and pairs[0]["prompt"].endswith("Action:\n")
    assert "History:" in pairs[1]["prompt"] and "History:" not in pairs[2]["prompt"]  # new task, new history
    skills = collect_expert_pairs(FakeChainEnv(expert_plan=True), SkillExpert(), policy, chains=[0])
    assert skills[0]["completion"].startswith("skill fetch(") and skills[1]["completion"].startswith("call ")
    failing = collect_expert_pairs(FakeChainEnv(), PlanExpert(), policy, chains=[0])  # no plan: "look"
    assert failing == []  # only successful tasks are kept by default


def test_sft_warm_start_lowers_expert_nll(tiny_copy, tmp_path, capsys):
    model, tok = tiny_copy
    policy = LLMPolicy(model, tok)
    pairs = collect_expert_pairs(FakeChainEnv(expert_plan=True, num_chains=4), SkillExpert(), policy)
    before = nll(policy, pairs)
    metrics = sft_warm_start(
        model, tok, pairs, output_dir=str(tmp_path), max_steps=6, lr=3e-3, batch_size=4, logging_steps=2
    )
    assert metrics["train_loss"] > 0 and nll(policy, pairs) < before - 0.5
    assert tok.padding_side == "left"  # restored for generation
    assert "'loss'" not in capsys.readouterr().out  # a progress bar, not a printed log line every 2 steps


def test_unscored_lines_are_read_but_left_out_of_the_sft_loss(tiny_copy, tmp_path):
    model, tok = tiny_copy
    pairs = [
        {"prompt": f"Task: fetch coin {i}\nNot tried yet: go to box 1, go to box 2\nObservation: hi\nAction:\n",
         "completion": f"take coin {i} from box 1"}
        for i in range(4)
    ]  # fmt: skip
    labelled = unscored_line_labels(pairs, tok, ["Not tried yet:"])
    for pair, row in zip(pairs, labelled, strict=True):
        text = pair["prompt"] + pair["completion"] + tok.eos_token
        assert row["input_ids"] == tok(text).input_ids  # the ids TRL would make of the pair
        line = tok("Not tried yet: go to box 1, go to box 2").input_ids
        start = len(tok(pair["prompt"].split("\n")[0] + "\n").input_ids)  # the task line and its newline
        span = range(start, start + len(line))
        assert row["input_ids"][start : start + len(line)] == line
        assert row["labels"] == [-100 if i in span else t for i, t in enumerate(row["input_ids"])]  # that line only
    # TRL trains on those labels as they are: the first step's loss is the mean NLL of the labelled tokens only
    with torch.no_grad():
        nlls = []
        for row in labelled:
            logits = model(torch.tensor([row["input_ids"]])).logits[0, :-1]
            targets = torch.tensor(row["labels"][1:])
            nlls.append(torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100, reduction="none"))
        expected = torch.cat(nlls)[torch.tensor([t for row in labelled for t in row["labels"][1:]]) != -100].mean()
    metrics = sft_warm_start(model, tok, labelled, output_dir=str(tmp_path), max_steps=1, lr=1e-9, batch_size=4)
    assert metrics["train_loss"] == pytest.approx(expected.item(), rel=1e-4)


def test_an_unscored_header_takes_its_block_of_items_with_it(tiny_copy):
    """``Guidance:`` leaves out the guidance skills the env lists under it, not the program skills before it."""
    _, tok = tiny_copy
    skill = guidance_skill(Advice("find_coin", "go to box 1", "the coin may be in the box"), turn=0, previous=None)
    skills = shown_guidance(skill, turn=0, previous=None, skills="Program skills (call NAME(args)):\n- fetch(obj)")
    prompt = f"Task: fetch coin 1\nSkills:\n{skills}\nObservation: hi\nAction:\n"
    guidance = skills[skills.index("Guidance:") :]
    assert guidance.count("\n") >= 3  # a header, its skill's item line and indented lines below
    [row] = unscored_line_labels([{"prompt": prompt, "completion": "go to box 1"}], tok, ["Guidance:"])
    # scored: every token but those of the guidance lines (their newlines stay, as in the other tests' layout)
    blanked = prompt.replace(guidance, "\n" * guidance.count("\n"))
    assert [t for t in row["labels"] if t != -100] == tok(blanked + "go to box 1" + tok.eos_token).input_ids
    assert "(obj)" in tok.decode([t for t in row["labels"] if t != -100])  # the program skill's line is scored


def test_sft_prints_progress_lines_when_stdout_is_not_a_terminal(tiny_copy, tmp_path, capsys, monkeypatch):
    """Piped to a log (capsys is not a tty) the SFT stage prints plain lines: step, loss once logged, elapsed."""
    import re

    import sage_agents.progress

    model, tok = tiny_copy
    pairs = collect_expert_pairs(FakeChainEnv(expert_plan=True, num_chains=2), SkillExpert(), LLMPolicy(model, tok))
    monkeypatch.setattr(sage_agents.progress, "PLAIN_EVERY_SECONDS", 0.0)  # a line at every step
    sft_warm_start(model, tok, pairs, output_dir=str(tmp_path), max_steps=4, lr=1e-3, batch_size=4, logging_steps=2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sft: ")]
    steps = [int(re.match(r"sft: (\d+)/4", line).group(1)) for line in lines]
    assert steps[0] == 0 and steps[-1] == 4 and set(range(5)) <= set(steps)  # the start, every step, the end
    assert all(line.endswith("s elapsed") for line in lines)
    assert re.search(r"^sft: 4/4, loss \d+\.\d{3}, \d+s elapsed$", "\n".join(lines), re.MULTILINE)


def test_the_progress_bar_follows_the_trainer_steps_and_loss():
    from types import SimpleNamespace

    from sage_agents.sft import RichProgress

    bar, state = RichProgress(), SimpleNamespace(max_steps=4, global_step=1)
    bar.on_train_begin(None, state, None)
    state.global_step = 3
    bar.on_step_end(None, state, None)
    bar.on_log(None, state, None, logs={"loss": 0.5})
    task = bar.bar.tasks[0]
    assert (task.total, task.completed, task.fields["info"]) == (4, 3, "loss 0.500")
    bar.on_train_end(None, state, None)


@pytest.mark.slow
def test_sft_then_constrained_policy_defines_and_reuses_skills(tiny_copy, tmp_path):
    model, tok = tiny_copy
    policy = LLMPolicy(model, tok, constrained=True, skill_templates=[FETCH_SKILL])
    train = collect_expert_pairs(FakeChainEnv(expert_plan=True, num_chains=6), SkillExpert(), policy)
    sft_warm_start(model, tok, train, output_dir=str(tmp_path), epochs=40, lr=3e-3, batch_size=4)
    model.eval()
    envs = [FakeChainEnv(num_chains=6) for _ in range(6)]
    stats = rollout_stats(rollout_chains(envs, policy, list(range(6)), [0] * 6, greedy=True))
    # the box is not observable before acting, so success is partial; the skill behaviour is learned
    assert stats["env/task_success"] >= 0.5 and stats["env/skills_created"] >= 1.0
    assert stats["env/skill_reuse_rate"] >= 0.8


@pytest.mark.parametrize("completion_only", [True, False])
def test_sft_on_full_logits_trains_the_model_trl_fused_head_trains(tiny, tmp_path, completion_only):
    """The same steps with TRL's fused LM head and with the model's full logits give the same loss and weights."""
    model, tok = tiny
    pairs = collect_expert_pairs(FakeChainEnv(expert_plan=True, num_chains=2), SkillExpert(), LLMPolicy(model, tok))
    trained, losses = [], []
    for full_logits in (False, True):
        trained.append(copy.deepcopy(model))
        metrics = sft_warm_start(trained[-1], tok, pairs, output_dir=str(tmp_path), max_steps=3, lr=1e-3, batch_size=4,
                                 completion_only=completion_only, full_logits=full_logits, progress=False)  # fmt: skip
        losses.append(metrics["train_loss"])
    fused, full = (list(m.parameters()) for m in trained)
    assert max((a - b).abs().max() for a, b in zip(fused, model.parameters(), strict=True)) > 1e-3  # it trained
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(fused, full, strict=True))


def test_full_logits_are_chosen_on_a_cpu_for_small_logits_only(monkeypatch):
    assert full_logits_fit(16, 1024, 827)  # the demo's tiny model: 54 MB of logits per batch at most
    assert not full_logits_fit(16, 1024, 151_936)  # a Qwen vocabulary: 10 GB
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert not full_logits_fit(16, 1024, 827)  # on a GPU TRL's fused head


def test_bf16_sft_does_not_leak_autocast_into_the_rl_trainer(tiny_copy, tmp_path):
    from accelerate.state import AcceleratorState

    model, tok = tiny_copy
    pairs = collect_expert_pairs(FakeChainEnv(expert_plan=True), PlanExpert(), LLMPolicy(model, tok), chains=[0])
    sft_warm_start(model, tok, pairs, output_dir=str(tmp_path), max_steps=1, batch_size=2, bf16=True)
    assert not AcceleratorState._shared_state or AcceleratorState().mixed_precision == "no"


def test_reweight_pairs_repeats_and_thins_by_action_verb():
    pairs = [{"prompt": f"p{i}", "completion": c} for i, c in enumerate(["take a", "go to b", "open c", ""] * 500)]
    out = reweight_pairs(pairs, {"take": 2.0, "go": 0.3, "open": 0.0}, seed=1)
    verbs = [p["completion"].split(maxsplit=1)[0] if p["completion"] else "" for p in out]
    assert verbs.count("take") == 1000  # every take pair exactly twice
    assert verbs.count("open") == 0
    assert verbs.count("") == 500  # unlisted words keep weight 1
    assert 100 < verbs.count("go") < 200  # 30% of 500 in expectation (150), binomial sd ~10
    assert reweight_pairs(pairs, {"go": 0.3}, seed=1) == reweight_pairs(pairs, {"go": 0.3}, seed=1)
    with pytest.raises(ValueError, match=">= 0"):
        reweight_pairs(pairs, {"go": -1.0})


# ---------------------------------------------------------------------------------------------- guidance in SFT data
@pytest.fixture(scope="module")
def alfworld_turns():
    """The ALFWorld expert's turns on 4 generated train chains (plain commands)."""
    import gymnasium as gym

    import sage_envs  # noqa: F401
    from sage_agents.sft import collect_expert_turns
    from sage_envs.domains.alfworld import AlfworldExpert

    env = gym.make("SageChain-ALFWorld-v0", split="train", skills="none", chain_length=2, max_steps_per_task=30)
    turns = collect_expert_turns(env, AlfworldExpert(use_skills=False), range(4))
    env.close()
    return turns


def guided(turns, **mix):
    import copy

    from sage_agents.sft import GuidanceMix, add_guidance
    from sage_envs.domains.alfworld.expert_guidance import advise

    turns = copy.deepcopy(turns)
    add_guidance(turns, GuidanceMix(**mix), advise)
    return turns


def shown_skills(turn):
    """The guidance skills an observation shows: ``[(name, text)]`` parsed back from its rendered section."""
    text = turn.obs["skills"]
    if not text:
        return []
    head, *lines = text.split("\n")
    assert head == "Guidance:"
    name, first = lines[0].removeprefix("- ").split(": ", 1)
    return [(name, "\n".join([first, *(line.removeprefix("  ") for line in lines[1:])]))]


def test_relevant_guidance_fires_on_the_turn_and_names_the_experts_action(alfworld_turns):
    from sage_agents.reskill.assertions import action_key
    from sage_agents.sft import guidance_skill
    from sage_envs.domains.alfworld.expert_guidance import advise

    turns = guided(alfworld_turns, relevant=1.0, irrelevant=0.0, own_example=1.0)
    advised = [t for t in turns if advise(t.obs["task"], t.earlier, t.action) is not None]
    assert len(advised) >= 0.9 * len(turns) and len(turns) > 40  # the expert's commands are nearly all advised
    for turn in advised:
        ((name, text),) = shown_skills(turn)
        assert f"Next, do '{action_key(turn.action)}', e.g. {turn.action}: " in text
        previous = turn.earlier[-1] if turn.earlier else None
        if previous is None:
            assert text.startswith("## When to Use\nAt the start of a task.")
        else:
            assert text.startswith(f"## When to Use\nRight after you '{action_key(previous)}'.")
        # the skill as the env would hold it fires on this turn (and its trigger is the previous action's verb)
        skill = guidance_skill(advise(turn.obs["task"], turn.earlier, turn.action), len(turn.earlier), previous)
        assert skill.name == name and skill.triggered(len(turn.earlier), previous)
    assert {t.obs["skills"] for t in turns if t not in advised} <= {""}  # a turn without advice shows none


def test_relevant_guidance_takes_its_example_from_another_task_with_the_same_verb(alfworld_turns):
    from sage_agents.reskill.assertions import action_key
    from sage_envs.domains.alfworld.expert_guidance import advise

    turns = guided(alfworld_turns, relevant=1.0, irrelevant=0.0, own_example=0.0)  # every example from elsewhere
    commands = {(t.obs["task"], a.command) for t in alfworld_turns if (a := advise(t.obs["task"], t.earlier, t.action))}
    foreign = 0
    for turn in turns:
        for _, text in shown_skills(turn):
            previous = turn.earlier[-1] if turn.earlier else None
            assert text.startswith(f"## When to Use\nRight after you '{action_key(previous)}'." if previous else
                                   "## When to Use\nAt the start of a task.")  # fmt: skip
            named = text.split("e.g. ", 1)[1].split(": ", 1)[0]
            verb = action_key(turn.action)
            assert f"Next, do '{verb}', e.g. " in text and action_key(named) == verb
            foreign += named != turn.action
            # made for a turn of another task, or the turn's own advice when no other task's has the verb
            assert {task for task, command in commands if command == named} - {turn.obs["task"]} or named == turn.action
    assert foreign >= 0.5 * len(turns)  # mostly another game's objects (households repeat some commands)
    with pytest.raises(ValueError, match="own_example"):
        guided(alfworld_turns, own_example=1.5)


def test_irrelevant_guidance_is_for_another_task_and_another_verb(alfworld_turns):
    from sage_agents.reskill.assertions import action_key
    from sage_envs.domains.alfworld.expert_guidance import advise

    turns = guided(alfworld_turns, relevant=0.0, irrelevant=1.0)
    commands = {(t.obs["task"], a.command) for t in alfworld_turns if (a := advise(t.obs["task"], t.earlier, t.action))}
    shown = 0
    for turn in turns:
        for _, text in shown_skills(turn):
            shown += 1
            named = text.split("e.g. ", 1)[1].split(": ", 1)[0]
            assert action_key(named) != action_key(turn.action) and named != turn.action
            sources = {task for task, command in commands if command == named}
            assert sources - {turn.obs["task"]}  # made for a turn of another task (households repeat commands)
    assert shown >= 0.9 * len(turns)


def test_guidance_shares_are_honoured_and_deterministic_by_seed(alfworld_turns):
    from sage_agents.reskill.assertions import action_key
    from sage_agents.sft import GuidanceMix

    def counts(turns):
        named = [f"Next, do '{action_key(t.action)}', e.g. " in t.obs["skills"] for t in turns]  # the turn's verb
        shown = [bool(t.obs["skills"]) for t in turns]
        return sum(named), sum(shown) - sum(named), len(turns) - sum(shown)

    n = len(alfworld_turns)
    assert counts(guided(alfworld_turns, relevant=0.0, irrelevant=0.0)) == (0, 0, n)
    big = [dataclasses.replace(t) for t in alfworld_turns for _ in range(8)]  # enough draws for the shares
    relevant, irrelevant, none = counts(guided(big, relevant=0.5, irrelevant=0.3, seed=1))
    sd = (len(big) * 0.25) ** 0.5
    assert abs(relevant - 0.5 * len(big)) < 4 * sd and abs(irrelevant - 0.3 * len(big)) < 4 * sd + 0.05 * len(big)
    assert none >= 0.2 * len(big) - 4 * sd
    same = [t.obs["skills"] for t in guided(alfworld_turns, seed=3)]
    assert same == [t.obs["skills"] for t in guided(alfworld_turns, seed=3)]
    assert same != [t.obs["skills"] for t in guided(alfworld_turns, seed=4)]
    with pytest.raises(ValueError, match="sum of at most 1"):
        GuidanceMix(relevant=0.8, irrelevant=0.3)


def test_collect_expert_pairs_shows_guidance_in_the_policy_prompt(tiny, alfworld_turns):
    import gymnasium as gym

    from sage_agents.sft import GuidanceMix, guidance_skill, shown_guidance
    from sage_envs.domains.alfworld import AlfworldExpert
    from sage_envs.domains.alfworld.expert_guidance import Advice, advise

    model, tok = tiny
    policy = LLMPolicy(model, tok, history_turns=1, show_admissible=False)
    env = gym.make("SageChain-ALFWorld-v0", split="train", skills="none", chain_length=2, max_steps_per_task=30)
    expert = AlfworldExpert(use_skills=False)
    pairs = collect_expert_pairs(env, expert, policy, range(4), guidance=GuidanceMix(relevant=1.0, irrelevant=0.0),
                                 advise=advise)  # fmt: skip
    plain = collect_expert_pairs(env, expert, policy, range(4))
    assert [p["completion"] for p in pairs] == [t.action for t in alfworld_turns] == [p["completion"] for p in plain]
    first = pairs[0]["prompt"]
    assert (
        first.startswith("Task: ") and "\nSkills:\nGuidance:\n- find_" in first and "Skills:" not in plain[0]["prompt"]
    )
    with pytest.raises(ValueError, match="together"):
        collect_expert_pairs(env, expert, policy, range(1), guidance=GuidanceMix())
    env.close()
    # a skill made for one turn is not shown on another (its trigger does not fire there)
    skill = guidance_skill(Advice("take_egg", "take egg 1 from fridge 1", "the task needs the egg"), 3, "open fridge 1")
    assert "Guidance:\n- take_egg:" in shown_guidance(skill, 3, "open fridge 1")
    with pytest.raises(ValueError, match="does not fire"):
        shown_guidance(skill, 4, "go to fridge 1")


def test_followed_guidance_names_the_perturbed_command_and_makes_it_a_pair(tiny):
    import gymnasium as gym

    import sage_envs  # noqa: F401
    from sage_agents.policy import LLMPolicy
    from sage_agents.reskill.assertions import action_key
    from sage_agents.reskill.creator import advised_key
    from sage_agents.sft import GuidanceMix, Perturbation, collect_expert_pairs
    from sage_envs.domains.alfworld import AlfworldExpert
    from sage_envs.domains.alfworld.expert_guidance import advise

    model, tok = tiny
    policy = LLMPolicy(model, tok, history_turns=1, show_admissible=False)
    env = gym.make("SageChain-ALFWorld-v0", split="train", skills="none", chain_length=2, max_steps_per_task=30)
    noise = Perturbation(rate=0.3, seed=2)

    def pairs(**mix):
        guidance = GuidanceMix(relevant=0.0, irrelevant=0.0, **mix)
        return collect_expert_pairs(env, AlfworldExpert(use_skills=False), policy, range(6), guidance=guidance,
                                    advise=advise, perturbation=noise)  # fmt: skip

    plain, followed, half = pairs(), pairs(followed=1.0), pairs(followed=0.5)
    guided = [p for p in followed if "Guidance:" in p["prompt"]]
    assert all("Guidance:" not in p["prompt"] for p in plain) and len(guided) >= 5
    # each perturbed turn is now a pair: the command sent is the completion, the guidance names it and its verb
    for pair in guided:
        command = pair["completion"]
        assert f"e.g. {command}." in pair["prompt"] and advised_key(pair["prompt"]) == action_key(command)
    assert len(followed) == len(plain) + len(guided)  # the expert's own pairs are unchanged in number
    assert len(plain) < len(half) < len(followed)
    with pytest.raises(ValueError, match="followed"):
        GuidanceMix(followed=1.5)
    env.close()


# ---------------------------------------------------------------------------------------------- perturbed expert play
def test_perturbed_turns_are_history_not_pairs_and_the_expert_recovers():
    import random

    import gymnasium as gym

    import sage_envs  # noqa: F401
    from sage_agents.sft import Perturbation, collect_expert_turns
    from sage_envs.domains.alfworld import AlfworldExpert

    class Steps(gym.Wrapper):
        taken = 0

        def step(self, action):
            Steps.taken += 1
            return self.env.step(action)

    env = Steps(gym.make("SageChain-ALFWorld-v0", split="train", skills="program", max_steps_per_task=30))
    expert, sent = AlfworldExpert(vary_definitions=0), []
    override = expert.override
    expert.override = lambda action: (sent.append(action), override(action))
    noise = Perturbation(rate=0.2, call_share=1.0, seed=1)
    turns = collect_expert_turns(env, expert, range(20), only_successful=False, perturbation=noise)
    calls = [a for a in sent if a.startswith("call ")]
    assert len(sent) >= 20 and calls  # random calls of the library's skills, and commands before it has one
    assert len(turns) + len(sent) == Steps.taken  # every turn is either a pair or perturbed, never both
    assert set(calls) & {action for t in turns for action in t.earlier}  # the pairs after it show it in history
    # the expert recovers: most perturbed tasks are still completed (those turns are kept with only_successful)
    kept = collect_expert_turns(env, AlfworldExpert(vary_definitions=0), range(20), perturbation=noise)
    assert len(kept) >= 0.7 * len(turns)
    assert collect_expert_turns(env, AlfworldExpert(vary_definitions=0), range(3), perturbation=Perturbation(0.0)) == (
        collect_expert_turns(env, AlfworldExpert(vary_definitions=0), range(3))
    )  # rate 0: the expert's own play
    with pytest.raises(ValueError, match="override"):
        collect_expert_turns(env, PlanExpert(), range(1), perturbation=noise)
    env.close()
    # the random action: a call with one argument per parameter, else an admissible command, else nothing
    obs = {"task": "put a apple in fridge", "observation": "You see apple 1.", "skills": "Program skills:\n- s(a, b)"}
    rng = random.Random(0)
    call = Perturbation(call_share=1.0).action(rng, obs, ["look"])
    assert call.startswith("call s(") and call.count(",") == 1
    assert Perturbation(call_share=0.0).action(rng, obs, ["look"]) == "look"
    assert Perturbation().action(rng, {**obs, "skills": ""}, []) is None
    with pytest.raises(ValueError, match="rate"):
        Perturbation(rate=1.5)


def test_a_learner_sends_every_action_and_the_expert_labels_every_turn():
    """DAgger: the learner's commands are what the env receives (and what the history shows); the pairs' actions
    are the expert's, told of each command it did not send."""
    import random

    import gymnasium as gym

    import sage_envs  # noqa: F401
    from sage_agents.sft import Perturbation, collect_expert_turns
    from sage_envs.domains.alfworld import AlfworldExpert

    class Sloppy:
        """Sends the expert's command, or on a third of the turns a random admissible one."""

        def __init__(self):
            self.rng, self.expert, self.sent = random.Random(3), AlfworldExpert(use_skills=False), []

        def reset(self):
            self.expert.reset()

        def act(self, obs, info):
            action = self.expert.act(obs, info)
            if self.rng.random() < 1 / 3:
                action = self.rng.choice(info["admissible_commands"])
                self.expert.override(action)
            self.sent.append(action)
            return action

        def override(self, action):
            self.sent[-1] = action
            self.expert.override(action)

    env = gym.make("SageChain-ALFWorld-v0", split="train", skills="none", max_steps_per_task=30)
    learner = Sloppy()
    expert = AlfworldExpert(use_skills=False)
    turns = collect_expert_turns(env, expert, range(6), only_successful=False, learner=learner)
    assert len(turns) == len(learner.sent)  # every turn a pair, whoever failed the task
    labels = [t.action for t in turns]
    assert all(t.action in t.admissible for t in turns)  # the expert's commands
    differ = sum(label != sent for label, sent in zip(labels, learner.sent, strict=True))
    assert 0.1 * len(turns) < differ < 0.5 * len(turns)  # its own command on the learner's good turns
    # each turn's history holds what the learner sent, not the labels
    earlier = [action for t in turns for action in t.earlier]
    assert set(earlier) <= set(learner.sent) and set(earlier) - set(labels)
    # a learner that plays as the expert does gives the expert's own pairs
    own = collect_expert_turns(env, AlfworldExpert(use_skills=False), range(2), only_successful=False)
    twin = collect_expert_turns(
        env, AlfworldExpert(use_skills=False), range(2), only_successful=False, learner=AlfworldExpert(use_skills=False)
    )
    assert [(t.action, t.earlier) for t in twin] == [(t.action, t.earlier) for t in own]
    # DAgger's beta: the expert's action sent on a share of the turns (the learner told), all of them at 1
    always = collect_expert_turns(env, expert, range(2), only_successful=False, learner=Sloppy(), expert_share=1.0)
    assert [(t.action, t.earlier) for t in always] == [(t.action, t.earlier) for t in own]
    half = Sloppy()
    turns = collect_expert_turns(env, expert, range(6), only_successful=False, learner=half, expert_share=0.5)
    differ_half = sum(t.action != sent for t, sent in zip(turns, half.sent, strict=True))
    assert 0 < differ_half < differ  # fewer turns where the learner's own slip was sent
    with pytest.raises(ValueError, match="override"):
        collect_expert_turns(env, expert, range(1), learner=PlanExpert(), expert_share=0.5)
    with pytest.raises(ValueError, match="share of turns"):
        collect_expert_turns(env, expert, range(1), learner=learner, expert_share=1.5)
    with pytest.raises(ValueError, match="not both"):
        collect_expert_turns(env, expert, range(1), perturbation=Perturbation(), learner=learner)
    with pytest.raises(ValueError, match="override"):
        collect_expert_turns(env, PlanExpert(), range(1), learner=learner)
    env.close()
