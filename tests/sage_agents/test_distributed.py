"""``accelerate launch`` of the trainer on CPU (slow: starts Python processes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMON = ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]


def launch(tmp_path, *flags):
    accelerate = Path(sys.executable).with_name("accelerate")
    cmd = [
        str(accelerate),
        "launch",
        *flags,
        *COMMON,
        "-m",
        "tests.sage_agents.accelerate_train",
        str(tmp_path),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, timeout=300, capture_output=True)
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
