"""Train grpo, sage or reskill for a few steps with TrainConfig + Trainer, and print each step's metrics.

    python examples/train.py --algo sage        # 2 steps of 2 rollouts from a fresh tiny model: seconds on a CPU
    python examples/train.py --algo reskill --steps 20 --group-size 8 --output runs/try-reskill
    python examples/train.py --algo grpo --model-path runs/demo/sft/model --max-turns 30 --steps 10

``config`` is a ``TrainConfig`` (sage_agents/config.py; every field in docs/agents.md) at toy size; ``Trainer``
plays ``--group-size`` rollouts of one train chain per step, computes the algorithm's rewards and advantages and
updates the model. The model's action is generated token by token among the admissible commands (constrained
decoding, prompts as in ``make demo``); GRPO plays plain commands, SAGE may also choose one of the expert's skill
definitions by its name (the body follows, forced) and call it (its reward pays a task that reuses a skill of an
earlier task), ReSkill sees guidance skills and creates and tests some once its reservoir holds a few episodes. By
default the model is a 2-layer tiny model built here (no download): it acts at random and rarely completes a task
in a few turns, and a group whose rollouts all fail has no advantage (``|advantage| 0``), so no gradient. The
figures then say that the loop runs, not that it learns; start from a warm-started model (``--model-path``,
``make demo``'s SFT checkpoint) to see rewards move.
The trainer writes ``OUTPUT/metrics.jsonl`` and a checkpoint; this script prints each step's metrics from it.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from sage_agents.checkpoints import read_metrics
from sage_agents.config import ALGOS, TrainConfig
from sage_agents.trainer import Trainer
from sage_envs.domains.alfworld.expert import SKILLS, skill_definition

SKILL_MODES = {"grpo": "none", "sage": "program", "reskill": "guidance"}
"""The env's skills mode per algorithm, as in ``make demo``: GRPO plays plain commands."""

SHOWN = {
    "env/task_success": "TGC",
    "env/chain_success": "SGC",
    "env/steps_per_task": "turns/task",
    "env/skills_created": "skills created/chain",
    "env/skill_reuse_rate": "reuse",
    "env/reward_mean": "reward",
    "losses/advantage_abs_mean": "|advantage|",
    "losses/loss": "loss",
    "losses/grad_norm": "grad norm",
    "reskill/version": "library version",
    "reskill/created": "skills proposed",
}
"""The metrics printed per step (every key is in docs/agents.md's table or docs/reskill.md's) and their labels."""


def config(
    algo: str, steps: int, group_size: int, max_turns: int, output: str, seed: int, model_path: str | None = None
) -> TrainConfig:
    """A toy-size configuration of ``algo``: short tasks, small groups, a 2-layer model of hidden size 32 built
    from scratch unless ``model_path`` names a local model (prompt and decoding as in ``make demo``)."""
    reskill = {"reskill_min_reservoir": 2 * group_size, "reskill_min_test_steps": 1, "reskill_min_test_episodes": 4}
    return TrainConfig(
        algo=algo,
        total_steps=steps,
        group_size=group_size,
        seed=seed,
        lr=1e-4,  # a tiny model on a CPU needs ~1e-4 (SAGE's 1e-6 is for 7B models)
        model_path=model_path,
        tiny_hidden=32,
        tiny_layers=2,
        env_kwargs={"max_steps_per_task": max_turns, "skills": SKILL_MODES[algo]},
        constrained=True,
        skill_templates=[skill_definition(name) for name in SKILLS] if algo == "sage" else [],
        typed_arguments=True,  # a call's arguments are of the types the task names: "put a pen in shelf" -> pen N
        history_turns=1,
        show_admissible=False,  # constrained decoding offers the admissible commands anyway: a shorter prompt
        skill_descriptions=False,
        output_dir=output,
        save_every=0,  # one checkpoint, at the end
        report_to=["jsonl"],
        progress=False,
        cpu=True,
        **(reskill if algo == "reskill" else {}),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=ALGOS, default="sage")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=2, help="rollouts per chain (SAGE and ReSkill use 8)")
    parser.add_argument("--max-turns", type=int, default=3, help="agent turns allowed per task")
    parser.add_argument("--model-path", help="a local model to start from, e.g. runs/demo/sft/model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", help="where metrics and the checkpoint go (default: a temporary folder)")
    args = parser.parse_args()

    output = args.output or tempfile.mkdtemp(prefix=f"train-{args.algo}-")
    trainer = Trainer(
        config(args.algo, args.steps, args.group_size, args.max_turns, output, args.seed, args.model_path)
    )
    try:
        trainer.train()
    finally:
        trainer.close()
    print(f"{args.algo}: {args.steps} steps, {args.group_size} rollouts of one train chain per step, in {output}")
    for row in read_metrics(output):
        shown = ", ".join(f"{label} {row[key]:.3g}" for key, label in SHOWN.items() if key in row)
        print(f"step {int(row['charts/step'])}: {shown}")
    checkpoints = sorted((Path(output) / "checkpoints").iterdir())
    print(f"checkpoint: {checkpoints[-1]}")


if __name__ == "__main__":
    main()
