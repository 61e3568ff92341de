"""Rollout (free generation and constrained decoding) speed of sage_agents vs per-env loops, side by side.

    python benchmarks/rollout_speed.py                       # defaults: G=8, 32 new tokens
    python benchmarks/rollout_speed.py --group-size 8 --max-new-tokens 32 --repeat 3

Everything uses one randomly initialised tiny model (``sage_agents.models.build_tiny_model``, ~1.1M params,
built offline, its vocabulary covering the expert's skill definitions) and real first-turn observations of G
different chains of ``SageChain-ALFWorld-v0`` (split ``train``).

Part (a), free generation. Each method produces the same thing: for each of the G prompts (``LLMPolicy.prompt``:
task, observation, admissible commands), up to ``--max-new-tokens`` tokens plus their log-probs (what a GRPO
rollout needs). Decoding is greedy (``--sample`` switches to sampling), so every method should emit the same
tokens; the ``same`` column counts the rows whose tokens equal those of ``LLMPolicy.generate`` (left padding can
flip a near-tie argmax on a random model; meaningless with ``--sample``).

* ``ours: LLMPolicy.generate, batch G``: one left-padded batch through Hugging Face ``model.generate`` (one
  prefill, then one KV-cached forward per new token for the whole batch; ``sage_agents.decoding.generate``).
* ``naive: per env, no KV cache``: for each prompt separately, one full forward over prompt + tokens so far
  for every new token (the whole sequence is recomputed each step).
* ``naive: per env, HF generate(use_cache=True)``: for each prompt separately, ``model.generate`` with its KV
  cache (``output_logits`` on, to get the log-probs).

Columns: ``s/call`` = median wall seconds to serve all G prompts (over ``--repeat`` interleaved repeats, after
one warm-up call of each method); ``tokens`` = tokens generated per call; ``tok/s`` = tokens / (s/call);
``ours x`` = ours tok/s divided by that row's tok/s (how many times faster ours is).

Part (b), constrained decoding (``LLMPolicy(constrained=True).act_batch``, greedy, the demo's prompt options):
each action is generated token by token among the tokens that keep it an admissible command or a skill call
(``sage_agents.decoding``). Two policies, as the demo's arms act: ``commands`` (GRPO: admissible commands only)
and ``+ templates`` (SAGE: also the expert's four skill definitions as define+call actions, whose body tokens are
forced once the name is chosen, and call arguments chosen one at a time). Each is timed two ways on the same G
observations: ``batch G`` = one ``act_batch`` call for the G envs (one ``generate`` over the batch, running until
its longest action is complete) and ``per env`` = G calls of one env each. Columns: ``s/call`` = median seconds
to serve the G envs; ``dec/s`` = actions per second; ``tokens`` = completion tokens per call (``forced`` of them
had one allowed id); ``batch x`` = per-env s/call / batch s/call of the same policy (how many times faster the
batch is); ``same`` = actions equal to the batched call's.

The per-step comparison of the trainers (native, TRL adapter, TRL's GRPOTrainer) is
benchmarks/trainer_speed.py.

Wall times on a shared machine are noisy: methods are interleaved within each repeat and medians are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402

import sage_envs  # noqa: E402, F401
from sage_agents.models import build_tiny_model, count_parameters  # noqa: E402
from sage_agents.policy import Completion, LLMPolicy  # noqa: E402
from sage_app.demo import DemoConfig, skill_templates  # noqa: E402

ENV_ID = "SageChain-ALFWorld-v0"


# ---------------------------------------------------------------------------------------------- helpers
def median_time(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        first = row[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join([first, *rest]))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def cut_at_eos(tokens: list[int], eos: int) -> list[int]:
    return tokens[: tokens.index(eos) + 1] if eos in tokens else tokens


def first_turns(n: int, first_chain: int) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    """First-turn observations and infos (admissible commands) of ``n`` different train chains."""
    env = gym.make(ENV_ID, split="train", chain_length=1, skills="program")
    stride = max(1, env.unwrapped.num_chains // n)
    observations, infos = [], []
    for i in range(n):
        chain = (first_chain + i * stride) % env.unwrapped.num_chains
        obs, info = env.reset(seed=i, options={"chain": chain})
        observations.append(obs)
        infos.append(info)
    env.close()
    return observations, infos


def timed(methods: dict[str, Any], repeat: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Median seconds and last output of each method: one warm-up call each, then ``repeat`` interleaved rounds."""
    times: dict[str, list[float]] = {name: [] for name in methods}
    outputs = {name: fn() for name, fn in methods.items()}  # warm-up
    for _ in range(repeat):
        for name, fn in methods.items():
            torch.manual_seed(0)
            t0 = time.perf_counter()
            outputs[name] = fn()
            times[name].append(time.perf_counter() - t0)
    return {name: median_time(t) for name, t in times.items()}, outputs


def pick(logits: torch.Tensor, temperature: float, greedy: bool) -> tuple[int, float]:
    """Token and its log-prob from one row of logits (V,)."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    tok = int(logp.argmax()) if greedy else int(torch.multinomial(logp.exp(), 1))
    return tok, float(logp[tok])


# ---------------------------------------------------------------------------------------------- part (a)
@torch.no_grad()
def naive_no_cache(model, prompt_ids, max_new, eos, temperature, greedy) -> list[list[int]]:
    """Per env, no KV cache: a full forward over prompt + generated tokens for every new token."""
    out = []
    for ids in prompt_ids:
        seq, toks, lps = list(ids), [], []
        for _ in range(max_new):
            logits = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1]  # (V,)
            tok, lp = pick(logits, temperature, greedy)
            toks.append(tok)
            lps.append(lp)
            seq.append(tok)
            if tok == eos:
                break
        out.append(toks)
    return out


@torch.no_grad()
def hf_generate_per_env(model, prompt_ids, max_new, eos, pad, temperature, greedy) -> list[list[int]]:
    """``model.generate(use_cache=True)`` on each prompt alone, with log-probs."""
    out = []
    for row in prompt_ids:
        ids = torch.tensor([row])  # (1, P)
        mask = torch.ones_like(ids)  # (1, P)
        kwargs = {} if greedy else {"temperature": temperature, "top_k": 0, "top_p": 1.0}
        gen = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max_new,
            do_sample=not greedy,
            use_cache=True,
            return_dict_in_generate=True,
            output_logits=True,
            pad_token_id=pad,
            eos_token_id=eos,
            **kwargs,
        )
        new = gen.sequences[:, ids.shape[1] :]  # (1, T)
        logits = torch.stack(gen.logits, 1).float()  # (1, T, V)
        logp = torch.log_softmax(logits / temperature, -1).gather(-1, new[..., None]).squeeze(-1)  # (1, T)
        tokens = cut_at_eos(new[0].tolist(), eos)
        _ = logp[0, : len(tokens)]  # the rollout's log-probs (every method computes them; only tokens are compared)
        out.append(tokens)
    return out


def part_a(args, model, tok, observations, infos) -> None:
    policy = LLMPolicy(model, tok, max_new_tokens=args.max_new_tokens, temperature=1.0)
    prompts = [policy.prompt(o, [], i["admissible_commands"]) for o, i in zip(observations, infos, strict=True)]
    prompt_ids = [policy.encode(p) for p in prompts]
    greedy, eos, pad, m = not args.sample, policy.eos_id, policy.pad_id, args.max_new_tokens
    lengths = [len(p) for p in prompt_ids]
    print(
        f"\n(a) free generation: G={args.group_size} prompts of {min(lengths)}-{max(lengths)} tokens "
        f"(mean {statistics.mean(lengths):.0f}), max_new_tokens={m}, {'greedy' if greedy else 'sampling'}"
    )

    def ours() -> list[list[int]]:
        return [c.completion_ids for c in policy.generate(prompts, greedy=greedy)]

    methods = {
        "ours: LLMPolicy.generate, batch G": ours,
        "naive: per env, no KV cache": lambda: naive_no_cache(model, prompt_ids, m, eos, 1.0, greedy),
        "naive: per env, HF generate(use_cache=True)": lambda: hf_generate_per_env(
            model, prompt_ids, m, eos, pad, 1.0, greedy
        ),
    }
    seconds, outputs = timed(methods, args.repeat)
    ours = next(iter(methods))
    ref = outputs[ours]
    ours_rate = sum(len(r) for r in ref) / seconds[ours]
    rows = []
    for name in methods:
        n_tok, sec = sum(len(r) for r in outputs[name]), seconds[name]
        same = sum(a == b for a, b in zip(outputs[name], ref, strict=True))
        rows.append(
            [name, f"{sec:.3f}", n_tok, f"{n_tok / sec:.0f}", f"{ours_rate / (n_tok / sec):.1f}", f"{same}/{len(ref)}"]
        )
    print(table(["free generation", "s/call", "tokens", "tok/s", "ours x", "same"], rows))


def part_b(args, model, tok, observations, infos) -> None:
    demo = DemoConfig()
    templates = skill_templates(demo.expert_skills)
    policies = {
        "commands": LLMPolicy(model, tok, constrained=True, **demo.prompt_kwargs),
        "+ templates": LLMPolicy(model, tok, constrained=True, skill_templates=templates, **demo.prompt_kwargs),
    }
    n_adm = [len(i["admissible_commands"]) for i in infos]
    print(
        f"\n(b) constrained decoding (greedy): G={args.group_size} envs, {min(n_adm)}-{max(n_adm)} admissible "
        f"commands; '+ templates' adds {len(templates)} skill definitions ({', '.join(demo.expert_skills)})"
    )
    histories = [[] for _ in observations]

    def batch(policy: LLMPolicy) -> list[Completion]:
        return policy.act_batch(observations, infos, histories, greedy=True)

    def per_env(policy: LLMPolicy) -> list[Completion]:
        pairs = zip(observations, infos, strict=True)
        return [c for o, i in pairs for c in policy.act_batch([o], [i], [[]], greedy=True)]

    methods = {}
    for label, policy in policies.items():
        methods[label, "batch G"] = lambda policy=policy: batch(policy)
        methods[label, "per env"] = lambda policy=policy: per_env(policy)
    seconds, outputs = timed(methods, args.repeat)
    rows, g = [], args.group_size
    for (label, way), completions in outputs.items():
        sec, ref = seconds[label, way], outputs[label, "batch G"]
        tokens = sum(len(c.completion_ids) for c in completions)
        forced = sum(len(a) == 1 for c in completions for a in c.allowed)
        same = sum(a.action.text == b.action.text for a, b in zip(completions, ref, strict=True))
        speedup = seconds[label, "per env"] / seconds[label, "batch G"]
        rows.append(
            [f"{label}, {way}", f"{sec:.3f}", f"{g / sec:.1f}", tokens, forced, f"{speedup:.1f}" if way == "batch G"
             else "1.0", f"{same}/{g}"]
        )  # fmt: skip
    print(table(["constrained decoding", "s/call", "dec/s", "tokens", "forced", "batch x", "same"], rows))
    actions = [c.action for c in outputs["+ templates", "batch G"]]
    kinds = {kind: sum(a.kind == kind for a in actions) for kind in dict.fromkeys(a.kind for a in actions)}
    print(f"actions with templates (batch G): {kinds}; first lines {[a.text.splitlines()[0] for a in actions]}")


# ---------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group-size", type=int, default=8, help="G: prompts per batch / rollouts per group")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="generation budget per turn")
    parser.add_argument("--repeat", type=int, default=3, help="timed repeats of each method")
    parser.add_argument("--chain", type=int, default=0, help="first train chain of the prompts")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--sample", action="store_true", help="sample instead of greedy decoding in part (a)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tok = build_tiny_model(skill_templates(), seed=0)
    model.eval()
    import transformers
    import trl

    print(
        f"tiny llama: {count_parameters(model) / 1e6:.2f}M params, vocab {len(tok)}; torch {torch.__version__}, "
        f"transformers {transformers.__version__}, trl {trl.__version__}; threads={torch.get_num_threads()}"
    )
    t0 = time.perf_counter()
    observations, infos = first_turns(args.group_size, args.chain)
    part_a(args, model, tok, observations, infos)
    part_b(args, model, tok, observations, infos)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
