"""benchmarks/gpu_check.py at toy size on CPU: the script the GPU check runs, end to end (slow: ~1 min)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_gpu_check_toy_runs_full_lora_and_whole_options_on_cpu(capsys):
    gpu_check = load_gpu_check()
    assert gpu_check.main(["--toy", "--cpu", "--modes", "full,lora,options"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| Qwen3-toy |")]
    assert [row.split("|")[2].strip() for row in rows] == ["full", "lora", "options"]
    for row in rows:
        step_s, tok_s = (float(c) for c in row.split("|")[3:5])
        assert step_s > 0 and tok_s > 0
    assert "toy full step 1:" in out and "toy lora step 1:" in out


def test_gpu_check_shapes_are_qwen3s():
    # the published config.json figures of Qwen/Qwen3-0.6B and Qwen/Qwen3-4B
    shapes = load_gpu_check().SHAPES
    assert (shapes["0.6b"]["hidden_size"], shapes["0.6b"]["num_hidden_layers"]) == (1024, 28)
    assert (shapes["4b"]["hidden_size"], shapes["4b"]["num_hidden_layers"], shapes["4b"]["intermediate_size"]) == (
        2560,
        36,
        9728,
    )
