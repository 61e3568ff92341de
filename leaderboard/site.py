"""Build the static leaderboard site from the summaries in ``leaderboard/results/``.

    python -m leaderboard.site [--results leaderboard/results] [--output site] [--screenshot PNG]

Writes ``index.html`` (one self-contained page: its CSS, script and charts are inline, it loads nothing from a
server or the network and opens from disk), ``data.json`` (every entry's summary, its episode log's link and its
verification) and ``episodes/`` (a copy of each entry's episode log, linked from its row). The page holds one
table per env / split / game source / protocol, as ``LEADERBOARD.md`` does (``leaderboard.render`` supplies the
grouping, columns, legend and protocol text), sortable by any column (click a header; again to reverse); under
each, success against tokens with the TGC interval, success per task type, and the chain-length mix. Entries whose
verification record (``python -m leaderboard.verify``) still matches their summary and log are marked verified.

Reads results only and is deterministic (same files in, same bytes out). ``--screenshot`` also renders the page in
headless Chromium (Debian's ``chromium``) to a PNG.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from leaderboard.evaluate import episodes_path
from leaderboard.render import COLUMNS, LEGEND, groups, protocol_paragraph, ranked, summary_paths, table_row
from leaderboard.verify import verification_status

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]  # fmt: skip
"""Agent colours (matplotlib's tab10, as the PNG plots), assigned by agent name in each table."""
SITE_COLUMNS = [*COLUMNS, "verified", "log"]
"""The site's table header: ``LEADERBOARD.md``'s columns, the verification mark and the episode log's link."""
SITE_LEGEND = [
    ("verified", "replayed by `python -m leaderboard.verify` and found to follow from its actions; the record's "
     "hashes still match the summary and the log (hover for the commit it was verified at)"),
    ("log", "the entry's episode log (JSON lines, one record per chain: actions, successes, steps, tokens)"),
]  # fmt: skip
"""The site's columns beyond ``LEADERBOARD.md``'s and what they mean."""


CHROMIUM = "chromium"
"""The headless browser the screenshot and the site's tests drive (Debian's package of that name)."""

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #222; }
div.scroll { overflow-x: auto; }
h1 { margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
code { background: #f3f3f3; padding: 0 .2em; }
table.board { border-collapse: collapse; font-size: 12px; margin: .8em 0; }
table.board th, table.board td { border: 1px solid #ddd; padding: .25em .45em; text-align: right; }
table.board td.text, table.board th.text { text-align: left; }
table.board th { background: #f5f5f5; cursor: pointer; user-select: none; white-space: nowrap; }
table.board th[aria-sort=ascending]::after { content: " \\25B2"; }
table.board th[aria-sort=descending]::after { content: " \\25BC"; }
table.board tr.verified td:first-child { font-weight: bold; }
td.given { min-width: 16em; max-width: 30em; } .ok { color: #176b2c; font-weight: bold; }
.figures { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
figure { margin: 0; } figcaption { font-size: 12px; color: #555; max-width: 40em; }
dl.legend dt { font-weight: bold; float: left; clear: left; width: 9em; } dl.legend dd { margin-left: 10em; }
#page-errors:empty { display: none; } #page-errors { color: #b00; }
"""

SCRIPT = r"""
(function () {
  var errors = document.getElementById("page-errors");
  window.addEventListener("error", function (e) {
    var li = document.createElement("li"); li.textContent = String(e.message); errors.appendChild(li);
  });
  function key(td, numeric) {
    var v = td.getAttribute("data-sort"); return numeric ? Number(v) : v;
  }
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
    var numeric = th.getAttribute("data-type") === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    var rows = Array.prototype.slice.call(body.rows).map(function (tr, i) { return [tr, i]; });
    rows.sort(function (a, b) {
      var x = key(a[0].cells[col], numeric), y = key(b[0].cells[col], numeric);
      var c = numeric ? x - y : (x < y ? -1 : x > y ? 1 : 0);  // code-point order, as Python's sorted
      return c !== 0 ? dir * c : a[1] - b[1];
    });
    rows.forEach(function (r) { body.appendChild(r[0]); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.board th"), function (th) {
    th.addEventListener("click", function () { sortBy(th); });
  });
  // Test hook: #click=T,C,N clicks header C of table T N times, as a person would (tests/leaderboard/test_site.py).
  var m = /^#click=(\d+),(\d+),(\d+)$/.exec(location.hash);
  if (m) {
    var th = document.querySelectorAll("table.board")[+m[1]].tHead.rows[0].cells[+m[2]];
    for (var i = 0; i < +m[3]; i++) th.dispatchEvent(new MouseEvent("click", {bubbles: true}));
  }
  document.documentElement.setAttribute("data-ready", "1");
})();
"""


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _prose(markdown: str) -> str:
    """A line of the renderer's markdown as HTML: escaped, with its `code` spans and **bold** kept."""
    text = re.sub(r"`([^`]*)`", r"<code>\1</code>", _esc(markdown))
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", text)


def load_entries(results: Path) -> list[dict[str, Any]]:
    """Every summary in ``results``, with a ``site`` key added.

    ``site`` holds ``id`` (the file stem), ``episodes`` (the log's link in the site, None when the log is missing)
    and ``verification`` (the verification record while it still matches, else None).
    """
    entries = []
    for path in summary_paths(results):
        log = episodes_path(path)
        site = {
            "id": path.name.removesuffix(".json"),
            "episodes": f"episodes/{log.name}" if log.is_file() else None,
            "verification": verification_status(path),
        }
        entries.append({**json.loads(path.read_text()), "site": site})
    return entries


def _colours(rows: list[dict[str, Any]]) -> dict[str, str]:
    return {s["agent"]: PALETTE[i % len(PALETTE)] for i, s in enumerate(sorted(rows, key=lambda s: s["agent"]))}


def _legend(colours: dict[str, str], x: float, y: float, hollow: set[str] = frozenset()) -> list[str]:
    """SVG legend rows: one swatch and name per agent, from ``(x, y)`` down."""
    out = []
    for i, (agent, colour) in enumerate(colours.items()):
        fill = "none" if agent in hollow else colour
        out.append(f'<circle cx="{x + 5}" cy="{y + 16 * i}" r="4.5" fill="{fill}" stroke="{colour}" stroke-width="2"/>'
                   f'<text x="{x + 15}" y="{y + 16 * i + 4}">{_esc(agent)}{" (words)" if agent in hollow else ""}'
                   "</text>")  # fmt: skip
    return out


def tokens_chart(rows: list[dict[str, Any]]) -> str:
    """TGC (with its 95% interval) against tokens per task, one point per entry (hollow: tokens are words)."""
    colours, width, height, left, top, plot_w, plot_h = _colours(rows), 640, 300, 50, 15, 400, 240
    x_max = max([s["mean_tokens"] for s in rows] + [1.0]) * 1.08
    px = lambda v: left + plot_w * v / x_max  # noqa: E731
    py = lambda v: top + plot_h * (1 - v)  # noqa: E731
    parts = [f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#999"/>']
    for tick in range(0, 101, 25):
        y = py(tick / 100)
        parts.append(f'<line x1="{left - 4}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
                     f'<text x="{left - 7}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')  # fmt: skip
    for i in range(5):
        value = x_max * i / 4
        parts.append(f'<text x="{px(value):.1f}" y="{top + plot_h + 15}" text-anchor="middle">{value:.0f}</text>')
    hollow = {s["agent"] for s in rows if s.get("token_unit") == "words"}
    for s in sorted(rows, key=lambda s: s["agent"]):
        low, high = s.get("ci95", {}).get("tgc", [s["tgc"], s["tgc"]])
        x, colour = px(s["mean_tokens"]), colours[s["agent"]]
        fill = "none" if s["agent"] in hollow else colour
        tip = f"{s['agent']}: TGC {100 * s['tgc']:.1f}% [{100 * low:.1f}, {100 * high:.1f}], {s['mean_tokens']:.1f}"
        parts.append(f'<g><title>{_esc(tip)} {_esc(s.get("token_unit", "tokens"))} per task</title>'
                     f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{py(low):.1f}" y2="{py(high):.1f}" stroke="{colour}"/>'
                     f'<circle cx="{x:.1f}" cy="{py(s["tgc"]):.1f}" r="5" fill="{fill}" stroke="{colour}" '
                     'stroke-width="2"/></g>')  # fmt: skip
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 8}" text-anchor="middle">tokens per task</text>')
    parts.append(f'<text transform="translate(13 {top + plot_h / 2}) rotate(-90)" text-anchor="middle">TGC %</text>')
    parts += _legend(colours, left + plot_w + 20, top + 8, hollow)
    return _svg(width, height, parts, "TGC against tokens per task")


def task_type_chart(rows: list[dict[str, Any]]) -> str:
    """Success per task type: one group of bars per type, one bar per entry."""
    colours = _colours(rows)
    types = sorted({t for s in rows for t in s["per_task_type"]})
    agents = sorted(rows, key=lambda s: s["agent"])
    left, top, plot_h, bar = 40, 15, 200, 9
    group_w = bar * len(agents) + 14
    plot_w = group_w * len(types)
    width, height = left + plot_w + 190, top + plot_h + 70
    parts = [f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#999"/>']
    for tick in range(0, 101, 25):
        y = top + plot_h * (1 - tick / 100)
        parts.append(f'<text x="{left - 5}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
    for j, task_type in enumerate(types):
        x0 = left + j * group_w + 7
        for i, s in enumerate(agents):
            if task_type not in s["per_task_type"]:
                continue
            value = s["per_task_type"][task_type]
            h = plot_h * value
            parts.append(f'<rect x="{x0 + i * bar}" y="{top + plot_h - h:.1f}" width="{bar - 1}" height="{h:.1f}" '
                         f'fill="{colours[s["agent"]]}"><title>{_esc(s["agent"])}, {_esc(task_type)}: '
                         f"{100 * value:.1f}%</title></rect>")  # fmt: skip
        words = task_type.replace("pick_", "").replace("_then_place_in_recep", "").split("_")
        centre = x0 + bar * len(agents) / 2
        lines = [" ".join(words[: (len(words) + 1) // 2]), " ".join(words[(len(words) + 1) // 2 :])]
        spans = "".join(f'<tspan x="{centre:.1f}" dy="{13 if k else 0}">{_esc(line)}</tspan>'
                        for k, line in enumerate(lines) if line)  # fmt: skip
        title = f"<title>{_esc(task_type)}</title>"
        parts.append(f'<text y="{top + plot_h + 16}" text-anchor="middle">{title}{spans}</text>')
    parts += _legend(colours, left + plot_w + 20, top + 8)
    return _svg(width, height, parts, "success per task type")


def mix_chart(rows: list[dict[str, Any]]) -> str:
    """The chain-length mix: one stacked bar per distinct mix, the chains of each length and who played it."""
    mixes: dict[str, list[str]] = {}
    for s in sorted(rows, key=lambda s: s["agent"]):
        mixes.setdefault(json.dumps(s.get("chain_length_mix") or {}, sort_keys=True), []).append(s["agent"])
    width, bar_w, parts = 640, 360, []
    for k, (mix_json, agents) in enumerate(mixes.items()):
        mix, y, x = json.loads(mix_json), 10 + 34 * k, 10.0
        total = sum(mix.values()) or 1
        for i, length in enumerate(sorted(mix, key=int)):
            w = bar_w * mix[length] / total
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="20" fill="{PALETTE[i % 10]}" '
                         f'opacity="0.75"><title>{mix[length]} chains of {length} tasks</title></rect>'
                         f'<text x="{x + 4:.1f}" y="{y + 14}">{length}: {mix[length]}</text>')  # fmt: skip
            x += w
        who = "every entry" if len(mixes) == 1 else ", ".join(agents)
        parts.append(f'<text x="{bar_w + 20}" y="{y + 14}">{_esc(who)}</text>')
    return _svg(width, 34 * len(mixes) + 10, parts, "chains per number of tasks")


def _svg(width: int, height: int, parts: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-size="11" '
            f'role="img" aria-label="{_esc(label)}">' + "".join(parts) + "</svg>")  # fmt: skip


def _table(rows: list[dict[str, Any]]) -> str:
    """One sortable entry table (rows in :func:`~leaderboard.render.ranked` order)."""
    cells = [[*table_row(s), _verified_cell(s), _log_cell(s)] for s in rows]
    numeric = [all(isinstance(row[c][1], (int, float)) for row in cells) for c in range(len(SITE_COLUMNS))]
    head = "".join(f'<th data-type="{"num" if num else "text"}" class="{"num" if num else "text"}" '
                   f'title="{_esc(_meaning(name))}">{_esc(name)}</th>'
                   for name, num in zip(SITE_COLUMNS, numeric, strict=True))  # fmt: skip
    body = []
    for s, row in zip(rows, cells, strict=True):
        tds = []
        for c, (text, value) in enumerate(row):
            css = ("num" if numeric[c] else "text") + (" given" if SITE_COLUMNS[c] == "given" else "")
            shown = text if SITE_COLUMNS[c] in ("verified", "log") else _esc(text)  # those two are built as HTML
            tds.append(f'<td class="{css}" data-sort="{_esc(value)}">{shown}</td>')
        verified = ' class="verified"' if s["site"]["verification"] else ""
        body.append(f'<tr id="{_esc(s["site"]["id"])}"{verified}>' + "".join(tds) + "</tr>")
    table = f'<table class="board"><thead><tr>{head}</tr></thead><tbody>' + "".join(body) + "</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def _meaning(column: str) -> str:
    return dict(LEGEND + SITE_LEGEND).get(column.removesuffix(" 95% CI"), "")


def _verified_cell(s: dict[str, Any]) -> tuple[str, str]:
    record = s["site"]["verification"]
    if not record:
        return "-", "0"
    tip = f"{record['chains']} chains replayed at commit {record['verifier_commit'][:8]}"
    return f'<span class="ok" title="{_esc(tip)}">&#10003; verified</span>', "1"


def _log_cell(s: dict[str, Any]) -> tuple[str, str]:
    link = s["site"]["episodes"]
    return (f'<a href="{_esc(link)}">episodes</a>', link) if link else ("missing", "")


def render_html(entries: list[dict[str, Any]]) -> str:
    """The page: the legend, then per group its protocol, sortable table and charts."""
    sections = []
    for i, ((env, split, source, played), rows) in enumerate(groups(entries).items()):
        rows = ranked(rows)
        sections.append(
            f'<section id="group-{i}"><h2>{_esc(env)} / {_esc(split)} / {_esc(source)} ({_esc(played)})</h2>'
            f"<p>{_prose(protocol_paragraph(rows))}</p>{_table(rows)}"
            '<div class="figures">'
            f"<figure>{tokens_chart(rows)}<figcaption>TGC and its 95% interval against tokens per task (hollow: "
            "whitespace words of the actions, for agents that count no tokens).</figcaption></figure>"
            f"<figure>{task_type_chart(rows)}<figcaption>Success per task type.</figcaption></figure>"
            f"<figure>{mix_chart(rows)}<figcaption>Chain-length mix: chains per number of tasks.</figcaption>"
            "</figure></div></section>"
        )
    legend = "".join(f"<dt>{_esc(name)}</dt><dd>{_prose(text)}</dd>" for name, text in LEGEND + SITE_LEGEND)
    n_verified = sum(bool(e["site"]["verification"]) for e in entries)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>sage-rl-agent leaderboard</title>'
        f'<meta name="viewport" content="width=device-width"><style>{STYLE}</style></head><body>'
        "<h1>sage-rl-agent leaderboard</h1>"
        f"<p>{len(entries)} entries, {n_verified} verified. Built by <code>python -m leaderboard.site</code> from "
        "<code>leaderboard/results/</code> (the same entries as <code>LEADERBOARD.md</code>; the raw figures are "
        'in <a href="data.json">data.json</a>). Each table holds the entries played on the same chains under the '
        "same protocol; click a column header to sort by it, again to reverse. Percentages are of tasks or "
        "chains; intervals are 95% bootstrap intervals over chains. How to submit an entry: "
        "<code>leaderboard/README.md</code>.</p>"
        '<ul id="page-errors"></ul>'
        + "".join(sections)
        + f'<h2>Columns</h2><dl class="legend">{legend}</dl><script>{SCRIPT}</script></body></html>\n'
    )


def build_site(results: Path, output: Path) -> list[dict[str, Any]]:
    """Write ``index.html``, ``data.json`` and ``episodes/`` into ``output``; returns the entries."""
    entries = load_entries(results)
    (output / "episodes").mkdir(parents=True, exist_ok=True)
    for path in summary_paths(results):
        if episodes_path(path).is_file():
            shutil.copyfile(episodes_path(path), output / "episodes" / episodes_path(path).name)
    (output / "index.html").write_text(render_html(entries))
    data = {"columns": SITE_COLUMNS, "legend": dict(LEGEND + SITE_LEGEND), "entries": entries}
    (output / "data.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return entries


def headless(url: str, *flags: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run headless Chromium on ``url`` with ``flags`` (e.g. ``--dump-dom``); its console goes to stderr.

    Raises FileNotFoundError naming the package to install when there is no ``chromium`` on the PATH.
    """
    binary = shutil.which(CHROMIUM)
    if binary is None:
        raise FileNotFoundError(f"no {CHROMIUM} on the PATH; install Debian's package: apt-get install -y chromium")
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
               "--v=0", *flags, url]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m leaderboard.site", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("leaderboard/results"))
    parser.add_argument("--output", type=Path, default=Path("site"))
    parser.add_argument("--screenshot", type=Path, default=None, help="also save a PNG of the page (needs chromium)")
    args = parser.parse_args(argv)
    entries = build_site(args.results, args.output)
    print(f"built {args.output / 'index.html'}: {len(entries)} entries, "
          f"{sum(bool(e['site']['verification']) for e in entries)} verified")  # fmt: skip
    if args.screenshot:
        args.screenshot.parent.mkdir(parents=True, exist_ok=True)
        headless((args.output / "index.html").resolve().as_uri(), f"--screenshot={args.screenshot.resolve()}",
                 "--window-size=2300,1500")  # fmt: skip
        print(f"screenshot {args.screenshot}")


if __name__ == "__main__":
    main()
