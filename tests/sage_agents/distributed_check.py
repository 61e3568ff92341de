"""Run by test_distributed.py, by ``accelerate launch`` (2 CPU processes over gloo) or by plain ``python`` (1).

``grads OUT``: the gradient of one step on a fixed batch, for every loss type. The batch is split unevenly
over the processes (rank 0 holds 3 trajectories, rank 1 the other 5, with different token counts), so a loss
normalised per process would differ from the one-process gradient. Writes ``OUT/grads_w{world}.pt``.

``chains OUT``: one training step where rank 0 plays a 2-task chain and rank 1 a 1-task chain. Writes
``OUT/chains_rank{r}.json`` with the metric keys and the chain lengths each rank played.
"""

import json
import sys

import numpy as np
import torch

from sage_agents.config import TrainConfig
from sage_agents.models import build_tiny_model
from sage_agents.policy import completion_logprobs
from sage_agents.trainer import Trainer
from tests.sage_agents.fake_env import FakeChainEnv

torch.set_num_threads(1)
LOSS_TYPES = ("grpo", "dr_grpo", "dapo")
SPLIT = 3  # trajectories of rank 0 (of 8)


def fixed_batch(model, vocab: int, pad_id: int) -> list[dict]:
    """8 trajectories of 1-3 turns, prompts of 3-9 tokens, completions of 1-7 tokens, ratio 1 (old = current)."""
    gen = torch.Generator().manual_seed(0)
    rows = []
    for traj in range(8):
        adv = float(torch.randn(1, generator=gen))
        for _ in range(int(torch.randint(1, 4, (1,), generator=gen))):
            plen, clen = (int(torch.randint(lo, hi, (1,), generator=gen)) for lo, hi in ((3, 10), (1, 8)))
            prompt = torch.randint(3, vocab, (plen,), generator=gen).tolist()
            completion = torch.randint(3, vocab, (clen,), generator=gen).tolist()
            rows.append({"prompt_ids": prompt, "completion_ids": completion, "adv": adv, "seq": (traj, 0)})
    with torch.no_grad():
        logp, _, _ = completion_logprobs(
            model, [r["prompt_ids"] for r in rows], [r["completion_ids"] for r in rows], pad_id=pad_id
        )
    for i, r in enumerate(rows):
        r["old_logp"] = logp[i, : len(r["completion_ids"])].tolist()
    return rows


def grads(out: str) -> None:
    model, tok = build_tiny_model(hidden=32, layers=2, heads=2, kv_heads=1, seed=0)
    cfg = TrainConfig(group_size=2, report_to=[], progress=False, micro_batch_size=2, output_dir=out, cpu=True)
    trainer = Trainer(cfg, model=model, tokenizer=tok, env_fn=lambda: FakeChainEnv(easy=True))
    rows = fixed_batch(model, len(tok), trainer.policy.pad_id)
    if trainer.world > 1:
        mine = (lambda t: t < SPLIT) if trainer.rank == 0 else (lambda t: t >= SPLIT)
        rows = [r for r in rows if mine(r["seq"][0])]
    result = {}
    for loss_type in LOSS_TYPES:
        trainer.config.loss_type = loss_type
        trainer.optimizer.zero_grad(set_to_none=True)
        sums = trainer.accumulate_gradients(rows, trainer.loss_weights(rows))
        if trainer.world > 1:
            sums = trainer.mean_over_processes(sums)
        params = trainer.accelerator.unwrap_model(trainer.model).parameters()
        result[loss_type] = {
            "grad": torch.cat([p.grad.detach().flatten() for p in params]),
            "policy_loss": sums["losses/policy_loss"],
            "rows": len(rows),
        }
    if trainer.is_main:
        torch.save(result, f"{out}/grads_w{trainer.world}.pt")


def chains(out: str) -> None:
    model, tok = build_tiny_model(hidden=32, layers=2, heads=2, kv_heads=1, seed=0)
    # the trainer draws each step's chains for every process from default_rng(seed), rank r taking the r-th:
    # pick a seed whose first draw gives the two ranks different chains, and make rank 1's chain the short one
    seed = next(s for s in range(100) if len(set(np.random.default_rng(s).integers(4, size=2))) == 2)
    short = int(np.random.default_rng(seed).integers(4, size=2)[1])
    cfg = TrainConfig(
        group_size=2,
        seed=seed,
        report_to=["jsonl"],
        progress=False,
        total_steps=1,
        save_every=0,
        output_dir=out,
        cpu=True,
    )
    trainer = Trainer(cfg, model=model, tokenizer=tok, env_fn=lambda: FakeChainEnv(easy=True, short_chains=[short]))
    history = trainer.train()
    summary = {
        "rank": trainer.rank,
        "chain_lengths": [len(ro.played) for ro in trainer.last_rollouts],
        "keys": sorted(history[0]),
    }
    with open(f"{out}/chains_rank{trainer.rank}.json", "w") as f:
        json.dump(summary, f)


if __name__ == "__main__":
    {"grads": grads, "chains": chains}[sys.argv[1]](sys.argv[2])
