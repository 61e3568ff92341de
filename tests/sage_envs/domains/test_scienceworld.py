"""SageChain-ScienceWorld-v0: splits and chains, score / won / lost, the gold expert, skills, hostile actions.

The env-generic checks (``check_env``, same seed same transcript, random strings, vector envs) run on it in
``tests/sage_envs/test_registered_envs.py``. These need the ``scienceworld`` package and Java, and skip without them.
"""

from __future__ import annotations

import shutil

import gymnasium as gym
import pytest

import sage_envs
from sage_envs import Skill, SkillLibrary
from sage_envs.error import DataNotFoundError, InvalidConfigError

pytest.importorskip("scienceworld")
if shutil.which("java") is None:
    pytest.skip("ScienceWorld's simulator needs Java (apt-get install default-jre-headless)", allow_module_level=True)

from sage_envs.domains.scienceworld import domain as sw  # noqa: E402  (after the skips: needs the package)
from sage_envs.domains.scienceworld.domain import SKILLS, ScienceWorldExpert, skill_call  # noqa: E402

ENV_ID = "SageChain-ScienceWorld-v0"


def make(**kwargs):
    kwargs.setdefault("split", "dev")
    return gym.make(ENV_ID, **kwargs)


@pytest.fixture(scope="module")
def find_env():
    """One env of find-animal dev chains (short gold sequences; a chair in the kitchen to focus on wrongly)."""
    env = make(task_names=("find-animal", "find-non-living-thing"), chain_length=2)
    yield env
    env.close()


def test_splits_are_scienceworld_variation_splits_and_chains_cover_them_once():
    domain = sw.ScienceWorldDomain()
    families = sw.variation_splits()
    assert len(families) == 30
    for split in sw.SPLITS:
        tasks = domain.tasks(split)
        assert len(tasks) == sum(len(f[split]) for f in families.values())
        chains = domain.chains(split, 3)
        # Every task in exactly one chain, each chain one family, consecutive variations of it.
        assert sorted(t.task_id for c in chains for t in c) == sorted(t.task_id for t in tasks)
        for chain in chains:
            assert len({t.task_type for t in chain}) == 1 and 1 <= len(chain) <= 3
            variations = [sw.parse_task_id(t.task_id)[1] for t in chain]
            listed = families[chain[0].task_type][split]
            start = listed.index(variations[0])
            assert variations == listed[start : start + len(chain)]
        # The first 30 chains are one per family (interleaved), so --num-chains 30 spans every family.
        assert len({c[0].task_type for c in chains[:30]}) == 30
    train = {t.task_id for t in domain.tasks("train")}
    assert train.isdisjoint(t.task_id for t in domain.tasks("dev"))


def test_unknown_split_family_or_simplification_is_a_clear_error():
    with pytest.raises(InvalidConfigError, match="Did you mean 'dev'"):
        make(split="devv")
    with pytest.raises(InvalidConfigError, match="not a ScienceWorld task"):
        make(task_names=("boill",))
    with pytest.raises(InvalidConfigError, match="openDoors"):
        sw.ScienceWorldDomain(simplifications="openDoor")


def test_missing_java_names_the_fix(monkeypatch):
    monkeypatch.setattr(sw.shutil, "which", lambda name: None)
    with pytest.raises(DataNotFoundError, match="apt-get install default-jre-headless"):
        sw.start_simulator()


def test_wrong_focus_loses_the_task_with_score_zero_and_the_chain_moves_on(find_env):
    obs, info = find_env.reset(options={"chain": 0})
    assert info["task_score"] == 0.0 and info["task_id"] == "find-animal/150"
    assert "focus on chair" in info["admissible_commands"]
    obs, reward, terminated, _, info = find_env.step("focus on chair")
    assert info["task_lost"] and not info["task_success"] and reward == 0.0 and not terminated
    assert info["task_score"] == 0.0 and info["new_task"] and info["chain_successes"] == [False]


def test_gold_expert_wins_with_score_100(find_env):
    expert = sage_envs.domain_class(ENV_ID).expert()
    expert.reset()
    obs, info = find_env.reset(options={"chain": 1})  # find-non-living-thing: a 3-command gold sequence
    scores, terminated = [], False
    while not terminated:
        obs, reward, terminated, _, info = find_env.step(expert.act(obs, info))
        scores.append(info["task_score"])
    assert info["chain_successes"] == [True, True] and scores[-1] == 100.0
    assert 0.0 < scores[0] < 100.0  # partial credit on the way


def test_skill_call_segments_a_gold_sequence():
    gold = ["open door to kitchen", "go to kitchen", "examine ice", "use thermometer in inventory on ice", "wait"]
    assert skill_call(gold) == ("enter", ("kitchen",))
    assert skill_call(gold[2:]) == ("measure_temperature", ("ice",))
    watering = ["activate sink", "move jug to sink", "pour jug into flower pot 3", "deactivate sink"]
    assert skill_call(watering) == ("water", ("flower pot 3",))
    assert skill_call(["open door to kitchen", "go to hallway"]) is None
    assert skill_call(["examine ice", "use thermometer in inventory on water"]) is None
    assert skill_call(watering[:3] + ["wait"]) is None
    assert skill_call(gold[4:]) is None and skill_call([]) is None
    assert sorted(sw.ScienceWorldDomain.skill_templates()) == sorted(SKILLS)


@pytest.mark.parametrize("mode", ["program", "none"])
def test_expert_defines_its_skills_once_and_the_next_variation_calls_them(mode):
    env = make(task_names=("find-living-thing",), chain_length=2, skills=mode)
    expert = sage_envs.domain_class(ENV_ID).expert()
    expert.reset()
    obs, info = env.reset(options={"chain": 0})
    infos, terminated = [], False
    while not terminated:
        obs, _, terminated, _, info = env.step(expert.act(obs, info))
        infos.append(info)
    assert info["chain_successes"] == [True, True]
    kinds = [i["action_kind"] for i in infos]
    if mode == "program":  # the first variation defines enter (with its first call); the second calls it
        assert kinds.count("define") == 1 and "call" in kinds[kinds.index("define") + 1 :]
        second = [i["skill_reuse"] for i in infos if i["task_index"] == 1 and i["action_kind"] == "call"]
        assert second == [["enter"]] * 2  # out of the garden and back: both reuse the first variation's skill
        assert env.unwrapped.library.names() == ["enter"]
    else:  # the definition is refused ("skills disabled"), then the gold sequence goes on as commands
        assert sum(not i["action_valid"] for i in infos) == 1 and "call" not in kinds
    env.close()


def test_expert_plan_is_the_rest_of_the_gold_sequence():
    env = make(task_names=("find-non-living-thing",), chain_length=1, expert_plan=True)
    _, info = env.reset(options={"chain": 0})
    plan = info["expert_plan"]
    _, _, _, _, info = env.step(plan[0])
    assert info["expert_plan"] == plan[1:]
    _, _, terminated, _, info = env.step("look around")  # off the gold path: no plan
    assert info["expert_plan"] == [] or terminated
    env.close()


def test_commands_the_parser_reads_are_valid_beyond_the_valid_action_list():
    """The gold sequences use other names for valid actions (`examine X`, `pick up X`): valid, as ScienceWorld reads
    them; a command the parser does not read is invalid and says so."""
    env = make(task_names=("find-living-thing",), chain_length=2)
    expert = sage_envs.domain_class(ENV_ID).expert()
    expert.reset()
    obs, info = env.reset(options={"chain": 0})
    outside, terminated = 0, False
    while not terminated:
        action = expert.act(obs, info)
        outside += action not in info["admissible_commands"]
        obs, _, terminated, _, info = env.step(action)
        assert info["action_valid"], (action, info["message"])
    assert outside > 0 and info["chain_successes"] == [True, True]  # the chain held commands outside the list
    env.reset(options={"chain": 0})
    _, _, _, _, info = env.step("examine the moon with a spoon")
    assert not info["action_valid"] and "parser does not read" in info["message"]
    env.close()


def test_unread_commands_keep_the_cached_valid_actions(find_env):
    _, info = find_env.reset(options={"chain": 0})
    game = find_env.unwrapped._game
    before = game.admissible_commands()
    _, _, _, _, info = find_env.step("xyzzy")
    assert not info["action_valid"] and game._admissible is not None and info["admissible_commands"] == before


@pytest.mark.parametrize("mode", ["program", "guidance", "both", "none"])
def test_skills_in_every_mode(mode, tmp_path):
    library = SkillLibrary([Skill(name="doors", kind="guidance", text="Open a door before you go through it.")])
    env = make(task_names=("find-animal",), chain_length=1, skills=mode)
    obs, info = env.reset(options={"chain": 0, "skill_library": library})
    assert ("Open a door" in obs["skills"]) == (mode in ("guidance", "both"))
    obs, _, _, _, info = env.step("skill survey(place):\n    look at {place}\n    look around\ncall survey(chair)")
    if mode in ("program", "both"):
        assert info["action_kind"] == "define" and info["primitive_steps"] == 2, info["message"]
        assert "> look at chair" in obs["observation"]
        env.unwrapped.library.save(tmp_path)
        again = SkillLibrary.load(tmp_path)  # SKILL.md round trip, then the loaded skill runs in a fresh chain
        assert again.get("survey").source == env.unwrapped.library.get("survey").source
        _, info = env.reset(options={"chain": 0, "skill_library": again})
        _, _, _, _, info = env.step("call survey(chair)")
        assert info["action_kind"] == "call" and info["action_valid"]
    else:
        assert info["action_kind"] == "invalid" and "disabled" in info["message"]
    env.close()


HOSTILE = [
    "",
    " ",
    "\t\t",
    "a" * 8192,
    "go to 😀 kitchen",
    "\x00\x01\x02",
    "focus on",
    "0",
    "look around\nlook around",
    "call nothing()",
    "skill (:",
    "skill s():\n" + "    look around\n" * 500,
    "call " + "x(" * 200,
    "%s%n{0}{place}",
]


def test_hostile_and_random_actions_raise_nothing_and_are_flagged(find_env):
    """Hostile texts and non-str actions are invalid turns; random valid actions run: no exception escapes."""
    import numpy as np

    obs, info = find_env.reset(options={"chain": 0})
    for action in [*HOSTILE, None, b"look around", 3]:
        obs, _, terminated, _, info = find_env.step(action)
        assert find_env.observation_space.contains(obs)
        assert not info["action_valid"], action
        if terminated:
            obs, info = find_env.reset(options={"chain": 0})
    # 500 articles: ScienceWorld's parser drops them and reads `pick up agent` (a command it answers): valid.
    obs, _, terminated, _, info = find_env.step("pick up " + "the " * 500 + "agent")
    assert info["action_valid"] and sw.UNKNOWN_INPUT not in obs["observation"]
    rng = np.random.default_rng(0)
    for _ in range(25):
        commands = info["admissible_commands"]
        obs, _, terminated, _, info = find_env.step(commands[int(rng.integers(len(commands)))])
        assert find_env.observation_space.contains(obs) and info["action_valid"]
        if terminated:
            obs, info = find_env.reset()


def test_vocabulary_covers_task_and_action_words():
    words = {w for text in sage_envs.domain_class(ENV_ID).vocabulary() for w in text.lower().split()}
    assert {"focus", "thermometer", "boil", "pour", "inventory", "door"} <= words


def test_canonical_sorts_each_run_of_indented_lines_like_a_naive_sort():
    text = "In it, you see:\n\tb\n\ta\nYou also see:\n\tz\n\ty\n\tx"
    naive = "In it, you see:\n" + "\n".join(sorted(["\tb", "\ta"])) + "\nYou also see:\n"
    naive += "\n".join(sorted(["\tz", "\ty", "\tx"]))
    assert sw.canonical(text) == naive
    assert sw.canonical("no tabs\nhere") == "no tabs\nhere"


def test_the_leaderboard_names_what_the_gold_expert_is_given():
    from sage_agents.baselines import make_expert

    assert make_expert(env_id=ENV_ID, use_skills=False).given == ScienceWorldExpert.given
    assert "gold action sequence" in ScienceWorldExpert.given
    assert "its own skills (enter, measure_temperature, water)" in make_expert(env_id=ENV_ID).given


def test_the_simulator_gets_constant_identity_hashes_after_the_users_jvm_options(monkeypatch):
    import scienceworld

    seen = []  # the JVM options each launch saw
    launch = lambda *args, **kwargs: seen.append(sw.os.environ["JAVA_TOOL_OPTIONS"])  # noqa: E731
    monkeypatch.setattr(scienceworld, "ScienceWorldEnv", launch)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx2g")
    sw.start_simulator()
    monkeypatch.delenv("JAVA_TOOL_OPTIONS")
    sw.start_simulator()
    assert seen == [f"-Xmx2g {sw.JVM_OPTIONS}", sw.JVM_OPTIONS]
    assert "JAVA_TOOL_OPTIONS" not in sw.os.environ  # set for the launch only


@pytest.mark.slow
def test_a_variation_reads_the_same_after_other_variations_as_in_a_fresh_simulator():
    """The paint variation whose committed chains failed to replay (its cupboard's cups listed in another order)."""

    def gold_transcript(domain, task):
        game = domain.load(task)
        texts = [game.reset()]
        return texts + [game.step(command).observation for command in game.expert_plan()]

    used, fresh = sw.ScienceWorldDomain(), sw.ScienceWorldDomain()
    try:
        tasks = used.tasks("dev")
        target = next(t for t in tasks if t.task_type == "chemistry-mix-paint-tertiary-color")
        for task in tasks[:6]:
            gold_transcript(used, task)
        assert gold_transcript(used, target) == gold_transcript(fresh, target)
    finally:
        used.close()
        fresh.close()


def test_gold_sequence_is_the_same_however_many_were_generated_before(tmp_path):
    # One JVM's second gold path of this variation takes other doors (its generator keeps state): a cache filled
    # on a reused simulator depended on what it had generated before.
    first = sw.gold_sequence("test-conductivity", 453, "", cache_dir=tmp_path / "a")
    again = sw.gold_sequence("test-conductivity", 453, "", cache_dir=tmp_path / "b")
    assert first == again and first[:2] == ["open door to hallway", "go to hallway"]
    assert sw.gold_sequence("test-conductivity", 453, "", cache_dir=tmp_path / "a") == first  # from the cache
