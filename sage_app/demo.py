"""The main job (``make demo``, ``sage demo``): expert chains -> SFT -> GRPO vs SAGE vs ReSkill -> leaderboard.

Stages, each resumable (a finished stage is skipped on a rerun; the RL arms resume from their last checkpoint and
the evaluations from their episode logs):

1. **expert**: the env's domain expert (ALFWorld's observation-only one by default) plays ``train`` chains
   twice, with program skills
   (it defines a skill on first need and calls it afterwards) and without; every turn of a completed task becomes
   a ``(prompt, completion)`` pair in the policy's own prompt format. Without skills, some prompts show a guidance
   skill that applies to the turn or one that does not (``DemoConfig.sft_guidance``; domains that advise).
2. **sft**: a tiny causal LM (word-level tokenizer built from the env vocabulary) is warm-started on both sets
   of pairs with TRL's ``SFTTrainer`` (SAGE's SFT stage); one checkpoint serves every RL arm.
3. **train**: three arms from that checkpoint with the same budget and seed: GRPO without skills
   (``skills="none"``, outcome reward), SAGE (program skills, skill-integrated reward, sequential rollout) and
   ReSkill (guidance skills created from diagnosed failures and chosen by Thompson sampling, outcome reward).
   All act by constrained decoding; SAGE may also choose the expert's skill definitions as templates.
4. **evaluate**: random, expert, SFT and the arms on the domain's evaluation split (ALFWorld: generated
   ``valid_unseen``) through the leaderboard
   evaluator (SAGE starts every chain with an empty library, as in the paper; ``sage_eval_bank`` starts it from
   the skills its reward paid for during training).
5. **report**: the table (TGC, SGC, steps, tokens, skill reuse, 95% CIs), the goals judged in words
   (:data:`GOALS`, :func:`goals_section`), ``results.json`` and plots (learning curves, success vs tokens).

``--quick`` shrinks every stage to a smoke run of about two minutes (used by the tests); ``--long`` (``make
demo-long``) trains every arm 200 steps with a held-out evaluation every 10, the learning curves.

Any registered env runs (``DemoConfig.env_id``; ``sage demo --set env_id=SageChain-TextWorld-v0``): the demo
reaches its domain only through ``sage_envs.domain_class`` (expert, skill templates, advice, splits, vocabulary).
Defaults measured on ALFWorld (:data:`ENV_DEFAULTS`) apply there only.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from leaderboard.evaluate import EvalConfig

ALFWORLD = "SageChain-ALFWorld-v0"
ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    ALFWORLD: {
        "expert_skills": ["place_in", "heat_then_place", "cool_then_place", "clean_then_place"],
        "sft_action_weights": (
            {w: 2.0 for w in ("take", "move", "heat", "cool", "clean", "use", "examine")} | {"go": 0.3}
        ),
        "train_command_grammar": "mixed",
        "extra_eval_sets": [{"split": "valid_seen", "source": "official"}],
        "skip_repeated_actions": True,
        "quick": {
            "max_steps_per_task": 15,
            "sft_epochs": 20.0,
            "sft_completion_only": True,
            "sft_action_weights": {},
            "group_size": 8,
        },
    },
    "SageChain-TextWorld-v0": {
        # 2,279 pairs from 60 houses at 2.5 epochs left the model's next-token probability mostly on prompt-like
        # text (16-19% on the offered actions' first tokens) and won no task; 10 epochs on the actions alone won 3
        # of 40 tasks on 20 valid chains (progress 16%), 10 on the whole text 1 (15%) (docs/textworld.md).
        "sft_epochs": 10.0,
        "sft_completion_only": True,
    },
}
"""Per env id, what a :class:`DemoConfig` field left None becomes: settings measured on that env (docs/demo.md,
"Choices, and why"; docs/textworld.md). ``quick`` holds what ``--quick`` sets on top of its generic sizes: on
ALFWorld, SFT that nearly memorises the expert's dozen chains (20 epochs on every turn's action alone, ``go to``
turns kept), 15 turns per task and groups of 8, so that some RL rollouts on those chains succeed and every arm's
update moves its weights (docs/demo.md). An env without an entry gets the domain-neutral choices each field names."""
LONG = {
    "rl_steps": 200,
    "rl_eval_every": 10,
    "rl_save_every": 10,
    "rl_lr": 1e-4,
    "reskill_min_test_episodes": 256,
    "option_sampling": True,
    "beta": 0.0,
    "sage_beta": 0.04,
}
"""What ``--long`` sets where a field has its default value (the other fields keep theirs): 200 RL steps per arm
(GRPO's gain over its SFT start came mostly after step 100 at three of four RL seeds: docs/demo.md, "Twice the RL
steps"), a held-out evaluation every 10 as SPEC.md and issue 20 item 3 ask (the first 50 chains of the evaluation
split; at most ~25 s each for SAGE's arm, the slowest, in stop 53's run: 3547 of its RL stage's 3810 s were steps),
a checkpoint every 10, lr 1e-4 (at the demo's 2e-5, 100 steps moved the policy by a KL of 0.016 to the SFT model and
its held-out TGC not at all; at 1e-4 it moved 5x more: docs/demo.md, "The learning run") and ReSkill version tests
of 256 episodes (16 steps; at 64, a useless version is accepted about one test in six and the demo-long arm accepted
one every ~25 steps: docs/reskill.md, "Sizing a test") and RL sampling whole options (``option_sampling``: 100 steps
token by token left held-out TGC where it started, by whole options it rose; docs/demo.md, "A policy over whole
options") and no KL penalty but for SAGE (``beta`` 0, TRL's default: GRPO gained +12.0, +6.0 and +7.0 TGC points
over its SFT start at three whole-pipeline seeds, against +7.0, +1.5 and +5.5 at the demo's 0.04; SAGE without it
lost 10 points at seed 0, hence ``sage_beta``; docs/demo.md, "No KL penalty in the long run")."""
ARMS = ("grpo", "sage", "reskill")
PERSISTENT = "sage-persistent"
"""Label of SAGE's last checkpoint evaluated with one library kept across chains
(:attr:`DemoConfig.sage_persistent_eval`)."""
SFT_AS_SAGE = "sft-sage"
"""Label of the SFT model played as the SAGE arm plays (its skills, templates and decoding): the start SAGE's RL
is judged against (issue 20 item 3), which the plain ``sft`` entry, playing without skills, is not."""
PERSISTENT_RUN_CHAINS = 25
"""Chains that share one library in the expert's persistent runs (:attr:`DemoConfig.sft_persistent_share`): the
expert's library stops growing after ~10 chains, and each run draws new skill names."""
ARM_SKILLS = {"grpo": "none", "sage": "program", "reskill": "guidance"}
"""The env's ``skills`` mode of each arm: GRPO acts without skills, SAGE writes programs, ReSkill reads guidance."""
ARM_COLORS = {"grpo": "tab:blue", "sage": "tab:orange", "reskill": "tab:green"}
"""Each arm's colour in the learning-curve plot (its extra seeds are drawn lighter)."""


@dataclass
class DemoConfig:
    """Settings of :func:`run_demo`; each field is documented right below it."""

    output_dir: str = "runs/demo"
    """Where every stage writes (pairs, models, runs, results, plots)."""
    seed: int = 0
    """Seed of the tiny model, SFT data order, RL sampling and chain order (the same for every arm)."""
    quick: bool = False
    """Smoke run: a few chains and steps per stage (a few minutes), for tests; RL replays the expert's chains
    (``rl_train_chains``), and on ALFWorld the SFT model nearly memorises them (``ENV_DEFAULTS``' ``quick``), so
    that some rollouts succeed and RL moves every arm's weights."""
    long: bool = False
    """The learning run (``make demo-long``, issue 20 item 3): every arm trains :data:`LONG` ``rl_steps`` from the
    same SFT checkpoint, with a held-out evaluation every ``rl_eval_every`` steps (the learning curves), and the
    other settings of the demo. Not with ``quick``."""

    # ------------------------------------------------------------------ environment
    env_id: str = ALFWORLD
    """The registered env every stage plays (expert data, the tokenizer's vocabulary, RL, evaluation), e.g.
    ``SageChain-TextWorld-v0``; its domain gives the expert, skill templates, advice and splits. Fields left None
    take this env's measured defaults (:data:`ENV_DEFAULTS`; ALFWorld's) or the domain-neutral choice they name."""
    chain_length: int = 2
    """Tasks per chain (SAGE uses 2)."""
    max_steps_per_task: int = 30
    """Agent turns per task before it fails (the expert needs ~11 without skills, ~4 with)."""
    train_command_grammar: str | None = None
    """Command grammar of the generated train games the expert, SFT and RL see (the env's ``command_grammar``;
    None: ``mixed`` on ALFWorld, and none on envs whose games have no such choice, e.g. TextWorld). ALFWorld:
    ``mixed`` (its default) gives each chain the wheel's "move X to Y" or the official games' "put X in/on Y", so the
    models learn both and can play the official benchmark; ``wheel`` is the demo before issue 20 (its models
    completed 5% of official valid_seen tasks against 45% of generated ones). Evaluation stays on the default
    (wheel) generated games, so the demo's ``eval_split`` figures compare with earlier runs."""

    # ------------------------------------------------------------------ expert data and SFT
    expert_chains: int = 600
    """Generated train chains the expert plays (each with and without skills)."""
    expert_skills: list[str] | None = None
    """The expert's skills, names of the domain's ``skill_templates``: the SAGE arm learns to define and call these,
    and is offered them as templates; the other stages are played as plain commands. None: on ALFWorld
    ``place_in``, ``heat_then_place``, ``cool_then_place``, ``clean_then_place`` (list all six to have them all),
    on other envs all of the domain's. ALFWorld's default leaves the search (``find_and_take``, ``use_lamp``),
    whose "where" argument a tiny model got wrong, to constrained plain commands: SFT and GRPO then completed 30%
    of valid_unseen tasks instead of 15.5%, SAGE 19.5% instead of 2% (docs/demo.md)."""
    sft_action_weights: dict[str, float] | None = None
    """Resampling weight of the SFT pairs by the first word of the expert's action (``sft.reweight_pairs``;
    others 1). None: on ALFWorld the decisive turns (take, move, heat, cool, clean, use, examine) twice and 30% of
    the ``go to`` turns, which are ~40% of the raw pairs; on other envs none ({}: no env's verbs are measured)."""
    tiny_hidden: int = 128
    """Hidden size of the tiny model (REFERENCE.md calibration: h128 x 4 layers, ~1M parameters)."""
    tiny_layers: int = 2
    """Layers of the tiny model (2: 598k parameters; 3: 844k). With 2, ``make demo`` took 13.5 minutes on a fresh
    clone here (SFT 427-500 s) and its SFT model completed 43.5% of valid_unseen tasks; with 3, SFT alone takes
    ~640 s (2.5 epochs at 0.25 s per step), which puts the demo at about the 20-minute bound, and its SFT models
    completed 30.5-35.0% (docs/demo.md, "The current default"). Earlier recipes: SAGE vs GRPO SGC was +30 / +48 /
    +44 points with 3, +26 / +3 / +43 with 4 and +9 / -3 / +0 with 2 (docs/demo_history.md)."""
    sft_epochs: float | None = None
    """Passes over the expert pairs. None: the env's measured default (:data:`ENV_DEFAULTS`), else 2.5 (ALFWorld:
    ~200 s each on 2 cores with 2 layers, the largest stage; with one, a 3-layer SFT model completed 6.5% of
    valid_unseen tasks, and a 4-layer one 10% instead of 30%)."""
    sft_lr: float = 2e-3
    """SFT learning rate (a from-scratch tiny model wants ~1e-3)."""
    sft_batch_size: int = 16
    """Pairs per SFT step."""
    sft_completion_only: bool | None = None
    """Train SFT on the action tokens only; False also trains on predicting the prompt's text. None: the env's
    measured default (:data:`ENV_DEFAULTS`), else False. On ALFWorld that language-model loss on observations
    teaches the model to copy entity numbers ("drawer 17") from them: at equal compute (500 steps) it preferred the
    right number over a wrong one in 100 of 100 held pairs vs 57, and agreed with the expert on 40% vs 19% of its
    turns (docs/demo.md)."""
    sft_unscored_lines: list[str] = field(default_factory=list)
    """Prompt lines that start with one of these, with the items listed under them, are left out of the SFT loss
    (``sage_agents.sft.unscored_line_labels``; with ``sft_completion_only`` off); e.g. ``["Not tried yet:"]`` with
    ``untried_commands`` (docs/demo.md, "Telling the policy where it has not been"), ``["Guidance:"]`` for the
    guidance skills' texts (docs/reskill.md, "Guidance out of the loss")."""
    sft_guidance: bool = True
    """Show guidance skills in the prompts of the no-skill expert pairs (``sft.GuidanceMix``'s shares: 40% of the
    turns a skill made for the turn that names the expert's action, 30% one made for another task and verb, the
    rest none), so that the SFT model every arm starts from learns to act on guidance that applies and to ignore
    the rest: ReSkill's skills reach its policy only as guidance (docs/reskill.md, "Guidance conditioning",
    measures how little the demo's model did). Off: no prompt holds guidance, as before issue 21 (ReSkill runs
    3-5: guidance in the prompt then hurt the policy whatever it said). Only a domain that advises
    (``Domain.advise``; ALFWorld) has guidance to show: on the others (TextWorld) no prompt holds any, on or off."""
    sft_perturbation: float = 0.1
    """Share of the expert's turns on which a random action is sent instead (``sft.Perturbation``: half of them,
    in the skill mode, a call of a library skill with random arguments), its recovery then being what the pairs
    show; the perturbed turns are not pairs. The demo's SAGE arm without it (8a5e623) sent a failing call again
    and again in half its tasks, having never seen a call fail. 0 turns it off; only an expert that can be told
    what was sent (an ``override`` method: ALFWorld's) is perturbed."""
    sft_guidance_followed: float = 0.0
    """With ``sft_guidance`` and ``sft_perturbation``: the share of the no-skill pairs' perturbed turns kept as
    pairs whose prompt shows guidance naming the random command sent (``sft.GuidanceMix.followed``). On every
    other turn the guidance names what the observation already decides, and the demo's SFT model did not read it:
    it picked a command the guidance named 2.2% of the time shown vs 2.5% not shown (docs/reskill.md, "Guidance
    conditioning"). 0 (every measured demo run): perturbed turns are not pairs."""
    sft_dagger_chains: int = 0
    """DAgger after SFT (``sft.collect_expert_pairs``' ``learner``): the SFT model plays this many more ``train``
    chains greedily without skills (the ones after the expert's ``expert_chains``), the expert labels every turn it
    played, and the model trains ``sft_dagger_epochs`` more passes over the expert's pairs and these together, from
    where SFT left it (``dagger/model``, which the RL arms then start from). 0 (default): off. Measured at 300
    chains (docs/demo.md, "What the SFT model gets wrong"): 32.0% TGC -> 4.5% (beta 0.5: 20.5%), the control with as
    many more steps on the expert's pairs 31.5%: the model took the expert's many "put it down" labels after its
    wrong takes as a habit, without telling a wrong object from the right one."""
    sft_dagger_epochs: float = 1.0
    """With ``sft_dagger_chains``: passes over the expert's and the DAgger pairs together after SFT."""
    sft_dagger_expert_share: float = 0.0
    """With ``sft_dagger_chains``: the share of the DAgger turns on which the expert's action is sent instead of
    the model's (DAgger's beta)."""
    sft_persistent_share: float = 0.0
    """Share of the skill-mode expert chains played with one library kept across runs of
    :data:`PERSISTENT_RUN_CHAINS` chains (``library_scope="persistent"``; the rest start each chain empty), so that
    the SFT data shows libraries holding skills of earlier chains, called where they fit and passed over where
    they do not, as the ``sage-persistent`` entry plays. 0 (default): every chain starts from an empty library; at
    0.5 the SFT model's kept-library TGC moved -7.0 and +1.0 points at two seeds (docs/demo.md, "Expert chains with
    a kept library in the SFT data")."""
    sft_bf16: bool | None = None
    """SFT under bf16 autocast; None: where the hardware runs bf16 natively (1.5-1.7x faster than fp32 on an
    AVX-512 CPU), fp32 elsewhere (emulated bf16 measured 11x slower on an AVX2 CPU; ``runs_bf16_natively``)."""
    history_turns: int = 1
    """(observation, action) pairs of the current task in the prompt (compact prompts win at fixed wall time;
    the earlier actions of the task are listed too, see ``LLMPolicy.earlier_actions``)."""
    show_admissible: bool = False
    """List the admissible commands in the prompt; off: constrained decoding offers them anyway, and they
    made prompts 1.7x longer (331 vs 195 tokens on average)."""
    untried_commands: str | None = None
    """List the admissible commands with this prefix not yet sent in the task in the prompt (``LLMPolicy``; ALFWorld
    ``"go to "``: the places not visited yet); None: no list (docs/demo.md, "Telling the policy where it has not
    been")."""
    skip_repeated_actions: bool | None = None
    """Constrained decoding does not offer a command already sent at the same observation in the task while another
    remains (``LLMPolicy``), in RL and evaluation alike. None: on for ALFWorld, where it was measured, off elsewhere
    (ScienceWorld's ``wait`` advances time, so sending it again at an unchanged observation can be what a task
    needs). False: every demo before it. On ALFWorld a greedy policy with one turn of history ended 14-42 of its
    60-87 lost tasks (of 200) sending the same one or two commands over and over; with the rule each of 26 trained
    agents played both ways completed more tasks, +4.0 to +12.0 TGC points on 100 valid_unseen chains (docs/demo.md,
    "Cycles")."""

    # ------------------------------------------------------------------ RL arms
    arms: list[str] = field(default_factory=lambda: list(ARMS))
    """The RL arms, each trained from the SFT checkpoint with the same budget and seeds: ``grpo`` and ``sage`` (the
    comparison; both required) and ``reskill`` (docs/reskill.md; ``--set 'arms=["grpo", "sage"]'`` drops it)."""
    extra_rl_seeds: list[int] = field(default_factory=list)
    """More seeds for every RL arm (``seed`` is the main one), each trained from the same SFT checkpoint and
    evaluated as ``grpo-seedN`` / ``sage-seedN`` / ...; the comparison then also reports mean and spread over seeds.
    These share one SFT model; runs with different ``seed`` vary it too (``examples/demo_seeds.py`` compares them),
    and that spread was ten times larger (docs/demo.md, "Whole-pipeline seeds")."""
    rl_steps: int = 6
    """Optimisation steps per arm (8 rollouts x 2 tasks x up to 30 turns per step; 2 layers, one core per arm: ~11
    s for GRPO and ReSkill, ~17 s for SAGE, whose written definitions make long turns; 6 steps move no arm
    measurably, docs/demo.md)."""
    group_size: int = 8
    """Rollouts per group (G)."""
    rl_chains_per_step: int = 1
    """Chains (groups) per RL step (``TrainConfig.chains_per_step``): more experience per update, each step that many
    times longer (docs/demo.md, "The learning run"). Two a step for 100 steps, the experience of ``--long``'s 200 at
    one, moved no arm of ``make demo-long`` (docs/demo.md, "`make demo-long` with two chains a step")."""
    rl_step_advantage_weight: float = 0.0
    """GiGPO's step-level advantage weight for every arm (``TrainConfig.step_advantage_weight``; 0: off, GRPO's
    advantage alone). From the ``--long`` SFT model, 1.0 ended 200 GRPO steps +3.2 TGC points ahead of plain GRPO,
    and 100 steps of four chains +5.8 (two RL seeds, pooled), but ``make demo-long`` with it on every arm left each
    arm within 2 points of the default run (docs/demo.md, "`make demo-long` with GiGPO on every arm"). Off by
    default, so that the GRPO arm stays the paper's GRPO."""
    rl_train_chains: int | None = None
    """RL plays only the first this many chains of the train split (``TrainConfig.train_chains``); None: all.
    ``--quick`` sets ``expert_chains``: RL then replays the chains its SFT data came from."""
    rl_save_every: int = 5
    """RL checkpoint every this many steps (and at the end); a killed arm resumes from its last checkpoint."""
    rl_eval_every: int = 0
    """Held-out evaluation during RL every this many steps and before the first (``TrainConfig.eval_every``):
    greedy play of the first ``rl_eval_chains`` chains of ``eval_split``, the learning curves' points. 0 = none (the
    curves then show the training groups' success, which is noisy and not held out)."""
    rl_eval_chains: int = 50
    """Chains of each held-out evaluation during RL (the first of ``eval_split``; stage 4 plays ``eval_chains``)."""
    rl_lr: float = 2e-5
    """RL learning rate (calibration: <= 1e-4 or a tiny model collapses)."""
    beta: float = 0.04
    """KL coefficient to the SFT model (calibration: GRPO without clipping/KL collapsed; ``--long``: 0, which 100
    steps at lr 1e-4 with clipping did not collapse)."""
    sage_beta: float | None = None
    """The SAGE arm's KL coefficient (None: ``beta``; ``--long``: 0.04). Without a KL term SAGE's skill-integrated
    reward drew its policy to write and call skills where held-out chains do not reward them: -10.0 TGC from its
    start at seed 0, where GRPO without it gained +12.0 (docs/demo.md, "No KL penalty in the long run")."""
    typed_arguments: bool = True
    """SAGE's skill-call arguments take only values of a type the task or the parameter names (``place`` in "put
    a pen in shelf" -> ``shelf 1``, not ``garbagecan 1``; ``LLMPolicy(typed_arguments=...)``)."""
    option_greedy: bool = True
    """Greedy evaluation takes each constrained choice's most likely whole option (``LLMPolicy(option_greedy=...)``,
    ``decoding.decode_options``), not the likeliest allowed token step by step; RL samples as before. False: every
    demo before it. Token-by-token greedy commits to a command's first word before weighing its object: the
    demo's SFT model chose ``take`` at 213 of 293 turns where the expert walked past objects the task does not
    name, whole options at 1, and its TGC on 100 valid_unseen chains went 38.0% -> 54.5% (seed 1: 44.5 -> 62.0;
    docs/demo.md, "Whole-option greedy decoding")."""
    option_sampling: bool = False
    """RL samples each constrained choice's option as a whole from the softmax over the whole-option scores and trains
    that choice's log-prob (``LLMPolicy(option_sampling=...)``), so RL shapes the distribution whole-option greedy
    evaluation reads. False: RL samples token by token (every demo before it)."""

    reskill_min_reservoir: int = 32
    """Episodes in ReSkill's reservoir before its creator is first asked (``TrainConfig.reskill_min_reservoir``,
    default 50; 32 = two steps of 8 rollouts x 2 tasks, so the first version is created at step 2; the
    three reskill_min_* are those of ReSkill run 4, docs/reskill.md)."""
    reskill_min_test_steps: int = 4
    """Steps a ReSkill version is tested before it is decided (ReSkill: 5; 4 decides the first version at the
    demo's last step, on 64 episodes). With 2 steps and 32 episodes a version was accepted at 0 successes in
    both arms (the posterior mean of the arm with fewer episodes is higher): too little evidence."""
    reskill_min_test_episodes: int = 50
    """Episodes (both arms of the test) before a ReSkill decision (ReSkill: 50; ``--long``: 256, :data:`LONG`)."""
    reskill_min_within_step_z: float | None = 0.84
    """A version is accepted only if its posterior mean is higher (ReSkill's rule) and it beats chance within the
    steps of its test by this z (``TrainConfig.reskill_min_within_step_z``, whose default None is the paper's rule
    alone; 0.84: one-sided 80%). Under the paper's rule the demo-long ReSkill arm accepted 8 and 11 versions at
    seeds 0 and 1, nearly all behind chance within their steps, and ended 14 points below GRPO at both; with 0.84
    it accepted 2 at seed 0 and ended 5 above, but 4 at seed 2 (two in tests whose groups almost never succeeded)
    and ended 12.5 below (docs/reskill.md, "Deciding within steps"). Runs saved before this field load with None,
    the rule they ran."""

    sage_writes_skills: bool = True
    """SAGE writes its skill definitions token by token under the DSL grammar (``LLMPolicy(write_skills=True)``,
    the vocabulary of the expert's definitions), and its SFT data holds the expert's definitions under varied
    names, parameter orders and bodies (search loops or not, whole-task skills calling sub-task skills) without
    comments (``AlfworldExpert(vary_definitions=seed)``; a domain expert without ``vary_definitions`` writes its
    own definitions as they are). Off: the expert's
    definitions are a menu SAGE picks from (its only way before issue 20)."""
    sft_shuffle_parameters: bool = False
    """With ``sage_writes_skills``, the expert draws each skill's parameter order per chain
    (``AlfworldExpert(shuffle_parameters=True)``); False: every definition keeps the canonical order (the object
    first, the place last), a convention a call can follow without reading the header. Shuffled, the tiny model
    called its skills with the object first whatever the header said: 168 of SAGE's 375 calls bound a receptacle
    to ``obj`` (14.0% TGC); in canonical order 2 of 327 did (38.5%; docs/demo.md, "Parameter order")."""

    # ------------------------------------------------------------------ evaluation
    sage_eval_bank: bool = False
    """Start SAGE's evaluation chains from its skill bank (the skills its reward paid for in training) instead of
    an empty library (the paper's protocol: task 1 starts empty, task 2 has task 1's skills). Off: with the bank,
    the tiny model called the banked skills where another was needed and completed 31% instead of 65% of the
    tasks of 40 valid_unseen chains (docs/demo.md)."""
    sage_persistent_eval: bool = True
    """Also evaluate SAGE's last checkpoint with one library kept across the evaluation chains
    (``library_scope="persistent"``: the chains played in order, each starting from the skills the ones before
    defined), as its own entry ``sage-persistent`` (issue 20 item 4's persistent row). One process, one chain at a
    time: the library's history is sequential."""
    eval_split: str | None = None
    """Split the agents are compared on; None: the domain's ``eval_split`` (ALFWorld: ``valid_unseen``, scenes never
    seen in training; TextWorld: ``test``)."""
    extra_eval_sets: list[dict[str, Any]] | None = None
    """Further sets every agent but random also plays after ``eval_split``'s, each the ``split``, ``source`` and
    ``num_chains`` of an evaluation (``leaderboard.evaluate.EvalConfig``'s fields; default: every chain of the
    split, ``--quick``: ``eval_chains``); a set whose data is absent is skipped with a note. None: on ALFWorld the
    official ``valid_seen`` games (found through ``$ALFWORLD_DATA``), the benchmark the field reports (issue 20
    item 6: :data:`BENCHMARK_GOAL`); on other envs none."""
    eval_chains: int = 100
    """Chains per agent (at least 100 for a comparison: differences under ~20 points are noise at n = 25)."""
    eval_seeds: list[int] = field(default_factory=lambda: [0])
    """Episode seeds of the evaluation."""
    workers: int = 2
    """Processes of the RL stage (arms train side by side) and of the evaluation, each with its share of the cores."""
    eval_batch_size: int = 16
    """Chains each evaluation process plays in lockstep (LLM agents generate for all of them at once; 16: 44 s for
    the SFT model's 100 chains with 2 workers, 51 s with 8)."""

    def __post_init__(self) -> None:
        if not {"grpo", "sage"} <= set(self.arms) <= set(ARMS) or len(set(self.arms)) != len(self.arms):
            raise ValueError(
                f"arms={self.arms!r} must hold 'grpo' and 'sage' (the comparison) and may add 'reskill', each once, "
                """e.g. --set 'arms=["grpo", "sage"]'."""
            )
        if not 0.0 <= self.sft_persistent_share <= 1.0:
            raise ValueError(f"sft_persistent_share={self.sft_persistent_share!r} is a share of chains: 0 to 1.")
        from sage_envs import domain_class
        from sage_envs.error import suggest

        domain = domain_class(self.env_id)  # an unregistered id: InvalidConfigError naming the registered ones
        defaults = ENV_DEFAULTS.get(self.env_id, {})
        generic = {  # a field left None on an env without a measured value: the domain-neutral choice
            "expert_skills": None, "sft_action_weights": {}, "train_command_grammar": None, "extra_eval_sets": [],
            "sft_epochs": 2.5, "sft_completion_only": False, "skip_repeated_actions": False,
        }  # fmt: skip
        for name, value in generic.items():
            if getattr(self, name) is None:
                setattr(self, name, copy.deepcopy(defaults.get(name, value)))  # a list of its own, not the table's
        if self.train_command_grammar is not None and not takes_command_grammar(self.env_id):
            raise ValueError(
                f"train_command_grammar={self.train_command_grammar!r}, but {self.env_id} has no command grammar to "
                "choose: leave it unset (--set train_command_grammar=null)."
            )
        self.eval_split = domain.eval_split if self.eval_split is None else self.eval_split
        if self.eval_split not in domain.splits:
            raise ValueError(
                f"eval_split={self.eval_split!r} is not a split of {self.env_id} {domain.splits}."
                f"{suggest(self.eval_split, domain.splits)}"
            )
        for eval_set in self.extra_eval_sets:
            if (
                not isinstance(eval_set, dict)
                or eval_set.get("split") not in domain.splits
                or not set(eval_set) <= {"split", "source", "num_chains"}
            ):
                raise ValueError(
                    f"extra_eval_sets holds {eval_set!r}: each set is a dict with a split of {self.env_id} "
                    f"{domain.splits} and optionally source and num_chains, e.g. "
                    """--set 'extra_eval_sets=[{"split": "valid_seen", "source": "official"}]'."""
                )
        templates = domain.skill_templates(**self.train_env_kwargs)  # checks the grammar too
        if self.expert_skills is not None:
            if isinstance(self.expert_skills, str) or not set(self.expert_skills) <= set(templates):
                raise ValueError(
                    f"expert_skills={self.expert_skills!r} must be a list of {sorted(templates)} ({self.env_id}'s "
                    """skills), e.g. --set 'expert_skills=["place_in", "heat_then_place"]' (a JSON list)."""
                )
        if self.sft_guidance_followed and not (self.sft_guidance and self.sft_perturbation):
            raise ValueError(
                f"sft_guidance_followed={self.sft_guidance_followed} keeps perturbed turns with guidance: it needs "
                "sft_guidance on and sft_perturbation > 0 (e.g. --set sft_perturbation=0.1)."
            )
        if self.sft_unscored_lines and self.sft_completion_only:
            raise ValueError(
                f"sft_unscored_lines={self.sft_unscored_lines!r} leaves prompt lines out of a loss on the whole text, "
                "but sft_completion_only leaves the whole prompt out: set --set sft_completion_only=false."
            )
        if self.quick and self.long:
            raise ValueError("quick and long are two sizes of the demo: set one of them.")
        if self.long:
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            for name, value in LONG.items():
                if getattr(self, name) == defaults[name]:
                    setattr(self, name, value)
        if self.quick:
            quick = {
                "expert_chains": 12, "tiny_hidden": 64, "tiny_layers": 2, "sft_epochs": 1.0, "rl_steps": 2,
                "group_size": 2, "eval_chains": 3, "workers": 1, "rl_save_every": 1,
                **copy.deepcopy(defaults.get("quick", {})),
            }  # fmt: skip
            quick.setdefault("rl_train_chains", quick["expert_chains"])  # RL replays the chains SFT learnt from
            for name, value in quick.items():
                setattr(self, name, value)
            self.extra_eval_sets = [{**eval_set, "num_chains": self.eval_chains} for eval_set in self.extra_eval_sets]

    def save(self, path: str | Path) -> None:
        """Write the settings as JSON (``demo_config.json``), what :meth:`load` reads back."""
        Path(path).write_text(json.dumps(dataclasses.asdict(self), indent=2))

    @classmethod
    def load(cls, path: str | Path) -> DemoConfig:
        """The settings a run saved (``demo_config.json``), earlier runs included.

        Settings of the decoder that an earlier version had and this one does not
        (:data:`sage_agents.config.REMOVED_FIELDS`) are dropped. A run saved before ``train_command_grammar``
        existed trained on the wheel's grammar, one saved before ``option_sampling`` sampled token by token, one saved
        before ``sft_shuffle_parameters`` on shuffled parameter orders, one saved before ``reskill_min_within_step_z``
        under the paper's accept rule (None) and one saved before ``skip_repeated_actions`` offered repeated commands,
        so that is what they are loaded with. A ``long`` run keeps the :data:`LONG` values it saved, including those
        equal to a field's default that ``--long`` now replaces. A run saved before ``env_id``
        existed played ALFWorld, where ``expert_skills`` None then meant all of its skills (now ALFWorld's four):
        it is loaded with their list.
        """
        from sage_agents.config import REMOVED_FIELDS
        from sage_envs import domain_class

        saved = {
            "train_command_grammar": "wheel",
            "sft_shuffle_parameters": True,
            "reskill_min_within_step_z": None,
            "option_sampling": False,
            "skip_repeated_actions": False,
            **json.loads(Path(path).read_text()),
        }
        if "env_id" not in saved and "expert_skills" in saved and saved["expert_skills"] is None:
            saved["expert_skills"] = list(domain_class(ALFWORLD).skill_templates())
        cfg = cls(**{k: v for k, v in saved.items() if k not in REMOVED_FIELDS})
        for name in LONG:  # what the run saved, not what --long sets today (a saved value may equal the default)
            if name in saved:
                setattr(cfg, name, saved[name])
        return cfg

    @property
    def sage_kwargs(self) -> dict[str, Any]:
        """The SAGE arm's skill options (LLMPolicy names), the same in SFT data, RL and evaluation.

        The templates hold each skill in every grammar of the train games (:func:`skill_templates`): their put
        lines are the put commands the SAGE arm can write; when it writes skills, the domain's other example definitions
        (:meth:`sage_envs.domain.Domain.skill_examples`: whole-task skills, other bodies) add to its vocabulary.
        """
        templates = skill_templates(self.expert_skills, self.train_env_kwargs, self.env_id)
        if self.sage_writes_skills:  # the vocabulary of the varying expert's other bodies (whole-task skills)
            from sage_envs import domain_class

            templates += domain_class(self.env_id).skill_examples()
        return {"skill_templates": templates, "write_skills": self.sage_writes_skills}

    @property
    def prompt_kwargs(self) -> dict[str, Any]:
        """The prompt format and decoding options, the same in SFT data, RL and evaluation (LLMPolicy names)."""
        return {
            "history_turns": self.history_turns,
            "show_admissible": self.show_admissible,
            "skill_descriptions": False,  # signatures only: the names and parameters say what a tiny model can use
            "typed_arguments": self.typed_arguments,
            **({"option_greedy": True} if self.option_greedy else {}),  # absent when off: earlier runs' hashes hold
            **({"option_sampling": True} if self.option_sampling else {}),
            **({"untried_commands": self.untried_commands} if self.untried_commands is not None else {}),
            **({"skip_repeated_actions": True} if self.skip_repeated_actions else {}),
        }

    @property
    def policy_kwargs(self) -> dict[str, Any]:
        """The options every policy agent is evaluated with: constrained decoding and :attr:`prompt_kwargs`.

        On a domain that names skill-call arguments its own way (TextWorld: "the red apple", a task that names no
        entity) those options too, as the arms trained with them (``TrainConfig.policy_kwargs``,
        :func:`~sage_agents.config.domain_argument_kwargs`); ALFWorld's defaults are left out, so its evaluations'
        config hashes (hence their resumable episode logs) are those of the runs before env_id.
        """
        from sage_agents.config import domain_argument_kwargs

        return {"constrained": True, **self.prompt_kwargs, **domain_argument_kwargs(self.env_id)}

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """``gymnasium.make`` kwargs shared by every stage (the skills mode is set per arm); evaluation uses these.

        No ``command_grammar``: evaluated games speak the env's default grammar, and an evaluation's config hash
        (hence its resumable episode log) stays that of the runs before the option existed.
        """
        return {"chain_length": self.chain_length, "max_steps_per_task": self.max_steps_per_task}

    def eval_env_kwargs(self, skills: str) -> dict[str, Any]:
        """:attr:`env_kwargs` in an agent's ``skills`` mode: what its evaluations play (stage 4, held-out RL ones)."""
        return {**self.env_kwargs, "skills": skills}

    @property
    def train_env_kwargs(self) -> dict[str, Any]:
        """:attr:`env_kwargs` of the training stages (expert chains, RL): the games speak ``train_command_grammar``.

        Only an env with a command grammar (ALFWorld) is given one.
        """
        if self.train_command_grammar is None:
            return dict(self.env_kwargs)
        return {**self.env_kwargs, "command_grammar": self.train_command_grammar}


def takes_command_grammar(env_id: str) -> bool:
    """Whether ``env_id``'s games have a ``command_grammar`` to choose (its domain takes one: ALFWorld)."""
    import inspect

    from sage_envs import domain_class

    return "command_grammar" in inspect.signature(domain_class(env_id)).parameters


# ---------------------------------------------------------------------------------------------- stages
def skill_templates(
    names: Sequence[str] | None = None, env_kwargs: dict[str, Any] | None = None, env_id: str = ALFWORLD
) -> list[str]:
    """The expert's skill definitions, offered to SAGE as define+call actions or as the words it writes skills with.

    ``names`` picks some of ``env_id``'s expert's skills (None = all, in their order); each comes once per form the
    games of ``env_kwargs`` need (:meth:`sage_envs.domain.Domain.skill_templates`; ALFWorld: once per command
    grammar, ``wheel`` "move X to Y", ``official`` "put X in/on Y"; default: the env's default games).
    """
    from sage_envs import domain_class

    templates = domain_class(env_id).skill_templates(**(env_kwargs or {}))
    return [text for name, forms in templates.items() if names is None or name in names for text in forms]


def expert_pairs(cfg: DemoConfig, out: Path) -> list[dict[str, str]]:
    """Stage 1: SFT pairs from the expert with and without skills (cached in ``expert/pairs.jsonl``).

    The two modes' chains are independent (each its own seeds), so with ``cfg.workers > 1`` they are played at once
    in spawned processes (``leaderboard.evaluate.worker_pool``); the pairs are the same either way.
    """
    return cached_pairs(out / "expert" / "pairs.jsonl", lambda: both_modes_pairs(cfg))


def both_modes_pairs(cfg: DemoConfig) -> list[dict[str, str]]:
    """The expert's pairs with skills, then without (:func:`expert_mode_pairs`), the modes at once with 2 workers."""
    modes = ("program", "none")
    workers = min(cfg.workers, len(modes))
    if workers > 1:
        from leaderboard.evaluate import worker_pool

        with worker_pool(cfg.env_id, workers) as pool:
            per_mode = list(pool.map(expert_mode_pairs, [cfg] * len(modes), modes))
    else:
        per_mode = [expert_mode_pairs(cfg, skills) for skills in modes]
    return [pair for mode_pairs in per_mode for pair in mode_pairs]


def cached_pairs(path: Path, make: Callable[[], list[dict[str, str]]]) -> list[dict[str, str]]:
    """The pairs in the JSONL file ``path``, or ``make()``'s, written there whole or not at all (a stage's cache)."""
    if path.exists():
        return [json.loads(line) for line in path.read_text().splitlines()]
    pairs = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    tmp.replace(path)
    return pairs


def expert_mode_pairs(cfg: DemoConfig, skills: str, learner: Path | None = None) -> list[dict[str, str]]:
    """The expert's pairs of one skills mode (``"program"``: it defines and calls skills; ``"none"``).

    ``learner``: a model folder that plays the ``sft_dagger_chains`` chains after the expert's, greedily, while the
    expert labels its every turn (DAgger; only in the ``"none"`` mode, the ``sft`` entry's).
    """
    import gymnasium as gym

    import sage_envs  # noqa: F401
    from sage_agents.models import build_tiny_model
    from sage_agents.policy import LLMPolicy
    from sage_agents.progress import track
    from sage_agents.registry import accepted_kwargs
    from sage_agents.sft import GuidanceMix, Perturbation, collect_expert_pairs
    from sage_envs import domain_class

    model, tokenizer = build_tiny_model(
        skill_templates(env_id=cfg.env_id), hidden=32, layers=1, env_id=cfg.env_id
    )  # only formats prompts here
    domain = domain_class(cfg.env_id)
    takes = accepted_kwargs(domain.expert)
    # The prompts of the arm that uses them: the skill arm is offered the templates of the expert's skills.
    sage = cfg.sage_kwargs if skills == "program" else {}
    prompter = LLMPolicy(model, tokenizer, **sage, **cfg.prompt_kwargs)
    options = {}
    if takes is None or "vary_definitions" in takes:  # definitions the policy writes: varied examples
        options["vary_definitions"] = cfg.seed if sage.get("write_skills") else None
    if takes is None or "shuffle_parameters" in takes:
        options["shuffle_parameters"] = cfg.sft_shuffle_parameters
    expert = domain.expert(use_skills=skills != "none", skills=cfg.expert_skills, **options)
    guided = skills == "none" and cfg.sft_guidance  # ReSkill's arm reads guidance where GRPO's reads none
    mix = GuidanceMix(seed=cfg.seed, followed=cfg.sft_guidance_followed)
    data = {"guidance": mix, "advise": domain.advise} if guided else {}
    share = cfg.sft_persistent_share if skills == "program" else 0.0
    runs = expert_runs(cfg.expert_chains, share)
    if learner is not None:
        from sage_agents.policy import make_policy_agent

        runs = [(range(cfg.expert_chains, cfg.expert_chains + cfg.sft_dagger_chains), "chain")]
        agent = make_policy_agent(str(learner), **cfg.policy_kwargs)
        data.update(learner=agent, expert_share=cfg.sft_dagger_expert_share, only_successful=False)
    pairs = []
    for chains, scope in runs:
        if cfg.sft_perturbation and hasattr(expert, "override") and learner is None:
            data["perturbation"] = Perturbation(  # each run its own noise
                cfg.sft_perturbation, seed=cfg.seed + chains.start, entity_pattern=domain.entity_pattern,
                task_words=domain.task_names_entities,
            )  # fmt: skip
        env_kwargs = {"skills": skills, "library_scope": scope, **cfg.train_env_kwargs}
        env = gym.make(cfg.env_id, split=domain.splits[0], **env_kwargs)
        played = track(chains, description=f"expert, skills={skills}, {scope} library", transient=True)
        pairs += collect_expert_pairs(env, expert, prompter, played, seed=cfg.seed, **data)
        env.close()
    return pairs


def expert_runs(num_chains: int, persistent_share: float) -> list[tuple[range, str]]:
    """The expert's chains as ``(chains, library_scope)`` runs, each played in one env.

    The first chains start each from an empty library; the last ``round(persistent_share * num_chains)`` come in
    runs of :data:`PERSISTENT_RUN_CHAINS` that each keep one library across their chains.
    """
    kept = round(persistent_share * num_chains)
    runs = [(range(0, num_chains - kept), "chain")] if kept < num_chains else []
    for start in range(num_chains - kept, num_chains, PERSISTENT_RUN_CHAINS):
        runs.append((range(start, min(start + PERSISTENT_RUN_CHAINS, num_chains)), "persistent"))
    return runs


def sft_model(cfg: DemoConfig, out: Path, pairs: list[dict[str, str]]) -> Path:
    """Stage 2: the tiny model warm-started on the expert pairs (``sft/model``)."""
    from sage_agents.models import build_tiny_model, build_tokenizer, count_parameters
    from sage_agents.sft import reweight_pairs

    path = out / "sft" / "model"
    if (path / "config.json").exists():
        return path
    tokenizer = build_tokenizer([p["prompt"] + "\n" + p["completion"] for p in pairs], env_id=cfg.env_id)
    pairs = reweight_pairs(pairs, cfg.sft_action_weights, seed=cfg.seed)
    model, tokenizer = build_tiny_model(
        tokenizer, hidden=cfg.tiny_hidden, layers=cfg.tiny_layers, seed=cfg.seed, env_id=cfg.env_id
    )
    recorded = {"parameters": count_parameters(model), "pairs": len(pairs)}
    return train_and_save(cfg, out / "sft", model, tokenizer, pairs, cfg.sft_epochs, recorded)


def dagger_model(cfg: DemoConfig, out: Path, sft: Path, pairs: list[dict[str, str]]) -> Path:
    """Stage 2b (``sft_dagger_chains`` > 0): the SFT model after one DAgger round (``dagger/model``).

    The SFT model plays new ``train`` chains with the expert labelling its turns (``dagger/pairs.jsonl``), then
    trains on the expert's ``pairs`` and those together from where SFT left it.
    """
    from sage_agents.models import load_policy
    from sage_agents.sft import reweight_pairs

    path = out / "dagger" / "model"
    if (path / "config.json").exists():
        return path
    labelled = cached_pairs(out / "dagger" / "pairs.jsonl", lambda: expert_mode_pairs(cfg, "none", learner=sft))
    model, tokenizer = load_policy(sft)
    both = reweight_pairs(pairs + labelled, cfg.sft_action_weights, seed=cfg.seed)
    recorded = {"pairs": len(pairs), "dagger_pairs": len(labelled)}
    return train_and_save(cfg, out / "dagger", model, tokenizer, both, cfg.sft_dagger_epochs, recorded)


def train_and_save(
    cfg: DemoConfig, folder: Path, model: Any, tokenizer: Any, pairs: list[dict], epochs: float, recorded: dict
) -> Path:
    """Train ``model`` on ``pairs`` at the demo's SFT settings; returns ``folder/model``.

    Writes ``folder/metrics.json`` (the trainer's, with ``recorded`` and the wall time), then ``folder/model`` whole or
    not at all (a killed stage leaves none).
    """
    from sage_agents.sft import sft_warm_start, unscored_line_labels

    start = time.perf_counter()
    if cfg.sft_unscored_lines:
        pairs = unscored_line_labels(pairs, tokenizer, cfg.sft_unscored_lines)
    metrics = sft_warm_start(
        model, tokenizer, pairs, output_dir=str(folder / "trl"), epochs=epochs, lr=cfg.sft_lr,
        batch_size=cfg.sft_batch_size, seed=cfg.seed, max_length=1024, bf16=cfg.sft_bf16,
        completion_only=cfg.sft_completion_only,
    )  # fmt: skip
    metrics.update(recorded, wall_seconds=time.perf_counter() - start)
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2))
    path, tmp = folder / "model", folder / "model.tmp"
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.replace(path)
    return path


def arm_label(cfg: DemoConfig, arm: str, seed: int) -> str:
    """``grpo`` / ``sage`` / ``reskill`` for the main seed, ``grpo-seedN`` ... for the extra ones (also the folder)."""
    return arm if seed == cfg.seed else f"{arm}-seed{seed}"


def arm_of(label: str) -> str:
    """The arm of an :func:`arm_label`."""
    return label.split("-seed", 1)[0]


def arm_config(cfg: DemoConfig, out: Path, arm: str, sft: Path, seed: int) -> Any:
    """The TrainConfig of one RL arm; the arms differ only in algorithm, skills, templates and ReSkill's tests."""
    from sage_agents.config import TrainConfig
    from sage_envs import domain_class

    reskill = {"reskill_min_reservoir": cfg.reskill_min_reservoir, "reskill_min_test_steps": cfg.reskill_min_test_steps,
               "reskill_min_test_episodes": cfg.reskill_min_test_episodes,
               "reskill_min_within_step_z": cfg.reskill_min_within_step_z}  # fmt: skip
    return TrainConfig(
        algo=arm, env_id=cfg.env_id, split=domain_class(cfg.env_id).splits[0], eval_split=cfg.eval_split,
        env_kwargs={**cfg.train_env_kwargs, "skills": ARM_SKILLS[arm]}, model_path=str(sft), constrained=True,
        **(cfg.sage_kwargs if arm == "sage" else {}), **cfg.prompt_kwargs, group_size=cfg.group_size,
        chains_per_step=cfg.rl_chains_per_step, step_advantage_weight=cfg.rl_step_advantage_weight,
        train_chains=cfg.rl_train_chains, total_steps=cfg.rl_steps, lr=cfg.rl_lr,
        beta=cfg.sage_beta if arm == "sage" and cfg.sage_beta is not None else cfg.beta, seed=seed,
        save_every=cfg.rl_save_every,
        eval_every=cfg.rl_eval_every, eval_chains=cfg.rl_eval_chains, eval_from_bank=cfg.sage_eval_bank,
        eval_env_kwargs=cfg.eval_env_kwargs(ARM_SKILLS[arm]),
        output_dir=str(out / arm_label(cfg, arm, seed)), resume=True, micro_batch_size=32, report_to=["jsonl"],
        **(reskill if arm == "reskill" else {}),
    )  # fmt: skip


def train_arm(cfg: DemoConfig, out: Path, arm: str, sft: Path, seed: int) -> Path:
    """Stage 3: one RL arm; returns its final checkpoint folder (``model/`` + ``skill_library/``)."""
    from sage_agents.trainer import Trainer

    config = arm_config(cfg, out, arm, sft, seed)
    trainer = Trainer(config)
    try:
        if trainer.step < config.total_steps:
            trainer.train()
        return trainer.latest_checkpoint()
    finally:
        trainer.close()


def arm_runs(cfg: DemoConfig) -> dict[str, tuple[str, int]]:
    """``arm label -> (arm, RL seed)`` of every RL run: each arm at the main seed, then at each extra seed."""
    return {arm_label(cfg, arm, seed): (arm, seed) for seed in [cfg.seed, *cfg.extra_rl_seeds] for arm in cfg.arms}


def rl_workers(cfg: DemoConfig) -> int:
    """How many RL runs train at once: ``cfg.workers``, at most one per run."""
    return min(cfg.workers, len(arm_runs(cfg)))


def train_arms(cfg: DemoConfig, out: Path, sft: Path) -> dict[str, Path]:
    """Stage 3: every arm of every seed (:func:`train_arm`); returns each :func:`arm_label`'s final checkpoint.

    The runs are independent, so :func:`rl_workers` of them train at once, each in a spawned process with its share
    of the cores: a tiny model's small matrices keep two threads of one process from using two cores well.
    """
    runs, workers = arm_runs(cfg), rl_workers(cfg)
    if workers <= 1:
        return {label: train_arm(cfg, out, arm, sft, seed) for label, (arm, seed) in runs.items()}
    from leaderboard.evaluate import worker_pool

    with worker_pool(cfg.env_id, workers) as pool:
        futures = {label: pool.submit(train_arm, cfg, out, arm, sft, seed) for label, (arm, seed) in runs.items()}
        return {label: future.result() for label, future in futures.items()}


def agent_entries(cfg: DemoConfig, sft: Path, arms: dict[str, Path]) -> dict[str, tuple[str, dict, dict]]:
    """``label -> (registered agent, agent kwargs, env kwargs)`` of every agent the demo evaluates.

    ``arms`` maps arm labels (:func:`arm_label`) to their final checkpoints.
    """
    from sage_agents.reskill.controller import LIBRARY_DIR

    policy = cfg.policy_kwargs
    entries = {
        "random": ("random", {}, cfg.eval_env_kwargs("none")),
        "expert": ("expert", {"skills": cfg.expert_skills}, cfg.eval_env_kwargs("program")),  # the SFT data's expert
        "sft": ("policy", {"model_path": str(sft), **policy}, cfg.eval_env_kwargs("none")),
    }
    if any(arm_of(label) == "sage" for label in arms):
        entries[SFT_AS_SAGE] = sft_as_sage_entry(cfg, sft)
    for label, checkpoint in arms.items():
        arm = arm_of(label)
        kwargs = {"model_path": str(checkpoint / "model"), **policy}
        if arm == "sage":
            kwargs.update(cfg.sage_kwargs)
            if cfg.sage_eval_bank and (checkpoint / "skill_library").is_dir():
                kwargs["skills_path"] = str(checkpoint / "skill_library")
        env_kwargs = cfg.eval_env_kwargs(ARM_SKILLS[arm])
        if arm == "reskill" and (checkpoint / LIBRARY_DIR).is_dir():
            # Its weights with the versions it accepted, as trained, and without them (issue 21 item 4): what RL
            # taught the weights apart from what the guidance adds.
            entries[label] = (arm, {**kwargs, "skills_path": str(checkpoint / LIBRARY_DIR)}, env_kwargs)
            entries[label.replace("reskill", "reskill-weights", 1)] = (arm, kwargs, env_kwargs)
        else:
            entries[label] = (arm, kwargs, env_kwargs)
        if arm == "sage" and cfg.sage_persistent_eval:
            entries[label.replace("sage", PERSISTENT, 1)] = (arm, kwargs, {**env_kwargs, "library_scope": "persistent"})
    return entries


def sft_as_sage_entry(cfg: DemoConfig, sft: Path) -> tuple[str, dict, dict]:
    """The :data:`SFT_AS_SAGE` entry of :func:`agent_entries`: the SFT model ``sft`` played as the SAGE arm plays."""
    return "sage", {"model_path": str(sft), **cfg.policy_kwargs, **cfg.sage_kwargs}, cfg.eval_env_kwargs("program")


def evaluate_agents(
    cfg: DemoConfig, out: Path, sft: Path, arms: dict[str, Path]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """Stage 4: every agent on the same ``eval_split`` chains through the leaderboard evaluator (resumable).

    Then every agent but random on each of ``cfg.extra_eval_sets``.

    Returns:
        The ``eval_split`` summaries, the extra sets' summaries, and a note per set skipped for lack of data.
    """
    from leaderboard.evaluate import evaluate, keeps_library, worker_pool
    from sage_envs.error import DataNotFoundError

    entries = agent_entries(cfg, sft, arms)
    # One pool of workers for every entry: each worker imports torch and transformers once, not once per entry.
    with worker_pool(cfg.env_id, cfg.workers) if cfg.workers > 1 else contextlib.nullcontext() as pool:

        def config(label: str, split: str, num_chains: int, source: str | None = None) -> EvalConfig:
            return entry_eval_config(cfg, label, entries[label], out / "results", split, num_chains, source)

        def run(label: str, split: str, num_chains: int, source: str | None = None) -> dict[str, Any]:
            return evaluate(config(label, split, num_chains, source), pool)

        # An entry that keeps its library plays its chains one at a time in one process: a worker of the pool plays
        # it from the start while the others play the other entries, instead of one core waiting for it at the end.
        kept = [label for label in entries if keeps_library(entries[label][2])] if pool is not None else []
        playing = {label: pool.submit(evaluate, config(label, cfg.eval_split, cfg.eval_chains)) for label in kept}
        summaries = [
            playing[label].result() if label in playing else run(label, cfg.eval_split, cfg.eval_chains)
            for label in entries
        ]
        extra, skipped = [], []
        # The extra sets judge the RL arms and their common start: not the random agent, the persistent library
        # (issue 20 item 4's row) or SAGE's own start (item 3's baseline, judged on the main split).
        labels = [x for x in entries if x not in ("random", SFT_AS_SAGE) and not x.startswith(PERSISTENT)]
        for eval_set in cfg.extra_eval_sets:
            chains = eval_set.get("num_chains", 10**9)  # default: every chain (the evaluator stops at the split's end)
            try:
                extra += [run(label, eval_set["split"], chains, eval_set.get("source")) for label in labels]
            except DataNotFoundError as error:
                skipped.append(f"{eval_set_name(eval_set)} not played: {error}")
    return summaries, extra, skipped


def entry_eval_config(
    cfg: DemoConfig,
    label: str,
    entry: tuple[str, dict[str, Any], dict[str, Any]],
    output: Path,
    split: str,
    num_chains: int,
    source: str | None = None,
    workers: int | None = None,
) -> EvalConfig:
    """The evaluator's settings for one of :func:`agent_entries`' ``(agent, agent_kwargs, env_kwargs)`` under ``label``.

    The demo's seeds and batch size, its ``workers`` unless given; an entry that keeps its library across chains
    (``sage-persistent``) plays them one at a time, in order, as that library's history is sequential.
    """
    from leaderboard.evaluate import EvalConfig, keeps_library

    agent, agent_kwargs, env_kwargs = entry
    sequential = keeps_library(env_kwargs)
    return EvalConfig(
        agent=agent, label=label, env=cfg.env_id, split=split, source=source, num_chains=num_chains,
        seeds=list(cfg.eval_seeds), agent_kwargs=agent_kwargs, env_kwargs=env_kwargs, output=str(output),
        workers=1 if sequential else workers or cfg.workers, batch_size=1 if sequential else cfg.eval_batch_size,
    )  # fmt: skip


def eval_set_name(eval_set: dict[str, Any]) -> str:
    """``valid_seen (official)``: an evaluation set's split, and its source where it names one."""
    return eval_set["split"] + (f" ({eval_set['source']})" if eval_set.get("source") else "")


def logged_episodes(out: Path, summary: dict[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    """The episodes stage 4 logged for ``summary``'s agent in the demo folder ``out``, by (seed, chain)."""
    from leaderboard.evaluate import EvalConfig, read_episodes

    label = summary["agent"]
    name = EvalConfig(agent=label, label=label, env=summary["env"], split=summary["split"]).run_name
    return read_episodes(out / "results" / f"{name}.episodes.jsonl", summary["config_hash"])


# ---------------------------------------------------------------------------------------------- report
def deltas(sage: dict[str, Any], grpo: dict[str, Any]) -> dict[str, Any]:
    """SAGE vs GRPO: SGC points gained, and the relative cut in steps and generated tokens per task.

    The values may be numbers or equally shaped arrays (one per bootstrap sample, :func:`deltas_ci`).
    """

    def cut(key: str) -> Any:  # no cut of nothing: 0 where GRPO's value is 0
        base = np.asarray(grpo[key], dtype=float)
        return np.where(base > 0, 1.0 - sage[key] / np.where(base > 0, base, 1.0), 0.0)[()]  # [()]: a scalar stays one

    return {"sgc_gain_points": 100 * (sage["sgc"] - grpo["sgc"]), "steps_cut": cut("mean_steps"),
            "tokens_cut": cut("mean_tokens")}  # fmt: skip


def paired_ci(first: dict[Any, dict], second: dict[Any, dict], statistic: Any) -> dict[str, list[float]]:
    """95% paired-bootstrap intervals of ``statistic(first's figures, second's figures)`` from two episode logs.

    Both agents played the same chains (:func:`read_episodes` dicts, by ``(seed, chain)``), so chains are resampled
    jointly: the interval is that of the difference on these chains, narrower than the two agents' own intervals
    would suggest. Each resample recomputes each agent's ratios over its chains (``tgc``: completed tasks over
    tasks; ``sgc``: chains with every task completed; ``mean_steps``, ``mean_tokens``: per task; ``progress``
    where every record holds the domain's ``task_score``), and
    ``statistic`` maps the two agents' figures (arrays, one value per resample) to a dict of arrays.
    """
    from leaderboard.evaluate import BOOTSTRAP_SAMPLES
    from sage_agents.evaluation import chain_ratios

    keys = sorted(set(first) & set(second))
    if not keys:
        raise ValueError("the two episode logs share no (seed, chain)")
    rows = np.random.default_rng(0).integers(len(keys), size=(BOOTSTRAP_SAMPLES, len(keys)))
    names = ["tgc", "sgc", "mean_steps", "mean_tokens"]
    if all("task_score" in records[k] for records in (first, second) for k in keys):  # a scored domain
        names.append("progress")

    def resampled(records: dict[Any, dict]) -> dict[str, np.ndarray]:
        ratios = chain_ratios([records[k] for k in keys], names=names)
        return {name: ratios[name][0][rows].sum(axis=1) / ratios[name][1][rows].sum(axis=1) for name in names}

    pairs = statistic(resampled(first), resampled(second)).items()
    return {k: np.percentile(v, [2.5, 97.5]).tolist() for k, v in pairs}


def deltas_ci(sage: dict[Any, dict], grpo: dict[Any, dict]) -> dict[str, list[float]]:
    """95% paired-bootstrap intervals of :func:`deltas` from two episode logs (:func:`paired_ci`)."""
    return paired_ci(sage, grpo, deltas)


def comparison(summaries: list[dict[str, Any]], episodes: dict[str, dict] | None = None) -> dict[str, Any]:
    """:func:`deltas` of the main seed's arms (``sage`` vs ``grpo``), and with extra RL seeds ``over_seeds``.

    ``over_seeds`` holds the deltas of every seed (``sage-seedN`` vs ``grpo-seedN``; the main seed as ``main``)
    with their mean and sample standard deviation. Given the arms' episode logs (label -> :func:`read_episodes`),
    ``ci95`` adds the main seed's paired-bootstrap intervals (:func:`deltas_ci`).
    """
    by = {s["agent"]: s for s in summaries}
    result: dict[str, Any] = deltas(by["sage"], by["grpo"])
    if episodes is not None:
        result["ci95"] = deltas_ci(episodes["sage"], episodes["grpo"])
    suffixes = [label[len("sage") :] for label in by if arm_of(label) == "sage"]  # the main and extra RL seeds
    if len(suffixes) > 1:
        per_seed = {
            suffix.lstrip("-") or "main": deltas(by["sage" + suffix], by["grpo" + suffix]) for suffix in suffixes
        }
        result["over_seeds"] = spread(per_seed)
    return result


def spread(per_seed: dict[str, dict[str, float]]) -> dict[str, Any]:
    """``per_seed`` :func:`deltas` with their mean and sample standard deviation over the seeds."""
    values = {k: np.array([d[k] for d in per_seed.values()]) for k in next(iter(per_seed.values()))}
    return {"n": len(per_seed), "per_seed": per_seed, "mean": {k: float(v.mean()) for k, v in values.items()},
            "std": {k: float(v.std(ddof=1)) for k, v in values.items()}}  # fmt: skip


def change(cut: Any) -> str:
    """A relative cut in the reports' sign convention: ``-31.9%`` is 31.9% fewer, ``+56.5%`` is 56.5% more."""
    return f"{-100 * cut + 0.0:+.1f}%"  # + 0.0: no cut prints +0.0%, not -0.0%


def spread_line(over: dict[str, Any]) -> str:
    """:func:`spread` of :func:`deltas` in words, with the signs of :func:`change` (a minus means fewer)."""
    mean, std = over["mean"], over["std"]
    return (f"SGC {mean['sgc_gain_points']:+.1f} +- {std['sgc_gain_points']:.1f} points, "
            f"steps {change(mean['steps_cut'])} +- {100 * std['steps_cut']:.1f}%, "
            f"tokens {change(mean['tokens_cut'])} +- {100 * std['tokens_cut']:.1f}%")  # fmt: skip


def comparison_line(comp: dict[str, Any]) -> str:
    """:func:`comparison` in words (the goals are judged in :func:`goals_section`).

    Every change is SAGE relative to GRPO with the sign of :func:`change`: ``steps -31.9%`` means SAGE took 31.9%
    fewer turns per task; intervals are printed in the same sign, low to high.
    """

    def interval(key: str, scale: float) -> str:
        if "ci95" not in comp:
            return ""
        low, high = sorted(scale * v + 0.0 for v in comp["ci95"][key])
        return f" [{low:+.1f}, {high:+.1f}]"

    line = (f"SAGE vs GRPO: SGC {comp['sgc_gain_points']:+.1f} points{interval('sgc_gain_points', 1)}, "
            f"steps {change(comp['steps_cut'])}{interval('steps_cut', -100)}, "
            f"generated tokens {change(comp['tokens_cut'])}{interval('tokens_cut', -100)}")  # fmt: skip
    if "over_seeds" in comp:
        line += f"; over {comp['over_seeds']['n']} RL seeds: {spread_line(comp['over_seeds'])}"
    return line


@dataclass(frozen=True)
class Goal:
    """One goal the report judges: ``agent`` against ``baseline`` on one figure of :func:`goal_figures`."""

    name: str
    """What is compared, in words."""
    agent: str
    """Label of the agent judged (its main seed; an extra RL seed's is ``<agent>-seedN``)."""
    baseline: str
    """Label of the agent it is compared with, on the same chains."""
    figure: str
    """Key of :func:`goal_figures`: ``tgc_points``, ``sgc_points`` (points gained), ``steps_change`` or
    ``tokens_change`` (relative change in percent, a minus meaning fewer: :func:`change`'s sign)."""
    bound: float
    """The figure's goal, in its unit."""
    at_most: bool = False
    """The figure must be at most ``bound`` (a cut); else at least."""
    excludes_zero: bool = False
    """The 95% paired interval must also lie wholly on the goal's side of 0."""
    every_seed: bool = False
    """With extra RL seeds, every seed's figure must meet ``bound`` (the main seed's is the one shown first)."""
    source: str = ""
    """The issue item that set the goal."""

    @property
    def unit(self) -> str:
        """`` points`` (TGC or SGC gained) or ``%`` (a relative change), as printed after the figure."""
        return " points" if self.figure.endswith("_points") else "%"


GOALS = (
    # issue 20 item 3 ("RL that learns"): each RL arm >= +10 points TGC over its SFT start, interval excluding 0
    Goal("GRPO vs its SFT start: TGC", "grpo", "sft", "tgc_points", 10.0, excludes_zero=True, source="issue 20 item 3"),
    # SAGE's start is the SFT model playing with SAGE's skills (:data:`SFT_AS_SAGE`), not without them
    Goal(
        "SAGE vs its SFT start: TGC",
        "sage",
        SFT_AS_SAGE,
        "tgc_points",
        10.0,
        excludes_zero=True,
        source="issue 20 item 3",
    ),
    # issue 20 item 4 ("skills that pay"): SGC >= +5 points at every seed, steps <= -40%, tokens no more than GRPO's
    Goal("SAGE vs GRPO: SGC", "sage", "grpo", "sgc_points", 5.0, every_seed=True, source="issue 20 item 4"),
    Goal("SAGE vs GRPO: steps per task", "sage", "grpo", "steps_change", -40.0, at_most=True, source="issue 20 item 4"),
    Goal(
        "SAGE vs GRPO: generated tokens per task",
        "sage",
        "grpo",
        "tokens_change",
        0.0,
        at_most=True,
        source="issue 20 item 4",
    ),
    # issue 20 item 4, with a library kept across chains (:attr:`DemoConfig.sage_persistent_eval`): tokens <= -50%
    Goal(
        "SAGE with a persistent library vs GRPO: generated tokens per task",
        PERSISTENT,
        "grpo",
        "tokens_change",
        -50.0,
        at_most=True,
        source="issue 20 item 4",
    ),
    # issue 21 item 4: ReSkill >= GRPO + 5 points TGC, interval excluding 0
    Goal("ReSkill vs GRPO: TGC", "reskill", "grpo", "tgc_points", 5.0, excludes_zero=True, source="issue 21 item 4"),
)
"""The goals the report judges, every threshold in one place (the issues' numbered items name them)."""


def meets(value: float, bound: float, *, at_most: bool = False) -> bool:
    """``value >= bound`` (``<=`` when ``at_most``), judged on the value as printed.

    Rounded first: 100 * (0.25 - 0.20) is 4.999..., and a figure printed as +5.0 meets a goal of +5.
    """
    value = round(value, 9)
    return value <= bound if at_most else value >= bound


BENCHMARK_GOAL = {"min_tgc": 50.0, "max_gap": 10.0, "source": "issue 20 item 6"}
"""On each of ``DemoConfig.extra_eval_sets``: every RL arm completes at least ``min_tgc`` % of its tasks, and its
TGC there is within ``max_gap`` points of its ``eval_split`` TGC."""


def benchmark_goals(summaries: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:data:`BENCHMARK_GOAL` judged on each extra evaluation set, in :func:`goals`' row shape.

    ``value`` is the lowest arm TGC on the set; ``per_arm`` holds each arm's ``tgc`` there and ``main_tgc`` on
    ``eval_split``, in percent.
    """
    main = {s["agent"]: 100 * s["tgc"] for s in summaries}
    rows = []
    for name in dict.fromkeys(eval_set_name(s) for s in extra):
        arms = {s["agent"]: 100 * s["tgc"] for s in extra if eval_set_name(s) == name and arm_of(s["agent"]) in ARMS}
        if not arms:
            continue
        per_arm = {label: {"tgc": tgc, "main_tgc": main[label]} for label, tgc in arms.items()}
        low, gap = BENCHMARK_GOAL["min_tgc"], BENCHMARK_GOAL["max_gap"]
        met = all(
            meets(arm["tgc"], low) and meets(abs(arm["tgc"] - arm["main_tgc"]), gap, at_most=True)
            for arm in per_arm.values()
        )
        rows.append({
            "name": f"Every RL arm on {name}: TGC", "unit": "%", "source": BENCHMARK_GOAL["source"],
            "goal": f">= {BENCHMARK_GOAL['min_tgc']:g}% and within {BENCHMARK_GOAL['max_gap']:g} points of its "
                    f"{summaries[0]['split']} TGC",
            "value": min(arms.values()), "ci95": None, "per_arm": per_arm, "met": met,
            "status": "met" if met else "not met",
        })  # fmt: skip
    return rows


def goal_figures(agent: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """``agent`` vs ``baseline`` in the units of :class:`Goal` (numbers, or arrays of bootstrap resamples).

    Points gained in TGC and SGC, and :func:`deltas`'s cuts as relative changes in percent (a minus means fewer).
    """
    d = deltas(agent, baseline)
    return {"tgc_points": 100 * (np.asarray(agent["tgc"]) - baseline["tgc"]), "sgc_points": d["sgc_gain_points"],
            "steps_change": -100 * d["steps_cut"], "tokens_change": -100 * d["tokens_cut"]}  # fmt: skip


def goal_text(goal: Goal) -> str:
    """The goal in words: ``>= +10 points, 95% interval excluding 0``, ``<= -40%``, ``>= +5 points at every seed``."""
    text = f"{'<=' if goal.at_most else '>='} {f'{goal.bound:+g}' if goal.bound else '0'}{goal.unit}"
    if goal.every_seed:
        text += " at every seed"
    if goal.excludes_zero:
        text += ", 95% interval excluding 0"
    return text


def goals(summaries: list[dict[str, Any]], episodes: dict[str, dict]) -> list[dict[str, Any]]:
    """Each of :data:`GOALS` judged on this run: its value, 95% paired-bootstrap interval and whether it was met.

    Args:
        summaries: the run's leaderboard summaries (``agent`` is the label).
        episodes: label -> :func:`read_episodes` dict of every agent a goal names that was run.

    Returns:
        Per goal, ``name``, ``goal`` (:func:`goal_text`), ``source``, ``unit`` (:attr:`Goal.unit`), ``value``
        (the main seed's figure), ``ci95`` (low, high; :func:`paired_ci`), ``met`` (True, False, or None when not
        measured) and ``status`` (``met``, ``not met`` or ``not measured (why)``); a goal judged at every seed, with
        extra RL seeds, adds ``per_seed`` (``main``, ``seedN`` -> value).
    """
    by = {s["agent"]: s for s in summaries}
    intervals: dict[tuple[str, str], dict[str, list[float]]] = {}
    judged = []
    for goal in GOALS:
        row: dict[str, Any] = {"name": goal.name, "goal": goal_text(goal), "source": goal.source, "unit": goal.unit}
        if goal.agent not in by or goal.baseline not in by:
            judged.append({**row, "value": None, "ci95": None, "met": None, "status": "not measured (arm not run)"})
            continue
        pair = (goal.agent, goal.baseline)
        if pair not in intervals:
            intervals[pair] = paired_ci(episodes[goal.agent], episodes[goal.baseline], goal_figures)
        low, high = intervals[pair][goal.figure]
        seeds = [label for label in by if goal.every_seed and label.startswith(goal.agent + "-seed")]
        values = {}  # the main seed's figure, then (judged at every seed) each extra RL seed's against its baseline
        for label in [goal.agent, *seeds]:
            suffix = label[len(goal.agent) :]
            if goal.baseline + suffix in by:
                figure = goal_figures(by[label], by[goal.baseline + suffix])[goal.figure]
                values[suffix.lstrip("-") or "main"] = float(figure)
        met = all(meets(v, goal.bound, at_most=goal.at_most) for v in values.values())
        if goal.excludes_zero:
            met = met and (high < 0 if goal.at_most else low > 0)
        row.update(value=values["main"], ci95=[low + 0.0, high + 0.0], met=met, status="met" if met else "not met")
        if len(values) > 1:
            row["per_seed"] = values
        judged.append(row)
    return judged


def goal_result(judged: dict[str, Any]) -> str:
    """A :func:`goals` row's measured figures, ``""`` when not measured.

    ``+15.1% [+8.6, +22.2]`` (value and 95% interval), or for a benchmark row each arm's TGC on the set and, in
    brackets, on the main split.
    """
    if judged["value"] is None:
        return ""
    if "per_arm" in judged:  # a benchmark_goals row
        arms = judged["per_arm"].items()
        return ", ".join(f"{label} {arm['tgc']:.1f} ({arm['main_tgc']:.1f})" for label, arm in arms)
    low, high = judged["ci95"]
    text = f"{judged['value'] + 0.0:+.1f}{judged['unit']} [{low:+.1f}, {high:+.1f}]"
    if "per_seed" in judged:
        text += ", per RL seed " + ", ".join(f"{seed} {v + 0.0:+.1f}" for seed, v in judged["per_seed"].items())
    return text


def goal_line(judged: dict[str, Any]) -> str:
    """One :func:`goals` row in words: ``- SAGE vs GRPO: steps per task: +15.1% [+8.6, +22.2] (goal ...): not met``."""
    name = judged["name"] + (" (main split's in brackets)" if "per_arm" in judged else "")
    result = goal_result(judged)
    return f"- {name}{': ' + result if result else ''} (goal {judged['goal']}; {judged['source']}): " \
           f"**{judged['status']}**"  # fmt: skip


def install_line(summaries: list[dict[str, Any]]) -> str:
    """Which of the report's figures depend on the install, with the library versions the run recorded."""
    recorded = {json.dumps(s.get("versions", {}), sort_keys=True) for s in summaries}
    if len(recorded) == 1:
        versions = "this run: " + ", ".join(f"{k} {v}" for k, v in json.loads(recorded.pop()).items())
    else:  # agents evaluated under different installs: the within-run comparison itself is suspect
        versions = "they differ between this run's agents: see each summary"
    return (
        f"Which figures depend on the install: every figure depends on the library versions recorded in each "
        f"summary's `versions` ({versions}), and the trained agents' (the SFT model and the RL arms) also on "
        f"the CPU's kernels (SFT trains under bf16 autocast where the CPU has bf16 kernels, fp32 otherwise), so "
        f"the same seed on another install or machine gives other models. Compare arms only within one run."
    )


def goals_section(summaries: list[dict[str, Any]], judged: list[dict[str, Any]], skipped: Sequence[str] = ()) -> str:
    """The report's markdown section: a line per :func:`goals` row and skipped evaluation set, then the install.

    ``judged`` holds :func:`goals` and :func:`benchmark_goals` rows; ``skipped``, why each extra evaluation set was
    not played; the section ends with :func:`install_line`.
    """
    s = summaries[0]
    lines = "\n".join([*(goal_line(row) for row in judged), *(f"- {note}" for note in skipped)])
    return (
        f"## Goals\n\nJudged on this run's {s['n_chains']} {s['split']} chains of {s['env']} (seeds "
        f"{', '.join(map(str, s['seeds']))}), each agent against its baseline on the same chains: points gained, "
        f"relative changes per task (a minus means fewer), 95% paired-bootstrap intervals (chains resampled "
        f"jointly).\n\n{lines}\n\n{install_line(summaries)}\n"
    )


def learning_curves(cfg: DemoConfig, out: Path) -> dict[str, list[tuple[float, float]]]:
    """``arm label -> [(RL step, TGC %)]`` of every arm trained so far.

    The points are the held-out evaluations' TGC when the arms evaluated during RL (``rl_eval_every``), else each
    training step's group TGC.
    """
    from sage_agents.checkpoints import METRICS_FILE, metric_curve

    key = "eval/task_success" if cfg.rl_eval_every else "env/task_success"
    curves = {}
    for label in arm_runs(cfg):
        if (out / label / METRICS_FILE).exists():
            curves[label] = [(step, 100 * value) for step, value in metric_curve(out / label, key)]
    return curves


def curves_section(cfg: DemoConfig, out: Path) -> str:
    """RESULTS.md's learning-curve table: each arm's held-out TGC at every evaluation during RL ("" without any)."""
    if not cfg.rl_eval_every:
        return ""
    curves = learning_curves(cfg, out)
    steps = sorted({step for points in curves.values() for step, _ in points})
    by_step = {label: dict(points) for label, points in curves.items()}
    rows = [
        f"| {step:.0f} | " + " | ".join(f"{by_step[label].get(step, float('nan')):.1f}" for label in curves) + " |"
        for step in steps
    ]
    return (
        f"\n## Learning curves\n\nHeld-out TGC (%) during RL: greedy play of the first {cfg.rl_eval_chains} "
        f"{cfg.eval_split} chains every {cfg.rl_eval_every} steps (step 0 is the SFT start in each arm's skill "
        f"mode; the trainer's `eval/*` metrics in `<arm>/metrics.jsonl`).\n\n"
        f"| RL step | {' | '.join(curves)} |\n|---|{'---|' * len(curves)}\n" + "\n".join(rows) + "\n"
    )


def plot(cfg: DemoConfig, out: Path, summaries: list[dict[str, Any]]) -> list[Path]:
    """Learning curves of the arms (success per step) and success vs tokens of every agent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(6, 4))
    curves = learning_curves(cfg, out)
    for label, points in curves.items():
        alpha = 1.0 if label == arm_of(label) else 0.4
        ax.plot(*zip(*points, strict=True), marker=".", color=ARM_COLORS[arm_of(label)], alpha=alpha, label=label)
    held_out = f"held-out TGC (%, first {cfg.rl_eval_chains} {cfg.eval_split} chains)"
    ylabel = held_out if cfg.rl_eval_every else "training TGC (%, the step's group)"
    ax.set(xlabel="RL step", ylabel=ylabel, title="Learning curves")
    ax.legend()
    paths.append(out / "learning_curves.png")
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for s in summaries:
        ax.scatter(s["mean_tokens"], 100 * s["tgc"])
        ax.annotate(s["agent"], (s["mean_tokens"], 100 * s["tgc"]), textcoords="offset points", xytext=(4, 4))
    ax.set(xlabel="generated tokens per task", ylabel="TGC (%)", title=f"Success vs tokens ({cfg.eval_split})")
    paths.append(out / "success_vs_tokens.png")
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def run_demo(cfg: DemoConfig) -> dict[str, Any]:
    """Run every stage (skipping finished ones) and write ``results.json``, ``RESULTS.md`` and the plots."""
    from rich.console import Console

    from leaderboard.render import render_markdown

    console, out, start = Console(), Path(cfg.output_dir), time.perf_counter()
    stage_seconds: dict[str, float] = {}  # this invocation's time per stage (a stage a rerun skipped: ~0)

    def timed(stage: str, run: Any, *args: Any) -> Any:
        begin = time.perf_counter()
        value = run(*args)
        stage_seconds[stage] = round(time.perf_counter() - begin, 1)
        return value

    out.mkdir(parents=True, exist_ok=True)
    cfg.save(out / "demo_config.json")
    console.rule("[bold]1/5 expert chains")
    pairs = timed("expert", expert_pairs, cfg, out)
    console.print(f"{len(pairs)} (prompt, action) pairs from {cfg.expert_chains} chains x 2 modes")
    console.rule("[bold]2/5 SFT warm start (TRL SFTTrainer)")
    sft = timed("sft", sft_model, cfg, out, pairs)
    if cfg.sft_dagger_chains:
        console.rule(f"[bold]2b/5 DAgger: the SFT model plays {cfg.sft_dagger_chains} chains, the expert labels them")
        sft = timed("dagger", dagger_model, cfg, out, sft, pairs)
    console.rule(f"[bold]3/5 RL: {len(arm_runs(cfg))} arm runs, {rl_workers(cfg)} at a time")
    arms = timed("rl", train_arms, cfg, out, sft)
    console.rule(f"[bold]4/5 evaluation on {cfg.env_id} {cfg.eval_split}")
    summaries, extra, skipped = timed("evaluation", evaluate_agents, cfg, out, sft, arms)
    console.rule("[bold]5/5 report")
    table = render_markdown(summaries + extra)  # one table per evaluation set
    compared = {"sage", "grpo"} | {label for goal in GOALS for label in (goal.agent, goal.baseline)}
    episodes = {s["agent"]: logged_episodes(out, s) for s in summaries if s["agent"] in compared}
    judged = goals(summaries, episodes) + benchmark_goals(summaries, extra)
    result = {"comparison": comparison(summaries, episodes), "goals": judged, "summaries": summaries,
              "extra_summaries": extra, "skipped_eval_sets": skipped, "stage_seconds": stage_seconds,
              "wall_seconds": time.perf_counter() - start, "config": dataclasses.asdict(cfg)}  # fmt: skip
    (out / "results.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    wall = result["wall_seconds"]
    stages = ", ".join(f"{stage} {seconds:.0f} s" for stage, seconds in stage_seconds.items())
    summary = f"{comparison_line(result['comparison'])}. Wall time {wall // 60:.0f}m{wall % 60:02.0f}s ({stages}).\n"
    section = goals_section(summaries, judged, skipped) + curves_section(cfg, out)
    (out / "RESULTS.md").write_text(f"{table}\n{summary}\n{section}")
    plot(cfg, out, summaries)
    console.print(table, soft_wrap=True)  # unwrapped: the markdown stays valid in a log or a narrow terminal
    console.print(summary, soft_wrap=True)
    console.print(section, soft_wrap=True)
    return result
