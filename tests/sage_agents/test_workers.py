"""sage_agents.workers: a worker's share of the cores holds even when torch was imported before it was set."""

from __future__ import annotations

import os

import torch

from sage_agents.workers import share_cores


def test_share_cores_reaches_a_torch_already_imported():
    before, threads = os.environ.pop("OMP_NUM_THREADS", None), torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        share_cores(1)
        assert os.environ["OMP_NUM_THREADS"] == "1" and torch.get_num_threads() == 1
        os.environ["OMP_NUM_THREADS"] = "2"  # the user's setting wins over the share
        share_cores(1)
        assert torch.get_num_threads() == 2
    finally:
        os.environ.pop("OMP_NUM_THREADS", None)
        if before is not None:
            os.environ["OMP_NUM_THREADS"] = before
        torch.set_num_threads(threads)
