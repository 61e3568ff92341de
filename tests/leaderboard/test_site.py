"""leaderboard.site: a self-contained, deterministic page set; in headless Chromium it loads cleanly and sorts.

The browser tests drive Debian's ``chromium`` (``make browser`` installs it; .ci/run does) and skip without it.
"""

from __future__ import annotations

import json
import shutil
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest

from leaderboard.evaluate import EvalConfig, episodes_path, evaluate
from leaderboard.site import CHROMIUM, SITE_COLUMNS, build_site, headless, main
from leaderboard.verify import main as verify_main

RESULTS = Path(__file__).parents[2] / "leaderboard" / "results"
needs_chromium = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None, reason=f"no {CHROMIUM} on the PATH (install it: make browser)"
)


class _Tables(HTMLParser):
    """The entry tables of a page: per table, its rows, each a list of ``(data-sort, text)`` cells."""

    def __init__(self):
        super().__init__()
        self.tables, self.row_ids, self.errors, self.ready = [], [], [], False
        self._in_body = self._in_errors = False
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "html":
            self.ready = attrs.get("data-ready") == "1"
        elif tag == "table" and attrs.get("class") == "board":
            self.tables.append([])
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.tables[-1].append([])
            self.row_ids.append(attrs.get("id"))
        elif tag == "td" and self._in_body:
            self._cell = [attrs.get("data-sort"), ""]
        elif tag == "ul" and attrs.get("id") == "page-errors":
            self._in_errors = True
        elif tag == "li" and self._in_errors:
            self.errors.append("")

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False
        elif tag == "td" and self._cell is not None:
            self.tables[-1][-1].append(tuple(self._cell))
            self._cell = None
        elif tag == "ul":
            self._in_errors = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data
        elif self._in_errors and self.errors:
            self.errors[-1] += data


def _parse(page: str) -> _Tables:
    parser = _Tables()
    parser.feed(page)
    return parser


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    build_site(RESULTS, out)
    return out


def test_the_site_is_deterministic_self_contained_and_links_every_log(site, tmp_path):
    build_site(RESULTS, tmp_path)
    for name in ("index.html", "data.json"):
        assert (tmp_path / name).read_bytes() == (site / name).read_bytes()
    page = (site / "index.html").read_text()
    assert "<link" not in page and " src=" not in page  # nothing loaded from elsewhere: style and script are inline
    assert page.count("http") == page.count('xmlns="http://www.w3.org/2000/svg"')  # the SVG namespace, not a fetch
    summaries = sorted(RESULTS.glob("*.json"))
    tables = _parse(page)
    assert sorted(tables.row_ids) == sorted(p.name.removesuffix(".json") for p in summaries)
    entries = json.loads((site / "data.json").read_text())["entries"]
    assert len(entries) == len(summaries)
    for entry in entries:
        log = site / entry["site"]["episodes"]
        assert log.read_bytes() == episodes_path(RESULTS / f"{entry['site']['id']}.json").read_bytes()
        assert f'href="{entry["site"]["episodes"]}"' in page
    assert all(len(row) == len(SITE_COLUMNS) for table in tables.tables for row in table)


def test_verified_entries_are_marked_while_their_record_matches(tmp_path):
    results = tmp_path / "results"
    config = EvalConfig(agent="random", num_chains=2, output=str(results), env_kwargs={"max_steps_per_task": 4})
    evaluate(config)
    summary = results / f"{config.run_name}.json"

    def marked() -> bool:
        entry = build_site(results, tmp_path / "site")[0]
        row = f'<tr id="{config.run_name}" class="verified">' in (tmp_path / "site" / "index.html").read_text()
        assert row == bool(entry["site"]["verification"])
        return row

    assert not marked()
    assert verify_main([str(summary)]) == 0
    assert marked()
    log = episodes_path(summary)
    log.write_text(log.read_text().replace('"success": [false', '"success": [true', 1))
    assert not marked()  # the log changed since it was verified


def _dom(site: Path, fragment: str = "") -> tuple[_Tables, str]:
    run = headless((site / "index.html").resolve().as_uri() + fragment, "--dump-dom")
    return _parse(run.stdout), run.stderr


@needs_chromium
def test_the_page_loads_in_chromium_without_errors_and_holds_every_entry(site):
    tables, log = _dom(site)
    assert tables.ready, "the page's script did not run to its end"
    console = [line for line in log.splitlines() if ":CONSOLE" in line]
    assert console == [] and tables.errors == []
    assert sum(len(t) for t in tables.tables) == len(list(RESULTS.glob("*.json")))


def _column(table: list[list[tuple[str, str]]], column: int, numeric: bool) -> list:
    return [float(row[column][0]) if numeric else row[column][0] for row in table]


@needs_chromium
def test_clicking_a_header_sorts_the_rows(site):
    tgc, agent = SITE_COLUMNS.index("TGC"), SITE_COLUMNS.index("agent")
    before, _ = _dom(site)
    once, _ = _dom(site, f"#click=0,{tgc},1")  # first click: ascending
    values = _column(once.tables[0], tgc, numeric=True)
    assert values == sorted(values) and values != _column(before.tables[0], tgc, numeric=True)
    twice, _ = _dom(site, f"#click=1,{agent},2")  # second click: descending
    names = _column(twice.tables[1], agent, numeric=False)
    assert names == sorted(names, reverse=True) and len(names) > 2
    assert sorted(map(tuple, twice.tables[1])) == sorted(map(tuple, before.tables[1]))  # the same rows, reordered


@needs_chromium
def test_the_screenshot_is_a_png_of_the_page(tmp_path):
    png = tmp_path / "shot.png"
    main(["--results", str(RESULTS), "--output", str(tmp_path / "site"), "--screenshot", str(png)])
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == (2300, 1500) and len(data) > 50_000  # a rendered page, not a blank one
