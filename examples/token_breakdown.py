"""Where an agent's generated tokens go: skill definitions, skill calls and plain commands, per task.

Recounts the actions of a leaderboard episode log with the model's own tokenizer (+1 EOS per action, as the
policy generates them) and checks the total against the log's recorded tokens.

    python examples/token_breakdown.py --model-path runs/demo/sft/model \
        docs/assets/demo/results/sage__SageChain-ALFWorld-v0__valid_unseen__default.episodes.jsonl
"""

from __future__ import annotations

import argparse
import json

from transformers import AutoTokenizer

from sage_agents.policy import parse_action

KINDS = {"define": "definitions", "call": "calls", "command": "commands", "none": "commands"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("episodes", help="an *.episodes.jsonl written by leaderboard.evaluate")
    parser.add_argument("--model-path", required=True, help="the local model whose tokenizer the agent used")
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(args.model_path)
    totals = {"recorded": 0, "definitions": 0, "calls": 0, "commands": 0}
    tasks = 0
    for line in open(args.episodes):
        record = json.loads(line)
        for actions, recorded in zip(record["actions"], record["tokens"], strict=True):
            tasks += 1
            totals["recorded"] += recorded
            for action in actions:
                tokens = len(tokenizer(action, add_special_tokens=False).input_ids) + 1  # + EOS
                totals[KINDS[parse_action(action).kind]] += tokens
    recount = totals["definitions"] + totals["calls"] + totals["commands"]
    parts = ", ".join(f"{kind} {totals[kind] / tasks:.1f}" for kind in ("definitions", "calls", "commands"))
    recorded = totals["recorded"] / tasks
    print(f"{tasks} tasks; tokens per task: recorded {recorded:.1f}, recounted {recount / tasks:.1f} = {parts}")


if __name__ == "__main__":
    main()
