"""A training run's files: its checkpoints and its metric log.

Checkpoints are ``output_dir/checkpoints/step_N``, the newest named by ``latest``; metrics are
``output_dir/metrics.jsonl``, one JSON object per logged step.

Light on purpose (no torch): ``sage skills show RUN`` finds a run's newest checkpoint through here, as the
trainer does when it resumes, and the demo's report and the examples read learning curves through here.
"""

from __future__ import annotations

import json
from pathlib import Path

METRICS_FILE = "metrics.jsonl"
"""The trainer's metric log in its output folder: one JSON object per line, each with ``charts/step``."""


def latest_checkpoint(ckpt_dir: str | Path) -> Path | None:
    """The newest complete checkpoint folder in ``ckpt_dir``: the ``latest`` pointer, else the highest step; or None."""
    ckpt_dir = Path(ckpt_dir)
    pointer = ckpt_dir / "latest"
    if pointer.exists() and (ckpt_dir / pointer.read_text().strip()).is_dir():
        return ckpt_dir / pointer.read_text().strip()
    found = sorted(p for p in ckpt_dir.glob("step_*") if p.is_dir() and not p.name.endswith(".old"))
    return found[-1] if found else None


def read_metrics(run_dir: str | Path) -> list[dict[str, float]]:
    """Every row the trainer logged to ``run_dir/metrics.jsonl``, oldest first ([] when there is no such file)."""
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def metric_curve(run_dir: str | Path, key: str) -> list[tuple[int, float]]:
    """``(RL step, value)`` of every logged row that holds ``key`` (``eval/task_success``: the held-out curve)."""
    return [(int(row["charts/step"]), row[key]) for row in read_metrics(run_dir) if key in row]
