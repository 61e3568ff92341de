r"""The LLM policy: prompt building, action parsing, batched KV-cached generation and constrained decoding.

One agent turn = one ``(prompt, completion)`` pair. The prompt is rebuilt every turn (task first, then the
last ``history_turns`` (observation, action) pairs, the skill library, the current observation and the
admissible commands) and the completion is the action text plus EOS; only completion tokens enter a loss.

Two ways to act, both through Hugging Face ``generate`` (KV cache, batched over the group with left padding;
:mod:`sage_agents.decoding`):

* **free generation** (``constrained=False``): sample up to ``max_new_tokens`` tokens. The action is parsed out
  of the completion (:func:`parse_action`).
* **constrained decoding** (``constrained=True``): the completion is one of the admissible commands, or a call
  ``call NAME(a, b)`` of a library skill (or of a skill-definition template, which comes first as
  ``DEFINITION\ncall NAME(``), generated token by token among the tokens that keep it one of those: the model's
  softmax restricted to the allowed tokens (:func:`sage_agents.decoding.call_plan`). A call's arguments follow
  one at a time among the entities and types the task, observation and admissible commands name (with
  ``typed_arguments``, only those of a type the task or the parameter's name names). This is what makes a tiny
  model act (see docs/agents.md, calibration).

Token log-probabilities everywhere are ``log_softmax(logits / temperature)`` (restricted to the allowed tokens
when constrained: :attr:`Completion.allowed`), the same distribution the trainer differentiates, so rollout
log-probs and training log-probs agree up to float error. A policy over whole options (``option_sampling``)
draws each constrained choice's option as a whole instead (:func:`sage_agents.decoding.decode_options`): its
log-probs are the choices' (:attr:`Completion.choices`), and the trainer differentiates those.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from sage_agents import decoding
from sage_agents.decoding import Plan, call_plan
from sage_agents.skill_grammar import SkillGrammar
from sage_envs.domain import ENTITY_PATTERN

ACTION_KINDS = ("command", "define", "call", "none")
MAX_CONSTRAINED_TOKENS = 512
"""Token budget of a constrained turn: far above the longest action (a skill-definition template and its call,
~100 tokens); generation stops as soon as every row's action is complete."""
MAX_MEMO_OPTIONS = 1 << 16
"""Option texts :meth:`LLMPolicy.encode_option` remembers (a few MB) before it starts afresh."""
_COMMAND_RE = re.compile(r"^[a-z0-9][a-z0-9 '/\-]*$")  # "/": the official ALFWorld games' "put X in/on Y"
_CALL_RE = re.compile(r"^call\s+[A-Za-z_][\w-]*\s*\(.*\)\s*$")
_DEF_RE = re.compile(r"^skill\s+[A-Za-z_][\w-]*\s*\(.*\)\s*:\s*$")
_SIGNATURE_RE = re.compile(r"^-\s*([A-Za-z_][\w-]*)\(([^)]*)\)", re.MULTILINE)
NO_SKILLS_YET = "(none yet: define one with skill NAME(params):)"
"""The prompt's Skills section for a policy that may define skills but has none yet."""
_PROGRAM_LINE_RE = re.compile(r"^(-\s*[A-Za-z_][\w-]*\([^)]*\)):.*$", re.MULTILINE)  # "- sig: description"


# ---------------------------------------------------------------------------------------------- parsing
@dataclass
class ParsedAction:
    """An action parsed out of a model completion."""

    text: str
    """What goes to ``env.step``: the action, or the raw completion when nothing parses (the env flags it)."""
    kind: str
    """``command``, ``define``, ``call`` or ``none`` (no parseable action)."""

    @property
    def parseable(self) -> bool:
        """False when the completion held no command, skill definition or call (SAGE's "no code" case)."""
        return self.kind != "none"


def parse_action(completion: str, commands: Collection[str] = ()) -> ParsedAction:
    """Parse one action from a completion: a skill definition block (+ call lines), a call, or a command.

    Leading ``Action:`` / ``>`` prefixes and Markdown code fences are stripped. A command is the first
    non-empty line when it is one of ``commands`` (the admissible ones, whatever their characters: ScienceWorld
    says "unknown substance B") or made of lowercase words, digits, spaces, ``'``, ``/`` and ``-``; anything else
    is ``none`` and is passed through unchanged, so that the env reports it as an invalid action.
    """
    text = completion.replace("\r", "")
    text = re.sub(r"```[a-zA-Z]*", "", text)
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return ParsedAction(completion, "none")
    first = re.sub(r"^\s*(action\s*:|>)\s*", "", lines[0], flags=re.IGNORECASE).strip()
    if _DEF_RE.match(first):
        block, i = [first], 1
        while i < len(lines) and lines[i].startswith((" ", "\t")) and lines[i].strip():  # the indented body
            block.append(lines[i])
            i += 1
        if len(block) == 1:
            return ParsedAction(completion, "none")
        while i < len(lines) and (not lines[i].strip() or _CALL_RE.match(lines[i].strip())):  # call lines
            if lines[i].strip():
                block.append(lines[i].strip())
            i += 1
        return ParsedAction("\n".join(block), "define")
    if _CALL_RE.match(first):
        return ParsedAction(first, "call")
    if first in commands or _COMMAND_RE.match(first):
        return ParsedAction(first, "command")
    return ParsedAction(completion, "none")


# ---------------------------------------------------------------------------------------------- prompts
def build_prompt(
    task: str,
    observation: str,
    history: Sequence[tuple[str, str]] = (),
    skills: str = "",
    admissible: Sequence[str] = (),
    *,
    earlier_actions: Sequence[str] = (),
    untried: Sequence[str] = (),
    max_admissible: int = 60,
    max_observation_chars: int = 600,
) -> str:
    r"""Build the compact text prompt of one turn (task first, as in the calibration notes).

    Args:
        task: the current task sentence.
        observation: the engine's text this turn.
        history: earlier ``(observation, action)`` pairs of this task, oldest first (already windowed).
        skills: the library text from the observation's ``skills`` field.
        admissible: the admissible commands (empty: the section is left out).
        earlier_actions: this task's actions before ``history``, oldest first: a cheap memory of where the
            agent has been, so that a short history window does not send it round in circles.
        untried: admissible commands not yet sent in this task (empty: the section is left out), e.g. the places
            the agent has not been to yet, said outright rather than left to be inferred from ``earlier_actions``.
        max_admissible: list at most this many commands (of ``admissible`` and of ``untried`` each).
        max_observation_chars: cut each history observation to this many characters.

    Returns:
        The prompt; it ends with ``"Action:\\n"`` so that the completion starts on a token boundary.
    """
    parts = [f"Task: {task.strip()}"]
    if skills.strip():
        parts.append(f"Skills:\n{skills.strip()}")
    if earlier_actions:
        parts.append("Earlier actions: " + "; ".join(_action_line(a) for a in earlier_actions))
    if untried:  # beside the other memory of the task, away from the turn's observation and the action
        parts.append("Not tried yet: " + ", ".join(list(untried)[:max_admissible]))
    if history:
        turns = [f"{_cut(obs, max_observation_chars)}\n> {act.strip()}" for obs, act in history]
        parts.append("History:\n" + "\n".join(turns))
    parts.append(f"Observation: {observation.strip()}")
    if admissible:
        parts.append("Admissible: " + ", ".join(list(admissible)[:max_admissible]))
    return "\n".join(parts) + "\nAction:\n"


def _action_line(action: str) -> str:
    """One line for an action: a skill definition (+ calls) is shown by its last call line."""
    lines = [line.strip() for line in action.strip().split("\n") if line.strip()]
    return lines[-1] if lines else ""


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def skill_signatures(skills_text: str) -> list[tuple[str, list[str]]]:
    """``[(name, [param, ...])]`` of the program skills listed in an observation's ``skills`` text."""
    out = []
    for name, params in _SIGNATURE_RE.findall(skills_text):
        out.append((name, [p.strip() for p in params.split(",") if p.strip()]))
    return out


_STOPWORDS = frozenset("a an the some two in on at of to from with and them it its under into onto".split())


def _task_words(task: str) -> list[str]:
    """The task's content words in order (lower case, stop words dropped): the names a task gives its types."""
    return [w for w in re.findall(r"[a-z]+", task.lower()) if w not in _STOPWORDS]


def argument_options(
    task: str,
    observation: str,
    admissible: Sequence[str],
    limit: int = 64,
    entity_pattern: str = ENTITY_PATTERN,
    task_words: bool = True,
) -> list[str]:
    """Values a skill-call argument may take in constrained decoding, task-named first.

    The entities named in the task, the observation and the admissible commands (the first group of
    ``entity_pattern``, the domain's :attr:`~sage_envs.domain.Domain.entity_pattern`; by default ``word N``), their
    types (the first word), and the task's content words. Values whose words appear in the task come first; at
    most ``limit`` are offered. ``task_words`` False (a domain whose task text names no entities,
    :attr:`~sage_envs.domain.Domain.task_names_entities`) leaves the task's words out.
    """
    texts = [task, observation, *admissible]
    entity_re = re.compile(entity_pattern)
    entities = [e for text in texts for e in entity_re.findall(text.lower())]
    named = _task_words(task) if task_words else []
    values = list(dict.fromkeys([*entities, *(e.split()[0] for e in entities), *named]))
    values.sort(key=lambda v: v.split()[0] not in named)  # stable: task-named values first
    return values[:limit]


def typed_options(values: Sequence[str], param: str, task: str) -> list[str]:
    """The values of :func:`argument_options` a parameter named ``param`` takes under ``typed_arguments``.

    A value's type is its first word (``sinkbasin`` for ``sinkbasin 1``). It is kept when the task names that
    type (``place`` in "put a pen in shelf" -> ``shelf 1``, ``pen 2``) or the parameter's name is a prefix of it
    (``microwave`` -> ``microwave 1``, ``sink`` -> ``sinkbasin 1``): the name of a parameter is its type, as in
    a typed language. When nothing matches, every value is kept (a skill whose arguments the task does not name).
    """
    named, param = set(_task_words(task)), param.lower()
    typed = [v for v in values if v.split()[0] in named or v.split()[0].startswith(param)]
    return typed or list(values)


def call_stubs(skills_text: str, templates: Sequence[str] = ()) -> list[tuple[str, list[str]]]:
    r"""Openings of skill calls for constrained decoding: ``(text, parameters still to choose)``.

    One ``call NAME(`` per program skill of the library, and one ``DEFINITION\ncall NAME(`` per template (a
    full ``skill NAME(params):`` definition) whose NAME is not in the library yet. A skill without
    parameters gives the complete call ``call NAME()`` with none to choose.
    """
    signatures = skill_signatures(skills_text)
    known = {name for name, _ in signatures}
    openings = [("", name, params) for name, params in signatures]
    for template in templates:
        header = template.strip().split("\n", 1)[0]
        match = re.match(r"skill\s+([A-Za-z_][\w-]*)\(([^)]*)\)", header)
        if match and match.group(1) not in known:
            params = [p.strip() for p in match.group(2).split(",") if p.strip()]
            openings.append((template.strip() + "\n", match.group(1), params))
    return [
        (f"{head}call {name}()", []) if not params else (f"{head}call {name}(", params)
        for head, name, params in openings
    ]


# ---------------------------------------------------------------------------------------------- the policy
@dataclass
class Completion:
    """One agent turn as the policy produced it."""

    prompt_ids: list[int]
    """Prompt token ids (after the chat template, when one is used)."""
    completion_ids: list[int]
    """The policy's tokens (sampled, or the chosen candidate's), EOS included when produced."""
    logprobs: list[float]
    """``log pi(token)`` of each completion token at sampling time."""
    text: str
    """The decoded completion."""
    action: ParsedAction
    """The parsed action (``action.text`` goes to ``env.step``)."""
    allowed: list[list[int]] | None = None
    """Constrained decoding: per completion token, the token ids the constraint allowed (one id: the token was
    forced, and it stays out of the loss); None for free generation (any token)."""
    choices: list[decoding.Choice] | None = None
    """Decoded by whole options: each choice's options and the one taken (``logprobs`` are the choices'
    ``log pi(option)`` at their first tokens); None when decoded token by token."""


class LLMPolicy:
    """A causal LM acting in a chain env; see the module docstring.

    Args:
        model: any Hugging Face causal LM.
        tokenizer: its tokenizer (left padding is set here).
        history_turns: (observation, action) pairs of the current task kept in the prompt.
        earlier_actions: the task's actions before those turns listed in the prompt (at most this many).
        skill_descriptions: show each program skill's description after its signature (False: signatures
            only, a shorter prompt; guidance texts are always shown).
        max_new_tokens: generation budget per turn (free generation).
        temperature: softmax temperature of the token distribution (sampling and log-probs).
        top_p: nucleus sampling threshold in free generation (1.0 = off; log-probs ignore it).
        constrained: act by constrained decoding (an admissible command or a skill call) instead of free generation.
        skill_calls: allow ``call NAME(args)`` of library skills (constrained mode).
        skill_templates: skill definitions allowed as "define + call" actions (constrained mode); a policy
            with templates shows :data:`NO_SKILLS_YET` as its Skills section while the library is empty.
        write_skills: instead of offering the templates whole, let the policy write its own definitions token
            by token under the skill DSL's grammar, with the vocabulary of the templates (their command shapes,
            collections, name words, parameter names; :class:`~sage_agents.skill_grammar.SkillGrammar`).
        max_argument_options: values offered per skill-call argument (constrained mode).
        typed_arguments: a skill-call argument takes only the values whose type the task or the parameter's name
            names (:func:`typed_options`; constrained mode).
        entity_pattern: how the env's domain names an entity (a regex, first group; its
            :attr:`~sage_envs.domain.Domain.entity_pattern`): skill-call arguments are drawn from these names.
        task_arguments: offer the task's words as skill-call arguments and type arguments by them (the domain's
            :attr:`~sage_envs.domain.Domain.task_names_entities`); False: entity names only, typed by the
            parameter's name.
        argument_values: the values a parameter of each name takes instead of entity names (the domain's
            :attr:`~sage_envs.domain.Domain.argument_values`, e.g. ``{"how": ["chop", "slice", "dice"]}``).
        show_admissible: list the admissible commands in the prompt.
        untried_commands: list the admissible commands that start with this prefix and were not yet sent in the
            current task (``build_prompt``'s ``untried``; ALFWorld's ``"go to "``: the places not visited yet),
            whether or not ``show_admissible`` lists them all; ``""``: every command; None: no list.
        max_prompt_tokens: drop the oldest history turns until the prompt fits.
        use_chat_template: wrap the prompt as one user message; None = when the tokenizer has a template.
        option_greedy: greedy constrained decoding takes each choice's most likely option as a whole (its tokens'
            full-vocabulary log-probs summed: :func:`~sage_agents.decoding.decode_options`) instead of the most
            likely allowed token at each step. False: token by token, as every run before it.
        option_sampling: the policy is a distribution over each constrained choice's whole options, softmax of
            those scores: sampling draws options, the trainer's log-probs are the options' (and greedy decoding
            is by whole options too). False: sampling token by token.
        skip_repeated_actions: constrained decoding leaves out the commands already sent at the same observation
            in the current task, while another remains. Where the observation shows the state, such a command
            leads where it led before, and a greedy policy whose prompt barely changes would send it again and again
            (about a third of the lost ALFWorld tasks of the demo's models ended in such a cycle: docs/demo.md,
            "Cycles"); not where time passes unseen (ScienceWorld's ``wait``).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        history_turns: int = 3,
        earlier_actions: int = 20,
        skill_descriptions: bool = True,
        max_new_tokens: int = 64,
        temperature: float = 1.0,
        top_p: float = 1.0,
        constrained: bool = False,
        skill_calls: bool = True,
        skill_templates: Sequence[str] = (),
        write_skills: bool = False,
        max_argument_options: int = 64,
        typed_arguments: bool = False,
        entity_pattern: str = ENTITY_PATTERN,
        task_arguments: bool = True,
        argument_values: Mapping[str, Sequence[str]] | None = None,
        show_admissible: bool = True,
        untried_commands: str | None = None,
        max_prompt_tokens: int = 1024,
        use_chat_template: bool | None = None,
        option_greedy: bool = False,
        option_sampling: bool = False,
        skip_repeated_actions: bool = False,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.tokenizer.padding_side = "left"
        self.history_turns, self.earlier_actions, self.max_new_tokens = history_turns, earlier_actions, max_new_tokens
        self.skill_descriptions = skill_descriptions
        self.temperature, self.top_p = temperature, top_p
        self.constrained, self.skill_calls = constrained, skill_calls
        self.skill_templates, self.max_argument_options = list(skill_templates), max_argument_options
        self.grammar = SkillGrammar.from_definitions(self.skill_templates) if write_skills else None
        if write_skills and not (self.grammar.command_shapes and self.grammar.param_names):
            raise ValueError("write_skills=True needs skill_templates: the grammar takes its vocabulary from them.")
        self.typed_arguments, self.entity_pattern = typed_arguments, entity_pattern
        self.task_arguments = task_arguments
        self.argument_values = {name: list(values) for name, values in (argument_values or {}).items()}
        self.show_admissible, self.max_prompt_tokens = show_admissible, max_prompt_tokens
        self.untried_commands = untried_commands
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.use_chat_template = has_template if use_chat_template is None else use_chat_template
        self.option_sampling = option_sampling
        self.skip_repeated_actions = skip_repeated_actions
        self.option_greedy = option_greedy or option_sampling  # a policy over whole options argmaxes them too
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        self._option_ids: dict[str, tuple[int, ...]] = {}  # encode_option's memo

    @property
    def given(self) -> str:
        """What the policy is handed besides the task and observation, in words (the leaderboard's "given")."""
        if self.constrained:
            parts = ["constrained decoding: picks among the admissible commands"
                     + (" and calls of library skills" if self.skill_calls else "")]  # fmt: skip
        else:
            parts = [f"free generation (up to {self.max_new_tokens} tokens)"]
        if self.show_admissible:
            parts.append("admissible commands listed in the prompt")
        if self.untried_commands is not None:
            which = f" starting {self.untried_commands.strip()!r}" if self.untried_commands else ""
            parts.append(f"the admissible commands{which} not yet sent in the task listed in the prompt")
        if self.constrained and self.skip_repeated_actions:
            parts.append("a command already sent at the same observation in the task is not offered again")
        if self.grammar is not None:
            parts.append(f"writes skill definitions under the DSL grammar ({len(self.grammar.command_shapes)} "
                         f"command shapes read from {len(self.skill_templates)} example definitions)")  # fmt: skip
        elif self.skill_templates:
            names = [t.split("(", 1)[0].removeprefix("skill ").strip() for t in self.skill_templates]
            parts.append(f"{len(names)} skill-definition templates ({', '.join(names)})")
        return "; ".join(parts)

    # ------------------------------------------------------------------ prompts
    def prompt(self, obs: dict[str, str], history: Sequence[tuple[str, str]], admissible: Sequence[str]) -> str:
        """The rendered prompt text of one turn (chat template applied when used)."""
        history = list(history)
        untried: list[str] = []
        if self.untried_commands is not None:  # off by default: no work on the rollouts' hot path
            sent = {act.strip() for _, act in history}
            untried = [a for a in admissible if a.startswith(self.untried_commands) and a not in sent]
        split = max(0, len(history) - self.history_turns)  # history[split:] is the window shown in full
        earlier = [act for _, act in history[:split]][-self.earlier_actions :] if self.earlier_actions > 0 else []
        history = history[split:]
        admissible = admissible if self.show_admissible else ()
        skills = obs.get("skills", "")
        if not self.skill_descriptions:
            skills = _PROGRAM_LINE_RE.sub(r"\1", skills)
        if not skills.strip() and self.skill_templates:
            # A policy that may define skills says so even before it has any: otherwise its first turn looks
            # exactly like a skill-less agent's, and one model trained on both cannot tell which it is.
            skills = NO_SKILLS_YET
        while True:
            text = build_prompt(
                obs["task"], obs["observation"], history, skills, admissible, earlier_actions=earlier, untried=untried
            )
            text = self.render(text)
            if not history or len(self.tokenizer(text, add_special_tokens=False).input_ids) <= self.max_prompt_tokens:
                return text
            history = history[1:]

    def render(self, text: str) -> str:
        """Apply the chat template (one user message + generation prompt) when the policy uses one."""
        if not self.use_chat_template:
            return text
        messages = [{"role": "user", "content": text}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens added."""
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def encode_option(self, text: str) -> tuple[int, ...]:
        """:meth:`encode` of a constrained choice's option, memoised.

        The same commands and arguments are offered turn after turn (the tokenizer call was a fifth of an
        evaluation's time: ``benchmarks/eval_speed.py --compare option-memo``); the memo is emptied when it reaches
        :data:`MAX_MEMO_OPTIONS` texts, so free text (skill bodies) cannot grow it without bound.
        """
        ids = self._option_ids.get(text)
        if ids is None:
            if len(self._option_ids) >= MAX_MEMO_OPTIONS:
                self._option_ids.clear()
            ids = self._option_ids[text] = tuple(self.encode(text))
        return ids

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act_batch(
        self,
        observations: Sequence[dict[str, str]],
        infos: Sequence[dict[str, Any]],
        histories: Sequence[Sequence[tuple[str, str]]],
        *,
        greedy: bool = False,
    ) -> list[Completion]:
        """One turn for each env of a batch: build the prompts, then generate (free, or under each turn's plan)."""
        admissible = [list(info.get("admissible_commands", [])) for info in infos]
        prompts = [self.prompt(o, h, a) for o, h, a in zip(observations, histories, admissible, strict=True)]
        if not self.constrained:
            return self.generate(prompts, greedy=greedy)
        plans = []
        for obs, adm, history in zip(observations, admissible, histories, strict=True):
            values = argument_options(
                obs["task"], obs.get("observation", ""), adm, self.max_argument_options, self.entity_pattern,
                task_words=self.task_arguments,
            )  # fmt: skip
            calls, define = [], None
            naming = obs["task"] if self.task_arguments else ""  # the text whose words type the arguments

            def arguments(param: str, values: list[str] = values, naming: str = naming) -> list[str]:
                if param in self.argument_values:
                    return self.argument_values[param]
                return typed_options(values, param, naming) if self.typed_arguments else values

            if self.skill_calls:
                templates = self.skill_templates if self.grammar is None else ()
                calls = [
                    (text, [arguments(p) for p in params])
                    for text, params in call_stubs(obs.get("skills", ""), templates)
                    if values or not params
                ]
                if self.grammar is not None and values:
                    library = skill_signatures(obs.get("skills", ""))  # the skills a written body may call
                    known = [*adm, *(action for _, action in history)]  # the game's commands seen this task
                    define = lambda arguments=arguments, library=library, known=known: self.grammar.plan(  # noqa: E731
                        arguments, library, known
                    )
            commands = list(dict.fromkeys(adm))
            if self.skip_repeated_actions:
                sent = {action for seen, action in history if seen == obs.get("observation", "")}
                commands = [c for c in commands if c not in sent] or commands
            commands = commands or (["look"] if not calls and define is None else [])
            plans.append(call_plan(commands, calls, define))
        return self.generate(prompts, greedy=greedy, plans=plans, commands=admissible)

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[str],
        *,
        greedy: bool = False,
        plans: Sequence[Plan] | None = None,
        commands: Sequence[Collection[str]] | None = None,
    ) -> list[Completion]:
        """Completions of a batch of prompt texts: free, or following one constrained :data:`Plan` per prompt.

        ``commands``: each prompt's admissible commands, which parse as commands whatever their characters.
        """
        prompt_ids = [self.encode(p) for p in prompts]
        if plans is not None and (self.option_greedy if greedy else self.option_sampling):
            rows = decoding.decode_options(
                self.model, prompt_ids, plans, encode=self.encode_option, eos_id=self.eos_id, greedy=greedy,
                temperature=self.temperature,
            )  # fmt: skip
        else:
            rows = decoding.generate(
                self.model, prompt_ids, eos_id=self.eos_id, pad_id=self.pad_id, greedy=greedy,
                temperature=self.temperature, top_p=self.top_p, plans=plans, encode=self.encode_option,
                max_new_tokens=self.max_new_tokens if plans is None else MAX_CONSTRAINED_TOKENS,
            )  # fmt: skip
        results = []
        for ids, row, adm in zip(prompt_ids, rows, commands or [()] * len(rows), strict=True):
            text = row.text  # constrained: the options' own texts, whatever the tokenizer decodes them to
            if text is None:
                text = self.tokenizer.decode(row.completion_ids, skip_special_tokens=True)
            action = parse_action(text, adm)
            results.append(Completion(ids, row.completion_ids, row.logprobs, text, action, row.allowed, row.choices))
        return results


def shared_prefix_length(prompt_ids: Sequence[Sequence[int]]) -> int:
    """Tokens every prompt of a batch starts with, less one: the prefix :func:`completion_logprobs` runs once.

    At least one token of each prompt stays out of it, so that the logits predicting every completion token come
    from the rows' own forward (an empty prompt shares nothing).
    """
    first = prompt_ids[0]
    length = min(len(p) for p in prompt_ids) - 1
    for other in prompt_ids[1:]:
        length = next((i for i in range(length) if other[i] != first[i]), length)
    return max(length, 0)


def _cache_argument(model: Any) -> str | None:
    """The name the causal LM under ``model`` takes a KV cache by, or None where a prefix cannot be shared.

    None also under activation checkpointing in training: the checkpointed layers drop the cache.
    """
    inner = getattr(model, "module", model)  # DistributedDataParallel
    checkpointed = any(getattr(m, "gradient_checkpointing", False) is True for m in inner.modules())
    if checkpointed and inner.training and torch.is_grad_enabled():
        return None
    names = decoding.forward_parameters(model)
    return next((name for name in ("cache", "past_key_values") if name in names), None)


def completion_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    pad_id: int = 0,
    with_entropy: bool = False,
    allowed: Sequence[Sequence[Sequence[int]] | None] | None = None,
    share_prefix: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Differentiable ``log pi(completion token | prompt, earlier tokens)`` for a batch of rows.

    Rows are left-padded ``prompt + completion`` (position ids count real tokens only, as in generation), so
    every completion ends at the last column and the LM head runs only on the last ``T + 1`` positions
    (``logits_to_keep``, where the model takes it): prompt (environment) tokens never get logits, never reach
    the loss, and a long prompt costs no (L, V) logits tensor.

    The prompts' common prefix (:func:`shared_prefix_length`: a GRPO group's first-turn prompts are one prompt G
    times, later turns share the task) runs once, as one row whose KV cache every row then attends to: the same
    log-probs up to float error, and the same gradient (autograd sums the rows' gradients through the shared
    cache), for one prompt's compute instead of B. ``share_prefix=False``, a model that takes no cache, and
    activation checkpointing in training (which drops the cache) run every row whole.

    With ``allowed`` (a constrained row's :attr:`Completion.allowed`), a token's distribution is the softmax
    restricted to the ids its constraint allowed, the one it was sampled from (:mod:`sage_agents.decoding`); a
    forced token (one allowed id) has log-prob 0 and is left out of ``mask``.

    Returns:
        ``(logp, mask, entropy)``: (B, T) log-probs of the completion tokens, (B, T) float mask of the tokens
        that enter a loss (real and not forced), and (B, T) token entropies (or None).
    """
    device = next(model.parameters()).device
    cache_name = _cache_argument(model) if share_prefix and len(prompt_ids) > 1 else None
    shared = shared_prefix_length(prompt_ids) if cache_name else 0
    rows = [list(p[shared:]) + list(c) for p, c in zip(prompt_ids, completion_ids, strict=True)]
    width = max(len(r) for r in rows)
    tmax = max(len(c) for c in completion_ids)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)  # (B, L)
    attn = torch.zeros_like(ids)  # (B, L)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r, device=device)
        attn[i, width - len(r) :] = 1
    position_ids = shared + (attn.cumsum(-1) - 1).clamp(min=0)  # (B, L)
    keep = min(tmax + 1, width)  # the positions that predict a completion token (+1 if a prompt is empty)
    head = {"logits_to_keep": keep} if "logits_to_keep" in decoding.forward_parameters(model) else {}
    prefix = {}
    if shared:
        one = torch.tensor([list(prompt_ids[0][:shared])], device=device)  # (1, C)
        out = model(input_ids=one, use_cache=True, **({"logits_to_keep": 1} if head else {}))
        cache = getattr(out, cache_name)
        cache.batch_repeat_interleave(len(rows))  # (B, heads, C, d) per layer: each row's copy of the prefix
        prefix = {cache_name: cache}
        attn = torch.cat([attn.new_ones(len(rows), shared), attn], 1)  # (B, C + L)
    logits = model(input_ids=ids, attention_mask=attn, position_ids=position_ids, **head, **prefix).logits
    logits = logits[:, -keep:]  # (B, K) over columns width-K .. width-1 (a no-op with logits_to_keep)
    clen = torch.tensor([len(c) for c in completion_ids], device=device)  # (B,)
    steps = torch.arange(tmax, device=device)  # (T,)
    mask = (steps[None] < clen[:, None]).float()  # (B, T)
    tok_col = (width - clen[:, None] + steps[None]).clamp(max=width - 1)  # (B, T): column of each token
    pred_idx = (tok_col - 1 - (width - keep)).clamp(min=0)  # (B, T): its predicting column, in the kept block
    sel = logits.gather(1, pred_idx[..., None].expand(-1, -1, logits.shape[-1])).float() / temperature  # (B, T, V)
    drawable = decoding.allowed_mask(allowed or [None] * len(rows), sel.shape, device)  # (B, T, V)
    mask = mask * (drawable.sum(-1) > 1).float()  # a forced token (one drawable id) stays out of the loss
    logp_all = F.log_softmax(sel.masked_fill(~drawable, float("-inf")), dim=-1)  # (B, T, V)
    targets = ids.gather(1, tok_col)  # (B, T)
    logp = logp_all.gather(-1, targets[..., None]).squeeze(-1) * mask  # (B, T)
    entropy = None
    if with_entropy:
        p_logp = torch.where(drawable, logp_all.exp() * logp_all, 0.0)  # (B, T, V): 0 log 0 = 0 off the drawable ids
        entropy = -p_logp.sum(-1).detach() * mask  # (B, T)
    return logp, mask, entropy


# ---------------------------------------------------------------------------------------------- agent adapter
class PolicyAgent:
    """The policy as a plug-in agent (``act(observation, info) -> str``) for the evaluator and leaderboard.

    History is kept per slot (an env of a batch) and cleared whenever ``info["new_task"]`` is set (a reset, or the
    observation opens the next task of the chain). ``tokens_generated`` counts completion tokens, ``last_tokens``
    those of each slot in the latest call.

    Args:
        policy: the :class:`LLMPolicy`.
        greedy: act greedily (evaluation) instead of sampling.
        skill_library: the library every chain starts from (a trained SAGE agent's skill bank); the evaluator
            passes it to ``env.reset``. None = the env's own (empty per chain).
    """

    def __init__(self, policy: LLMPolicy, *, greedy: bool = True, skill_library: Any = None):
        self.policy, self.greedy, self.skill_library = policy, greedy, skill_library
        self.tokens_generated = 0
        self.last_tokens: list[int] = []
        self._histories: dict[int, list[tuple[str, str]]] = {}
        self._last: dict[int, tuple[str, str]] = {}

    @property
    def given(self) -> str:
        """What the agent is handed, in words: its policy's :attr:`LLMPolicy.given` and the starting skill bank."""
        if self.skill_library is None or not len(self.skill_library):
            return self.policy.given
        return f"{self.policy.given}; skill bank of {len(self.skill_library)} ({', '.join(self.skill_library.names())})"

    def reset(self, seed: int | None = None) -> None:
        """Start afresh: forget every slot's history; a ``seed`` reseeds torch's sampler (when not greedy)."""
        self._histories, self._last = {}, {}
        if seed is not None and not self.greedy:
            torch.manual_seed(seed)

    def act(self, observation: dict[str, str], info: dict[str, Any]) -> str:
        """The action text for ``env.step``."""
        return self.act_batch([observation], [info])[0]

    def override(self, action: str, slot: int = 0) -> None:
        """The action sent for ``slot``'s latest observation was ``action``, not the one returned (history keeps it)."""
        observation, _ = self._last[slot]
        self._last[slot] = (observation, action)

    def act_batch(
        self,
        observations: Sequence[dict[str, str]],
        infos: Sequence[dict[str, Any]],
        slots: Sequence[int] | None = None,
    ) -> list[str]:
        """One action per observation, generated as one batch.

        ``slots`` name the env each observation comes from (default ``0 .. n-1``); a slot's history follows its
        env from call to call, so envs may finish or start between calls.
        """
        slots = range(len(observations)) if slots is None else slots
        for slot, info in zip(slots, infos, strict=True):
            last = self._last.get(slot)
            if info.get("new_task", False) or last is None:
                self._histories[slot] = []
            else:
                self._histories[slot] = [*self._histories[slot], last][-64:]
        histories = [self._histories[slot] for slot in slots]
        completions = self.policy.act_batch(observations, infos, histories, greedy=self.greedy)
        for slot, obs, comp in zip(slots, observations, completions, strict=True):
            self._last[slot] = (obs["observation"], comp.action.text)
        self.last_tokens = [len(c.completion_ids) for c in completions]
        self.tokens_generated += sum(self.last_tokens)
        return [c.action.text for c in completions]


def make_policy_agent(
    model_path: str, *, greedy: bool = True, skills_path: str | None = None, **policy_kwargs: Any
) -> PolicyAgent:
    """A local Hugging Face causal LM folder (an SFT, GRPO, SAGE or ReSkill checkpoint) as a :class:`PolicyAgent`.

    Args:
        model_path: the model folder (``save_pretrained`` output, e.g. a checkpoint's ``model/``).
        greedy: act greedily.
        skills_path: a folder of SKILL.md folders every chain starts from (a checkpoint's ``skill_library/``);
            None = no starting library.
        **policy_kwargs: :class:`LLMPolicy` options (e.g. ``constrained=True``).
    """
    from sage_agents.models import load_policy
    from sage_envs.skills import SkillLibrary

    model, tokenizer = load_policy(model_path)
    model.eval()
    library = SkillLibrary.load(skills_path) if skills_path else None
    agent = PolicyAgent(LLMPolicy(model, tokenizer, **policy_kwargs), greedy=greedy, skill_library=library)
    agent.model_id = str(model_path)  # recorded as "model" in leaderboard summaries
    return agent


make_policy_agent.forwards_kwargs_to = LLMPolicy  # the registry checks agent kwargs against LLMPolicy's names
