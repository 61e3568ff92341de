"""Warm start (SAGE's SFT stage): expert chains -> (prompt, completion) pairs -> TRL's ``SFTTrainer``.

SAGE trains prompt-only skill agent -> SFT on expert trajectories -> RL; RL from the base model without SFT
collapses (arXiv 2512.17102). The prompts are built by the same :meth:`LLMPolicy.prompt` the RL policy uses,
so the warm-started model sees exactly the format it will act in; the completion is the expert's action
(TRL appends EOS) and only completion tokens are trained (``completion_only_loss``).
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from transformers import Trainer, TrainerCallback
from trl import SFTTrainer

from sage_agents.policy import ENTITY_PATTERN, LLMPolicy, argument_options, skill_signatures
from sage_agents.reskill.assertions import action_key, key_pattern
from sage_agents.reskill.creator import next_action, skill_text, when_line
from sage_envs import Skill, SkillLibrary
from sage_envs.domain import Advice


class PlanExpert:
    """An expert that follows the env's ``info["expert_plan"]`` (make the env with ``expert_plan=True``)."""

    def act(self, observation: dict[str, str], info: dict[str, Any]) -> str:
        """The first command of the expert plan, or ``look`` when there is none."""
        plan = info.get("expert_plan") or ["look"]
        return plan[0]


@dataclass
class GuidanceMix:
    """Guidance in the prompts of expert SFT pairs, so that a model learns to act on guidance that applies.

    A model whose SFT prompts never held guidance has no reason to act on ReSkill's skills (docs/reskill.md, runs
    3-5: guidance hurt such a policy whatever it said). Each turn that can be advised (``advise`` returns advice
    for it) independently gets relevant guidance, irrelevant guidance or none, with these shares; both kinds are
    shown as ReSkill shows a guidance skill (:func:`shown_guidance`).
    """

    relevant: float = 0.4
    """Share of turns shown a guidance skill made for the turn: its trigger fires there and its text names the
    expert's action and what it is for (the model learns to follow guidance that applies)."""
    irrelevant: float = 0.3
    """Share of turns shown a guidance skill made for a turn of another task (another task sentence) and with
    another verb, shown here as a skill whose trigger fires where it does not apply: the model learns to ignore
    it. The rest of the turns show none."""
    own_example: float = 1.0
    """Share of the relevant guidance whose example is the turn's own command (what the expert sends); the rest
    show the advice of another task with the same verb (:func:`advice_elsewhere`): the verb applies, its example's
    objects are another game's, as in ReSkill's rule skills, whose examples come from other episodes. 1 (every
    measured demo run's recipe): one SFT run at 0 read guidance no better and played worse, within the spread of
    SFT runs (docs/reskill.md, "Guidance conditioning")."""
    followed: float = 0.0
    """Share of the perturbed turns (:class:`Perturbation`: a random command sent instead of the expert's) kept as
    pairs whose prompt shows guidance naming the command sent, the rule creator's layout without a reason
    (``own_example`` applies: the rest show another task's advice of its verb). On the other turns guidance names
    what the observation already decides, and the demo's SFT models did not learn to read it (docs/reskill.md,
    "Guidance conditioning"); on these only the guidance tells what to do. 0 (every measured demo run): perturbed
    turns are not pairs."""
    seed: int = 0
    """Seed of the draws (which turns get which guidance, which irrelevant skill): the same seed, the same pairs."""

    def __post_init__(self) -> None:
        if not 0 <= self.followed <= 1:
            raise ValueError(f"GuidanceMix.followed={self.followed} is a share: it must be in [0, 1].")
        if not (0 <= self.relevant <= 1 and 0 <= self.irrelevant <= 1 and self.relevant + self.irrelevant <= 1):
            raise ValueError(
                f"GuidanceMix shares relevant={self.relevant}, irrelevant={self.irrelevant} must each be in [0, 1] "
                "with a sum of at most 1 (the rest of the turns show no guidance)."
            )
        if not 0 <= self.own_example <= 1:
            raise ValueError(f"GuidanceMix.own_example={self.own_example} is a share: it must be in [0, 1].")


def guidance_skill(advice: Any, turn: int, previous: str | None) -> Skill:
    """The guidance skill a rule creator would write to show ``advice`` on ``turn`` (0-based) of a task.

    ``advice``: any object with ``name``, ``command`` and ``reason`` (e.g. the ALFWorld expert's,
    ``sage_envs.domain.Domain.advise``). The trigger fires on that turn: ``beginning`` on turn 0,
    else after an action with the verb of ``previous`` (the task's last action), as the rule creator's triggers
    do; the text is the creator's layout (:func:`~sage_agents.reskill.creator.skill_text`): ``Right after you
    'go to'.`` / ``Next, do 'heat', e.g. heat egg 1 with microwave 1: the microwave can heat the egg.``
    """
    if turn == 0 or not previous:
        trigger, pattern = "beginning", ""
    else:
        trigger, pattern = "action_pattern", key_pattern(action_key(previous))
    action = next_action(action_key(advice.command), advice.command, advice.reason)
    text = skill_text(when_line(trigger, pattern), action)
    return Skill(name=advice.name, kind="guidance", text=text, trigger=trigger, pattern=pattern)


def shown_guidance(skill: Skill, turn: int, previous: str | None, skills: str = "") -> str:
    """The observation's ``skills`` text with ``skill`` shown on ``turn`` after ``previous``, as the env shows it.

    The chain env renders its library the same way (:meth:`~sage_envs.SkillLibrary.render`, guidance kind);
    ``skills`` (what the observation already shows, e.g. program skills) comes first.

    Raises:
        ValueError: the skill's trigger does not fire on that turn (it would not be shown).
    """
    text = SkillLibrary([skill]).render(turn=turn, last_action=previous, kinds=("guidance",))
    if not text:
        raise ValueError(
            f"guidance skill {skill.name!r} ({skill.trigger} {skill.pattern!r}) does not fire on turn {turn} after "
            f"{previous!r}; build it for that turn with guidance_skill(advice, turn, previous)."
        )
    return "\n\n".join(part for part in (skills.strip(), text) if part)


@dataclass
class Perturbation:
    """Noise injected into expert play, so that SFT data shows how to recover from a wrong turn.

    DART (Laskey et al., 2017, "DART: Noise Injection for Robust Imitation Learning"). A model trained only on an
    expert's own turns never sees a state its mistakes lead to: the SAGE arm of ``make demo`` sent one failing skill
    call again and again until its turns ran out (docs/demo.md). On a drawn turn a random action is sent instead
    of the expert's: the expert is told (its ``override(action)``), reads what came of it and goes on from there;
    that turn is kept in the next turns' history but is not a training pair.
    """

    rate: float = 0.1
    """Share of turns on which a random action is sent instead of the expert's."""
    call_share: float = 0.5
    """Of those turns, the share that send a call of a library skill with random arguments (when the library has a
    skill with parameters and the turn has argument values); the rest send a random admissible command."""
    seed: int = 0
    """Seed of the draws: the same seed, the same pairs."""
    entity_pattern: str = ENTITY_PATTERN
    """Entity names a random call's arguments are drawn from (the domain's ``entity_pattern``)."""
    task_words: bool = True
    """Whether the task's words are argument values too (the domain's ``task_names_entities``)."""

    def __post_init__(self) -> None:
        if not (0 <= self.rate <= 1 and 0 <= self.call_share <= 1):
            raise ValueError(f"Perturbation rate={self.rate} and call_share={self.call_share} must each be in [0, 1].")

    def action(self, rng: random.Random, observation: Mapping[str, str], admissible: Sequence[str]) -> str | None:
        """A random action: a library skill's call with random arguments, or an admissible command (None: neither)."""
        calls = [(name, params) for name, params in skill_signatures(observation.get("skills", "")) if params]
        values = argument_options(
            observation["task"],
            observation.get("observation", ""),
            admissible,
            entity_pattern=self.entity_pattern,
            task_words=self.task_words,
        )
        if calls and values and (rng.random() < self.call_share or not admissible):
            name, params = rng.choice(calls)
            return f"call {name}({', '.join(rng.choice(values) for _ in params)})"
        return rng.choice(list(admissible)) if admissible else None


@dataclass
class ExpertTurn:
    """One expert turn, as :func:`collect_expert_turns` records it (a prompt is built from it later)."""

    obs: dict[str, str]
    """The observation the expert acted on (its ``skills`` text gains the guidance shown, if any)."""
    history: list[tuple[str, str]]
    """The task's earlier ``(observation, action)`` pairs."""
    admissible: list[str]
    """The admissible commands of the turn."""
    action: str
    """The expert's action (the completion)."""
    sent_instead: bool = False
    """A perturbed turn: ``action`` is the random command sent instead of the expert's (recorded only when asked:
    :func:`collect_expert_turns`' ``keep_perturbed``)."""

    @property
    def earlier(self) -> list[str]:
        """The task's actions before this turn, oldest first."""
        return [action for _, action in self.history]


def collect_expert_turns(
    env: Any,
    expert: Any,
    chains: Iterable[int] | None = None,
    *,
    seed: int = 0,
    only_successful: bool = True,
    max_turns: int = 10_000,
    perturbation: Perturbation | None = None,
    keep_perturbed: bool = False,
    learner: Any = None,
    expert_share: float = 0.0,
) -> list[ExpertTurn]:
    """Play ``chains`` with ``expert`` and record every turn (arguments: :func:`collect_expert_pairs`).

    ``keep_perturbed``: record the perturbed turns too (``ExpertTurn.sent_instead``), for guidance that names what
    was sent (:attr:`GuidanceMix.followed`); by default they are history only.
    """
    chains = range(int(env.unwrapped.num_chains)) if chains is None else chains
    if (perturbation is not None or learner is not None) and not hasattr(expert, "override"):
        raise ValueError(
            f"a Perturbation or a learner needs an expert that can be told what was sent instead of its action (an "
            f"override(action) method); {type(expert).__name__} has none: pass perturbation=None, learner=None."
        )
    if not 0 <= expert_share <= 1:
        raise ValueError(f"expert_share={expert_share} is a share of turns: 0 to 1.")
    if learner is not None and expert_share and not hasattr(learner, "override"):
        raise ValueError(
            f"an expert_share needs a learner that can be told the expert's action was sent instead of its own (an "
            f"override(action) method); {type(learner).__name__} has none."
        )
    if perturbation is not None and learner is not None:
        raise ValueError("collect_expert_turns: a perturbation or a learner, not both (a learner sends every action).")
    rng = random.Random(perturbation.seed if perturbation is not None else 0)
    turns: list[ExpertTurn] = []
    for chain in chains:
        for agent in (expert, learner):
            if hasattr(agent, "reset"):
                agent.reset()
        obs, info = env.reset(seed=seed + int(chain), options={"chain": int(chain)})
        history: list[tuple[str, str]] = []
        task_turns: list[ExpertTurn] = []
        for _ in range(max_turns):
            label = expert.act(obs, info)
            admissible = list(info.get("admissible_commands", []))
            if learner is not None:  # DAgger: the learner's action is sent, the expert's is the turn's label
                action = learner.act(obs, info)
                if expert_share and rng.random() < expert_share:
                    learner.override(label)
                    action = label
                task_turns.append(ExpertTurn(obs, list(history), admissible, label))
            else:
                noise = None
                if perturbation is not None and rng.random() < perturbation.rate:
                    noise = perturbation.action(rng, obs, admissible)
                action = label if noise is None else noise
                if action == label:
                    task_turns.append(ExpertTurn(obs, list(history), admissible, label))
                elif keep_perturbed:  # otherwise not a training pair: the turns after it show the recovery
                    task_turns.append(ExpertTurn(obs, list(history), admissible, action, sent_instead=True))
            if action != label:
                expert.override(action)
            before = obs["observation"]
            obs, _, terminated, truncated, info = env.step(action)
            if info.get("new_task") or terminated or truncated:  # the task of this action ended
                if info.get("task_success") or not only_successful:
                    turns += task_turns
                task_turns, history = [], []
            else:
                history.append((before, action))
            if terminated or truncated:
                break
    return turns


def collect_expert_pairs(
    env: Any,
    expert: Any,
    policy: LLMPolicy,
    chains: Iterable[int] | None = None,
    *,
    seed: int = 0,
    only_successful: bool = True,
    max_turns: int = 10_000,
    guidance: GuidanceMix | None = None,
    advise: Callable[[str, Sequence[str], str], Any] | None = None,
    perturbation: Perturbation | None = None,
    learner: Any = None,
    expert_share: float = 0.0,
) -> list[dict[str, str]]:
    """Play ``chains`` with ``expert`` and record one ``{"prompt", "completion"}`` pair per turn.

    Args:
        env: a chain env (the expert may need ``expert_plan=True``).
        expert: any object with ``act(observation, info) -> str`` (and optionally ``reset()``).
        policy: supplies the prompt format (history window, skills, admissible list, chat template).
        chains: chain indices to play (default: every chain of the split).
        seed: reset seed base (chain i uses ``seed + i``).
        only_successful: keep only the turns of tasks the expert completed.
        max_turns: safety bound on turns per chain.
        guidance: show guidance skills in the prompts of some turns (:class:`GuidanceMix`, :func:`add_guidance`);
            needs ``advise``.
        advise: the domain's ``advise(task, earlier_actions, action)`` -> advice with ``name``, ``command`` and
            ``reason`` (:func:`guidance_skill`), or None for a turn it cannot advise (shown no guidance); e.g.
            ``sage_envs.domain.Domain.advise``.
        perturbation: send random actions on some turns instead of the expert's (:class:`Perturbation`; the
            expert needs an ``override`` method): the pairs then show recovery from wrong turns.
        learner: an agent (``act(observation, info)``, optionally ``reset()``) whose action is sent on every turn
            instead of the expert's, while the expert's action is the turn's completion: DAgger (Ross, Gordon and
            Bagnell, 2011, "A Reduction of Imitation Learning and Structured Prediction to No-Regret Online
            Learning"), whose pairs cover the states the learner's own mistakes lead to. The expert needs an
            ``override`` method; not with ``perturbation``. With ``only_successful=False`` the turns of the tasks
            the learner failed are kept too: their labels are the expert's whatever came of the learner's play.
        expert_share: with a ``learner``, the share of turns on which the expert's action is sent instead (DAgger's
            beta; the learner, told through its ``override``, keeps it in its history): fewer turns in states that
            only the learner's repeated mistakes reach.

    Returns:
        A list of prompt/completion dicts (TRL's prompt-completion dataset format).
    """
    if (guidance is None) != (advise is None):
        raise ValueError("collect_expert_pairs: pass guidance= and advise= together (the mix and the domain's advice).")
    turns = collect_expert_turns(
        env, expert, chains, seed=seed, only_successful=only_successful, max_turns=max_turns,
        perturbation=perturbation, keep_perturbed=guidance is not None and guidance.followed > 0, learner=learner,
        expert_share=expert_share,
    )  # fmt: skip
    if guidance is not None:
        turns = add_guidance(turns, guidance, advise)
    return [{"prompt": policy.prompt(t.obs, t.history, t.admissible), "completion": t.action} for t in turns]


def other_advice(rng: random.Random, pool: Sequence[tuple[str, Any]], task: str, action: str, tries: int = 20) -> Any:
    """Advice of ``pool`` (``(task sentence, advice)`` pairs) for another task and another verb than ``action``.

    Guidance for another situation: it names neither this task's situation nor the verb of the action to take.
    ``tries`` random draws; None when none of them fits (the turn is then shown no guidance).
    """
    return _advice_of_another_task(rng, pool, task, tries, lambda verb: verb != action_key(action))


def advice_elsewhere(
    rng: random.Random, pool: Sequence[tuple[str, Any]], task: str, action: str, tries: int = 20
) -> Any:
    """Advice of ``pool`` for another task with the verb of ``action``: what to do applies here, its example does not.

    ReSkill's rule creator writes its examples from other episodes ("Next, do 'open', e.g. open cabinet 8." in a
    game whose cabinet is 3): the verb is the advice, the objects are another game's. ``tries`` random draws; None
    when none of them fits.
    """
    return _advice_of_another_task(rng, pool, task, tries, lambda verb: verb == action_key(action))


def _advice_of_another_task(
    rng: random.Random, pool: Sequence[tuple[str, Any]], task: str, tries: int, verb_fits: Callable[[str], bool]
) -> Any:
    for other_task, advice in (rng.choice(pool) for _ in range(tries if pool else 0)):
        if other_task != task and verb_fits(action_key(advice.command)):
            return advice
    return None


def add_guidance(
    turns: Sequence[ExpertTurn], mix: GuidanceMix, advise: Callable[[str, Sequence[str], str], Any]
) -> list[ExpertTurn]:
    """Show relevant, irrelevant or no guidance in each turn's observation, in ``mix``'s shares (in place).

    Relevant: the turn's own advice (``advise(task, earlier, action)``), or in ``1 - mix.own_example`` of them
    :func:`advice_elsewhere` (the turn's own when no other task's fits); irrelevant: :func:`other_advice`; both
    drawn from the advice of the other turns. Each is shown as :func:`guidance_skill` written for the turn
    (:func:`shown_guidance`). Turns ``advise`` returns None for keep their observation. Perturbed turns
    (``sent_instead``) are shown guidance naming the command sent in ``mix.followed`` of them.

    Returns:
        The turns to train on: ``turns`` but the perturbed ones shown no guidance.
    """
    rng = random.Random(mix.seed)
    advice = [None if t.sent_instead else advise(t.obs["task"], t.earlier, t.action) for t in turns]
    pool = [(t.obs["task"], a) for t, a in zip(turns, advice, strict=True) if a is not None]
    kept = []
    for turn, own in zip(turns, advice, strict=True):
        if turn.sent_instead:
            if action_key(turn.action) in ("call", "skill") or rng.random() >= mix.followed:
                continue  # history only, as without guidance: a skill call or definition names no command
            sent = Advice(re.sub(r"\W+", "_", action_key(turn.action)) + "_next", turn.action, "")
            show(turn, _relevant(rng, mix, pool, turn, sent))
            kept.append(turn)
            continue
        kept.append(turn)
        if own is None:
            continue
        draw = rng.random()
        if draw < mix.relevant:
            chosen = _relevant(rng, mix, pool, turn, own)
        elif draw < mix.relevant + mix.irrelevant:
            chosen = other_advice(rng, pool, turn.obs["task"], turn.action)
        else:
            chosen = None
        if chosen is not None:
            show(turn, chosen)
    return kept


def _relevant(rng: random.Random, mix: GuidanceMix, pool: Sequence[tuple[str, Any]], turn: ExpertTurn, own: Any) -> Any:
    """``own`` (advice naming the turn's action), or in ``1 - mix.own_example`` of them :func:`advice_elsewhere`."""
    # no draw at own_example=1, so that the default mix draws (and shows) what it did before the option
    elsewhere = mix.own_example < 1 and rng.random() >= mix.own_example
    return (elsewhere and advice_elsewhere(rng, pool, turn.obs["task"], turn.action)) or own


def show(turn: ExpertTurn, advice: Any) -> None:
    """Show ``advice`` in ``turn``'s observation as :func:`guidance_skill` written for the turn (in place)."""
    n, previous = len(turn.history), (turn.history[-1][1] if turn.history else None)
    skill = guidance_skill(advice, n, previous)
    turn.obs = {**turn.obs, "skills": shown_guidance(skill, n, previous, turn.obs.get("skills", ""))}


def reweight_pairs(
    pairs: Sequence[dict[str, str]], weights: Mapping[str, float], *, seed: int = 0
) -> list[dict[str, str]]:
    """Resample pairs by the first word of their action (class rebalancing).

    Weight ``w`` keeps each pair ``floor(w)`` times plus once more with probability ``w - floor(w)``; words not
    in ``weights`` keep weight 1.

    Why: an expert's turns are mostly navigation (``go to`` is ~40% of ALFWorld's), while the turns that decide a
    task (``take``, ``move``, ``heat``, ...) are rare; a tiny model trained on the raw mix keeps walking past the
    object it was sent for. Up-weighting the decisive turns is the usual class-rebalancing remedy.
    """
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"weights must be >= 0, got {dict(weights)}")
    rng = random.Random(seed)
    out: list[dict[str, str]] = []
    for pair in pairs:
        words = pair["completion"].split(maxsplit=1)
        weight = weights.get(words[0] if words else "", 1.0)
        copies = int(weight) + (rng.random() < weight - int(weight))
        out += [pair] * copies
    return out


def unscored_line_labels(
    pairs: Sequence[dict[str, str]], tokenizer: Any, prefixes: Sequence[str]
) -> list[dict[str, list[int]]]:
    """Pairs tokenized for SFT with the prompt lines that start with one of ``prefixes`` left out of the loss.

    A left-out line takes its block with it: the lines right after it that start with ``- `` or two spaces (a
    header's items, as :meth:`~sage_envs.SkillLibrary.render` lists skills under ``Guidance:``). Each pair becomes
    the ids TRL makes of a prompt and its completion (one text, the EOS token after the completion) and ``labels``:
    -100 on the tokens of those lines (the model reads them but is not trained to write them), the token elsewhere,
    as with ``completion_only=False``. TRL's ``SFTTrainer`` takes such pre-tokenized pairs as they are.

    Why: long, predictable text (the prompt's ``Not tried yet: go to ...`` list, the guidance skills' texts)
    otherwise takes a large share of a small model's language-model loss, and with it what the model learns about
    its actions (docs/demo.md, "Telling the policy where it has not been"; docs/reskill.md, "Guidance out of the
    loss"). Needs a fast tokenizer (character offsets of its tokens).
    """
    prefixes = tuple(prefixes)
    out = []
    for pair in pairs:
        prompt = pair["prompt"]
        encoded = tokenizer(prompt + pair["completion"] + tokenizer.eos_token, return_offsets_mapping=True)
        spans, start, in_block = [], 0, False
        for line in prompt.split("\n"):
            in_block = line.startswith(prefixes) or (in_block and line.startswith(("- ", "  ")))
            if in_block:
                spans.append((start, start + len(line)))
            start += len(line) + 1
        labels = [
            -100 if end > begin and any(a <= begin and end <= b for a, b in spans) else token
            for token, (begin, end) in zip(encoded.input_ids, encoded.offset_mapping, strict=True)
        ]
        out.append({"input_ids": list(encoded.input_ids), "labels": labels})
    return out


class RichProgress(TrainerCallback):
    """A progress bar over the optimizer steps with the latest logged loss, in place of the printed logs.

    Outside a terminal (a log file, CI) it prints a plain line instead, every
    :data:`sage_agents.progress.PLAIN_EVERY_SECONDS` (:class:`sage_agents.progress.Progress`).
    """

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Start the bar at the trainer's current step (a resumed run starts part-way)."""
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

        from sage_agents.progress import Progress

        columns = [TextColumn("[bold]sft"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        self.bar = Progress(*columns, TextColumn("{task.fields[info]}"))
        self.bar.start()
        self.task = self.bar.add_task("sft", total=state.max_steps, completed=state.global_step, info="")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Advance to the trainer's step."""
        self.bar.update(self.task, completed=state.global_step)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        """Show the latest training loss."""
        if logs and "loss" in logs:
            self.bar.update(self.task, info=f"loss {float(logs['loss']):.3f}")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Close the bar."""
        self.bar.stop()


class FullLogitsSFTTrainer(SFTTrainer):
    """TRL's ``SFTTrainer`` whose loss comes from the model's own LM head, over the full logits.

    ``SFTTrainer`` computes its loss with a fused LM head that scores the positions in chunks without keeping the
    (tokens x vocabulary) logits, and computes them again in the backward pass: the right trade for a large
    vocabulary on an accelerator. A word-level tiny model's logits are small (a demo batch: 16 x ~180 tokens x 827
    words, 9 MB), and on a CPU that second projection made each demo SFT step 1.20x slower
    (``python benchmarks/sft_speed.py --compare logits``). The loss is the same (transformers' causal-LM loss,
    averaged over the batch's labelled tokens as TRL averages it); TRL's ``entropy`` and ``mean_token_accuracy``
    log entries, which its fused head computes, are not logged.
    """

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """``Trainer.compute_loss``: the model's own loss from its labels (no KV cache in training)."""
        return Trainer.compute_loss(self, model, {**inputs, "use_cache": False}, return_outputs, num_items_in_batch)


def full_logits_fit(batch_size: int, max_length: int | None, vocab_size: int, budget_bytes: int = 2**28) -> bool:
    """Whether :class:`FullLogitsSFTTrainer` is the faster choice: training on a CPU, and small logits.

    Small: a batch's fp32 logits (``batch_size x max_length x vocab_size``, no ``max_length`` counted as 2048)
    within ``budget_bytes`` (256 MiB).
    """
    import torch

    tokens = batch_size * (max_length or 2048)
    return not torch.cuda.is_available() and tokens * vocab_size * 4 <= budget_bytes


def runs_bf16_natively() -> bool:
    """Whether bf16 autocast runs on bf16 kernels here: a CUDA GPU with bf16, or a CPU with oneDNN's (AVX-512, AMX).

    On other CPUs (AVX2 only, e.g. many AMD EPYC) autocast emulates bf16: the demo's SFT step took 4.97 s in
    bf16 vs 0.44 s in fp32 on one (``python benchmarks/sft_speed.py --compare precision --steps 10``), where on
    an AVX-512 CPU bf16 was 1.5-1.7x faster than fp32.
    """
    import torch

    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def sft_warm_start(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[dict[str, str]],
    *,
    output_dir: str,
    epochs: float = 1.0,
    max_steps: int = -1,
    lr: float = 2e-5,
    batch_size: int = 8,
    max_length: int | None = 2048,
    seed: int = 0,
    logging_steps: int = 10,
    bf16: bool | None = False,
    group_by_length: bool = True,
    completion_only: bool = True,
    gradient_checkpointing: bool = False,
    full_logits: bool | None = None,
    progress: bool = True,
) -> dict[str, float]:
    """Supervised fine-tuning of ``model`` on ``pairs`` with TRL's ``SFTTrainer`` (completion-only loss).

    Args:
        model: the causal LM (trained in place).
        tokenizer: its tokenizer.
        pairs: ``{"prompt", "completion"}`` dicts from :func:`collect_expert_pairs`, or pre-tokenized
            ``{"input_ids", "labels"}`` ones (:func:`unscored_line_labels`), which TRL trains on as they are.
        output_dir: TRL's output folder (no checkpoints are saved; save the model yourself).
        epochs: passes over the pairs.
        max_steps: stop after this many optimizer steps (-1 = use ``epochs``).
        lr: learning rate (a tiny model from scratch wants ~1e-3).
        batch_size: pairs per device step.
        max_length: truncate longer sequences.
        seed: data order and init seed.
        logging_steps: TRL logging interval.
        bf16: train under bf16 autocast (faster where the hardware runs bf16; off by default for exactness).
            None: where it does (:func:`runs_bf16_natively`), else fp32.
        group_by_length: batch pairs of similar length (transformers' ``group_by_length`` sampler): far less
            padding when prompts range from 50 to 800 tokens, same data per epoch.
        completion_only: train on the completion tokens only (TRL's ``completion_only_loss``); False trains the
            language-model loss on the prompt too, i.e. also on predicting the environment's text.
        gradient_checkpointing: recompute activations in the backward pass to save memory. TRL's ``SFTConfig``
            turns it on by default (for large models on GPUs); a tiny model on a CPU only pays for the recompute
            (``benchmarks/sft_speed.py``).
        full_logits: compute the loss from the model's full logits (:class:`FullLogitsSFTTrainer`) instead of
            TRL's fused LM head; None: where :func:`full_logits_fit` (a CPU, small logits).
        progress: show a progress bar with the loss instead of printing every ``logging_steps`` log line (plain
            progress lines when stdout is not a terminal: :class:`RichProgress`).

    Returns:
        TRL's train metrics (``train_loss``, ``train_runtime``, ...).
    """
    import torch
    from accelerate.state import AcceleratorState
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTConfig

    # transformers 5 renamed `gradient_checkpointing` to `activation_checkpointing` (the old name warns until v6).
    fields = {field.name for field in dataclasses.fields(SFTConfig)}
    checkpointing = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    args = SFTConfig(
        output_dir=output_dir,
        num_train_epochs=epochs,
        max_steps=max_steps,
        learning_rate=lr,
        per_device_train_batch_size=batch_size,
        max_length=max_length,
        completion_only_loss=completion_only,
        **{checkpointing: gradient_checkpointing},
        packing=False,
        save_strategy="no",
        report_to="none",
        logging_steps=logging_steps,
        seed=seed,
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=True,
        bf16=runs_bf16_natively() if bf16 is None else bf16,
        fp16=False,
        train_sampling_strategy="group_by_length" if group_by_length else "random",
    )
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "right"  # training pads on the right; generation (LLMPolicy) on the left
    if full_logits is None:
        head = model.get_output_embeddings()  # None on a model without an LM head: TRL's own handling
        full_logits = head is not None and full_logits_fit(batch_size, max_length, head.weight.shape[0])
    try:
        trainer = (FullLogitsSFTTrainer if full_logits else SFTTrainer)(
            model=model, args=args, train_dataset=Dataset.from_list(list(pairs)), processing_class=tokenizer
        )
        if progress:
            trainer.remove_callback(PrinterCallback)
            trainer.add_callback(RichProgress())
        result = trainer.train()
    finally:
        tokenizer.padding_side = padding_side
        if AcceleratorState._shared_state and AcceleratorState().mixed_precision != "no":
            AcceleratorState._reset_state(reset_partial_state=False)  # do not leak autocast into the RL trainer
    return dict(result.metrics)
