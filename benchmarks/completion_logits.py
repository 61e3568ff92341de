"""Memory and time of ``completion_logprobs``: logits on completion positions only vs the whole row (old).

Usage: python benchmarks/completion_logits.py OLD_POLICY_PY (``git show <rev>:sage_agents/policy.py > old.py``).
Memory is the bytes autograd saves for backward (unique storages), time the median forward+backward of 5.
"""

import importlib.util
import statistics
import sys
import time

import torch

from sage_agents.models import build_tiny_model
from sage_agents.policy import completion_logprobs


def saved_bytes_and_seconds(fn, model, prompts, completions):
    seen, total = set(), [0]

    def pack(t):
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        if key not in seen:
            seen.add(key)
            total[0] += key[1]
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logp, mask, _ = fn(model, prompts, completions, pad_id=0)
    logp.sum().backward()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        logp, mask, _ = fn(model, prompts, completions, pad_id=0)
        logp.sum().backward()
        times.append(time.perf_counter() - t0)
    return total[0], statistics.median(times), logp.detach()


def main():
    spec = importlib.util.spec_from_file_location("old_policy", sys.argv[1])
    old = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old
    spec.loader.exec_module(old)
    torch.manual_seed(0)
    model, tok = build_tiny_model()  # the default tiny model: hidden 128, 4 layers, vocab 743
    vocab = len(tok)
    for batch, plen, clen in ((16, 400, 8), (16, 1000, 16)):
        prompts = torch.randint(4, vocab, (batch, plen)).tolist()
        completions = torch.randint(4, vocab, (batch, clen)).tolist()
        b_old, s_old, lp_old = saved_bytes_and_seconds(old.completion_logprobs, model, prompts, completions)
        b_new, s_new, lp_new = saved_bytes_and_seconds(completion_logprobs, model, prompts, completions)
        print(
            f"B={batch} prompt={plen} completion={clen}: saved for backward {b_old / 2**20:.1f} -> "
            f"{b_new / 2**20:.1f} MiB, fwd+bwd {s_old * 1e3:.0f} -> {s_new * 1e3:.0f} ms, "
            f"max |logp diff| {(lp_old - lp_new).abs().max():.1e}; fp32 logits tensor "
            f"{batch * (plen + clen) * vocab * 4 / 2**20:.1f} -> {batch * (clen + 1) * vocab * 4 / 2**20:.1f} MiB "
            f"(x {151936 / vocab:.0f} at Qwen's vocab)"
        )


if __name__ == "__main__":
    main()
