"""Where a training run's checkpoints are: ``output_dir/checkpoints/step_N``, the newest named by ``latest``.

Light on purpose (no torch): ``sage skills show RUN`` finds a run's newest checkpoint through here, as the
trainer does when it resumes.
"""

from __future__ import annotations

from pathlib import Path


def latest_checkpoint(ckpt_dir: str | Path) -> Path | None:
    """The newest complete checkpoint folder in ``ckpt_dir``: the ``latest`` pointer, else the highest step; or None."""
    ckpt_dir = Path(ckpt_dir)
    pointer = ckpt_dir / "latest"
    if pointer.exists() and (ckpt_dir / pointer.read_text().strip()).is_dir():
        return ckpt_dir / pointer.read_text().strip()
    found = sorted(p for p in ckpt_dir.glob("step_*") if p.is_dir() and not p.name.endswith(".old"))
    return found[-1] if found else None
