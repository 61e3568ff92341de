import pytest

from sage_agents.policy import Completion, LLMPolicy, parse_action
from sage_agents.rollout import rollout_chains, rollout_stats
from tests.sage_agents.fake_env import FakeChainEnv, ScoredFake, SkillExpert


class ScriptedPolicy:
    """Plays a fixed function of (obs, info, history); records the histories it was shown."""

    def __init__(self, fn):
        self.fn, self.seen = fn, []

    def act_batch(self, observations, infos, histories, greedy=False):
        out = []
        for obs, info, hist in zip(observations, infos, histories, strict=True):
            self.seen.append(list(hist))
            text = self.fn(obs, info, hist)
            out.append(Completion([1, 2], [3, 4, 5], [-1.0, -1.0, -1.0], text, parse_action(text)))
        return out


def test_skill_expert_chain_records_reuse_and_success():
    expert = SkillExpert()
    envs = [FakeChainEnv(chain_length=3, expert_plan=True) for _ in range(2)]
    rollouts = rollout_chains(envs, ScriptedPolicy(lambda o, i, h: expert.act(o, i)), [0, 1], [0, 1])
    for ro in rollouts:
        assert ro.task_success == [True, True, True] and ro.played == [True, True, True]
        assert ro.reuse == {(1, 0), (2, 0)}  # tasks 2 and 3 called the skill made in task 1
        assert [t.env_kind for t in ro.turns] == ["define", "call", "call"]
        assert ro.skills_created == 1 and ro.library[0]["name"] == "fetch"
    stats = rollout_stats(rollouts)
    assert stats["env/task_success"] == 1.0 and stats["env/chain_success"] == 1.0
    assert stats["env/skill_reuse_rate"] == 1.0 and stats["env/steps_per_task"] == 1.0
    assert stats["env/primitive_steps_per_task"] == 2.0 and stats["env/tokens_per_task"] == 3.0


def test_rollout_stats_positions_come_from_the_configured_chain_length():
    # chain 1 is a 1-task chain: a batch of only short chains still reports every configured position
    expert = SkillExpert()
    policy = ScriptedPolicy(lambda o, i, h: expert.act(o, i))
    envs = [FakeChainEnv(chain_length=3, expert_plan=True, short_chains=[1]) for _ in range(2)]
    short = rollout_chains(envs, policy, [1, 1], [0, 1])
    assert [len(ro.played) for ro in short] == [1, 1]
    assert [k for k in rollout_stats(short) if "_pos" in k] == ["env/task_success_pos1"]
    stats = rollout_stats(short, chain_length=3)
    assert [k for k in stats if "_pos" in k] == [f"env/task_success_pos{k}" for k in (1, 2, 3)]
    assert stats["env/task_success_pos1"] == 1.0 and stats["env/task_success_pos3"] == 0.0  # unplayed: 0
    full = rollout_chains(envs, policy, [0, 0], [0, 1])
    with pytest.raises(ValueError, match="chain_length=2"):
        rollout_stats(full, chain_length=2)


def test_failed_tasks_history_window_and_lockstep():
    policy = ScriptedPolicy(lambda o, i, h: "look")
    envs = [FakeChainEnv(max_steps_per_task=3), FakeChainEnv(max_steps_per_task=2)]
    rollouts = rollout_chains(envs, policy, [0, 0], [0, 0])
    assert [len(ro.turns) for ro in rollouts] == [6, 4]
    assert all(ro.task_success == [False, False] and ro.reuse == set() for ro in rollouts)
    assert [t.task_index for t in rollouts[0].turns] == [0, 0, 0, 1, 1, 1]
    # history restarts with each task: lengths shown to env 0 are 0,1,2 then 0,1,2
    env0 = policy.seen[0::2][:3] + [policy.seen[i] for i in (6, 8, 9)]
    assert [len(h) for h in env0] == [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize("stop", [True, False])
def test_no_parseable_action_ends_chain_when_asked(stop):
    policy = ScriptedPolicy(lambda o, i, h: "%%% ???")
    ro = rollout_chains([FakeChainEnv()], policy, [0], [0], stop_on_no_action=stop)[0]
    if stop:
        assert len(ro.turns) == 1 and ro.no_action == [True, False] and ro.played == [True, False]
    else:
        assert len(ro.turns) == 6 and ro.no_action == [False, False]
    assert all(t.parsed_kind == "none" and not t.valid for t in ro.turns)


def test_llm_policy_rollout_constrained(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True)
    rollouts = rollout_chains([FakeChainEnv(), FakeChainEnv()], policy, [2, 2], [5, 6])
    for ro in rollouts:
        assert all(t.valid and t.completion_ids[-1] == tok.eos_token_id for t in ro.turns)
        assert all(len(t.logprobs) == len(t.completion_ids) for t in ro.turns)


def test_rollout_keeps_each_tasks_latest_score_where_the_domain_reports_one():
    actions = iter(["go to box 1", "look", "go to box 2", "go to box 3", "look"] * 4)
    policy = ScriptedPolicy(lambda o, i, h: next(actions))
    scored = rollout_chains([ScoredFake(FakeChainEnv(max_steps_per_task=3))], policy, [0], [0])[0]
    assert scored.task_success == [False, False] and scored.task_score == [50.0, 50.0]
    assert rollout_stats([scored])["env/task_progress"] == 0.5
    expert = SkillExpert()
    plain = rollout_chains([FakeChainEnv(expert_plan=True)], ScriptedPolicy(lambda o, i, h: expert.act(o, i)), [0], [0])
    assert plain[0].task_score == [None, None]
    assert rollout_stats(plain)["env/task_progress"] == rollout_stats(plain)["env/task_success"] == 1.0
