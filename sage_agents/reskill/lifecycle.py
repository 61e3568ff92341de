"""The skill lifecycle log (JSONL) and its plot (PNG).

One JSON object per line, each with ``event`` and ``step`` (the training step, 1-based, that produced it):

- ``created``: a bundle was proposed, one line per operation; ``version``, ``op``, ``skill``, ``trigger``,
  ``pattern``, ``text``, ``reason``, ``creator``.
- ``tested``: each training step of a running test; ``version``, ``posterior``, ``w_new``, ``w_old``, ``n_new``,
  ``n_old``, ``success_new``, ``success_old``.
- ``accepted`` (an add / modify) / ``pruned`` (a delete) / ``rejected`` (any operation of a rejected version): the
  test's decision, one line per operation; ``version``, ``op``, ``skill``, ``posterior``.
- ``skipped``: the creator proposed nothing or the bundle was invalid (logged when the reason changes); ``reason``.
- ``unverified``: a skill the creator wrote failed the pre-test check and was not proposed
  (:meth:`~sage_agents.reskill.creator.Creator.check`: too long, a word unknown to the policy's tokenizer, not
  shown on the failures it was made from, trigger too rare); ``skill``, ``reason``, ``creator``. Logged when new
  (the same skill and reason as at the previous creation attempt are not logged again).

``posterior`` is ``{"new": {"alpha", "beta", "mean"}, "old": {...}, "p_new", "steps", "episodes", "M",
"within_step_z", "within_step_p"}`` (the last two: :func:`~sage_agents.reskill.thompson.within_step_z` and its exact
p-value).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EVENTS = ("created", "tested", "accepted", "pruned", "rejected", "skipped", "unverified")


def _clean(value: Any) -> Any:
    """Replace non-finite floats by None so that every line is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class LifecycleLog:
    """Events in memory, appended to ``path`` (JSONL) when a path is given.

    Args:
        path: the JSONL file (parent folders are created); None keeps events in memory only.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else None
        self.events: list[dict[str, Any]] = []
        if self.path is not None and self.path.exists():
            self.events = read_lifecycle(self.path)

    def log(self, event: str, step: int, **fields: Any) -> dict[str, Any]:
        """Record one event; return it."""
        if event not in EVENTS:
            raise ValueError(f"unknown lifecycle event {event!r}; use one of {EVENTS}")
        record = _clean({"event": event, "step": int(step), **fields})
        self.events.append(record)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps(record, sort_keys=True) + "\n")
        return record

    def trim(self, step: int) -> None:
        """Drop events after ``step`` (resume from a checkpoint taken at ``step``), in memory and on disk."""
        self.events = [e for e in self.events if e["step"] <= step]
        if self.path is not None and self.path.exists():
            tmp = self.path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in self.events))
            os.replace(tmp, self.path)


def read_lifecycle(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The events of a lifecycle JSONL file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def lifecycle_rows(events: Sequence[dict[str, Any]], end: int) -> dict[str, list[tuple[float, float, str]]]:
    """Per skill, the spans ``(start, stop, kind)`` of the plot; ``kind`` is ``testing``, ``live`` or ``rejected``.

    Within a row, the ``rejected`` marks come after the testing / live spans, so they are drawn on top: a version
    proposed at the very step its predecessor was rejected starts its testing span there too.
    """
    rows: dict[str, list[tuple[float, float, str]]] = {}
    opened: dict[tuple[str, int], tuple[int, str]] = {}
    live: dict[str, int] = {}
    for e in events:
        name, event = e.get("skill"), e["event"]
        if event == "created":
            opened[(name, e["version"])] = (e["step"], e["op"])
            rows.setdefault(name, [])
        elif event in ("accepted", "rejected", "pruned"):
            start, op = opened.pop((name, e["version"]), (e["step"], e.get("op", "")))
            rows.setdefault(name, []).append((start, e["step"], "testing"))
            if event == "rejected":
                rows[name].append((e["step"], e["step"] + 0.5, "rejected"))
            elif event == "pruned" and name in live:
                rows[name].append((live.pop(name), e["step"], "live"))
            elif event == "accepted":
                if name in live:  # a modify ends the previous live span
                    rows[name].append((live.pop(name), e["step"], "live"))
                live[name] = e["step"]
    for (name, _), (start, _) in opened.items():
        rows[name].append((start, end, "testing"))
    for name, start in live.items():
        rows[name].append((start, end, "live"))
    return {name: sorted(spans, key=lambda span: span[2] == "rejected") for name, spans in rows.items()}


def tested_segments(events: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The ``tested`` events split into one run per version test (consecutive events of one version)."""
    segments: list[list[dict[str, Any]]] = []
    for e in events:
        if e["event"] != "tested":
            continue
        if segments and segments[-1][-1]["version"] == e["version"] and segments[-1][-1]["step"] < e["step"]:
            segments[-1].append(e)
        else:
            segments.append([e])
    return segments


def plot_lifecycle(events: Sequence[dict[str, Any]], path: str | os.PathLike, total_steps: int | None = None) -> Path:
    """Draw the lifecycle: one row per skill (testing / live / rejected spans) above P(new) and posterior means.

    Args:
        events: lifecycle events (:class:`LifecycleLog` or :func:`read_lifecycle`).
        path: the PNG to write.
        total_steps: right end of the time axis (default: the last event's step).

    Returns:
        The path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    end = max([total_steps or 0, *(e["step"] for e in events)], default=1)
    rows = lifecycle_rows(events, end)
    colors = {"testing": "tab:orange", "live": "tab:green", "rejected": "tab:red"}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 2.5 + 0.35 * max(1, len(rows))), sharex=True)
    for y, (name, spans) in enumerate(sorted(rows.items())):
        for start, stop, kind in spans:
            top.barh(
                y,
                max(stop - start, 0.3),
                left=start,
                color=colors[kind],
                height=0.6,
                zorder=3 if kind == "rejected" else 2,
            )
        for e in events:
            if e.get("skill") == name and e["event"] == "pruned":
                top.plot(e["step"], y, marker="x", color="black")
    top.set_yticks(range(len(rows)), sorted(rows))
    top.set_title("Skill lifecycle (orange: testing, green: live, red: rejected, x: pruned)")
    for i, segment in enumerate(tested_segments(events)):  # one line per test: posteriors restart with each version
        steps = [e["step"] for e in segment]
        first = i == 0
        bottom.plot(
            steps, [e["posterior"]["p_new"] for e in segment], ".", color="tab:blue", label="P(new)" if first else None
        )
        for arm, style, color in (("new", "-", "tab:orange"), ("old", "--", "tab:green")):
            means = [e["posterior"][arm]["mean"] for e in segment]
            bottom.plot(steps, means, style, color=color, label=f"posterior mean, {arm}" if first else None)
    if any(e["event"] == "tested" for e in events):
        bottom.legend(loc="upper left", fontsize="small")
    bottom.set_ylim(0, 1)
    bottom.set_xlabel("training step")
    bottom.set_xlim(0, end + 1)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
