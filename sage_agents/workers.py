"""Spawned worker processes: their share of the cores, and death with the process that started them."""

from __future__ import annotations

import os
import signal
import sys


def share_cores(threads: int) -> None:
    """Let math libraries (torch, BLAS) start ``threads`` threads in this process, not one per core.

    Workers that each start one thread per core contend for them; ``OMP_NUM_THREADS`` set by the user is left alone.
    A spawned worker may have imported torch already (its parent's main module is imported first: a script that
    imports torch at the top), after which the variable is not read again, so torch is told directly too: with two
    workers of 2 threads each on 2 cores, ``benchmarks/eval_speed.py --compare pool`` took 122-250 s per row, with
    one thread each 27-38 s.
    """
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    if (torch := sys.modules.get("torch")) is not None:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when ``parent``, the process that started it, dies (Linux).

    A worker that outlives a killed run goes on using its share of the cores for nothing (its results went to the
    dead parent), and one that writes (an RL arm's checkpoints) would write beside the rerun resuming its work.
    ``PR_SET_PDEATHSIG`` asks the kernel for SIGKILL when the parent ends; a parent that died before the request took
    effect is seen by the changed parent pid. Elsewhere than Linux: nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)
