import copy
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)  # tiny models: threads only add contention on a shared 2-core machine


@pytest.fixture(scope="session")
def tiny():
    """A tiny (model, tokenizer) pair built once; tests that train must deep-copy the model."""
    from sage_agents.models import build_tiny_model

    model, tokenizer = build_tiny_model(hidden=32, layers=2, heads=2, kv_heads=1, seed=0)
    model.eval()
    return model, tokenizer


@pytest.fixture
def tiny_copy(tiny):
    model, tokenizer = tiny
    return copy.deepcopy(model), tokenizer
