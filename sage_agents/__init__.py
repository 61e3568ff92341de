"""LLM agents for the sage_envs chain environments: policy, GRPO, SAGE, warm start, plug-in agents.

Importing this package is light (no torch, transformers or trl): names are loaded on first access, as in TRL's
``_import_structure``.
"""

from __future__ import annotations

import importlib
from typing import Any

_import_structure: dict[str, list[str]] = {
    "config": ["TrainConfig"],
    "models": ["build_tiny_model", "build_tokenizer", "load_policy", "count_parameters"],
    "policy": [
        "LLMPolicy",
        "PolicyAgent",
        "ParsedAction",
        "Completion",
        "build_prompt",
        "parse_action",
        "completion_logprobs",
        "make_policy_agent",
    ],
    "rollout": ["ChainRollout", "Turn", "rollout_chains", "rollout_stats"],
    "trainer": ["Trainer"],
    "sft": ["PlanExpert", "collect_expert_pairs", "sft_warm_start"],
    "registry": ["Agent", "agent_factories", "list_agents", "make_agent"],
}
_name_to_module = {name: module for module, names in _import_structure.items() for name in names}

__all__ = sorted(_name_to_module)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _name_to_module:
        value = getattr(importlib.import_module(f"{__name__}.{_name_to_module[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
