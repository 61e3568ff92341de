"""``accelerate launch`` of the trainer on CPU (slow: starts Python processes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
COMMON = ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def run(cmd):
    done = subprocess.run(cmd, cwd=ROOT, env=ENV, timeout=300, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]


def launch(tmp_path, *flags, script=("tests.sage_agents.accelerate_train",)):
    accelerate = Path(sys.executable).with_name("accelerate")
    run([str(accelerate), "launch", *flags, *COMMON, "-m", *script, str(tmp_path)])
    return [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]


@pytest.mark.slow
def test_accelerate_launch_cpu_flag(tmp_path):
    # `--cpu` runs accelerate's simple launcher: one process (2 CPU processes need MPI or torchrun)
    ranks = launch(tmp_path, "--num_processes", "2", "--cpu")
    assert ranks and all(r["steps"] == 2 for r in ranks)
    assert (tmp_path / "checkpoints" / "step_0000002" / "model").is_dir()


@pytest.mark.slow
def test_accelerate_two_process_data_parallel_on_cpu(tmp_path):
    # the torchrun launcher (--multi_gpu) with no GPU gives two CPU processes over gloo
    ranks = launch(tmp_path, "--multi_gpu", "--num_processes", "2")
    assert [r["world"] for r in ranks] == [2, 2] and [r["steps"] for r in ranks] == [2, 2]
    assert ranks[0]["checksum"] == ranks[1]["checksum"]  # replicas stay identical after all-reduced steps
    assert (tmp_path / "checkpoints" / "step_0000002" / "state" / "random_states_1.pkl").exists()  # per process
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2


@pytest.mark.slow
def test_two_process_gradient_equals_one_process_for_every_loss_type(tmp_path):
    # one fixed batch of 8 trajectories; 2 processes hold 3 and 5 of them (different sequence and token counts)
    launch(tmp_path, "--multi_gpu", "--num_processes", "2", script=("tests.sage_agents.distributed_check", "grads"))
    run([sys.executable, "-m", "tests.sage_agents.distributed_check", "grads", str(tmp_path)])
    two, one = (torch.load(tmp_path / f"grads_w{w}.pt") for w in (2, 1))
    for loss_type in ("grpo", "dr_grpo", "dapo"):
        a, b = two[loss_type], one[loss_type]
        assert a["rows"] < b["rows"] and b["grad"].abs().max() > 1e-3  # rank 0 held part of a batch that moves
        assert torch.allclose(a["grad"], b["grad"], rtol=0, atol=1e-6), (loss_type, (a["grad"] - b["grad"]).abs().max())
        assert abs(a["policy_loss"] - b["policy_loss"]) < 1e-6, loss_type


@pytest.mark.slow
def test_two_processes_with_chains_of_different_length_log_the_same_keys(tmp_path):
    launch(tmp_path, "--multi_gpu", "--num_processes", "2", script=("tests.sage_agents.distributed_check", "chains"))
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("chains_rank*.json"))]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [set(r["chain_lengths"]) for r in ranks] == [{2}, {1}]  # the ranks really drew different lengths
    assert ranks[0]["keys"] == ranks[1]["keys"]
    assert {"env/task_success_pos1", "env/task_success_pos2"} <= set(ranks[0]["keys"])
    logged = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert "env/task_success_pos2" in logged
