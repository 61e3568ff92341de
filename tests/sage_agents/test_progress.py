"""sage_agents.progress: rich's bars in a terminal, plain periodic lines in a log."""

import io

from rich.console import Console

import sage_agents.progress
from sage_agents.progress import Progress, track


def test_a_log_gets_a_start_line_periodic_lines_and_one_finished_line(monkeypatch):
    log = io.StringIO()
    clock = iter([0.0, 10.0, 31.0, 35.0, 40.0, 41.0, 99.0])
    monkeypatch.setattr(sage_agents.progress.time, "monotonic", lambda: next(clock))
    with Progress(console=Console(file=log), auto_refresh=False) as progress:
        task = progress.add_task("eval", total=4, info="")  # t=0: printed
        progress.advance(task)  # t=10: too soon
        progress.update(task, completed=2, info="TGC 0.50")  # t=31: printed
        progress.advance(task)  # t=35: too soon
        progress.advance(task)  # t=40: finished, printed
        progress.update(task, completed=4)  # t=41: finished already printed
    lines = [line for line in log.getvalue().splitlines() if line.startswith("eval: ")]
    assert [line.split(",")[0] for line in lines] == ["eval: 0/4", "eval: 2/4", "eval: 4/4"]
    assert "eval: 2/4, TGC 0.50, " in lines[1] and lines[1].endswith("s elapsed")


def test_a_terminal_or_a_disabled_display_gets_no_plain_lines():
    terminal, log = Console(file=io.StringIO(), force_terminal=True), Console(file=io.StringIO())
    for console, disable in ((terminal, False), (log, True)):
        with Progress(console=console, disable=disable, transient=True) as progress:
            task = progress.add_task("sft", total=2)
            progress.advance(task, 2)
        assert "sft: " not in console.file.getvalue()


def test_track_yields_every_item_and_logs_its_progress(capsys):
    assert list(track(range(3), "chains")) == [0, 1, 2]
    out = capsys.readouterr().out
    assert "chains: 0/3, 0s elapsed" in out and "chains: 3/3, " in out
