"""What program skills cost in generated tokens at perfect play: the scripted expert three ways, side by side.

The expert plays the same generated chains with plain commands (``skills="none"``), defining its skills in each
chain (the paper's protocol: every chain starts with an empty library), and calling them from a library that
already holds them (cross-chain reuse). Its actions are recounted with a model's tokenizer
(``token_breakdown.breakdown``), so the figures compare with that model's agents; the expert's own log counts
whitespace words.

    python examples/token_ceiling.py --model-path runs/demo/sft/model              # demo protocol, 100 chains
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from token_breakdown import breakdown
from transformers import AutoTokenizer

from leaderboard.evaluate import EvalConfig, evaluate
from sage_app.demo import DemoConfig, skill_templates
from sage_envs.skills import SkillLibrary
from sage_envs.skills.dsl import parse_definition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-path", required=True, help="the local model whose tokenizer counts the tokens")
    parser.add_argument("--split", default="valid_unseen")
    parser.add_argument("--num-chains", type=int, default=100)
    args = parser.parse_args()
    demo = DemoConfig()
    work = Path(tempfile.mkdtemp())
    SkillLibrary([parse_definition(t)[0] for t in skill_templates(demo.expert_skills)]).save(work / "bank")
    ways = {
        "plain commands": ("none", {"use_skills": False}),
        "defines its skills in each chain": ("program", {"skills": demo.expert_skills}),
        "calls them from a prefilled library": ("program", {"skills": demo.expert_skills,
                                                            "skills_path": str(work / "bank")}),
    }  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(args.model_path)
    rows = []
    for i, (way, (skills, agent_kwargs)) in enumerate(ways.items()):
        config = EvalConfig(
            agent="expert", label=f"expert-{i}", split=args.split, num_chains=args.num_chains, seeds=[0],
            agent_kwargs=agent_kwargs, env_kwargs={**demo.env_kwargs, "skills": skills}, output=str(work),
        )  # fmt: skip
        summary = evaluate(config)
        rows.append((way, summary, breakdown(str(work / f"{config.run_name}.episodes.jsonl"), tokenizer)))
    plain = rows[0][2]["recounted"]
    print("| expert | TGC % | steps / task | words / task | tokens / task | of which definitions | tokens vs plain |")
    print("|---|---|---|---|---|---|---|")
    for way, summary, tokens in rows:
        print(
            f"| {way} | {100 * summary['tgc']:.1f} | {summary['mean_steps']:.1f} | {tokens['recorded']:.1f} | "
            f"{tokens['recounted']:.1f} | {tokens['definitions']:.1f} | {tokens['recounted'] / plain - 1:+.1%} |"
        )


if __name__ == "__main__":
    main()
