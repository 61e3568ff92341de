"""ReSkill (arXiv 2606.01619): versioned guidance skills created and A/B-tested inside GRPO groups.

- :mod:`.registry`: library versions, bundles of add / modify / delete operations, accept / revert.
- :mod:`.reservoir`, :mod:`.assertions`: the experience reservoir and the 9-check assertion engine.
- :mod:`.creator`: the skill creator interface, verification (trigger fire rate, length) and the rule-based
  offline backend; :mod:`.llm`: the LLM backend (a local HF model or an OpenAI-compatible endpoint).
- :mod:`.thompson`: in-group version sampling (Thompson sampling, adaptive discount, empirical-Bayes M).
- :mod:`.lifecycle`: the lifecycle log (JSONL) and plot (PNG).
- :mod:`.controller`: the per-step loop the trainer drives for ``algo="reskill"``.

Nothing here imports torch at module level (the HF creator backend loads it when built). See docs/reskill.md.
"""

from sage_agents.reskill.assertions import CHECK_TYPES, Assertion, AssertionEngine, PassRates, pass_rates
from sage_agents.reskill.controller import ReSkill, make_creator
from sage_agents.reskill.creator import Creator, RuleCreator, fire_rate, verify_skill
from sage_agents.reskill.lifecycle import LifecycleLog, plot_lifecycle, read_lifecycle
from sage_agents.reskill.llm import LLMCreator, extract_json, hf_generate, openai_generate
from sage_agents.reskill.registry import Bundle, LibraryVersion, Operation, VersionRegistry
from sage_agents.reskill.reservoir import Episode, ExperienceReservoir, episodes_from_rollouts
from sage_agents.reskill.thompson import (
    ThompsonTracker,
    accept_decision,
    assignment_probability,
    discount_weight,
    discounted_log_likelihood,
    discounted_update,
    estimate_M,
    prob_new_better,
    prob_new_better_exact,
)

__all__ = [
    "CHECK_TYPES",
    "Assertion",
    "AssertionEngine",
    "Bundle",
    "Creator",
    "Episode",
    "ExperienceReservoir",
    "LLMCreator",
    "LibraryVersion",
    "LifecycleLog",
    "Operation",
    "PassRates",
    "ReSkill",
    "RuleCreator",
    "ThompsonTracker",
    "VersionRegistry",
    "accept_decision",
    "assignment_probability",
    "discount_weight",
    "discounted_log_likelihood",
    "discounted_update",
    "episodes_from_rollouts",
    "estimate_M",
    "extract_json",
    "fire_rate",
    "hf_generate",
    "make_creator",
    "openai_generate",
    "pass_rates",
    "plot_lifecycle",
    "prob_new_better",
    "prob_new_better_exact",
    "read_lifecycle",
    "verify_skill",
]
