"""Leaderboard evaluation of an LLM agent: chains played one at a time vs in lockstep batches, side by side.

    python benchmarks/eval_speed.py                                   # random tiny model, 8 chains, ~2 min
    python benchmarks/eval_speed.py --model-path runs/demo/sft/model --chains 16 --batch-sizes 1 8 16
    python benchmarks/eval_speed.py --model-path runs/demo/sage/checkpoints/step_0000006/model --skills program
    python benchmarks/eval_speed.py --model-path runs/demo/sft/model --chains 32 --compare option-memo
    python benchmarks/eval_speed.py --model-path runs/demo/sft/model --chains 50 --compare pool --workers 2
    python benchmarks/eval_speed.py --chains 16 --batch-sizes 16 --compare greedy --repeat 2

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
``--compare pool``: ``--entries`` agents evaluated one after another with ``--workers`` processes each, as the
demo's stage 4 does: a new pool of workers per entry (each worker importing torch and transformers and loading its
model) vs one :func:`leaderboard.evaluate.worker_pool` for all of them (``s`` = all entries, ``same`` = the
first entry's chains).
``--compare greedy``: one batch size, greedy decoding token by token vs by whole options (``LLMPolicy(option_greedy=
...)``, the demo's); the runs alternate and ``s`` is each row's median. A trained model plays other chains each
way (other actions, other turn counts: ``same`` says how many match); the random tiny default plays every task to
the turn limit either way, the like-for-like cost per turn.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from leaderboard.evaluate import EvalConfig, evaluate, worker_pool
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
    parser.add_argument("--compare", choices=("batch", "option-memo", "pool", "greedy"), default="batch")
    parser.add_argument("--repeat", type=int, default=1, help="alternating rounds (option-memo, pool, greedy)")
    parser.add_argument("--workers", type=int, default=1, help="evaluation worker processes per entry")
    parser.add_argument("--entries", type=int, default=3, help="agents evaluated in turn (--compare pool)")
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

        def run(label: str, batch: int, entries: int = 1, pool: Any = None, **policy: Any) -> tuple[float, int, float]:
            """Evaluate ``entries`` agents (the same model under other labels) in turn; the first one's actions.

            ``policy``: agent kwargs over the demo's."""
            start, chains = time.perf_counter(), 0
            for entry in range(entries):
                config = EvalConfig(
                    agent="policy", label=f"policy-{entry}", split="valid_unseen", num_chains=args.chains,
                    output=f"{tmp}/{label}", agent_kwargs={**agent_kwargs, **policy}, env_kwargs=env_kwargs,
                    batch_size=batch, workers=args.workers,
                )  # fmt: skip
                summary = evaluate(config, pool)
                chains += summary["n_chains"]
                if entry == 0:
                    episodes = Path(config.output, f"{config.run_name}.episodes.jsonl").read_text().splitlines()
                    actions[label] = {(r["seed"], r["chain"]): r["actions"] for r in map(json.loads, episodes)}
            return time.perf_counter() - start, chains, summary["tgc"]

        actions: dict[str, dict] = {}
        rows = []
        if args.compare == "batch":
            rows = [(str(batch), *run(str(batch), batch)) for batch in args.batch_sizes]
        elif args.compare == "pool":
            batch = args.batch_sizes[-1]
            seconds = {"a pool per entry": [], "one pool": []}
            for _ in range(args.repeat):
                seconds["a pool per entry"].append(run("a pool per entry", batch, args.entries)[0])
                with worker_pool(demo.env_id, args.workers) as pool:
                    spent, n, tgc = run("one pool", batch, args.entries, pool)
                seconds["one pool"].append(spent)
            rows = [(label, statistics.median(spent), n, tgc) for label, spent in seconds.items()]
        elif args.compare == "greedy":
            batch = args.batch_sizes[-1]
            seconds = {"token by token": [], "whole options": []}
            for _ in range(args.repeat):
                for label in seconds:
                    spent, n, tgc = run(label, batch, option_greedy=label == "whole options")
                    seconds[label].append(spent)
            rows = [(label, statistics.median(spent), n, tgc) for label, spent in seconds.items()]
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
    print(f"{'run':>16} {'s':>8} {'s/chain':>8} {'x':>6} {'same':>7} {'TGC':>6}")
    for label, spent, n, tgc in rows:
        same = f"{sum(actions[label][key] == reference[key] for key in reference)}/{len(reference)}"
        print(f"{label:>16} {spent:>8.1f} {spent / n:>8.2f} {rows[0][1] / spent:>6.2f} {same:>7} {tgc:>6.2f}")


if __name__ == "__main__":
    main()
