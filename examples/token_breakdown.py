"""Where an agent's generated tokens go: skill definitions, skill calls and plain commands, per task.

Recounts the actions of a leaderboard episode log with the model's own tokenizer (+1 EOS per action, as the
policy generates them) and checks the total against the log's recorded tokens (an agent without a tokenizer,
like the scripted expert, is recorded in whitespace words, so only the recount compares with an LLM's).

    python examples/token_breakdown.py --model-path runs/demo/sft/model \
        docs/assets/demo/results/sage__SageChain-ALFWorld-v0__valid_unseen__default.episodes.jsonl
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from transformers import AutoTokenizer

from sage_agents.policy import parse_action

KINDS = {"define": "definitions", "call": "calls", "command": "commands", "none": "commands"}


def breakdown(episodes: str, tokenizer: Any) -> dict[str, float]:
    """Per-task means of the log's ``recorded`` tokens and of the recount: ``definitions``, ``calls``,
    ``commands`` and their sum ``recounted``."""
    totals = {"recorded": 0, "definitions": 0, "calls": 0, "commands": 0}
    tasks = 0
    for line in open(episodes):
        record = json.loads(line)
        for actions, recorded in zip(record["actions"], record["tokens"], strict=True):
            tasks += 1
            totals["recorded"] += recorded
            for action in actions:
                tokens = len(tokenizer(action, add_special_tokens=False).input_ids) + 1  # + EOS
                totals[KINDS[parse_action(action).kind]] += tokens
    totals["recounted"] = totals["definitions"] + totals["calls"] + totals["commands"]
    return {kind: total / tasks for kind, total in totals.items()} | {"tasks": tasks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("episodes", help="an *.episodes.jsonl written by leaderboard.evaluate")
    parser.add_argument("--model-path", required=True, help="the local model whose tokenizer the agent used")
    args = parser.parse_args()
    got = breakdown(args.episodes, AutoTokenizer.from_pretrained(args.model_path))
    parts = ", ".join(f"{kind} {got[kind]:.1f}" for kind in ("definitions", "calls", "commands"))
    print(
        f"{got['tasks']} tasks; tokens per task: recorded {got['recorded']:.1f}, recounted {got['recounted']:.1f} "
        f"= {parts}"
    )


if __name__ == "__main__":
    main()
