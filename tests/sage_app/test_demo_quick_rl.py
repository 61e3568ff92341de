"""``make demo-quick``'s RL stage learns from rewards, and a kill -9 in its middle then a rerun changes nothing (slow).

The stages run in fresh Python processes (:data:`RL_STAGE`), as ``sage demo --quick`` would: stages 1-2 (expert
pairs, SFT) then every arm's RL, two arms at a time in worker processes (``DemoConfig.workers``, as ``make demo``
trains them). The killed run gets the uninterrupted run's SFT model, so the comparison is of the RL stage alone.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from sage_app.demo import ARMS, DemoConfig

from ..processes import outliving, spawned_workers

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
RL_STAGE = """
import sys
from pathlib import Path
from sage_app import demo
cfg = demo.DemoConfig(quick=True, output_dir=sys.argv[1])
cfg.workers = 2  # after construction: --quick sets 1
out = Path(cfg.output_dir)
demo.train_arms(cfg, out, demo.sft_model(cfg, out, demo.expert_pairs(cfg, out)))
"""
"""Stages 1-3 of the quick demo with two RL workers (each finished stage is skipped, each arm resumes from its last
checkpoint)."""
TIMEOUT = 900


def rl_stage(out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RL_STAGE, str(out)], cwd=ROOT, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip


def finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err[-3000:]


def final_weights(out: Path, arm: str) -> dict[str, torch.Tensor]:
    checkpoints = out / arm / "checkpoints"
    return load_file(checkpoints / (checkpoints / "latest").read_text().strip() / "model" / "model.safetensors")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    finish(rl_stage(out))
    return out


@pytest.mark.slow
def test_every_quick_arm_learns_from_its_rewards(uninterrupted):
    sft = load_file(uninterrupted / "sft" / "model" / "model.safetensors")
    for arm in ARMS:
        rows = [json.loads(line) for line in (uninterrupted / arm / "metrics.jsonl").read_text().splitlines()]
        # Weights drift even with all-zero advantages (~1e-5: the KL term's float-noise gradient, scaled to the
        # learning rate by Adam), so a change alone proves nothing: some group must have had a reward spread.
        assert any(r["losses/advantage_abs_mean"] > 0 for r in rows), f"{arm}: no reward spread in any group"
        trained = final_weights(uninterrupted, arm)
        assert trained.keys() == sft.keys()
        assert not all(torch.equal(trained[k], sft[k]) for k in sft), f"{arm}: RL left the SFT weights unchanged"


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; workers die with the demo on Linux")
def test_a_kill_in_the_quick_rl_stage_then_a_rerun_ends_with_the_uninterrupted_weights(uninterrupted, tmp_path):
    assert DemoConfig(quick=True).rl_steps >= 2  # a checkpoint before the last step: there is a middle to kill in
    for stage in ("expert", "sft"):  # the same SFT model: only the RL stage is compared
        shutil.copytree(uninterrupted / stage, tmp_path / stage)
    first = tmp_path / "grpo" / "checkpoints" / "step_0000001"
    proc, deadline = rl_stage(tmp_path), time.monotonic() + TIMEOUT
    while not (first / "trainer_state.json").exists():  # the folder appears whole (renamed into place)
        assert proc.poll() is None, f"the RL stage ended before its first checkpoint: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, "no first checkpoint in time"
        time.sleep(0.1)
    workers = spawned_workers(proc.pid)
    assert workers, "no RL worker process"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert not outliving(workers, 10), "an RL worker outlived the killed demo"  # the kernel kills them with it
    assert not (tmp_path / "grpo" / "checkpoints" / "step_0000002").exists()  # killed in the middle of the arm
    written = (first / "trainer_state.json").stat().st_mtime_ns
    finish(rl_stage(tmp_path))
    assert (first / "trainer_state.json").stat().st_mtime_ns == written  # resumed from step 1, not restarted
    for arm in ARMS:
        expected, got = final_weights(uninterrupted, arm), final_weights(tmp_path, arm)
        assert got.keys() == expected.keys()
        differing = [k for k in expected if not torch.equal(got[k], expected[k])]
        assert not differing, f"{arm}: {len(differing)} tensors differ after the resume, e.g. {differing[:3]}"
