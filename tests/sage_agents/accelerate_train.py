"""Run by ``accelerate launch --num_processes 2 --cpu`` in test_distributed.py: two tiny SAGE steps."""

import json
import sys

import torch

from sage_agents.config import TrainConfig
from sage_agents.models import build_tiny_model
from sage_agents.trainer import Trainer
from tests.sage_agents.fake_env import FakeChainEnv

torch.set_num_threads(1)
out = sys.argv[1]
model, tok = build_tiny_model(hidden=32, layers=2, heads=2, kv_heads=1, seed=0)
cfg = TrainConfig(
    group_size=2,
    lr=1e-3,
    constrained=True,
    report_to=["jsonl"],
    progress=False,
    micro_batch_size=3,
    total_steps=2,
    output_dir=out,
    cpu=True,
)
trainer = Trainer(cfg, model=model, tokenizer=tok, env_fn=lambda: FakeChainEnv(easy=True))
history = trainer.train()
params = torch.cat([p.detach().flatten() for p in trainer.accelerator.unwrap_model(trainer.model).parameters()])
summary = {
    "rank": trainer.rank,
    "world": trainer.world,
    "checksum": float(params.double().sum()),
    "steps": len(history),
}
with open(f"{out}/rank{trainer.rank}.json", "w") as f:
    json.dump(summary, f)
