"""Does an SFT model trained with guidance in its prompts act on it? Relevant vs no vs irrelevant guidance.

    python examples/guidance_conditioning.py --quick            # a smoke run (tests)
    python examples/guidance_conditioning.py --train-chains 200 --eval-chains 40
    python examples/guidance_conditioning.py --model runs/demo/sft/model --eval-chains 40   # the demo's SFT model
    python examples/guidance_conditioning.py --model M --eval-chains 100 --conditions relevant none --probe-chains 0

1. The observation-only expert plays generated ``train`` chains; its turns become SFT pairs in the demo's prompt
   format, a share of them showing a guidance skill made for the turn (it names the expert's action), a share one
   made for another task and verb, the rest none (``sage_agents.sft.GuidanceMix``, ``collect_expert_pairs``).
2. A tiny model (word-level tokenizer, as in the demo) is warm-started on them (``--model``: an SFT model made
   elsewhere, e.g. by the demo, is evaluated instead; the turns then only supply other tasks' advice).
3. It plays held-out ``valid_unseen`` chains four times (greedy, constrained): shown, on every turn, the guidance
   skill made from what the expert would do there (the expert shadows the model's own path:
   ``expert_guidance.ShadowExpert``), the same verb's guidance made for another task (its example names another
   game's objects, as ReSkill's rule skills do), nothing, or a skill made for another situation. Printed: TGC
   (tasks completed) and the share of turns on which the model sent the expert's command.
4. The probe (``--probe-chains``, train chains after the training ones, played by the expert with 30% random
   commands): on each turn, does the model's greedy constrained choice equal the command a guidance skill names,
   shown the skill and not? Two kinds of turns: the random ones (the guidance names the command sent: only the
   guidance tells it) and the expert's own (it names the expert's command, which the observation also decides).
"""

from __future__ import annotations

import argparse
import copy
import random
import tempfile
import time
from typing import Any

import gymnasium as gym

import sage_envs  # noqa: F401
from sage_agents.models import build_tiny_model, build_tokenizer, load_policy
from sage_agents.policy import LLMPolicy
from sage_agents.reskill.assertions import action_key
from sage_agents.sft import (
    GuidanceMix,
    Perturbation,
    add_guidance,
    advice_elsewhere,
    collect_expert_turns,
    guidance_skill,
    other_advice,
    reweight_pairs,
    sft_warm_start,
    shown_guidance,
)
from sage_app.demo import ALFWORLD as ENV_ID  # the ALFWorld expert's advice: this study is ALFWorld's
from sage_app.demo import DemoConfig
from sage_envs.domains.alfworld import AlfworldExpert
from sage_envs.domains.alfworld.expert_guidance import ShadowExpert, advise

CONDITIONS = ("relevant", "elsewhere", "none", "irrelevant")


def play(policy: LLMPolicy, env_kwargs: dict, chains: list[int], condition: str, pool: list, batch: int = 8) -> dict:
    """Play ``chains`` of ``valid_unseen`` greedily, shown ``condition``'s guidance; TGC and expert agreement.

    ``pool``: ``(task sentence, advice)`` pairs the other tasks' guidance is drawn from (:func:`advice_elsewhere`,
    :func:`other_advice`).
    """
    rng = random.Random(0)
    tasks = successes = agree = turns = 0
    for start in range(0, len(chains), batch):
        envs = [
            gym.make(ENV_ID, split="valid_unseen", skills="none", **env_kwargs) for _ in chains[start : start + batch]
        ]
        experts = [ShadowExpert() for _ in envs]
        states = [env.reset(seed=0, options={"chain": chain}) for env, chain in zip(envs, chains[start:], strict=False)]
        histories: list[list[tuple[str, str]]] = [[] for _ in envs]
        live = list(range(len(envs)))
        while live:
            observations, infos = [], []
            wanted = {}
            for i in live:
                obs, info = states[i]
                wanted[i] = experts[i].act(obs, info)
                earlier = [action for _, action in histories[i]]
                if condition == "relevant":
                    advice = advise(obs["task"], earlier, wanted[i])
                elif condition == "elsewhere":
                    advice = advice_elsewhere(rng, pool, obs["task"], wanted[i])
                elif condition == "irrelevant":
                    advice = other_advice(rng, pool, obs["task"], wanted[i])
                else:
                    advice = None
                if advice is not None:
                    previous = earlier[-1] if earlier else None
                    skill = guidance_skill(advice, len(earlier), previous)
                    obs = {**obs, "skills": shown_guidance(skill, len(earlier), previous, obs["skills"])}
                observations.append(obs)
                infos.append(info)
            completions = policy.act_batch(observations, infos, [histories[i] for i in live], greedy=True)
            for i, completion in zip(list(live), completions, strict=True):
                action = completion.action.text
                experts[i].follow(action)
                agree += action.strip() == wanted[i].strip()
                turns += 1
                before = states[i][0]["observation"]
                obs, _, terminated, truncated, info = envs[i].step(action)
                states[i] = (obs, info)
                histories[i] = [] if info["new_task"] else [*histories[i], (before, action)]
                if info["new_task"] or terminated or truncated:  # the task of this action ended
                    tasks += 1
                    successes += bool(info.get("task_success"))
                if terminated or truncated:
                    live.remove(i)
        for env in envs:
            env.close()
    return {"tgc": successes / max(1, tasks), "tasks": tasks, "agreement": agree / max(1, turns), "turns": turns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few chains and steps (tests)")
    parser.add_argument("--train-chains", type=int, default=200, help="generated train chains the expert plays")
    parser.add_argument("--eval-chains", type=int, default=40, help="valid_unseen chains per condition (0: none)")
    parser.add_argument("--epochs", type=float, default=2.0, help="SFT passes over the pairs")
    parser.add_argument("--hidden", type=int, default=128, help="hidden size of the tiny model")
    parser.add_argument("--layers", type=int, default=2, help="layers of the tiny model")
    parser.add_argument("--eval-max-steps", type=int, default=30, help="turns per task in the evaluation")
    parser.add_argument("--relevant", type=float, default=GuidanceMix.relevant, help="GuidanceMix.relevant")
    parser.add_argument("--irrelevant", type=float, default=GuidanceMix.irrelevant, help="GuidanceMix.irrelevant")
    parser.add_argument("--own-example", type=float, default=GuidanceMix.own_example, help="GuidanceMix.own_example")
    parser.add_argument("--followed", type=float, default=GuidanceMix.followed, help="GuidanceMix.followed")
    parser.add_argument("--perturbation", type=float, default=0.0, help="Perturbation.rate of the expert's play")
    parser.add_argument("--model", help="evaluate this SFT model folder (e.g. runs/demo/sft/model) instead of training")
    parser.add_argument("--probe-chains", type=int, default=60, help="probe chains, after the --train-chains (0: none)")
    parser.add_argument("--save", help="save the trained model (and tokenizer) to this folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--conditions", nargs="+", choices=CONDITIONS, default=list(CONDITIONS), help="played ones")
    args = parser.parse_args()
    if args.quick:
        args.train_chains, args.eval_chains, args.epochs, args.hidden, args.layers = 4, 2, 1.0, 32, 1
        args.eval_max_steps, args.probe_chains = 6, min(args.probe_chains, 2)
    start = time.perf_counter()

    cfg = DemoConfig(seed=args.seed)
    env = gym.make(ENV_ID, split="train", skills="none", **cfg.env_kwargs)
    noise = Perturbation(args.perturbation, seed=args.seed) if args.perturbation else None
    expert, chains = AlfworldExpert(use_skills=False), range(args.train_chains)
    kept = args.followed > 0  # perturbed turns are pairs only when guidance names what was sent
    turns = collect_expert_turns(env, expert, chains, seed=args.seed, perturbation=noise, keep_perturbed=kept)
    env.close()
    own = [t for t in turns if not t.sent_instead]
    pool = [(t.obs["task"], a) for t in own if (a := advise(t.obs["task"], t.earlier, t.action)) is not None]
    if args.model:
        model, tokenizer = load_policy(args.model)
        print(f"SFT model: {args.model}; {len(pool)} advised turns of {args.train_chains} train chains to draw from")
    else:
        model, tokenizer = train_model(args, cfg, turns)
        if args.save:
            model.save_pretrained(args.save)
            tokenizer.save_pretrained(args.save)
    model.eval()
    policy = LLMPolicy(model, tokenizer, constrained=True, **cfg.prompt_kwargs)
    chains = list(range(args.eval_chains))
    if chains:
        print(f"\n{args.eval_chains} valid_unseen chains, greedy constrained decoding\n")
        print("| guidance shown | TGC | tasks | agreement with the expert | turns |")
        print("|---|---|---|---|---|")
    for condition in args.conditions if chains else ():
        r = play(policy, {**cfg.env_kwargs, "max_steps_per_task": args.eval_max_steps}, chains, condition, pool)
        print(f"| {condition} | {100 * r['tgc']:.1f}% | {r['tasks']} | {100 * r['agreement']:.1f}% | {r['turns']} |")
    if args.probe_chains:
        probe(policy, cfg, range(args.train_chains, args.train_chains + args.probe_chains), args.seed)
    print(f"\nwall time {time.perf_counter() - start:.0f} s")


def probe(policy: LLMPolicy, cfg: DemoConfig, chains: range, seed: int) -> None:
    """Print how often the model's choice is the command a guidance skill names, with the skill shown and not."""
    env = gym.make(ENV_ID, split="train", skills="none", **cfg.env_kwargs)
    noise = Perturbation(0.3, seed=seed + 1)
    bare = collect_expert_turns(env, AlfworldExpert(use_skills=False), chains, perturbation=noise, keep_perturbed=True)
    env.close()
    guided = add_guidance(copy.deepcopy(bare), GuidanceMix(1.0, 0.0, followed=1.0, seed=seed), advise)
    counts = {"random command": [0, 0, 0], "expert's command": [0, 0, 0]}  # turns, picked with, picked without

    def picks(turn: Any) -> bool:
        info = {"admissible_commands": turn.admissible}
        return policy.act_batch([turn.obs], [info], [turn.history], greedy=True)[0].action.text.strip() == turn.action

    for shown, hidden in zip(guided, bare, strict=True):  # add_guidance kept every turn (followed=1, relevant=1)
        if "Guidance:" in shown.obs["skills"] and shown.action in shown.admissible:
            row = counts["random command" if shown.sent_instead else "expert's command"]
            row[0], row[1], row[2] = row[0] + 1, row[1] + picks(shown), row[2] + picks(hidden)
    print(f"\nprobe: {len(chains)} train chains after the training ones, 30% random commands\n")
    print("| guidance names | turns | model picks it, guidance shown | not shown |")
    print("|---|---|---|---|")
    for kind, (n, with_, without) in counts.items():
        print(f"| {kind} | {n} | {100 * with_ / max(1, n):.1f}% | {100 * without / max(1, n):.1f}% |")


def train_model(args: argparse.Namespace, cfg: DemoConfig, turns: list) -> tuple:
    """Stages 1-2: guidance in the turns' prompts (``GuidanceMix``), then SFT of a tiny model on them."""
    mix = GuidanceMix(
        args.relevant, args.irrelevant, own_example=args.own_example, followed=args.followed, seed=args.seed
    )
    turns = add_guidance(turns, mix, advise)
    followed = sum(t.sent_instead for t in turns)
    guided = sum("Guidance:" in t.obs["skills"] for t in turns) - followed
    relevant = sum(f"Next, do '{action_key(t.action)}'" in t.obs["skills"] for t in turns) - followed  # own or not

    formatter, tokenizer = build_tiny_model(hidden=32, layers=1)  # only formats prompts here
    prompter = LLMPolicy(formatter, tokenizer, **cfg.prompt_kwargs)
    pairs = [{"prompt": prompter.prompt(t.obs, t.history, t.admissible), "completion": t.action} for t in turns]
    tokenizer = build_tokenizer([p["prompt"] + "\n" + p["completion"] for p in pairs])
    model, tokenizer = build_tiny_model(tokenizer, hidden=args.hidden, layers=args.layers, seed=args.seed)
    train = reweight_pairs(pairs, cfg.sft_action_weights, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        metrics = sft_warm_start(
            model, tokenizer, train, output_dir=tmp, epochs=args.epochs, lr=cfg.sft_lr, batch_size=cfg.sft_batch_size,
            seed=args.seed, max_length=1024, bf16=cfg.sft_bf16, completion_only=cfg.sft_completion_only,
            progress=False,
        )  # fmt: skip
    print(f"SFT: {len(pairs) - followed} expert turns from {args.train_chains} train chains ({relevant} with relevant "
          f"guidance, {guided - relevant} irrelevant, {len(pairs) - followed - guided} none), {followed} perturbed "
          f"turns shown guidance naming the command sent, {len(train)} after reweighting, "
          f"loss {metrics['train_loss']:.3f}")  # fmt: skip
    return model, tokenizer


if __name__ == "__main__":
    main()
