"""leaderboard.evaluate on the toy domain: summary keys, fixed chains, resume after a crash."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

from leaderboard.evaluate import EvalConfig, evaluate, parse_args, play_chain, play_chains, resummarize, summarize
from sage_agents.registry import UnknownAgentError, list_agents, make_agent
from sage_envs import SageChainEnv

from ..processes import outliving, spawned_workers
from ..sage_envs.toy_domain import ToyDomain

TOY_ID = "SageChain-Toy-v0"
SUMMARY_KEYS = {
    "agent", "env", "split", "source", "n_chains", "n_tasks", "tgc", "sgc", "mean_steps", "mean_primitive_steps",
    "mean_tokens", "skill_reuse_rate", "skills_created", "per_task_type", "ci95", "seeds", "model", "commit",
    "versions", "agent_errors", "chain_length_mix", "sgc_full_length", "n_full_length_chains", "model_name", "given",
}  # fmt: skip
RESULTS = Path(__file__).parents[2] / "leaderboard" / "results"


def _make_toy(**kwargs):
    return SageChainEnv(ToyDomain(), **kwargs)


@pytest.fixture(autouse=True, scope="module")
def toy_env_id():
    if TOY_ID not in gym.registry:
        gym.register(TOY_ID, entry_point=_make_toy)
    yield


class ScriptedAgent:
    """Plays the toy expert plan, so the outcome is known: every task won in 3 turns."""

    def act(self, observation, info):
        return info["expert_plan"][0]


def test_builtin_agents_are_registered_and_unknown_names_suggest():
    assert {"random", "expert"} <= set(list_agents())
    with pytest.raises(UnknownAgentError, match="random"):
        make_agent("randon")


def test_play_chain_records_per_task_fields():
    env = gym.make(TOY_ID, expert_plan=True)
    record = play_chain(env, ScriptedAgent(), chain=0, seed=0)
    assert record["success"] == [True, True] and record["steps"] == [3, 3]
    assert record["task_ids"] == ["train/h0/key", "train/h0/coin"]
    assert record["tokens"] == [4 + 5 + 4, 4 + 5 + 4]  # whitespace words of the actions (no token counter)


def test_summary_of_known_records():
    records = [
        {"chain": 0, "seed": 0, "success": [True, False], "steps": [2, 4], "primitive_steps": [2, 8],
         "tokens": [6, 10], "task_types": ["a", "b"], "skill_reuse": [False, True],
         "skills_created": [["s"], []], "invalid_actions": [0, 1]},
        {"chain": 1, "seed": 0, "success": [True, True], "steps": [1, 1], "primitive_steps": [1, 1],
         "tokens": [2, 2], "task_types": ["a", "a"], "skill_reuse": [False, False],
         "skills_created": [[], []], "invalid_actions": [0, 0]},
    ]  # fmt: skip
    summary = summarize(records, EvalConfig(agent="x", split="train"), model="m", source="s")
    assert summary["tgc"] == 0.75 and summary["sgc"] == 0.5
    assert summary["mean_steps"] == 2.0 and summary["mean_primitive_steps"] == 3.0 and summary["mean_tokens"] == 5.0
    assert summary["per_task_type"] == {"a": 1.0, "b": 0.0}
    assert summary["skill_reuse_rate"] == 0.5 and summary["skills_created"] == 0.5
    low, high = summary["ci95"]["tgc"]
    assert 0.5 <= low <= 0.75 <= high <= 1.0


def test_evaluate_writes_summary_and_resumes_identically(tmp_path):
    config = parse_args(["--agent", "random", "--env", TOY_ID, "--split", "valid_seen", "--num-chains", "3",
                         "--seeds", "0", "1", "--output", str(tmp_path)])  # fmt: skip
    summary = evaluate(config)
    assert SUMMARY_KEYS <= set(summary)
    assert summary["n_chains"] == 6 and summary["n_tasks"] == 10 and 0 <= summary["tgc"] <= 1
    assert summary["token_unit"] == "words"  # the random agent counts no tokens: its actions' words are counted
    assert summary["versions"]["gymnasium"] == gym.__version__ and summary["versions"]["python"].count(".") == 2
    episodes = tmp_path / f"{config.run_name}.episodes.jsonl"
    lines = episodes.read_text().splitlines()
    assert len(lines) == 6

    # A crash after two episodes, mid-way through writing the third: the rerun completes the rest.
    torn = lines[2][:25]
    episodes.write_text("\n".join(lines[:2]) + "\n" + torn)
    resumed = evaluate(config)
    assert {k: v for k, v in resumed.items() if k != "commit"} == {k: v for k, v in summary.items() if k != "commit"}
    assert json.loads((tmp_path / f"{config.run_name}.json").read_text())["tgc"] == summary["tgc"]

    # Episodes played by other code are named in the summary's commit, not passed off as this commit's.
    lines = episodes.read_text().splitlines()
    assert lines[2] == torn and len(lines) == 7  # the torn line stays alone; the replayed record follows
    played = [json.loads(line) for line in lines[:2] + lines[3:]]
    assert {r["commit"] for r in played} == {summary["commit"]}
    played[0]["commit"] = "f" * 40
    episodes.write_text("".join(json.dumps(r) + "\n" for r in played))
    assert evaluate(config)["commit"] == "+".join(sorted({"f" * 40, summary["commit"]}))


def test_a_killed_evaluation_resumes_to_the_uninterrupted_summary(tmp_path):
    """A real crash: ``python -m leaderboard.evaluate`` is SIGKILLed mid-run, then rerun to completion."""
    # random plays every task to the turn limit: ~0.2 s a chain here, so the kill lands mid-run
    argv = ["--agent", "random", "--env", "SageChain-ALFWorld-v0", "--split", "train", "--num-chains", "20",
            "--env-kwargs", '{"max_steps_per_task": 200}']  # fmt: skip
    reference = evaluate(parse_args([*argv, "--output", str(tmp_path / "uninterrupted")]))
    config = parse_args([*argv, "--output", str(tmp_path / "killed")])
    episodes = tmp_path / "killed" / f"{config.run_name}.episodes.jsonl"
    command = [sys.executable, "-m", "leaderboard.evaluate", *argv, "--output", str(tmp_path / "killed")]
    run = subprocess.Popen(command, cwd=Path(__file__).parents[2], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while (not episodes.exists() or len(episodes.read_text().splitlines()) < 3) and time.monotonic() < deadline:
        time.sleep(0.01)
    run.send_signal(signal.SIGKILL)
    assert run.wait() == -signal.SIGKILL, "the evaluation ended before it could be killed"
    played = len(episodes.read_text().splitlines())
    assert 3 <= played < 20
    resumed = evaluate(config)
    assert len(episodes.read_text().splitlines()) == 20  # nothing played twice, nothing lost
    assert {k: v for k, v in resumed.items() if k != "commit"} == {k: v for k, v in reference.items() if k != "commit"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; workers die with their parent on Linux")
def test_the_workers_of_a_killed_evaluation_die_with_it(tmp_path):
    argv = ["--agent", "random", "--env", "SageChain-ALFWorld-v0", "--split", "train", "--num-chains", "40",
            "--env-kwargs", '{"max_steps_per_task": 200}', "--workers", "2", "--output", str(tmp_path)]  # fmt: skip
    episodes = tmp_path / f"{parse_args(argv).run_name}.episodes.jsonl"
    command = [sys.executable, "-m", "leaderboard.evaluate", *argv]
    run = subprocess.Popen(command, cwd=Path(__file__).parents[2], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while (not episodes.exists() or not episodes.read_text()) and time.monotonic() < deadline:  # workers playing
        time.sleep(0.01)
    workers = spawned_workers(run.pid)
    assert len(workers) == 2
    run.send_signal(signal.SIGKILL)
    assert run.wait() == -signal.SIGKILL, "the evaluation ended before it could be killed"
    assert not outliving(workers, 10), "a worker outlived the killed evaluation"


def test_parallel_workers_match_serial(tmp_path):
    base = ["--agent", "random", "--env", TOY_ID, "--num-chains", "4", "--split", "train"]
    serial = evaluate(parse_args([*base, "--output", str(tmp_path / "a")]))
    parallel = evaluate(parse_args([*base, "--output", str(tmp_path / "b"), "--workers", "2"]))
    assert serial["tgc"] == parallel["tgc"] and serial["mean_steps"] == parallel["mean_steps"]


def test_one_worker_pool_plays_each_config_with_its_own_agent(tmp_path):
    """Workers of a shared pool keep the latest config's agent: the next config must not be played by it."""
    from leaderboard.evaluate import worker_pool

    from ..sage_envs.toy_domain import ToyChainEnv

    env_id = "SageChain-ToyPool-v0"  # a domain class behind it, for the expert agent
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=ToyChainEnv)
    args = ["--env", env_id, "--num-chains", "4", "--split", "train", "--workers", "2"]
    configs = [parse_args(["--agent", agent, *args, "--output", str(tmp_path / agent)])
               for agent in ("expert", "random", "expert")]  # fmt: skip
    with worker_pool(env_id, 2) as pool:
        shared = [evaluate(config, pool) for config in configs]
    alone = [evaluate(dataclasses.replace(config, output=str(tmp_path / "alone"))) for config in configs[:2]]
    assert shared[0]["mean_steps"] < shared[1]["mean_steps"]  # the expert's plan is shorter than random play
    for pooled, own in zip(shared, [*alone, alone[0]], strict=True):
        assert (pooled["tgc"], pooled["mean_steps"]) == (own["tgc"], own["mean_steps"])


def _mark_and_wait(folder: str, index: int) -> None:
    Path(folder, str(index)).touch()
    time.sleep(1)


def test_an_error_inside_a_worker_pool_drops_its_queued_work(tmp_path):
    from leaderboard.evaluate import worker_pool

    with pytest.raises(KeyboardInterrupt), worker_pool(TOY_ID, 2) as pool:
        for index in range(12):
            pool.submit(_mark_and_wait, str(tmp_path), index)
        raise KeyboardInterrupt
    assert len(list(tmp_path.iterdir())) < 12  # waiting for the queue would have run every job


class BatchScriptedAgent:
    """The toy expert plan through ``act_batch``; checks that every slot keeps to one chain until it ends."""

    def __init__(self):
        self.tasks, self.calls, self.last_tokens = {}, [], []

    def act_batch(self, observations, infos, slots=None):
        for slot, obs, info in zip(slots, observations, infos, strict=True):
            if info["new_task"]:
                self.tasks[slot] = obs["task"]
            assert obs["task"] == self.tasks[slot], "a slot received another chain's observation"
        self.calls.append(len(slots))
        self.last_tokens = [7] * len(slots)
        return [info["expert_plan"][0] for info in infos]

    def act(self, observation, info):
        raise AssertionError("the batched evaluator must call act_batch")


def test_batched_play_refills_slots_and_records_the_same_episodes():
    envs = [gym.make(TOY_ID, expert_plan=True, split="train") for _ in range(3)]
    agent = BatchScriptedAgent()
    todo = [(seed, chain) for seed in (0, 1) for chain in range(4)]
    batched = {(r["seed"], r["chain"]): r for r in play_chains(envs, agent, todo)}
    assert set(batched) == set(todo)
    # Finished envs start the next chain at once: the batch stays full (toy chains have 1 or 2 tasks of 3 turns).
    assert agent.calls == [3] * 12 and sum(sum(r["steps"]) for r in batched.values()) == 36
    serial_env = gym.make(TOY_ID, expert_plan=True, split="train")
    for seed, chain in todo:
        serial = play_chain(serial_env, ScriptedAgent(), chain=chain, seed=seed)
        record = batched[(seed, chain)]
        assert set(record["tokens"]) == {21}  # 3 turns x last_tokens, not words
        assert {k: v for k, v in record.items() if k != "tokens"} == {k: v for k, v in serial.items() if k != "tokens"}


def test_batch_size_falls_back_to_one_chain_at_a_time_without_act_batch(tmp_path):
    base = ["--agent", "random", "--env", TOY_ID, "--num-chains", "4", "--split", "train"]
    serial = evaluate(parse_args([*base, "--output", str(tmp_path / "a")]))
    batched = evaluate(parse_args([*base, "--output", str(tmp_path / "b"), "--batch-size", "3", "--workers", "2"]))
    assert serial["tgc"] == batched["tgc"] and serial["mean_steps"] == batched["mean_steps"]
    assert serial["config_hash"] != batched["config_hash"]  # never resumed from the other's episodes


def test_sage_cli_reaches_the_evaluator(tmp_path):
    from typer.testing import CliRunner

    from sage_app.cli import app

    result = CliRunner().invoke(app, ["leaderboard", "evaluate", "--agent", "random", "--env", TOY_ID,
                                      "--num-chains", "2", "--split", "train", "--output", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["n_chains"] == 2
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_an_agent_with_a_skill_library_starts_every_chain_from_it():
    from sage_envs.skills import SkillLibrary
    from sage_envs.skills.dsl import parse_definition

    class LibraryAgent(ScriptedAgent):
        def __init__(self):
            skill, _ = parse_definition("skill visit(x):\n    go to {x}")
            self.skill_library = SkillLibrary([skill])
            self.seen = []

        def act(self, observation, info):
            self.seen.append([s["name"] for s in info["skill_library"]])
            return super().act(observation, info)

    env = gym.make(TOY_ID, expert_plan=True)
    agent = LibraryAgent()
    for chain in (0, 1):
        play_chain(env, agent, chain=chain, seed=0)
    assert agent.seen and all(names[:1] == ["visit"] for names in agent.seen)
    assert agent.skill_library.get("visit").uses == 0  # the env plays on a copy


def test_the_expert_calls_the_skills_of_its_starting_library_without_defining_them(tmp_path):
    import sage_envs  # noqa: F401  (registers SageChain-ALFWorld-v0)
    from sage_app.demo import skill_templates
    from sage_envs.skills import SkillLibrary
    from sage_envs.skills.dsl import parse_definition

    SkillLibrary([parse_definition(t)[0] for t in skill_templates(["place_in"])]).save(tmp_path / "bank")
    env = gym.make("SageChain-ALFWorld-v0", split="valid_unseen", skills="program", chain_length=2)
    plain, banked = (
        play_chain(env, make_agent("expert", skills=["place_in"], skills_path=path), chain=0, seed=0)
        for path in (None, str(tmp_path / "bank"))
    )
    assert plain["success"] == banked["success"] == [True, True]
    plain_actions, banked_actions = (sum(record["actions"], []) for record in (plain, banked))
    assert any(a.startswith("skill place_in(") for a in plain_actions)
    assert not any(a.startswith("skill ") for a in banked_actions)
    assert any("place_in(" in a for a in banked_actions) and sum(banked["tokens"]) < sum(plain["tokens"])


def test_a_resume_keeps_the_commit_and_versions_of_earlier_records(tmp_path):
    base = ["--agent", "random", "--env", TOY_ID, "--split", "train", "--output", str(tmp_path)]
    first = evaluate(parse_args([*base, "--num-chains", "2"]))
    assert first["versions"]["gymnasium"] == gym.__version__
    config = parse_args([*base, "--num-chains", "4"])
    episodes = tmp_path / f"{config.run_name}.episodes.jsonl"
    earlier = [json.loads(line) for line in episodes.read_text().splitlines()]
    for record in earlier:  # as if an older install at another commit had played them
        record["commit"], record["versions"] = "e" * 40, {**record["versions"], "torch": "0.0.1"}
    episodes.write_text("".join(json.dumps(r) + "\n" for r in earlier))
    before = episodes.read_text()
    resumed = evaluate(config)
    assert episodes.read_text().startswith(before)  # earlier lines untouched, the new ones appended
    assert resumed["commit"] == "+".join(sorted({"e" * 40, first["commit"]}))
    torch_now = first["versions"].get("torch")
    assert resumed["versions"]["torch"] == "+".join(sorted({"0.0.1", torch_now} - {None}))
    assert resumed["versions"]["gymnasium"] == gym.__version__  # one version where all records agree


def test_records_without_provenance_take_the_earlier_summary_s(tmp_path):
    config = parse_args(["--agent", "random", "--env", TOY_ID, "--split", "train", "--num-chains", "2",
                         "--output", str(tmp_path)])  # fmt: skip
    evaluate(config)
    summary_path = tmp_path / f"{config.run_name}.json"
    summary = json.loads(summary_path.read_text())
    summary["commit"], summary["versions"] = "a" * 40, {"python": "3.0.0"}
    summary_path.write_text(json.dumps(summary))
    episodes = tmp_path / f"{config.run_name}.episodes.jsonl"
    bare = [{k: v for k, v in json.loads(line).items() if k not in ("commit", "versions")}
            for line in episodes.read_text().splitlines()]  # fmt: skip
    episodes.write_text("".join(json.dumps(r) + "\n" for r in bare))
    resumed = evaluate(config)  # nothing left to play: the summary is rebuilt from the log
    assert resumed["commit"] == "a" * 40 and resumed["versions"] == {"python": "3.0.0"}


@pytest.mark.parametrize("summary_path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.stem)
def test_every_committed_summary_is_recomputed_from_its_episode_log(summary_path):
    committed = json.loads(summary_path.read_text())
    assert resummarize(summary_path, write=False) == committed
    # Provenance: the summary names its library versions and commit, and so does every episode record.
    assert committed["versions"].get("python") and len(committed["commit"]) == 40
    records = [json.loads(line) for line in summary_path.with_suffix(".episodes.jsonl").read_text().splitlines()]
    assert records and all(len(r["commit"]) == 40 and r["versions"] for r in records)


def test_resummarize_keeps_provenance_and_recomputes_figures(tmp_path):
    config = parse_args(["--agent", "random", "--env", TOY_ID, "--split", "train", "--num-chains", "3",
                         "--output", str(tmp_path)])  # fmt: skip
    summary = evaluate(config)
    path = tmp_path / f"{config.run_name}.json"
    tampered = {**summary, "tgc": 0.99, "ci95": {}, "commit": "c" * 40, "model": "kept"}
    del tampered["chain_length_mix"]
    path.write_text(json.dumps(tampered))
    rewritten = resummarize(path)
    assert rewritten == {**summary, "commit": "c" * 40, "model": "kept"}
    assert json.loads(path.read_text()) == rewritten


def test_a_persistent_library_carries_over_resumes_and_replays(tmp_path):
    """``library_scope="persistent"``: chains in order in one env, each from the library the one before ended with."""
    from leaderboard.evaluate import summary_episodes
    from leaderboard.verify import verify

    def argv(scope, output):
        env_kwargs = {"skills": "program", "chain_length": 2, "library_scope": scope}
        return ["--agent", "expert", "--env", "SageChain-ALFWorld-v0", "--split", "valid_unseen", "--num-chains", "4",
                "--env-kwargs", json.dumps(env_kwargs), "--output", str(tmp_path / output)]  # fmt: skip

    for option in (["--workers", "2"], ["--batch-size", "2"]):
        with pytest.raises(ValueError, match="workers=1 and batch_size=1"):
            parse_args([*argv("persistent", "x"), *option])
    per_chain = evaluate(parse_args(argv("chain", "per_chain")))
    config = parse_args(argv("persistent", "persistent"))
    persistent = evaluate(config)
    assert persistent["tgc"] == per_chain["tgc"] == 1.0
    # the skills a chain defined are called, not defined again, in the chains after it
    assert persistent["skills_created"] < per_chain["skills_created"]
    assert persistent["mean_tokens"] < per_chain["mean_tokens"]
    path = tmp_path / "persistent" / f"{config.run_name}.json"
    _, records = summary_episodes(path)
    names = [{s["name"] for s in r["skill_library_end"]["skills"]} for r in records]
    assert names[0] and all(before <= after for before, after in zip(names, names[1:], strict=False))
    counts, mismatch = verify(path)  # replayed in order, the library carried over as in the run
    assert mismatch is None and counts["chains"] == 4

    # killed after 2 chains (num_chains is not part of the config): the rerun starts chain 2 from chain 1's library
    resumed_config = parse_args(argv("persistent", "resumed"))
    evaluate(dataclasses.replace(resumed_config, num_chains=2))
    resumed = evaluate(resumed_config)
    assert {k: v for k, v in resumed.items() if k != "commit"} == {k: v for k, v in persistent.items() if k != "commit"}
    # a log that is not the first chains in order leaves the starting library unknown: refused, nothing played
    log = tmp_path / "resumed" / f"{config.run_name}.episodes.jsonl"
    log.write_text("".join(line + "\n" for line in log.read_text().splitlines()[1:]))
    with pytest.raises(ValueError, match="delete that log"):
        evaluate(resumed_config)
    assert len(log.read_text().splitlines()) == 3


def test_config_hash_reads_a_model_path_under_the_working_directory_as_its_relative_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kwargs = {"model_path": "runs/demo/sft/model", "constrained": True}
    relative = EvalConfig(agent="sft", agent_kwargs=kwargs, batch_size=16)
    assert relative.config_hash == "23ff5f35e3a0"  # its hash before paths were read: earlier runs' logs key on it
    absolute = EvalConfig(agent="sft", agent_kwargs={**kwargs, "model_path": str(tmp_path / "runs/demo/sft/model")})
    assert dataclasses.replace(absolute, batch_size=16).config_hash == relative.config_hash  # the run resumes
    outside = EvalConfig(agent="sft", agent_kwargs={**kwargs, "model_path": "/elsewhere/runs/demo/sft/model"})
    assert dataclasses.replace(outside, batch_size=16).config_hash != relative.config_hash  # another model
