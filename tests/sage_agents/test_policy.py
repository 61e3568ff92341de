import copy
import math
import types

import pytest
import torch

from sage_agents import decoding
from sage_agents.decoding import ConstrainedRow, Option, call_plan
from sage_agents.policy import (
    LLMPolicy,
    ParsedAction,
    PolicyAgent,
    argument_options,
    build_prompt,
    call_stubs,
    completion_logprobs,
    parse_action,
    shared_prefix_length,
    skill_signatures,
    typed_options,
)

DEF = "skill fetch(item, box):\n    go to {box}\n    take {item} from {box}"
OBS = {
    "task": "take the coin from the box",
    "observation": "You arrive at box 2. You see coin 1.",
    "skills": "",
}
ADM = ["go to box 1", "go to box 3", "take coin 1 from box 2", "look"]


@pytest.mark.parametrize(
    "completion, text, kind",
    [
        ("go to countertop 1", "go to countertop 1", "command"),
        ("go to countertop 1\nlook\n", "go to countertop 1", "command"),
        ("Action: open fridge 1", "open fridge 1", "command"),
        ("> look", "look", "command"),
        ("put cloth 3 in/on garbagecan 1", "put cloth 3 in/on garbagecan 1", "command"),  # official grammar
        ("move cloth 3 to garbagecan 1", "move cloth 3 to garbagecan 1", "command"),  # the wheel's
        ("call fetch(coin 1, box 2)", "call fetch(coin 1, box 2)", "call"),
        (f"{DEF}\ncall fetch(coin 1, box 2)\nlook", f"{DEF}\ncall fetch(coin 1, box 2)", "define"),
        (f"```\n{DEF}\n```", DEF, "define"),
        (
            f"{DEF}\n\ncall fetch(a 1, b 2)\ncall fetch(c 1, d 2)",
            f"{DEF}\ncall fetch(a 1, b 2)\ncall fetch(c 1, d 2)",
            "define",
        ),
        ("skill broken(x):\nno body", "skill broken(x):\nno body", "none"),
        ("", "", "none"),
        ("   \n ", "   \n ", "none"),
        ("(*&^ garbage ]]", "(*&^ garbage ]]", "none"),
    ],
)
def test_parse_action(completion, text, kind):
    parsed = parse_action(completion)
    assert (parsed.text, parsed.kind) == (text, kind)
    assert parsed.parseable == (kind != "none")


def test_an_admissible_command_parses_as_a_command_whatever_its_characters():
    command = "focus on unknown substance B in inventory"  # ScienceWorld names substances with capitals
    assert parse_action(command).kind == "none"
    assert parse_action(command, [command, "look around"]) == ParsedAction(command, "command")


@pytest.mark.parametrize("grammar", ["wheel", "official"])
def test_every_admissible_command_of_a_played_chain_parses_as_a_command(grammar):
    """Training ends a chain at an unparseable completion (the -1 rule): a command the game offers must never be
    one (the official grammar's "put X in/on Y" was, before "/" was allowed)."""
    import gymnasium as gym

    import sage_envs

    env = gym.make("SageChain-ALFWorld-v0", split="train", skills="none", command_grammar=grammar)
    expert = sage_envs.domain_class("SageChain-ALFWorld-v0").expert(use_skills=False)
    seen, (obs, info), done = set(), env.reset(seed=0, options={"chain": 0}), False
    expert.reset()
    while not done:
        seen |= set(info["admissible_commands"])
        obs, _, terminated, truncated, info = env.step(expert.act(obs, info))
        done = terminated or truncated
    assert any(c.startswith("put " if grammar == "official" else "move ") for c in seen)
    assert [c for c in seen if parse_action(c).kind != "command"] == []


def test_build_prompt_task_first_and_compact():
    history = [(f"obs {i}", f"act {i}") for i in range(3)]
    prompt = build_prompt("put a apple in fridge", "now", history, "- f(x)", ["look", "go to x 1"])
    assert prompt.startswith("Task: put a apple in fridge\n")
    assert prompt.endswith("\nAction:\n")
    assert prompt.index("Skills:") < prompt.index("History:") < prompt.index("Observation: now")
    assert "obs 0\n> act 0\nobs 1" in prompt and "Admissible: look, go to x 1" in prompt
    assert "History" not in build_prompt("t", "o")
    earlier = build_prompt("t", "o", earlier_actions=["look", f"{DEF}\ncall fetch(coin 1, box 2)"])
    assert "\nEarlier actions: look; call fetch(coin 1, box 2)\n" in earlier  # a definition shows as its call


def test_policy_prompt_keeps_last_k_turns_and_fits(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, history_turns=2, max_prompt_tokens=500)
    history = [(f"you see drawer {i}", f"examine drawer {i}") for i in range(5)]
    prompt = policy.prompt(OBS, history, ADM)
    assert "> examine drawer 3\nyou see drawer 4\n> examine drawer 4" in prompt
    assert "Earlier actions: examine drawer 0; examine drawer 1; examine drawer 2\n" in prompt  # actions only
    assert "you see drawer 2" not in prompt  # observations of the last 2 turns only
    windowed = LLMPolicy(model, tok, history_turns=2, earlier_actions=1).prompt(OBS, history, ADM)
    assert "Earlier actions: examine drawer 2\n" in windowed and "drawer 1" not in windowed
    assert "Earlier" not in LLMPolicy(model, tok, history_turns=2, earlier_actions=0).prompt(OBS, history, ADM)
    small = LLMPolicy(model, tok, history_turns=3, max_prompt_tokens=10)
    assert "History" not in small.prompt(OBS, history, ADM)  # history dropped to fit


def test_policy_prompt_lists_the_commands_not_yet_sent(tiny):
    model, tok = tiny
    history = [("you see a box 1", "go to box 1"), ("nothing happens", "look")]
    policy = LLMPolicy(model, tok, history_turns=1, show_admissible=False, untried_commands="")
    prompt = policy.prompt(OBS, history, ADM)
    assert "\nNot tried yet: go to box 3, take coin 1 from box 2\nHistory:\n" in prompt  # in admissible order
    assert "Admissible" not in prompt and "the admissible commands not yet sent" in policy.given
    places = LLMPolicy(model, tok, history_turns=1, untried_commands="go to ")
    assert "\nNot tried yet: go to box 3\n" in places.prompt(OBS, history, ADM)  # the places not visited yet
    assert "commands starting 'go to' not yet sent" in places.given
    assert "Not tried" not in LLMPolicy(model, tok, history_turns=1).prompt(OBS, history, ADM)  # off by default
    assert "Not tried" not in build_prompt("t", "o", admissible=ADM)


def test_a_command_sent_at_the_same_observation_is_not_offered_again(tiny):
    model, tok = tiny
    policy = LLMPolicy(
        model, tok, constrained=True, skill_calls=False, option_sampling=True, skip_repeated_actions=True
    )
    info = {"admissible_commands": ADM}

    def turn(history):
        completion = policy.act_batch([OBS], [info], [history], greedy=True)[0]
        options = [
            option[:-1] if option[-1] == tok.eos_token_id else option for option in completion.choices[0].options
        ]
        offered = {command for command in ADM if policy.encode_option(command) in map(tuple, options)}
        assert len(offered) == len(options)  # every option is one of the admissible commands
        return completion.action.text, offered

    first, offered = turn([])
    assert offered == set(ADM)
    second, offered = turn([(OBS["observation"], first)])  # the same observation again: a cycle would start
    assert second != first and offered == set(ADM) - {first}  # the trained distribution is over what was offered
    elsewhere, offered = turn([("another observation", first)])
    assert elsewhere == first and offered == set(ADM)
    everything, offered = turn([(OBS["observation"], command) for command in ADM])
    assert everything == first and offered == set(ADM)  # nothing left untried: every command is offered again
    assert "not offered again" in policy.given
    plain = LLMPolicy(model, tok, constrained=True, skill_calls=False, option_sampling=True)
    assert plain.act_batch([OBS], [info], [[(OBS["observation"], first)]], greedy=True)[0].action.text == first
    assert "not offered again" not in plain.given


def test_skill_signatures_call_stubs_and_argument_options():
    skills = "Program skills (call NAME(args)):\n- fetch(item, box): get it\n- noop()"
    assert skill_signatures(skills) == [("fetch", ["item", "box"]), ("noop", [])]
    assert call_stubs(skills) == [("call fetch(", ["item", "box"]), ("call noop()", [])]
    assert call_stubs("", [DEF]) == [(f"{DEF}\ncall fetch(", ["item", "box"])]
    assert call_stubs(skills, [DEF]) == call_stubs(skills)  # a template whose name is in the library is not offered
    values = argument_options("take the coin", "You see box 2.", ADM)
    assert values[:2] == ["coin 1", "coin"]  # task-named values first: the entity, its type, then task words
    assert set(values) == {"coin 1", "coin", "take", "box 2", "box 1", "box 3", "box"}
    assert argument_options("take the coin", "", ADM, limit=1) == ["coin 1"]


def test_typed_options_keep_the_types_the_task_or_the_parameter_names():
    values = argument_options("put a pen in shelf", "You see garbagecan 1, sinkbasin 2 and microwave 1.",
                              ["take pen 3 from desk 1", "go to shelf 1", "go to shelf 2"])  # fmt: skip
    task = "put a pen in shelf"
    named = ["pen 3", "shelf 1", "shelf 2", "pen", "shelf", "put"]  # the task's types (and words) first
    assert typed_options(values, "place", task) == named  # not garbagecan 1: the task names no garbagecan
    assert typed_options(values, "sink", task) == [*named, "sinkbasin 2", "sinkbasin"]
    assert typed_options(values, "microwave", task) == [*named, "microwave 1", "microwave"]
    assert typed_options(values, "where", "look around") == values  # nothing typed: every value stays


def call_arguments(policy, obs, info, opening):
    """A constrained turn's first choice, then the values it offers a call's first and (the first value taken)
    second argument."""
    plans = []
    policy.generate = lambda prompts, greedy, plans=(), commands=None, seen=plans: seen.extend(plans)  # record
    policy.act_batch([obs], [info], [[]], greedy=True)
    plan = plans[0]
    first_choice = next(plan)
    first = [o.text.removesuffix(",") for o in plan.send(opening)]
    second = [o.text.strip().removesuffix(")") for o in plan.send(f"{first[0]},")]
    return first_choice, first, second


def test_typed_arguments_restrict_the_values_a_call_is_offered(tiny):
    model, tok = tiny
    obs = {**OBS, "skills": "Program skills (call NAME(args)):\n- fetch(item, box)"}
    info = {"admissible_commands": [*ADM, "go to desk 4"]}
    calls = {}
    for typed in (False, True):
        policy = LLMPolicy(model, tok, constrained=True, typed_arguments=typed)
        opening, *calls[typed] = call_arguments(policy, obs, info, "call fetch(")
        assert Option("call fetch(", False, "call") in opening  # the first choice: a command or the call's opening
    assert "desk 4" in calls[False][0] and "desk 4" not in calls[True][0]  # no task or parameter names a desk
    assert calls[True][1] == [v for v in calls[False][1] if v.split()[0] in ("coin", "box", "take")]


def test_without_task_arguments_calls_take_entity_names_typed_by_parameter_names_only(tiny):
    model, tok = tiny
    obs = {**OBS, "skills": "Program skills (call NAME(args)):\n- fetch(item, box)"}
    info = {"admissible_commands": [*ADM, "go to desk 4"]}
    policy = LLMPolicy(model, tok, constrained=True, typed_arguments=True, task_arguments=False)
    _, first, second = call_arguments(policy, obs, info, "call fetch(")
    assert "desk 4" in first and "take" not in first  # "item" types nothing, and the task's words are no values
    assert second and all(v.split()[0] == "box" for v in second)  # "box" types by its own name


@pytest.mark.parametrize("typed", [False, True])
def test_a_parameter_with_domain_values_takes_those_values_only(tiny, typed):
    """TextWorld's ``how`` (chop, slice, dice) fills a verb slot: no entity name is a value of it, and the
    cookbook's "dice the carrot" offers none of them as an entity."""
    model, tok = tiny
    obs = {**OBS, "skills": "Program skills (call NAME(args)):\n- cut(item, how)"}
    info = {"admissible_commands": ADM}
    policy = LLMPolicy(
        model, tok, constrained=True, typed_arguments=typed, argument_values={"how": ["chop", "slice", "dice"]}
    )
    _, first, second = call_arguments(policy, obs, info, "call cut(")
    assert "coin 1" in first and "chop" not in first  # ``item``: entity names as before
    assert second == ["chop", "slice", "dice"]


def test_generation_logprobs_match_training_forward(tiny):
    model, tok = tiny
    torch.manual_seed(0)
    policy = LLMPolicy(model, tok, max_new_tokens=6)
    prompts = [policy.prompt(OBS, [], ADM), policy.prompt(OBS, [("a long earlier observation", "look")], ADM)]
    outs = policy.generate(prompts)
    assert len(outs[0].prompt_ids) != len(outs[1].prompt_ids)  # left padding is exercised
    logp, mask, _ = completion_logprobs(
        model, [o.prompt_ids for o in outs], [o.completion_ids for o in outs], pad_id=tok.pad_token_id
    )
    for i, o in enumerate(outs):
        assert 1 <= len(o.completion_ids) <= 6 and mask[i].sum() == len(o.completion_ids)
        assert torch.allclose(logp[i, : len(o.logprobs)], torch.tensor(o.logprobs), atol=1e-4)


@pytest.mark.parametrize(
    "prompts",
    [[[1, 2, 3], [1, 2, 3]], [[1, 2, 3, 4], [1, 2, 9], [1, 2, 3]], [[5, 6], [7]], [[], [1, 2]], [[4, 4, 4]]],
)
def test_shared_prefix_length_is_the_common_prefix_less_one(prompts):
    common = 0  # naive: the longest prefix every prompt starts with
    while all(len(p) > common and p[common] == prompts[0][common] for p in prompts):
        common += 1
    assert shared_prefix_length(prompts) == max(0, min(common, min(map(len, prompts)) - 1))


def test_a_shared_prompt_prefix_runs_once_with_the_same_logprobs_and_gradient(tiny):
    model, tok = tiny
    torch.manual_seed(0)
    vocab = len(tok)
    base = torch.randint(4, vocab, (60,)).tolist()
    prompts = [base, base, base[:40] + [7, 8], base + [5, 6]]  # a group's prompt twice, one branching, one longer
    completions = [torch.randint(4, vocab, (n,)).tolist() for n in (6, 2, 6, 4)]
    mixed = [[c] if t % 2 else [c, 9] for t, c in enumerate(completions[3])]  # every other token forced
    allowed = [None, [[c, 9] for c in completions[1]], None, mixed]
    out = {}
    for share in (False, True):
        trained = copy.deepcopy(model).train()
        logp, mask, entropy = completion_logprobs(
            trained, prompts, completions, pad_id=tok.pad_token_id, with_entropy=True, allowed=allowed,
            share_prefix=share,
        )  # fmt: skip
        (logp * torch.arange(1.0, 1.0 + logp.shape[1])).sum().backward()  # a loss that weighs every token
        out[share] = logp.detach(), mask, entropy, torch.cat([p.grad.flatten() for p in trained.parameters()])
    (logp0, mask0, ent0, grad0), (logp1, mask1, ent1, grad1) = out[False], out[True]
    assert mask0.tolist() == mask1.tolist() and mask0[3, 1] == 0 and mask0[3, 0] == 1  # forced token left out
    torch.testing.assert_close(logp1, logp0, atol=1e-5, rtol=0)
    torch.testing.assert_close(ent1, ent0, atol=1e-5, rtol=0)
    torch.testing.assert_close(grad1, grad0, atol=1e-5, rtol=1e-4)
    assert grad0.abs().max() > 1e-3  # a gradient that could differ


def test_batched_greedy_generation_equals_one_by_one(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, max_new_tokens=5)
    prompts = [policy.prompt(OBS, [], ADM), policy.prompt({**OBS, "task": "x"}, [("long " * 20, "look")], [])]
    batched = policy.generate(prompts, greedy=True)
    single = [policy.generate([p], greedy=True)[0] for p in prompts]
    assert [b.completion_ids for b in batched] == [s.completion_ids for s in single]


SKILLS_OBS = {**OBS, "skills": "Program skills (call NAME(args)):\n- fetch(item, box)"}


def test_constrained_actions_are_commands_or_well_formed_calls_with_exact_logprobs(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True)
    torch.manual_seed(0)
    outs = policy.act_batch([SKILLS_OBS] * 16, [{"admissible_commands": ADM}] * 16, [[]] * 16)
    values = argument_options(OBS["task"], OBS["observation"], ADM)
    for out in outs:
        args = out.text.removeprefix("call fetch(").removesuffix(")").split(",")
        assert out.text in ADM or (out.action.kind == "call" and all(a.strip() in values for a in args))
        assert out.completion_ids[-1] == tok.eos_token_id and len(out.allowed) == len(out.completion_ids)
        assert all(t in a for t, a in zip(out.completion_ids, out.allowed, strict=True))
    assert {o.action.kind for o in outs} == {"command", "call"}  # sampling explores both
    assert_trained_logprobs_are_the_sampled_ones(model, tok, outs)


def assert_trained_logprobs_are_the_sampled_ones(model, tok, outs):
    """The trainer's log-probs of constrained completions are those recorded at sampling; forced tokens: 0, masked."""
    logp, mask, _ = completion_logprobs(
        model, [o.prompt_ids for o in outs], [o.completion_ids for o in outs], pad_id=tok.pad_token_id,
        allowed=[o.allowed for o in outs],
    )  # fmt: skip
    for i, o in enumerate(outs):
        n = len(o.completion_ids)
        free = torch.tensor([len(a) > 1 for a in o.allowed])
        assert mask[i, :n].tolist() == free.float().tolist()  # forced tokens stay out of the loss
        assert torch.allclose(logp[i, :n].detach(), torch.tensor(o.logprobs) * free, atol=1e-5)
        assert all(lp == 0.0 for lp, f in zip(o.logprobs, free, strict=True) if not f)


def test_constrained_sampling_follows_the_recorded_distribution(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True)
    info = {"admissible_commands": ADM}
    torch.manual_seed(1)
    outs = policy.act_batch([OBS] * 400, [info] * 400, [[]] * 400)  # no skills: one choice among the commands
    prob = {o.text: float(torch.tensor(o.logprobs).sum().exp()) for o in outs}
    assert set(prob) == set(ADM) and sum(prob.values()) == pytest.approx(1.0, abs=1e-4)
    for text, p in prob.items():  # each action's empirical frequency is its recorded probability
        freq = sum(o.text == text for o in outs) / len(outs)
        assert abs(freq - p) < 4 * (p * (1 - p) / len(outs)) ** 0.5 + 1e-3, (text, freq, p)
    greedy = policy.act_batch([OBS], [info], [[]], greedy=True)[0]
    first = {a: policy.encode(a)[0] for a in ADM}  # the commands branch at their first token, and "go to box"
    mass = {t: sum(p for a, p in prob.items() if first[a] == t) for t in first.values()}  # once more at the last
    top = max(mass, key=mass.get)
    assert greedy.text == max((a for a in ADM if first[a] == top), key=prob.get)  # the argmax token at each branch


def test_constrained_actions_form_one_distribution(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True)
    prompt = policy.prompt(OBS, [], ADM)
    options = [["coin 1", "box 2"], ["box 2", "box 3", "coin"]]
    pieces = [[c] for c in ADM] + [["call fetch(", f"{a},", f" {b})"] for a in options[0] for b in options[1]]
    completions, allowed = [], []
    for parts in pieces:  # walk the plan over each action's tokens, as generation does
        row = ConstrainedRow(call_plan(ADM, [("call fetch(", options)]), policy.encode, tok.eos_token_id)
        ids = [t for part in parts for t in policy.encode(part)] + [tok.eos_token_id]
        for t in ids:
            assert t in row.allowed()
            row.advance(t)
        assert row.done
        completions.append(ids)
        allowed.append(row.allowed_log)
    logp, _, _ = completion_logprobs(
        model, [policy.encode(prompt)] * len(pieces), completions, pad_id=tok.pad_token_id, allowed=allowed
    )
    assert float(logp.detach().sum(-1).exp().sum()) == pytest.approx(1.0, abs=1e-4)  # the actions' total is 1


def test_a_template_body_is_forced_once_its_name_is_chosen(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True, skill_templates=[DEF])
    out = policy.act_batch([OBS], [{"admissible_commands": []}], [[]])[0]  # nothing to do but define and call
    assert out.action.kind == "define" and out.text.startswith(f"{DEF}\ncall fetch(")
    opening = len(policy.encode(f"{DEF}\ncall fetch("))
    assert all(len(a) == 1 for a in out.allowed[:opening]) and out.logprobs[:opening] == [0.0] * opening
    assert any(len(a) > 1 for a in out.allowed[opening:])  # the arguments are choices


def test_options_of_one_choice_must_be_prefix_free(tiny):
    _, tok = tiny

    def plan():
        yield [Option("go to box", False), Option("go to box 1", True)]

    with pytest.raises(ValueError, match="prefix"):
        ConstrainedRow(plan(), lambda text: tok(text, add_special_tokens=False).input_ids, tok.eos_token_id)


def test_option_ids_are_the_tokenizers_and_their_memo_is_bounded(tiny, monkeypatch):
    import sage_agents.policy

    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True)
    monkeypatch.setattr(sage_agents.policy, "MAX_MEMO_OPTIONS", 2)
    texts = ["go to cabinet 1", "open drawer 2", "take apple 1 from countertop 1", "go to cabinet 1"]
    for text in texts:
        assert list(policy.encode_option(text)) == policy.encode(text) != []
        assert len(policy._option_ids) <= 2
    assert policy.encode_option(texts[-1]) is policy.encode_option(texts[-1])  # served from the memo


def test_policy_agent_history_and_tokens(tiny):
    model, tok = tiny
    agent = PolicyAgent(LLMPolicy(model, tok, constrained=True, history_turns=3))
    agent.reset(seed=0)
    info = {"admissible_commands": ADM, "new_task": True}
    a1 = agent.act(OBS, info)
    a2 = agent.act({**OBS, "observation": "second"}, {**info, "new_task": False})
    assert a1 in ADM and a2 in ADM
    assert agent._histories[0] == [(OBS["observation"], a1)]
    agent.act(OBS, info)  # a new task clears the history
    assert agent._histories[0] == []
    assert agent.tokens_generated > 0
    agent.override("look")  # another action was sent for that observation: the history keeps that one
    agent.act({**OBS, "observation": "third"}, {**info, "new_task": False})
    assert agent._histories[0] == [(OBS["observation"], "look")]


def test_policy_agent_histories_follow_slots_not_positions(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True, history_turns=3)
    seen = []
    original = policy.act_batch
    policy.act_batch = lambda obs, infos, histories, greedy: (
        seen.append(histories) or original(obs, infos, histories, greedy=greedy)
    )
    agent = PolicyAgent(policy)
    start, later = {"admissible_commands": ADM, "new_task": True}, {"admissible_commands": ADM, "new_task": False}
    views = [{**OBS, "observation": f"env {i}"} for i in range(3)]
    first = agent.act_batch(views, [start] * 3, slots=[0, 1, 2])
    # Env 1 has finished: envs 0 and 2 go on, and env 2's turn must come with env 2's history.
    agent.act_batch([views[0], views[2]], [later] * 2, slots=[0, 2])
    assert seen[-1] == [[("env 0", first[0])], [("env 2", first[2])]]
    assert len(agent.last_tokens) == 2 and agent.tokens_generated >= sum(agent.last_tokens) > 0


def test_chat_template_is_used_when_present(tiny):
    model, tok = tiny
    chat_tok = copy.deepcopy(tok)
    chat_tok.chat_template = (
        "{% for m in messages %}<bos>{{ m['role'] }}\n{{ m['content'] }}<eos>{% endfor %}"
        "{% if add_generation_prompt %}<bos>assistant\n{% endif %}"
    )
    policy = LLMPolicy(model, chat_tok, constrained=True)
    prompt = policy.prompt(OBS, [], ADM)
    assert prompt.startswith("<bos>user\nTask: ") and prompt.endswith("<bos>assistant\n")
    out = policy.act_batch([OBS], [{"admissible_commands": ADM}], [[]], greedy=True)[0]
    assert out.prompt_ids[0] == chat_tok.bos_token_id and out.text in ADM
    assert not LLMPolicy(model, chat_tok, use_chat_template=False).prompt(OBS, [], ADM).startswith("<bos>")


def test_prompt_can_show_skill_signatures_only(tiny):
    model, tok = tiny
    skills = "Program skills (call NAME(args)):\n- fetch(item, box): go get it\nGuidance:\n- tidy: close boxes: always"
    obs = {**OBS, "skills": skills}
    assert "- fetch(item, box): go get it" in LLMPolicy(model, tok).prompt(obs, [], [])
    short = LLMPolicy(model, tok, skill_descriptions=False).prompt(obs, [], [])
    assert "- fetch(item, box)\nGuidance:\n- tidy: close boxes: always" in short  # guidance text untouched


def test_a_policy_that_may_define_skills_says_so_with_an_empty_library(tiny):
    from sage_agents.policy import NO_SKILLS_YET

    model, tok = tiny
    assert f"Skills:\n{NO_SKILLS_YET}\n" in LLMPolicy(model, tok, skill_templates=[DEF]).prompt(OBS, [], [])
    assert "Skills" not in LLMPolicy(model, tok).prompt(OBS, [], [])
    with_library = LLMPolicy(model, tok, skill_templates=[DEF]).prompt({**OBS, "skills": "- fetch(item, box)"}, [], [])
    assert NO_SKILLS_YET not in with_library


def test_a_history_shorter_than_the_window_is_shown_whole(tiny):
    model, tok = tiny
    history = [("you see drawer 0", "examine drawer 0"), ("you see drawer 1", "examine drawer 1")]
    prompt = LLMPolicy(model, tok, history_turns=3).prompt(OBS, history, ADM)
    assert "History:\nyou see drawer 0\n> examine drawer 0\nyou see drawer 1" in prompt
    assert "Earlier" not in prompt


@torch.no_grad()
def option_greedy_by_brute_force(model, prompt_ids, plan, encode, eos_id):
    """The text greedy :func:`decode_options` must produce: at each choice, among the options of the group whose
    probabilities sum largest, the option whose tokens (EOS if it ends) have the largest full-vocabulary log-prob
    sum, each option scored by its own uncached forward."""
    ids, text, choice = list(prompt_ids), "", next(plan)
    while True:
        scores = []
        for option in choice:
            tokens = [*encode(option.text), *[eos_id] * option.ends]
            logits = model(input_ids=torch.tensor([ids + tokens])).logits[0, len(ids) - 1 : -1]
            scores.append(float(torch.log_softmax(logits, -1)[torch.arange(len(tokens)), tokens].sum()))
        mass = {}
        for score, option in zip(scores, choice, strict=True):
            mass[option.group] = mass.get(option.group, 0.0) + math.exp(score)
        group = max(mass, key=mass.get)
        best = choice[max((i for i, o in enumerate(choice) if o.group == group), key=scores.__getitem__)]
        text, ids = text + best.text, ids + list(encode(best.text))
        if best.ends:
            return text
        try:
            choice = plan.send(best.text)
        except StopIteration:
            return text


@pytest.mark.parametrize("way", ["tree attention", "whole paths", "trie pieces"])
@pytest.mark.parametrize("obs", [OBS, SKILLS_OBS], ids=["commands", "commands-and-calls"])
def test_option_greedy_takes_each_choices_likeliest_whole_option(tiny, obs, way, monkeypatch):
    model, tok = tiny
    if way == "whole paths":  # as under an attention that takes no custom mask: every path after its whole prefix
        monkeypatch.setattr(decoding, "TREE_ATTENTION", ())
    pieces = []
    if way == "trie pieces":  # as for ScienceWorld's thousands of commands: each trie scored in pieces
        monkeypatch.setattr(decoding, "MAX_TRIE_NODES", 4)
        cut = decoding._trie_pieces
        monkeypatch.setattr(decoding, "_trie_pieces", lambda trie: pieces.append(cut(trie)) or pieces[-1])
    policy = LLMPolicy(model, tok, constrained=True, option_greedy=True)
    info = {"admissible_commands": ADM}
    outs = policy.act_batch(
        [obs, {**obs, "task": "put the key in box 3"}], [info] * 2, [[], [("x", "look")]], greedy=True
    )
    values = argument_options(obs["task"], obs["observation"], ADM)
    calls = [("call fetch(", [values, values])] if obs is SKILLS_OBS else []
    for out in outs:
        expected = option_greedy_by_brute_force(
            model, out.prompt_ids, call_plan(ADM, calls), policy.encode_option, tok.eos_token_id
        )
        assert out.text == expected and out.completion_ids[-1] == tok.eos_token_id
    logp, _, _ = decoding.choice_logprobs(
        model, [o.prompt_ids for o in outs], [o.completion_ids for o in outs], [o.choices for o in outs]
    )  # recorded log-probs: the choices' log pi(option), as the trainer computes them
    for i, out in enumerate(outs):
        torch.testing.assert_close(logp[i, : len(out.logprobs)].detach(), torch.tensor(out.logprobs), atol=1e-5, rtol=0)
    assert way != "trie pieces" or max(map(len, pieces)) > 1  # the tries were cut


def test_trie_pieces_hold_the_tries_options_in_order_within_the_node_budget(monkeypatch):
    paths = [[1, 2, 3], [1, 2, 4], [1, 5], [6, 7, 8, 9, 10, 11], [6, 7, 12], [13]]
    trie = decoding._FlatTrie.of_paths(paths)
    assert decoding._trie_pieces(trie) == [trie]  # it fits
    monkeypatch.setattr(decoding, "MAX_TRIE_NODES", 5)
    pieces = decoding._trie_pieces(trie)
    assert [path for piece in pieces for path in piece.paths] == paths
    # [1,2,3] + [1,2,4] = 4 nodes; + [1,5] = 5; the 6-token option alone; [6,7,12] + [13] = 4
    assert [len(piece.tokens) for piece in pieces] == [5, 6, 4]


class NextWordLM(torch.nn.Module):
    """A causal LM whose next-token logits depend on the last token only (``table``); it takes no attention mask."""

    config = types.SimpleNamespace(_attn_implementation="none")

    def __init__(self, vocab_size, table):
        super().__init__()
        self.vocab_size, self.table = vocab_size, table
        self.weight = torch.nn.Parameter(torch.zeros(1))  # a device for the decoder to read

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        logits = torch.full((*input_ids.shape, self.vocab_size), -20.0)
        for token, probs in self.table.items():
            for nxt, p in probs.items():
                logits[input_ids == token, nxt] = float(torch.tensor(p).log())
        return types.SimpleNamespace(logits=logits)


def test_option_greedy_weighs_the_whole_command_where_token_greedy_commits_to_its_first_word(tiny):
    """The SFT model's failure it fixes: "take" is the likeliest first word, but the object the model would take
    is not offered; the walk on is likelier as a whole."""
    _, tok = tiny
    encode = lambda text: tok(text, add_special_tokens=False).input_ids  # noqa: E731
    commands = ["take soapbar 1", "go to box 1", "go to box 2"]
    (take, soapbar, one), (go, to, box, _), (*_, two) = (encode(c) for c in commands)
    prompt, eos = encode("look"), tok.eos_token_id
    assert len({take, soapbar, one, go, to, box, two, *prompt, eos}) == 9  # nine tokens the tokenizer tells apart
    table = {
        prompt[-1]: {take: 0.6, go: 0.4},
        take: {tok.convert_tokens_to_ids("apple"): 0.9, soapbar: 0.1},  # it would take an apple; a soapbar is here
        go: {to: 1.0}, to: {box: 1.0}, box: {one: 0.5, two: 0.5}, soapbar: {one: 1.0}, one: {eos: 1.0}, two: {eos: 1.0},
    }  # fmt: skip
    model = NextWordLM(len(tok), table)
    [out] = decoding.decode_options(model, [prompt], [call_plan(commands, [])], encode=encode, eos_id=eos, greedy=True)
    assert out.text == "go to box 1"  # 0.4 * 0.5 = 0.2 as a whole, against take soapbar 1's 0.6 * 0.1 = 0.06
    assert out.logprobs[0] == pytest.approx(float(torch.tensor(0.2 / 0.46).log()), abs=1e-4)  # 0.2 / (.06 + .2 + .2)


@pytest.mark.parametrize("skill_p", [0.4, 0.6])
def test_option_greedy_weighs_a_definition_against_all_commands_not_each(tiny, skill_p):
    """``skill`` opens every definition: the model's probability of writing some definition is weighed against
    that of acting at all (the commands' sum), not against each command's; within the kind, the likeliest option."""
    _, tok = tiny
    encode = lambda text: tok(text, add_special_tokens=False).input_ids  # noqa: E731
    commands = ["go to box 1", "go to box 2"]
    (go, to, box, one), (*_, two) = (encode(c) for c in commands)
    [skill], [done] = encode("skill"), encode(" done")
    prompt, eos = encode("look"), tok.eos_token_id
    assert len({go, to, box, one, two, skill, done, *prompt, eos}) == 9
    table = {
        prompt[-1]: {go: 1 - skill_p, skill: skill_p}, go: {to: 1.0}, to: {box: 1.0}, box: {one: 0.5, two: 0.5},
        one: {eos: 1.0}, two: {eos: 1.0}, skill: {done: 1.0}, done: {eos: 1.0},
    }  # fmt: skip
    model = NextWordLM(len(tok), table)
    define = lambda: iter([[Option(" done", True)]])  # noqa: E731  a one-piece definition
    plan = call_plan(commands, [], define)
    [out] = decoding.decode_options(model, [prompt], [plan], encode=encode, eos_id=eos, greedy=True)
    # 0.4 beats each command (0.3) but not the two together (0.6); 0.6 beats both together (0.4)
    assert out.text == ("skill done" if skill_p == 0.6 else "go to box 1")
