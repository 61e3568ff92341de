"""``TrainConfig``: every setting of the GRPO / SAGE trainer (defaults follow SAGE, arXiv 2512.17102)."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from sage_envs.domain import ENTITY_PATTERN
from sage_envs.error import InvalidConfigError, NoDomainError

ALGOS = ("grpo", "sage", "reskill")
RESKILL_DISCOUNTS = ("eb", "none", "last_step")
RESKILL_CREATORS = ("rule", "llm")
LOSS_TYPES = ("grpo", "dr_grpo", "dapo")
SEQUENCE_UNITS = ("trajectory", "turn")
LR_SCHEDULES = ("constant_with_warmup", "linear", "cosine")
STEP_ANCHORS = ("observation", "prompt")
REWARD_MODES = ("skill", "outcome", "progress")
REPORTERS = ("jsonl", "tensorboard")
BACKENDS = ("native", "trl")
DTYPES = ("float32", "bfloat16", "float16", "auto")
MIXED_PRECISIONS = ("no", "bf16", "fp16")
REMOVED_FIELDS = {
    "candidate_score": "candidate scoring gave way to token-level constrained decoding at a60884f",
    "template_headers": "a template's body is forced once its name is chosen since a60884f",
}
"""Fields of earlier versions, each with why it went; :meth:`TrainConfig.from_dict` drops them with a warning."""


ConfigError = InvalidConfigError  # a TrainConfig field is outside its allowed values (sage_envs.error)


def domain_argument_kwargs(env_id: str) -> dict[str, Any]:
    """The :class:`~sage_agents.policy.LLMPolicy` options by which ``env_id``'s domain names skill-call arguments.

    Its :attr:`~sage_envs.domain.Domain.entity_pattern`, whether its tasks name entities
    (:attr:`~sage_envs.domain.Domain.task_names_entities`) and its parameters' closed values
    (:attr:`~sage_envs.domain.Domain.argument_values`), each only where it differs from the default, so that the
    options of a run on a domain with the defaults (ALFWorld) read, and hash, as they always did. Nothing for an
    env that names no domain (a test double, a third-party env) or is not registered yet (a config is checked
    before its env's package registers it).
    """
    import sage_envs

    try:
        domain = sage_envs.domain_class(env_id)
    except (NoDomainError, InvalidConfigError):
        return {}
    kwargs: dict[str, Any] = {}
    if domain.entity_pattern != ENTITY_PATTERN:
        kwargs["entity_pattern"] = domain.entity_pattern
    if not domain.task_names_entities:
        kwargs["task_arguments"] = False
    if domain.argument_values:
        kwargs["argument_values"] = {name: list(values) for name, values in domain.argument_values.items()}
    return kwargs


@dataclass
class TrainConfig:
    """Settings of :class:`sage_agents.trainer.Trainer`; each field is documented right below it."""

    # ------------------------------------------------------------------ algorithm
    algo: str = "sage"
    """``sage`` (skill-integrated reward, chains), ``grpo`` (outcome reward) or ``reskill`` (docs/reskill.md)."""
    reward_mode: str | None = None
    """``skill``, ``outcome`` or ``progress`` (max(task_score / 100, won)); None: sage -> skill, else outcome."""
    no_action_penalty: float | None = -1.0
    """Reward of a completion with no parseable action, which also ends the chain (SAGE: -1); None = off."""
    group_size: int = 8
    """Rollouts per group (G), all on the same chain (SAGE and ReSkill use 8)."""
    chains_per_step: int = 1
    """Groups (distinct chains) per optimisation step and process."""
    scale_std: bool = False
    """Divide advantages by the group std (GRPO); SAGE uses reward minus group mean only."""
    step_advantage_weight: float = 0.0
    """GiGPO's omega: weight of the step-level advantage (turns in one state compared; algos/gigpo.py); 0 = off."""
    step_anchor: str = "observation"
    """What makes turns one state for the step level: ``observation`` (the text acted on; GiGPO's) or ``prompt``."""
    step_discount: float = 0.95
    """GiGPO's gamma: discount of a task's reward back over its turns, for the step-level advantage only."""
    loss_type: str = "grpo"
    """``grpo`` (sequence mean, then mean), ``dr_grpo`` (sum / L_max) or ``dapo`` (batch token mean)."""
    sequence_unit: str = "trajectory"
    """What a loss "sequence" is: ``trajectory`` (all turns of one task attempt) or ``turn``."""
    dr_grpo_max_len: int | None = None
    """The constant L_max of dr_grpo; None = the longest sequence of the batch."""
    eps_low: float = 0.2
    """Lower PPO clip range (ratio >= 1 - eps_low)."""
    eps_high: float = 0.2
    """Upper PPO clip range (ratio <= 1 + eps_high); > eps_low is DAPO's clip-higher."""
    beta: float = 0.0
    """KL coefficient to a frozen copy of the initial model (k3 estimator); 0 = no reference (SAGE)."""
    ppo_epochs: int = 1
    """Optimisation passes over each batch of rollouts (GRPO's mu); clipping only matters when > 1."""

    # ------------------------------------------------------------------ optimisation
    lr: float = 1e-6
    """AdamW learning rate (SAGE: 1e-6; a tiny CPU model needs ~1e-4, see docs/agents.md)."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up steps."""
    lr_scheduler_type: str = "constant_with_warmup"
    """Schedule after the warm-up (TRL's names): ``constant_with_warmup``, ``linear``, ``cosine``."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm; 0 = off."""
    micro_batch_size: int = 16
    """Turns per forward/backward pass; gradients accumulate to exactly the full-batch gradient."""
    total_steps: int = 100
    """Optimisation steps to train for."""
    seed: int = 0
    """Seed of every random choice (chains, sampling, initial tiny weights)."""
    dtype: str = "float32"
    """Dtype of the trained (master) weights: a bf16/fp16 checkpoint is upcast; ``auto`` keeps the checkpoint's."""
    mixed_precision: str = "no"
    """Compute dtype of forward passes through accelerate's autocast: ``no``, ``bf16`` or ``fp16`` (GPU)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (non-reentrant): less memory, ~30% more update time."""
    lora_r: int = 0
    """LoRA rank (peft); 0 = full fine-tuning."""
    lora_alpha: int = 16
    """LoRA scaling numerator (the update is scaled by lora_alpha / lora_r)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA branch's input."""
    lora_target_modules: list[str] | None = None
    """Module names LoRA adapts (e.g. ``["q_proj", "v_proj"]``); None = every linear layer but the LM head."""

    # ------------------------------------------------------------------ environment
    env_id: str = "SageChain-ALFWorld-v0"
    """Gymnasium id of the chain env."""
    split: str = "train"
    """Env split to train on."""
    train_chains: int | None = None
    """Train on the split's first N chains only (None: all), e.g. a smoke run on the chains its SFT data held."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra ``gymnasium.make`` kwargs (chain_length, skills, max_steps_per_task, ...)."""

    # ------------------------------------------------------------------ policy
    model_path: str | None = None
    """Local folder of a Hugging Face causal LM; None = build a tiny model from scratch."""
    tiny_hidden: int = 128
    """Hidden size of the tiny model (when ``model_path`` is None)."""
    tiny_layers: int = 4
    """Layers of the tiny model (when ``model_path`` is None)."""
    constrained: bool = False
    """Act by constrained decoding (an admissible command or a skill call) instead of free generation."""
    skill_calls: bool = True
    """Allow ``call NAME(args)`` of library skills in constrained decoding."""
    skill_templates: list[str] = field(default_factory=list)
    """Skill definitions allowed as define+call actions in constrained decoding (the body is forced)."""
    write_skills: bool = False
    """Write definitions token by token under the DSL grammar, with the vocabulary of ``skill_templates``."""
    max_argument_options: int = 64
    """Values offered per skill-call argument in constrained decoding (arguments are chosen one at a time)."""
    typed_arguments: bool = False
    """A skill-call argument is offered only values of a type the task or the parameter names (``typed_options``)."""
    history_turns: int = 3
    """(observation, action) pairs of the current task kept in the prompt."""
    earlier_actions: int = 20
    """The task's actions before the history window listed in the prompt (a cheap memory against loops)."""
    skill_descriptions: bool = True
    """Show program skills' descriptions in the prompt (False: signatures only, a shorter prompt)."""
    show_admissible: bool = True
    """List the admissible commands in the prompt (redundant with constrained decoding, and costly)."""
    untried_commands: str | None = None
    """List the admissible commands with this prefix not yet sent in the task in the prompt (``LLMPolicy``)."""
    skip_repeated_actions: bool = False
    """Constrained decoding does not offer a command already sent at the same observation in the task (LLMPolicy)."""
    max_new_tokens: int = 64
    """Generation budget per turn (free generation)."""
    max_prompt_tokens: int = 1024
    """Oldest history turns are dropped until the prompt fits."""
    option_greedy: bool = False
    """Greedy constrained decoding picks each choice's likeliest whole option (``LLMPolicy``); sampling unchanged."""
    option_sampling: bool = False
    """Constrained choices are sampled, trained and argmaxed as whole options (``LLMPolicy``; needs constrained)."""
    temperature: float = 1.0
    """Sampling temperature (also used for the training log-probs)."""
    top_p: float = 1.0
    """Nucleus sampling threshold in free generation; 1.0 = off."""

    # ------------------------------------------------------------------ reskill (algo="reskill", arXiv 2606.01619)
    reskill_max_active: int = 8
    """Most guidance skills live in one library version (ReSkill: 8)."""
    reskill_min_test_steps: int = 5
    """Training steps a version test runs before it can be decided (ReSkill: 5)."""
    reskill_min_test_episodes: int = 50
    """Episodes (both arms) a version test collects before it can be decided (ReSkill: 50)."""
    reskill_discount: str = "eb"
    """Posterior discount per step: ``eb`` (w = M/(M+n), M by empirical Bayes), ``none`` or ``last_step``."""
    reskill_p_clamp: float = 0.15
    """P(new) of a rollout slot is clamped to [p_clamp, 1 - p_clamp] (ReSkill: 0.15)."""
    reskill_min_within_step_z: float | None = None
    """Accept only above this within-step z (``thompson.within_step_z``; 0 = any gain); None = the paper's rule."""
    reskill_reservoir_size: int = 200
    """Most recent episodes kept in the experience reservoir (ReSkill: ~200)."""
    reskill_min_reservoir: int = 50
    """Episodes in the reservoir before the skill creator is first asked."""
    reskill_create_every: int = 1
    """Steps between skill-creator calls while no version test runs."""
    reskill_creator: str = "rule"
    """Skill creator backend: ``rule`` (offline, assertion contrasts) or ``llm``."""
    reskill_creator_endpoint: str | None = None
    """Base URL of an OpenAI-compatible server for the llm creator (POST /v1/chat/completions)."""
    reskill_creator_model: str | None = None
    """``model`` field sent to the endpoint (None = "default")."""
    reskill_creator_model_path: str | None = None
    """Local folder of a Hugging Face causal LM for the llm creator (when no endpoint is set)."""
    reskill_creator_retries: int = 2
    """Extra attempts per llm-creator stage after an unparseable or invalid reply."""
    reskill_fire_rate: float = 0.5
    """Verification: a new skill's trigger must fire in at least this share of reservoir episodes (ReSkill: 0.5)."""
    reskill_max_chars: int = 500
    """Verification: longest guidance text of a new skill, in characters (ReSkill: 500)."""
    reskill_skills_dir: str | None = None
    """Folder of SKILL.md folders to start the library from (None = empty)."""

    # ------------------------------------------------------------------ bookkeeping
    output_dir: str = "runs/sage"
    """Where metrics, TensorBoard events and checkpoints go."""
    save_every: int = 50
    """Checkpoint every this many steps (and at the end); 0 = only at the end."""
    eval_every: int = 0
    """Greedy evaluation on fixed chains every this many steps and before the first (``eval/*`` metrics); 0 = never."""
    eval_split: str = "valid_unseen"
    """Split of the evaluation chains (env ``split``); ignored when the trainer is given ``env_fn``."""
    eval_chains: int = 16
    """Evaluation plays the first this many chains of ``eval_split`` once each, ``group_size`` at a time."""
    eval_from_bank: bool = True
    """SAGE's evaluation chains start from its skill bank (False: an empty library, the paper's protocol)."""
    eval_env_kwargs: dict[str, Any] | None = None
    """``gymnasium.make`` kwargs of the evaluation envs (None = ``env_kwargs``), e.g. without a training grammar."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk."""
    resume: bool = False
    """Continue exactly from the latest checkpoint in ``output_dir``."""
    report_to: list[str] = field(default_factory=lambda: ["jsonl", "tensorboard"])
    """Metric sinks: ``jsonl`` (metrics.jsonl) and/or ``tensorboard``."""
    progress: bool = True
    """Show a rich progress bar."""
    cpu: bool = False
    """Force CPU in accelerate even when an accelerator is present."""

    # ------------------------------------------------------------------ backend
    backend: str = "native"
    """``native`` (sage_agents.trainer.Trainer) or ``trl`` (TRL's GRPOTrainer; docs/agents.md, "TRL backend")."""
    trl_args: dict[str, Any] = field(default_factory=dict)
    """GRPOConfig kwargs passed straight through with ``backend="trl"`` (use_vllm, vllm_mode, bf16, ...)."""

    def __post_init__(self) -> None:
        def fail(name: str, rule: str, fix: str) -> None:
            raise ConfigError(f"TrainConfig.{name}={getattr(self, name)!r}: {rule}; {fix}.")

        choices = {
            "algo": ALGOS,
            "loss_type": LOSS_TYPES,
            "sequence_unit": SEQUENCE_UNITS,
            "step_anchor": STEP_ANCHORS,
            "lr_scheduler_type": LR_SCHEDULES,
            "backend": BACKENDS,
            "dtype": DTYPES,
            "mixed_precision": MIXED_PRECISIONS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                fail(name, f"must be one of {allowed}", f"set {name} to one of {allowed}")
        if self.reward_mode is not None and self.reward_mode not in REWARD_MODES:
            fail("reward_mode", f"must be None or one of {REWARD_MODES}", "use 'skill', 'outcome', 'progress' or None")
        for name in ("group_size",):
            if getattr(self, name) < 2:
                fail(name, "group-relative advantages need at least 2 rollouts per group", "set it to >= 2 (8)")
        positive_ints = (
            "chains_per_step",
            "ppo_epochs",
            "micro_batch_size",
            "max_new_tokens",
            "max_prompt_tokens",
        )
        positive_ints += ("tiny_hidden", "tiny_layers", "max_argument_options", "keep_checkpoints", "eval_chains")
        for name in positive_ints:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                fail(name, "must be a positive integer", "set it to 1 or more")
        if self.train_chains is not None and (not isinstance(self.train_chains, int) or self.train_chains < 1):
            fail("train_chains", "must be None or a positive integer", "set it to None (all chains) or 1 or more")
        for name in ("total_steps", "warmup_steps", "save_every", "eval_every", "history_turns", "earlier_actions"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                fail(name, "must be a non-negative integer", "set it to 0 or more")
        if not self.lr > 0:
            fail("lr", "must be > 0", "use e.g. 1e-6 (SAGE) or 1e-4 for a tiny model")
        if not 0 < self.eps_low < 1:
            fail("eps_low", "must be in (0, 1)", "use 0.2")
        if not self.eps_high > 0:
            fail("eps_high", "must be > 0", "use 0.2 (or 0.28 for DAPO clip-higher)")
        for name in ("beta", "weight_decay", "max_grad_norm"):
            if getattr(self, name) < 0:
                fail(name, "must be >= 0", "use 0 to switch it off")
        if not self.temperature > 0:
            fail(
                "temperature",
                "must be > 0",
                "use 1.0 (greedy evaluation is a policy option, not a temperature)",
            )
        if not 0 < self.top_p <= 1:
            fail("top_p", "must be in (0, 1]", "use 1.0 to switch nucleus sampling off")
        if self.no_action_penalty is not None and self.no_action_penalty > 0:
            fail("no_action_penalty", "a penalty must be <= 0", "use -1.0 (SAGE) or None to switch it off")
        if self.step_advantage_weight < 0:
            fail("step_advantage_weight", "must be >= 0", "use 0 (off) or 1 (GiGPO's omega)")
        if not 0 < self.step_discount <= 1:
            fail("step_discount", "must be in (0, 1]", "use 0.95 (GiGPO's gamma)")
        if self.dr_grpo_max_len is not None and self.dr_grpo_max_len < 1:
            fail("dr_grpo_max_len", "must be None or a positive integer", "use None (longest sequence)")
        if not set(self.report_to) <= set(REPORTERS):
            fail("report_to", f"entries must be in {REPORTERS}", "drop the unknown sinks")
        if not isinstance(self.env_kwargs, dict):
            fail("env_kwargs", "must be a dict", "pass e.g. {'chain_length': 2}")
        if self.eval_env_kwargs is not None and not isinstance(self.eval_env_kwargs, dict):
            fail("eval_env_kwargs", "must be None or a dict", "pass None to evaluate on env_kwargs")
        if self.option_sampling and not self.constrained:
            fail("option_sampling", "samples the options of constrained choices", "set constrained=True")
        self._check_lora(fail)
        self._check_reskill(fail)
        self._check_backend(fail)

    def _check_lora(self, fail: Any) -> None:
        """Validate the ``lora_*`` fields."""
        if not isinstance(self.lora_r, int) or self.lora_r < 0:
            fail("lora_r", "must be a non-negative integer", "use 0 (LoRA off) or a rank such as 16")
        if not isinstance(self.lora_alpha, int) or self.lora_alpha < 1:
            fail("lora_alpha", "must be a positive integer", "use 16 (or 2 * lora_r)")
        if not 0 <= self.lora_dropout < 1:
            fail("lora_dropout", "must be in [0, 1)", "use 0.0 or 0.05")
        targets = self.lora_target_modules
        if targets is not None and not (
            isinstance(targets, list) and targets and all(isinstance(t, str) and t for t in targets)
        ):
            fail("lora_target_modules", "must be None or a non-empty list of module names", "use None (all linear)")
        if self.lora_r == 0 and targets is not None:
            fail("lora_target_modules", "only applies with LoRA on", "set lora_r > 0 or drop lora_target_modules")

    def _check_backend(self, fail: Any) -> None:
        """Validate ``trl_args`` and what the TRL backend does not do (yet)."""
        if not isinstance(self.trl_args, dict):
            fail("trl_args", "must be a dict of GRPOConfig kwargs", "pass e.g. {'use_vllm': true}")
        if self.backend != "trl":
            if self.trl_args:
                fail("trl_args", "only applies to backend='trl'", "set backend='trl' or drop trl_args")
            return
        trl_off = (("eval_every", 0), ("resume", False), ("lora_r", 0), ("step_advantage_weight", 0.0))
        for name, off in (*trl_off, ("option_sampling", False)):
            if getattr(self, name) != off:
                fail(name, "is not supported by backend='trl' yet", f"set {name}={off!r} or use backend='native'")
        for name, off, trl_name in (
            ("mixed_precision", "no", "bf16 / fp16"),
            ("gradient_checkpointing", False, "gradient_checkpointing"),
        ):
            if getattr(self, name) != off:
                fail(name, "the TRL backend takes it from trl_args", f"set {name}={off!r} and pass trl_args {trl_name}")

    def _check_reskill(self, fail: Any) -> None:
        """Validate the ``reskill_*`` fields (only when ``algo == "reskill"`` for the cross-field rules)."""
        for name, allowed in (("reskill_discount", RESKILL_DISCOUNTS), ("reskill_creator", RESKILL_CREATORS)):
            if getattr(self, name) not in allowed:
                fail(name, f"must be one of {allowed}", f"set {name} to one of {allowed}")
        for name in ("reskill_max_active", "reskill_reservoir_size", "reskill_create_every", "reskill_max_chars"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                fail(name, "must be a positive integer", "set it to 1 or more")
        for name in ("reskill_min_test_steps", "reskill_min_test_episodes", "reskill_min_reservoir"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                fail(name, "must be a non-negative integer", "set it to 0 or more")
        if not isinstance(self.reskill_creator_retries, int) or self.reskill_creator_retries < 0:
            fail("reskill_creator_retries", "must be a non-negative integer", "use 2")
        if not 0 <= self.reskill_p_clamp < 0.5:
            fail("reskill_p_clamp", "must be in [0, 0.5)", "use 0.15 (ReSkill)")
        if not 0 <= self.reskill_fire_rate <= 1:
            fail("reskill_fire_rate", "must be in [0, 1]", "use 0.5 (ReSkill)")
        z = self.reskill_min_within_step_z
        if z is not None and (isinstance(z, bool) or not isinstance(z, int | float) or not math.isfinite(z)):
            fail("reskill_min_within_step_z", "must be None or a finite number", "use None (ReSkill) or 0")
        if self.algo != "reskill":
            return
        if self.reskill_creator == "llm" and not (self.reskill_creator_endpoint or self.reskill_creator_model_path):
            fail(
                "reskill_creator",
                "the llm creator needs reskill_creator_endpoint or reskill_creator_model_path",
                "set one of them, or use reskill_creator='rule' (offline)",
            )
        if self.env_kwargs.get("skills", "guidance") not in ("guidance", "both"):
            raise ConfigError(
                f"TrainConfig.env_kwargs['skills']={self.env_kwargs['skills']!r}: ReSkill shows guidance skills "
                "through the observation; set env_kwargs['skills'] to 'guidance' (or 'both')."
            )

    @property
    def effective_reward_mode(self) -> str:
        """``reward_mode``, or the algorithm's default (computed at runtime)."""
        return self.reward_mode or ("skill" if self.algo == "sage" else "outcome")  # reskill: plain episode reward

    def chain_pool(self, available: int) -> int:
        """How many of the split's ``available`` chains training draws from (the first ones)."""
        return available if self.train_chains is None else min(self.train_chains, available)

    @property
    def policy_kwargs(self) -> dict[str, Any]:
        """The :class:`~sage_agents.policy.LLMPolicy` options (prompt and decoding) the trained model acts with.

        An evaluation of its checkpoint passes the same ones: ``make_policy_agent(path, **policy_kwargs)``.
        """
        names = ("history_turns", "earlier_actions", "skill_descriptions", "max_new_tokens", "temperature", "top_p",
                 "constrained", "skill_calls", "skill_templates", "write_skills", "max_argument_options",
                 "typed_arguments", "max_prompt_tokens", "show_admissible")  # fmt: skip
        kwargs = {name: getattr(self, name) for name in names}
        kwargs.update(domain_argument_kwargs(self.env_id))  # how the env's domain names skill-call arguments
        for name in ("option_greedy", "option_sampling", "skip_repeated_actions"):  # likewise left out when off
            if getattr(self, name):
                kwargs[name] = True
        if self.untried_commands is not None:
            kwargs["untried_commands"] = self.untried_commands
        return kwargs

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build a config from :meth:`to_dict` output; unknown keys raise with the known names.

        Fields of earlier versions that no longer exist (:data:`REMOVED_FIELDS`, e.g. in a checkpoint's
        ``trainer_state.json``) are dropped with a warning, so earlier runs stay readable.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        removed = sorted(set(data) & REMOVED_FIELDS.keys())
        if removed:
            warnings.warn(
                f"TrainConfig fields {removed} were removed ({'; '.join(REMOVED_FIELDS[k] for k in removed)}); "
                "ignored.",
                stacklevel=2,
            )
            data = {k: v for k, v in data.items() if k not in REMOVED_FIELDS}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown TrainConfig fields {sorted(unknown)}; known fields: {sorted(known)}.")
        return cls(**data)

    def to_json(self) -> str:
        """The config as indented JSON."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)
