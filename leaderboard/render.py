"""Render ``LEADERBOARD.md`` and plots from the summary JSONs in ``leaderboard/results/``.

    python -m leaderboard.render [--results leaderboard/results] [--output leaderboard]

Reads results only; deterministic (same files in, same bytes out).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any


def summary_paths(results: Path) -> list[Path]:
    """The summary JSONs directly in ``results``, sorted (episode logs and the ``verified/`` records are not)."""
    return sorted(results.glob("*.json"))


def load_summaries(results: Path) -> list[dict[str, Any]]:
    """Every summary JSON in ``results`` (:func:`summary_paths`)."""
    return [json.loads(p.read_text()) for p in summary_paths(results)]


LEGEND = [
    ("agent", "the entry's name (the evaluator's `--label`, else the registered agent)"),
    ("model", "the model the agent acts with (summary `model_name`, else `model`: its local path or id)"),
    (
        "given",
        "what the agent is handed besides the task and the observation (the agent's own `given`): "
        "admissible-command menus, constrained decoding, skill templates, a starting skill bank",
    ),
    (
        "skills",
        "the env's skill mode (`skills`): `program` (define and call skills), `guidance` (triggered "
        "guidance texts), `both`, or `none` (plain commands only)",
    ),
    (
        "chains",
        "chains played per seed, and how many hold 1, 2, ... tasks (`1:58 2:41`: 58 of one task, 41 of "
        "two; a split's last chain of a scenario may be short)",
    ),
    ("TGC", "task goal completion: completed tasks over all tasks, in percent"),
    (
        "progress",
        "mean task progress, max(score / max score, 1 if won) (BALROG's progression), in percent, for domains "
        "that score their tasks (TextWorld, ScienceWorld); `-` elsewhere",
    ),
    ("SGC", "scenario goal completion: chains with every task completed, in percent"),
    ("SGC full", "SGC over the chains of full length only (single-task chains make SGC a copy of TGC)"),
    ("95% CI", "95% bootstrap interval of the number to its left, resampling chains"),
    ("steps", "agent turns per task (a failed task uses all its turns)"),
    ("engine steps", "primitive commands the engine ran per task (a skill call is one turn, several commands)"),
    (
        "tokens",
        "generated tokens per task; `w`: whitespace words of the actions instead, for agents that do "
        "not count tokens (the scripted ones), so not comparable with tokens",
    ),
    (
        "skill reuse",
        "share of the tasks after the first of their chain that called a skill created earlier in "
        "the chain, in percent",
    ),
    ("skills/chain", "skill definitions per chain"),
    ("errors", "chains the agent's own errors ended (summary `agent_errors`; such a chain counts as failed)"),
    ("seeds", "episode seeds; every chain is played once per seed"),
    ("commit", "the project's commit the entry was evaluated at"),
]
"""Every column of the tables and what it means (rendered as the legend)."""


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _interval(summary: dict[str, Any], key: str) -> list[float]:
    """The 95% interval of ``key`` (the point itself when the summary has none)."""
    return summary.get("ci95", {}).get(key, [summary[key], summary[key]])


def _ci(summary: dict[str, Any], key: str) -> str:
    low, high = _interval(summary, key)
    return f"[{_pct(low)}, {_pct(high)}]"


def _cell(text: Any) -> str:
    """Text safe inside a markdown table cell (no pipe, no line break)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def length_mix(summary: dict[str, Any]) -> str:
    """``chain_length_mix`` as ``1:58 2:41`` (chains per number of tasks), or "" when the summary lacks it."""
    mix = summary.get("chain_length_mix") or {}
    return " ".join(f"{length}:{mix[length]}" for length in sorted(mix, key=int))


def protocol(summary: dict[str, Any]) -> str:
    """The chain settings an entry was played with (entries are only comparable under the same ones)."""
    kwargs = summary.get("env_kwargs", {})
    length, turns = kwargs.get("chain_length"), kwargs.get("max_steps_per_task")
    parts = [f"{length}-task chains" if length else "", f"{turns} turns per task" if turns else ""]
    return ", ".join(p for p in parts if p) or "env defaults"


def groups(summaries: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], list[dict[str, Any]]]:
    """Entries by (env, split, source, protocol), sorted: the sets of comparable entries."""
    out: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for s in summaries:
        out.setdefault((s["env"], s["split"], s["source"], protocol(s)), []).append(s)
    return dict(sorted(out.items()))


def _one_or_each(values: list[str], each: str) -> str:
    """The value all entries share, or ``each`` when they differ."""
    return values[0] if len(set(values)) == 1 else each


def protocol_paragraph(rows: list[dict[str, Any]]) -> str:
    """What the entries of one table were played on, from their summaries: chains, turn limit, seeds, settings."""
    first = rows[0]
    kwargs = first.get("env_kwargs", {})
    chains = _one_or_each([str(s["n_chains"]) for s in rows], "as in the `chains` column")
    seeds = _one_or_each([",".join(map(str, s["seeds"])) for s in rows], "as in the `seeds` column")
    mix = _one_or_each([length_mix(s) for s in rows], "")
    lines = [
        f"Protocol: the first {chains} chains of `{first['split']}` ({first['source']} games of {first['env']}; "
        f'chain `i` is `reset(seed=s, options={{"chain": i}})`), each played once per seed (seeds {seeds}), so '
        "every entry meets the same games.",
        f"A chain holds up to {kwargs.get('chain_length', 'the env default')} tasks"
        + (f" (chains per number of tasks: {mix})" if mix else "")
        + f"; a task ends as failed after {kwargs.get('max_steps_per_task', 'the env default number of')} agent "
        "turns"
        + (
            ", and a chain starts with an empty skill library unless the agent brings one."
            if kwargs.get("library_scope", "chain") == "chain"
            else "."
        ),
    ]
    others = sorted({f"`{k}={v}`" for s in rows for k, v in s.get("env_kwargs", {}).items()
                     if k not in ("chain_length", "max_steps_per_task", "split", "source", "skills")})  # fmt: skip
    if others:
        lines.append(f"Other env settings: {', '.join(others)}.")
    return " ".join(lines)


COLUMNS = [
    "agent", "model", "given", "skills", "chains", "TGC", "TGC 95% CI", "progress", "SGC", "SGC 95% CI", "SGC full",
    "SGC full 95% CI", "steps", "engine steps", "tokens", "skill reuse", "skills/chain", "errors", "seeds", "commit",
]  # fmt: skip
"""The header of an entry table (each name is explained in :data:`LEGEND`)."""


def table_row(s: dict[str, Any]) -> list[tuple[str, float | str]]:
    """One entry's cells under :data:`COLUMNS`: each its text and the value it sorts by (a number where one is)."""
    words = " w" if _counted_in_words(s) else ""
    if "sgc_full_length" in s:
        full = [(_pct(s["sgc_full_length"]), s["sgc_full_length"]),
                (_ci(s, "sgc_full_length"), _interval(s, "sgc_full_length")[0])]  # fmt: skip
    else:
        full = [("-", -1.0), ("-", -1.0)]
    mix = length_mix(s)
    errors = s.get("agent_errors")
    return [
        (s["agent"], s["agent"]), (s.get("model_name") or s["model"],) * 2, (s.get("given") or "-",) * 2,
        (s.get("env_kwargs", {}).get("skills", "env default"),) * 2,
        (f"{s['n_chains']} ({mix})" if mix else str(s["n_chains"]), s["n_chains"]),
        (_pct(s["tgc"]), s["tgc"]), (_ci(s, "tgc"), _interval(s, "tgc")[0]),
        (_pct(s["progress"]), s["progress"]) if "progress" in s else ("-", -1.0),
        (_pct(s["sgc"]), s["sgc"]), (_ci(s, "sgc"), _interval(s, "sgc")[0]), *full,
        (f"{s['mean_steps']:.1f}", s["mean_steps"]), (f"{s['mean_primitive_steps']:.1f}", s["mean_primitive_steps"]),
        (f"{s['mean_tokens']:.1f}{words}", s["mean_tokens"]), (_pct(s["skill_reuse_rate"]), s["skill_reuse_rate"]),
        (f"{s['skills_created']:.2f}", s["skills_created"]), ("-" if errors is None else str(errors), errors or 0),
        (",".join(map(str, s["seeds"])),) * 2, ("+".join(c[:8] for c in str(s["commit"]).split("+")),) * 2,
    ]  # fmt: skip


def ranked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries best first: by SGC, then TGC, then name (the order of every table)."""
    return sorted(rows, key=lambda s: (-s["sgc"], -s["tgc"], s["agent"]))


def render_markdown(summaries: list[dict[str, Any]]) -> str:
    """One table per (env, split, source, protocol), rows sorted by SGC then TGC, best first."""
    lines = [
        "# Leaderboard",
        "",
        "Generated by `python -m leaderboard.render` from `leaderboard/results/*.json`; do not edit by hand.",
        "Each table holds the entries played on the same chains under the same protocol (stated above it); an",
        "entry is one agent evaluated by `python -m leaderboard.evaluate` (its summary JSON and episode log are",
        "in `leaderboard/results/`). Percentages are of tasks or chains; intervals are 95% bootstrap intervals",
        "over chains.",
        "",
        "Columns:",
        "",
        *(f"- **{name}**: {meaning}." for name, meaning in LEGEND),
    ]
    for (env, split, source, played), rows in groups(summaries).items():
        rows = ranked(rows)
        lines += [
            "",
            f"## {env} / {split} / {source} ({played})",
            "",
            protocol_paragraph(rows),
            "",
            "| " + " | ".join(COLUMNS) + " |",
            "|---" * len(COLUMNS) + "|",
        ]
        for s in rows:
            lines.append("| " + " | ".join(_cell(text) for text, _ in table_row(s)) + " |")
        types = sorted({t for s in rows for t in s["per_task_type"]})
        lines += ["", "Success per task type (%):", "", "| agent | " + " | ".join(types) + " |",
                  "|---" * (len(types) + 1) + "|"]  # fmt: skip
        for s in rows:
            cells = [_pct(s["per_task_type"][t]) if t in s["per_task_type"] else "-" for t in types]
            lines.append(f"| {s['agent']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _counted_in_words(summary: dict[str, Any]) -> bool:
    """Whether the entry's "tokens" are whitespace words of its actions (an agent that does not count tokens)."""
    return summary.get("token_unit") == "words"


def render_plots(summaries: list[dict[str, Any]], output: Path) -> list[Path]:
    """Success vs tokens and per-task-type bars, one PNG pair per (env, split, source, protocol).

    Agents are told apart by a legend beside the axes (never over the bars or points, and no labels that can
    overlap when several agents land on one spot); an agent whose "tokens" are whitespace words is drawn hollow
    and marked "(words)" in the legend.
    """
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for (env, split, source, played), rows in groups(summaries).items():
        rows = sorted(rows, key=lambda s: s["agent"])
        colors = {s["agent"]: plt.get_cmap("tab10")(i % 10) for i, s in enumerate(rows)}
        markers = {s["agent"]: "osD^v<>ph*"[i // 10 % 10] for i, s in enumerate(rows)}
        stem = "__".join([env, split, source, re.sub(r"[^A-Za-z0-9]+", "-", played)])
        title = f"{split}, {source} games ({played})"
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for s in rows:
            low, high = s.get("ci95", {}).get("tgc", (s["tgc"], s["tgc"]))
            words = _counted_in_words(s)
            ax.errorbar(
                s["mean_tokens"], s["tgc"], yerr=[[s["tgc"] - low], [high - s["tgc"]]], fmt=markers[s["agent"]],
                capsize=3, color=colors[s["agent"]], markerfacecolor="none" if words else colors[s["agent"]],
                label=s["agent"] + (" (words)" if words else ""),
            )  # fmt: skip
        ax.set(xlabel="generated tokens per task (hollow: whitespace words)", ylabel="TGC", ylim=(-0.05, 1.05))
        ax.set_title(f"TGC vs generated tokens\n{title}", fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
        paths.append(output / f"{stem}__success_vs_tokens.png")
        fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)

        types = sorted({t for s in rows for t in s["per_task_type"]})
        fig, ax = plt.subplots(figsize=(max(7, len(types) * 1.6), 4.5))
        width = 0.8 / max(len(rows), 1)
        for i, s in enumerate(rows):
            ax.bar([j + i * width for j in range(len(types))], [s["per_task_type"].get(t, 0) for t in types],
                   width, label=s["agent"], color=colors[s["agent"]])  # fmt: skip
        ticks = [textwrap.fill(t.replace("_", " "), 16) for t in types]
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(types))], ticks, fontsize=8)
        ax.set(ylabel="task success", ylim=(0, 1.05))
        ax.set_title(f"Success per task type\n{title}", fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        paths.append(output / f"{stem}__per_task_type.png")
        fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m leaderboard.render", description=__doc__.splitlines()[0].replace("``", "")
    )
    parser.add_argument("--results", type=Path, default=Path("leaderboard/results"))
    parser.add_argument("--output", type=Path, default=Path("leaderboard"))
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    summaries = load_summaries(args.results)
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "LEADERBOARD.md").write_text(render_markdown(summaries))
    if not args.no_plots:
        (args.output / "plots").mkdir(exist_ok=True)
        render_plots(summaries, args.output / "plots")
    print(f"rendered {len(summaries)} results into {args.output / 'LEADERBOARD.md'}")


if __name__ == "__main__":
    main()
