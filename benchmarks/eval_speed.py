"""Leaderboard evaluation of an LLM agent: chains played one at a time vs in lockstep batches, side by side.

    python benchmarks/eval_speed.py                                   # random tiny model, 8 chains, ~2 min
    python benchmarks/eval_speed.py --model-path runs/demo/sft/model --chains 16 --batch-sizes 1 8 16
    python benchmarks/eval_speed.py --model-path runs/demo/sage/checkpoints/step_0000006/model --skills program
    python benchmarks/eval_speed.py --model-path runs/demo/sft/model --chains 32 --compare option-memo

``leaderboard.evaluate.evaluate`` plays the same generated ``valid_unseen`` chains of ``SageChain-ALFWorld-v0``
with the ``policy`` agent (constrained decoding, the demo's prompt) once per batch size, in one process
(``workers=1``). Batch size 1 calls ``act`` once per turn of one chain; batch size B keeps B chains in play and
calls ``act_batch`` once per turn for all of them (one batched ``generate``: a prefill, then one forward per
token for the whole batch), starting the next chain in an env as soon as its chain ends. Without
``--model-path`` the model is a randomly initialised tiny model of the demo's size, built offline (its chains run
to the turn limit, so every batch stays full until the tail). ``--expert-skills`` offers the templates of a demo
run with ``DemoConfig.expert_skills`` set.

Columns: ``s`` = wall seconds of the evaluation; ``s/chain``; ``x`` = the first row's seconds / this row's seconds
(how many times faster); ``same`` = chains whose actions equal those of the first row (left padding can round a
greedy near-tie the other way, so a few may differ); ``TGC`` = task success of the run.

``--compare option-memo``: one batch size (the last of ``--batch-sizes``), the policy tokenizing every option of
every constrained choice afresh (as before ``LLMPolicy.encode_option``) vs through its memo; the runs alternate
(``--repeat`` rounds) and ``s`` is each row's median. Both must play the same actions (``same`` = all).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from leaderboard.evaluate import EvalConfig, evaluate
from sage_agents.models import build_tiny_model
from sage_agents.policy import LLMPolicy
from sage_app.demo import DemoConfig, skill_templates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", default=None, help="a local HF causal LM folder (default: random tiny)")
    parser.add_argument("--chains", type=int, default=8, help="valid_unseen chains per run")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 8], help="runs to compare (first = 1)")
    parser.add_argument("--expert-skills", nargs="+", default=None, help="as DemoConfig.expert_skills (default all)")
    parser.add_argument("--skills", choices=["none", "program"], default="none", help="the env's skills mode")
    parser.add_argument("--max-steps-per-task", type=int, default=10, help="turn limit per task")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--compare", choices=("batch", "option-memo"), default="batch")
    parser.add_argument("--repeat", type=int, default=1, help="alternating rounds (--compare option-memo)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    demo = DemoConfig()
    with tempfile.TemporaryDirectory() as tmp:
        model_path = args.model_path
        if model_path is None:
            model, tokenizer = build_tiny_model(skill_templates(), hidden=demo.tiny_hidden, layers=demo.tiny_layers)
            model_path = f"{tmp}/model"
            model.save_pretrained(model_path)
            tokenizer.save_pretrained(model_path)
        agent_kwargs = {"model_path": model_path, "constrained": True, **demo.prompt_kwargs}
        if args.skills == "program":
            agent_kwargs["skill_templates"] = skill_templates(args.expert_skills)
        env_kwargs = {**demo.env_kwargs, "skills": args.skills, "max_steps_per_task": args.max_steps_per_task}

        def run(label: str, batch: int) -> tuple[float, int, float]:
            config = EvalConfig(
                agent="policy", split="valid_unseen", num_chains=args.chains, output=f"{tmp}/{label}",
                agent_kwargs=agent_kwargs, env_kwargs=env_kwargs, batch_size=batch,
            )  # fmt: skip
            start = time.perf_counter()
            summary = evaluate(config)
            seconds = time.perf_counter() - start
            episodes = Path(config.output, f"{config.run_name}.episodes.jsonl").read_text().splitlines()
            actions[label] = {(r["seed"], r["chain"]): r["actions"] for r in map(json.loads, episodes)}
            return seconds, summary["n_chains"], summary["tgc"]

        actions: dict[str, dict] = {}
        rows = []
        if args.compare == "batch":
            rows = [(str(batch), *run(str(batch), batch)) for batch in args.batch_sizes]
        else:
            batch, memo = args.batch_sizes[-1], LLMPolicy.encode_option
            seconds: dict[str, list[float]] = {"memo off": [], "memo on": []}
            for _ in range(args.repeat):
                for label in seconds:
                    LLMPolicy.encode_option = memo if label == "memo on" else LLMPolicy.encode  # off: no memo
                    spent, n, tgc = run(label, batch)
                    seconds[label].append(spent)
            LLMPolicy.encode_option = memo
            rows = [(label, statistics.median(spent), n, tgc) for label, spent in seconds.items()]
    reference = actions[rows[0][0]]
    model = args.model_path or "random tiny"
    print(f"policy agent, {args.chains} chains of valid_unseen, skills={args.skills}, model={model}")
    print(f"{'run':>8} {'s':>8} {'s/chain':>8} {'x':>6} {'same':>7} {'TGC':>6}")
    for label, spent, n, tgc in rows:
        same = sum(actions[label][key] == reference[key] for key in reference)
        print(f"{label:>8} {spent:>8.1f} {spent / n:>8.2f} {rows[0][1] / spent:>6.2f} {same:>3}/{n:<3} {tgc:>6.2f}")


if __name__ == "__main__":
    main()
