"""Processes seen through Linux's /proc: the workers a run spawned, and whether they still run."""

import time
from pathlib import Path


def stat_fields(stat: Path) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` file after the command name: state, parent pid, ..."""
    return stat.read_text().rsplit(")", 1)[1].split()


def spawned_workers(parent: int) -> list[int]:
    """The pids of ``parent``'s spawned worker processes (Linux: read from /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat_fields(stat)[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # the process ended while being read
        if ppid == parent and b"spawn_main" in command:
            pids.append(int(stat.parent.name))
    return pids


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        return stat_fields(Path(f"/proc/{pid}/stat"))[0] != "Z"
    except OSError:
        return False


def outliving(pids: list[int], seconds: float) -> list[int]:
    """Those of ``pids`` still running after up to ``seconds`` of waiting for all of them to end."""
    deadline = time.monotonic() + seconds
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]
