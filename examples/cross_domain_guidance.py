"""Guidance skills from one domain loaded into another's chains: where they fire and whether what they say is right.

    python examples/cross_domain_guidance.py runs/demo-long/reskill/checkpoints/step_100/reskill_library \\
        --target SageChain-ALFWorld-v0=valid_unseen --target SageChain-ScienceWorld-v0=dev \\
        --target SageChain-TextWorld-v0=valid --chains 20

Issue 22 item 6. The library (a folder of SKILL.md folders, e.g. the versions a ReSkill run accepted) is loaded
into each target env (``skills="guidance"``, ``reset(options={"skill_library": ...})``) and the target domain's
expert plays its first ``--chains`` chains of the split without skills. The expert ignores guidance, so its turns
are what a good policy does there; per skill and target the script reports, from the observations the env
rendered:

- **shown**: the share of tasks on which the env showed the skill at least once (its trigger fired), and the
  turns per task that showed it;
- **right where shown**: the share of those turns on which the expert's command has the verb the skill advises
  (``Next, do 'open', ...``, :func:`~sage_agents.reskill.creator.advised_key`), beside **right anywhere**, the
  same share over every turn: a trigger that knows the situation makes the first larger than the second;
- **can follow**: the share of the turns that showed it on which some admissible command has that verb;
- **unknown words**: words of its text that the target's tokenizer encodes as unknown (``--tokenizer ENV=PATH``
  gives a target's model folder; by default the word-level tokenizer built from the target domain's vocabulary
  and the words of the guidance layout, what a demo model trained with guidance in its SFT prompts knows).

The source domain among the targets is the control: the same figures where the skills were made.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import gymnasium as gym

import sage_envs  # noqa: F401  (registers the env ids)
from sage_agents.baselines import make_expert
from sage_agents.models import build_tokenizer
from sage_agents.reskill.assertions import action_key
from sage_agents.reskill.creator import WHEN, advised_key, next_action, skill_text, unknown_words, when_line
from sage_envs.skills import SkillLibrary


def shown_names(skills_text: str, names: list[str]) -> list[str]:
    """The guidance skills of ``names`` that an observation's ``skills`` text shows (``- name: ...`` lines)."""
    return [name for name in names if f"\n- {name}: " in f"\n{skills_text}"]


def measure(library: SkillLibrary, env_id: str, split: str, chains: int) -> tuple[dict[str, Counter], int, int]:
    """Play the target's expert on its first ``chains`` chains with ``library`` loaded; per-skill counts.

    Returns ``(counts by skill name, tasks, turns)``; the counts: ``tasks_shown``, ``turns_shown``,
    ``right_shown`` (turns that showed it where the expert's verb is the advised one), ``followable`` (turns that
    showed it where an admissible command has that verb), ``right_anywhere`` (any turn where the verb is it).
    """
    env = gym.make(env_id, split=split, skills="guidance", chain_length=2, max_steps_per_task=30)
    expert = make_expert(use_skills=False, env_id=env_id)
    skills = library.guidance()
    names = [s.name for s in skills]
    advised = {s.name: advised_key(s.text) for s in skills}
    figures = {name: Counter() for name in names}
    tasks = turns = 0
    for chain in range(min(chains, env.unwrapped.num_chains)):
        obs, info = env.reset(options={"chain": chain, "skill_library": library.copy()})
        expert.reset()
        shown_in_task: set[str] = set()
        done = False
        while not done:
            shown = shown_names(obs["skills"], names)
            keys = {action_key(c) for c in info["admissible_commands"]}
            action = expert.act(obs, info)
            for name in names:
                right = advised[name] is not None and action_key(action) == advised[name]
                figures[name]["right_anywhere"] += right
                if name in shown:
                    figures[name]["turns_shown"] += 1
                    figures[name]["right_shown"] += right
                    figures[name]["followable"] += advised[name] in keys
            shown_in_task.update(shown)
            obs, _, terminated, truncated, info = env.step(action)
            turns += 1
            done = terminated or truncated
            if info.get("new_task") or done:
                tasks += 1
                for name in shown_in_task:
                    figures[name]["tasks_shown"] += 1
                shown_in_task = set()
    env.close()
    return figures, tasks, turns


def layout_tokenizer(env_id: str):
    """The target domain's word-level tokenizer plus the words of every rule skill's layout."""
    layout = [skill_text(when_line(t, r"^go\ to\b"), next_action("go to", "x")) for t in (*WHEN, "action_pattern")]
    return build_tokenizer(layout, env_id=env_id)


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("library", help="a folder of SKILL.md folders (guidance skills)")
    parser.add_argument("--target", action="append", required=True, metavar="ENV=SPLIT", help="repeatable")
    parser.add_argument("--chains", type=int, default=20, help="first chains of each target split")
    parser.add_argument("--tokenizer", action="append", default=[], metavar="ENV=PATH", help="a target's model folder")
    args = parser.parse_args()
    library = SkillLibrary.load(args.library)
    if not library.guidance():
        raise SystemExit(f"{args.library} holds no active guidance skill.")
    models = dict(item.split("=", 1) for item in args.tokenizer)
    print(f"{len(library.guidance())} guidance skills from {args.library}:")
    for skill in library.guidance():
        when = skill.pattern if skill.trigger == "action_pattern" else skill.trigger
        print(f"- {skill.name} [{when}]: {' | '.join(skill.text.splitlines())}")
    print()
    print(
        "| skill | target | tasks shown | turns shown per task | right where shown | right anywhere | can follow "
        "| unknown words |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for target in args.target:
        env_id, split = target.split("=", 1)
        if env_id in models:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(Path(models[env_id]))
        else:
            tokenizer = layout_tokenizer(env_id)
        figures, tasks, turns = measure(library, env_id, split, args.chains)
        for skill in library.guidance():
            f, unknown = figures[skill.name], ", ".join(unknown_words(skill.text, tokenizer)) or "none"
            verb = [share(f["right_shown"], f["turns_shown"]), share(f["right_anywhere"], turns),
                    share(f["followable"], f["turns_shown"])]  # fmt: skip
            if advised_key(skill.text) is None:  # a text that names no verb: nothing to be right about
                verb = ["-"] * 3
            print(f"| {skill.name} | {env_id} {split} | {share(f['tasks_shown'], tasks)} | "
                  f"{f['turns_shown'] / tasks:.1f} | {' | '.join(verb)} | {unknown} |")  # fmt: skip
        print(f"<!-- {env_id} {split}: {tasks} tasks, {turns} expert turns -->", flush=True)


if __name__ == "__main__":
    main()
