"""Rollout (generation and constrained decoding) speed of sage_agents vs naive loops, side by side in one run.

    python benchmarks/rollout_speed.py                       # defaults: G=8, 32 new tokens
    python benchmarks/rollout_speed.py --group-size 8 --max-new-tokens 32 --repeat 3

Everything uses one randomly initialised tiny model (``sage_agents.models.build_tiny_model``, ~1.1M params,
built offline) and real prompts of ``SageChain-ALFWorld-v0`` (split ``train``): the first-turn prompt that
``LLMPolicy.prompt`` renders for G different chains (task, observation, admissible commands).

Part (a), generation. Each method produces the same thing: for each of the G prompts, up to
``--max-new-tokens`` tokens plus their log-probs (what a GRPO rollout needs). Decoding is greedy (``--sample``
switches to sampling), so every method should emit the same tokens; the ``same`` column counts the rows whose
tokens equal those of ``LLMPolicy.generate`` (left padding can flip a near-tie argmax on a random model;
meaningless with ``--sample``).

* ``ours: LLMPolicy.generate, batch G (KV cache)``: one left-padded batch, one prefill, then one cached
  forward per new token for the whole batch.
* ``naive: per env, no KV cache``: for each prompt separately, one full forward over prompt + tokens so far
  for every new token (the whole sequence is recomputed each step).
* ``naive: per env, HF generate(use_cache=True)``: for each prompt separately, ``model.generate`` with its KV
  cache (``output_logits`` on, to get the log-probs).
* ``HF generate, batch G (KV cache)``: the same batch as ours through ``model.generate`` (a reference point,
  not a naive loop).

Columns: ``s/call`` = median wall seconds to serve all G prompts (over ``--repeat`` interleaved repeats, after
one warm-up call of each method); ``tokens`` = tokens generated per call; ``tok/s`` = tokens / (s/call);
``ours x`` = ours tok/s divided by that row's tok/s (how many times faster ours is).

Constrained decoding (``LLMPolicy.choose``, the policy scores each admissible command + EOS and picks one):
``ours`` shares one prompt KV cache across a prompt's candidates; ``naive: per env, per candidate`` runs one
full forward over prompt + candidate for every candidate; ``naive: per env, candidates batched`` runs one
padded forward per env over all its (prompt + candidate) rows. ``dec/s`` = decisions (envs served) per
second, ``cand/s`` = candidates scored per second, ``ours x`` = that row's s/call / ours' s/call, ``same`` =
greedy choices equal to ours.

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
from sage_agents.policy import LLMPolicy  # noqa: E402

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


def collect_prompts(policy: LLMPolicy, n: int, first_chain: int) -> tuple[list[str], list[list[str]]]:
    """First-turn prompts (and admissible commands) of ``n`` different train chains."""
    env = gym.make(ENV_ID, split="train", chain_length=1)
    stride = max(1, env.unwrapped.num_chains // n)
    prompts, candidates = [], []
    for i in range(n):
        chain = (first_chain + i * stride) % env.unwrapped.num_chains
        obs, info = env.reset(seed=i, options={"chain": chain})
        admissible = list(info["admissible_commands"])
        prompts.append(policy.prompt(obs, [], admissible))
        candidates.append(admissible)
    env.close()
    return prompts, candidates


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
def hf_generate(model, prompt_ids, max_new, eos, pad, temperature, greedy, batched) -> list[list[int]]:
    """``model.generate(use_cache=True)`` per env (``batched=False``) or on one left-padded batch, with log-probs."""
    groups = [prompt_ids] if batched else [[ids] for ids in prompt_ids]
    out = []
    for group in groups:
        width = max(len(r) for r in group)
        ids = torch.full((len(group), width), pad, dtype=torch.long)  # (B, P)
        mask = torch.zeros_like(ids)  # (B, P)
        for i, row in enumerate(group):
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
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
        new = gen.sequences[:, width:]  # (B, T)
        logits = torch.stack(gen.logits, 1).float()  # (B, T, V)
        logp = torch.log_softmax(logits / temperature, -1).gather(-1, new[..., None]).squeeze(-1)  # (B, T)
        for row, lps in zip(new.tolist(), logp.tolist(), strict=True):
            row = cut_at_eos(row, eos)
            _ = lps[: len(row)]  # the rollout's log-probs (every method computes them; only tokens are compared)
            out.append(row)
    return out


@torch.no_grad()
def naive_score(model, prompt_ids, cand_ids, temperature, batched) -> list[list[float]]:
    """Per env: log-likelihood of each candidate (+ EOS) by full forwards over prompt + candidate (no cache)."""
    result = []
    for p, cands in zip(prompt_ids, cand_ids, strict=True):
        chunks = [cands] if batched else [[c] for c in cands]
        scores = []
        for chunk in chunks:
            rows = [p + c for c in chunk]
            width = max(len(r) for r in rows)
            ids = torch.zeros((len(rows), width), dtype=torch.long)  # (n, L) right-padded
            mask = torch.zeros_like(ids)
            for i, r in enumerate(rows):
                ids[i, : len(r)] = torch.tensor(r)
                mask[i, : len(r)] = 1
            logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits  # (n, L, V)
            logp = torch.log_softmax(logits.float() / temperature, -1)  # (n, L, V)
            for i, c in enumerate(chunk):
                pos = torch.arange(len(p) - 1, len(p) - 1 + len(c))  # positions predicting the candidate
                scores.append(float(logp[i, pos, torch.tensor(c)].sum()))
        result.append(scores)
    return result


def part_a(args, model, tok) -> None:
    policy = LLMPolicy(model, tok, max_new_tokens=args.max_new_tokens, temperature=1.0)
    prompts, candidates = collect_prompts(policy, args.group_size, args.chain)
    prompt_ids = [policy.encode(p) for p in prompts]
    cand_ids = [[policy.encode(c) + [policy.eos_id] for c in cands] for cands in candidates]
    greedy, eos, pad, m = not args.sample, policy.eos_id, policy.pad_id, args.max_new_tokens
    lengths = [len(p) for p in prompt_ids]
    print(
        f"\n(a) generation: G={args.group_size} prompts of {min(lengths)}-{max(lengths)} tokens "
        f"(mean {statistics.mean(lengths):.0f}), max_new_tokens={m}, {'greedy' if greedy else 'sampling'}"
    )

    def ours():
        return [c.completion_ids for c in policy.generate(prompts, greedy=greedy)]

    methods = {
        "ours: LLMPolicy.generate, batch G (KV cache)": ours,
        "naive: per env, no KV cache": lambda: naive_no_cache(model, prompt_ids, m, eos, 1.0, greedy),
        "naive: per env, HF generate(use_cache=True)": lambda: hf_generate(
            model, prompt_ids, m, eos, pad, 1.0, greedy, batched=False
        ),
        "HF generate, batch G (KV cache)": lambda: hf_generate(
            model, prompt_ids, m, eos, pad, 1.0, greedy, batched=True
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in methods}
    outputs: dict[str, list[list[int]]] = {}
    for name, fn in methods.items():  # warm-up
        outputs[name] = fn()
    for _ in range(args.repeat):
        for name, fn in methods.items():
            torch.manual_seed(0)
            t0 = time.perf_counter()
            outputs[name] = fn()
            times[name].append(time.perf_counter() - t0)
    ref = outputs[next(iter(methods))]
    ours_rate = sum(len(r) for r in ref) / median_time(times[next(iter(methods))])
    rows = []
    for name in methods:
        n_tok = sum(len(r) for r in outputs[name])
        sec = median_time(times[name])
        same = sum(a == b for a, b in zip(outputs[name], ref, strict=True))
        rows.append(
            [name, f"{sec:.3f}", n_tok, f"{n_tok / sec:.0f}", f"{ours_rate / (n_tok / sec):.1f}", f"{same}/{len(ref)}"]
        )
    print(table(["free generation", "s/call", "tokens", "tok/s", "ours x", "same"], rows))

    # constrained decoding
    n_cands = sum(len(c) for c in candidates)
    print(f"\nconstrained decoding: G={args.group_size} prompts, {n_cands} candidates in all (admissible commands)")

    def ours_choose():
        chosen = policy.choose(prompts, candidates, greedy=True)
        return [cands.index(c.text) for c, cands in zip(chosen, candidates, strict=True)]

    def naive_choose(batched):
        scores = naive_score(model, prompt_ids, cand_ids, 1.0, batched)
        return [max(range(len(s)), key=s.__getitem__) for s in scores]

    cmethods = {
        "ours: LLMPolicy.choose, batch G (shared prompt cache)": ours_choose,
        "naive: per env, per candidate (no cache)": lambda: naive_choose(False),
        "naive: per env, candidates batched (no cache)": lambda: naive_choose(True),
    }
    ctimes: dict[str, list[float]] = {name: [] for name in cmethods}
    choices: dict[str, list[int]] = {}
    for name, fn in cmethods.items():  # warm-up
        choices[name] = fn()
    for _ in range(args.repeat):
        for name, fn in cmethods.items():
            t0 = time.perf_counter()
            choices[name] = fn()
            ctimes[name].append(time.perf_counter() - t0)
    cref = choices[next(iter(cmethods))]
    ours_sec = median_time(ctimes[next(iter(cmethods))])
    rows = []
    for name in cmethods:
        sec = median_time(ctimes[name])
        same = sum(a == b for a, b in zip(choices[name], cref, strict=True))
        g = args.group_size
        rows.append(
            [name, f"{sec:.3f}", f"{g / sec:.1f}", f"{n_cands / sec:.0f}", f"{sec / ours_sec:.1f}", f"{same}/{g}"]
        )
    print(table(["constrained decoding", "s/call", "dec/s", "cand/s", "ours x", "same"], rows))


# ---------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group-size", type=int, default=8, help="G: prompts per batch / rollouts per group")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="generation budget per turn")
    parser.add_argument("--repeat", type=int, default=3, help="timed repeats of each part (a) method")
    parser.add_argument("--chain", type=int, default=0, help="first train chain of the prompts")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--sample", action="store_true", help="sample instead of greedy decoding in part (a)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tok = build_tiny_model(seed=0)
    model.eval()
    import transformers
    import trl

    print(
        f"tiny llama: {count_parameters(model) / 1e6:.2f}M params, vocab {len(tok)}; torch {torch.__version__}, "
        f"transformers {transformers.__version__}, trl {trl.__version__}; threads={torch.get_num_threads()}"
    )
    t0 = time.perf_counter()
    part_a(args, model, tok)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
