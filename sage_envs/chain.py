"""The task-chain environment: one Gymnasium episode = a chain of related tasks sharing a skill library."""

from __future__ import annotations

import numbers
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from sage_envs.domain import Domain, StepResult, TaskGame, TaskSpec
from sage_envs.error import InvalidConfigError, ResetNeededError, SkillError, SkillLimitError, suggest
from sage_envs.skills import Limits, Skill, SkillLibrary, parse_call, parse_definition, run_calls

SKILL_MODES = ("program", "guidance", "both", "none")
LIBRARY_SCOPES = ("chain", "persistent")
ACTION_KINDS = ("command", "define", "call", "invalid")

# Text spaces with a printable charset: Gymnasium's default is alphanumeric only, which rejects "fridge 1.".
CHARSET = frozenset(string.printable)
MAX_OBSERVATION_CHARS = 16_384
MAX_TASK_CHARS = 1_024
MAX_SKILLS_CHARS = 16_384
MAX_ACTION_CHARS = 8_192
MAX_MESSAGE_CHARS = 1_024
"""Longest ``info["message"]`` kept whole; a longer one (e.g. echoing a huge action) keeps this many characters
followed by `` [... N characters cut]``."""
TRUNCATION_MARK = "\n[...]"
_SHOWN_KINDS = {"program": ("program",), "guidance": ("guidance",), "both": ("program", "guidance"), "none": ()}
"""Skill kinds the observation's ``skills`` field shows, per ``skills`` mode."""


def _fit(text: str, max_chars: int) -> str:
    """Map ``text`` into a Text space: drop characters outside the charset, cut to ``max_chars``."""
    # isascii() + isprintable() (both C loops) prove the common case cheaply: ASCII 0x20-0x7e is inside CHARSET.
    if not (text.isascii() and text.isprintable()) and not CHARSET.issuperset(text):
        text = "".join(ch if ch in CHARSET else "?" for ch in text)
    return truncate(text, max_chars)


def truncate(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, the cut marked with :data:`TRUNCATION_MARK`."""
    return text if len(text) <= max_chars else text[: max_chars - len(TRUNCATION_MARK)] + TRUNCATION_MARK


def _cap_message(message: str) -> str:
    """Cut ``message`` to ``MAX_MESSAGE_CHARS`` characters, saying how many were cut."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]} [... {len(message) - MAX_MESSAGE_CHARS} characters cut]"


class SageChainEnv(gym.Env):
    """A chain of ``chain_length`` related tasks played in one episode, with a skill library the agent grows.

    ## Description
    Each episode plays one chain: tasks from one scenario (an ALFWorld household), one after another. The agent may
    define program skills in the project's DSL and call them later in the chain, as in SAGE (arXiv 2512.17102), and
    sees guidance skills whose trigger fires, as in ReSkill (arXiv 2606.01619). Domains are plug-ins
    (:class:`sage_envs.domain.Domain`); this class never looks inside one.

    ## Action Space
    ``spaces.Text`` (printable, up to 8192 characters). One action is one agent turn:

    1. a domain command, e.g. ``go to countertop 1``;
    2. a skill definition ``skill NAME(params):`` with an indented body, optionally followed by ``call`` lines;
    3. a skill call ``call NAME(arg, arg)``.

    Anything else is an invalid action: flagged in ``info``, never an exception. So is an action that is not a
    ``str`` (bytes, None, a number): it is never converted with ``str()``, and it spends a turn like any invalid
    action. ``step`` after the chain terminated (or before ``reset``) raises
    :class:`~sage_envs.error.ResetNeededError`: call ``reset()`` to play the next chain.

    ## Observation Space
    ``spaces.Dict`` of printable ``spaces.Text``: ``observation`` (the engine's text this turn; for a call, one
    ``> command`` line and its feedback per executed command), ``task`` (current task sentence) and ``skills``
    (program skills as signatures + descriptions, triggered guidance skills with their text).

    ## Rewards
    1.0 on the step a task is completed, else 0.0 (outcome reward). A domain that scores its tasks
    (:attr:`Domain.scored <sage_envs.domain.Domain.scored>`) reports the score in ``info["task_score"]``; the
    reward stays the outcome.

    ## Starting State
    ``reset(options={"chain": i})`` plays chain ``i`` of the split (an int or a numpy integer, not a bool);
    without it a chain is drawn from ``self.np_random``. ``options={"skill_library": lib}`` starts from a given
    :class:`SkillLibrary`.

    ## Episode End
    ``terminated`` when the last task of the chain ends: won, lost (the domain's game says the task can no longer
    be won), or out of its ``max_steps_per_task`` turns. A lost task or one that runs out fails and the chain
    moves on to its next task. ``truncated`` is never set by the env itself.

    ## Skills
    ``skills="program"`` allows definitions and calls, ``"guidance"`` shows triggered guidance skills only,
    ``"both"`` does both and ``"none"`` disables skills (definitions and calls are invalid actions).
    ``library_scope="chain"`` empties the library at each reset (SAGE training); ``"persistent"`` carries it over.
    A skill's ``uses`` counts its calls (program) or the observations that showed it (guidance).

    ## Info
    Every step (and reset) returns: ``task_index`` (the task this step's action was applied to), ``chain_length``,
    ``task_type``, ``task_success`` (that task was won on this step), ``chain_successes``, ``action_valid``,
    ``action_kind``, ``message`` (why an action was invalid, else ""; at most ``MAX_MESSAGE_CHARS`` = 1024
    characters, then `` [... N characters cut]``), ``admissible_commands`` (for the task the *next* action goes to),
    ``primitive_steps``, ``skills_used``, ``skills_created``, ``skill_library``, ``skill_reuse``. Extra keys:
    ``new_task`` (the returned observation opens the next task), ``task_id``, ``turn`` (turns used in the current
    task), ``previous_observation`` (the feedback that ended the previous task when ``new_task``, else "") and
    ``task_lost`` (that task was lost on this step). ``task_score`` (float: the latest score the domain reported
    for the ``task_index`` task, 0.0 before any) is added for a domain that scores its tasks; ``expert_plan`` when
    the env is made with ``expert_plan=True``.

    The admissible commands are read from the game once per game state: the list ``info`` reports after a step
    is the one the next command is checked against (a Java-bridged engine pays one call per turn, not two).

    ## Arguments
    See :meth:`__init__`.

    ## Version History
    * v0: initial release.
    """

    # Text has no frame rate; Gymnasium's checker asks for one, and its toy-text envs declare 4.
    metadata = {"render_modes": ["ansi"], "render_fps": 4}
    domain_class: type[Domain] | None = None
    """The domain a registered subclass plays (:func:`sage_envs.registration.domain_class` reads it)."""

    def __init__(
        self,
        domain: Domain | Callable[[], Domain],
        chain_length: int = 2,
        split: str = "train",
        max_steps_per_task: int = 50,
        skills: str = "program",
        library_scope: str = "chain",
        expert_plan: bool = False,
        limits: Limits | None = None,
        max_library_size: int = 64,
        render_mode: str | None = None,
    ):
        """Create a chain env.

        Args:
            domain: the domain plug-in, or a zero-argument factory of one.
            chain_length: tasks per chain (SAGE uses 2).
            split: one of the domain's :attr:`~sage_envs.domain.Domain.splits` (ALFWorld: ``train``,
                ``valid_seen``, ``valid_unseen``).
            max_steps_per_task: agent turns allowed per task (a skill call is one turn).
            skills: ``program``, ``guidance``, ``both`` or ``none``.
            library_scope: ``chain`` (empty library at each reset) or ``persistent`` (kept across resets).
            expert_plan: add ``info["expert_plan"]``, the expert's next commands from the current state.
            limits: hard limits of the skill DSL (statements, steps and loop iterations per turn, call depth, size).
            max_library_size: the most skills the library may hold.
            render_mode: ``None`` or ``"ansi"``.
        """
        _check_choice("skills", skills, SKILL_MODES)
        _check_choice("library_scope", library_scope, LIBRARY_SCOPES)
        for name, value in (("chain_length", chain_length), ("max_steps_per_task", max_steps_per_task)):
            if not isinstance(value, int) or value < 1:
                raise InvalidConfigError(f"{name}={value!r} must be a positive integer.")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise InvalidConfigError(f"render_mode={render_mode!r}; use None or 'ansi'.")

        self.domain = domain() if callable(domain) and not isinstance(domain, Domain) else domain
        if split not in self.domain.splits:
            raise InvalidConfigError(
                f"split={split!r} is not a split of domain {self.domain.name!r}; use one of "
                f"{self.domain.splits}.{suggest(str(split), self.domain.splits)}"
            )
        self.chain_length = chain_length
        self.split = split
        self.max_steps_per_task = max_steps_per_task
        self.skills_mode = skills
        self.library_scope = library_scope
        self.expert_plan = expert_plan
        self.limits = limits or Limits()
        self.max_library_size = max_library_size
        self.render_mode = render_mode

        self.chains: list[tuple[TaskSpec, ...]] = self.domain.chains(split, chain_length)
        if not self.chains:
            raise InvalidConfigError(f"domain {self.domain.name!r} has no chains for split={split!r}.")

        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Text(MAX_OBSERVATION_CHARS, min_length=0, charset=CHARSET),
                "task": spaces.Text(MAX_TASK_CHARS, min_length=0, charset=CHARSET),
                "skills": spaces.Text(MAX_SKILLS_CHARS, min_length=0, charset=CHARSET),
            }
        )
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=CHARSET)

        self.library = SkillLibrary(max_size=max_library_size)
        self._chain_counter = -1
        self._terminated = False
        self._chain: tuple[TaskSpec, ...] = ()
        self._game: TaskGame | None = None
        self._admissible: list[str] | None = None  # the game's admissible commands in its current state, once read
        self._score = 0.0  # the latest score the domain reported for the current task
        self._observation = ""
        # The task and skills fields of the observation change rarely: each is fitted again only when it changes.
        self._task_raw: str | None = None
        self._task_text = ""
        self._skills_raw = ""
        self._skills_text = ""

    # ------------------------------------------------------------------ public properties
    @property
    def num_chains(self) -> int:
        """How many chains the split has; ``reset(options={"chain": i})`` takes ``0 <= i < num_chains``."""
        return len(self.chains)

    @property
    def tasks(self) -> list[str]:
        """The split's task ids, in the order the chains cover them."""
        return [task.task_id for chain in self.chains for task in chain]

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None):
        """Start a chain; see the class docstring for ``options``."""
        super().reset(seed=seed)
        options = dict(options or {})
        unknown = set(options) - {"chain", "skill_library"}
        if unknown:
            raise InvalidConfigError(f"unknown reset options {sorted(unknown)}; use 'chain' and 'skill_library'.")

        if "chain" in options:
            index = options["chain"]
            # numbers.Integral takes Python and numpy integers; bool is one too, but True as a chain is a bug.
            if isinstance(index, bool) or not isinstance(index, numbers.Integral):
                raise InvalidConfigError(
                    f"options['chain']={index!r} is a {type(index).__name__}; pass the chain index as an int "
                    f"in [0, {self.num_chains})."
                )
            index = int(index)
            if not 0 <= index < self.num_chains:
                raise InvalidConfigError(f"options['chain']={index!r} must be an int in [0, {self.num_chains}).")
        else:
            index = int(self.np_random.integers(self.num_chains))
        if "skill_library" in options:
            library = options["skill_library"]
            if not isinstance(library, SkillLibrary):
                raise InvalidConfigError(
                    f"options['skill_library'] is a {type(library).__name__}; pass a sage_envs.SkillLibrary "
                    "(SkillLibrary.from_dict / SkillLibrary.load build one)."
                )
            self.library = library.copy()
        elif self.library_scope == "chain":
            self.library = SkillLibrary(max_size=self.max_library_size)

        self._chain_counter += 1
        self._chain_index = index
        self._chain = self.chains[index]
        self._chain_successes: list[bool] = []
        self._terminated = False
        self._start_task(0)
        obs = self._obs(record_uses=True)  # before info, so that its skill_library counts this observation
        info = self._info(action_kind="command", action_valid=True, message="", new_task=True)
        return obs, info

    def step(self, action: str):
        """Play one agent turn; see the class docstring for the action forms.

        Raises:
            ResetNeededError: the chain has terminated, or ``reset()`` was not called since creation or ``close()``.
        """
        if self._game is None:
            raise ResetNeededError("step() was called before reset() (or after close()); call env.reset() first.")
        if self._terminated:
            raise ResetNeededError(
                "step() was called after the chain terminated; call env.reset() to start the next chain."
            )
        self._turn += 1
        if isinstance(action, str):
            outcome = self._dispatch(action.strip("\n"))
            self._last_action = action
        else:  # str() would turn None or b"look" into a command-like text the agent never wrote
            outcome = self._invalid(f"an action must be a str, got {type(action).__name__}; send the action text.")
            self._last_action = ""
        task_index, won = self._task_index, outcome.won
        score = self._score

        reward = 1.0 if won else 0.0
        new_task = won or outcome.lost or self._turn >= self.max_steps_per_task
        previous_observation = ""
        terminated = False
        if new_task:
            self._chain_successes.append(won)
            if task_index + 1 < len(self._chain):
                previous_observation = outcome.observation
                self._start_task(task_index + 1)
            else:
                terminated = self._terminated = True
                self._observation = outcome.observation
        else:
            self._observation = outcome.observation

        obs = self._obs(record_uses=True)  # before info, so that its skill_library counts this observation
        info = self._info(
            action_kind=outcome.kind,
            action_valid=outcome.valid,
            message=_cap_message(outcome.message),
            new_task=new_task and not terminated,
            task_index=task_index,
            task_success=won,
            task_lost=outcome.lost,
            task_score=score,
            primitive_steps=outcome.primitive_steps,
            skills_used=outcome.skills_used,
            skills_created=outcome.skills_created,
            previous_observation=previous_observation,
        )
        return obs, reward, terminated, False, info

    def render(self) -> str | None:
        """Return the current observation as text (``render_mode="ansi"``)."""
        if self.render_mode != "ansi":
            return None
        obs = self._obs()
        return f"Task: {obs['task']}\n{obs['skills']}\n{obs['observation']}"

    def close(self) -> None:
        """Close the running game and the domain."""
        if self._game is not None:
            self._game.close()
            self._game = None
        self.domain.close()

    # ------------------------------------------------------------------ internals
    def _start_task(self, task_index: int) -> None:
        if self._game is not None:
            self._game.close()
        self._task_index = task_index
        self._task = self._chain[task_index]
        self._game = self.domain.load(self._task)
        self._observation = self._game.reset()
        self._admissible = None
        self._score = 0.0
        self._turn = 0
        self._last_action: str | None = None

    def _dispatch(self, action: str) -> _Outcome:
        """Route an action to the command / define / call handler; every failure becomes an invalid outcome."""
        head = action.lstrip()
        if head.startswith("skill ") or head.startswith("call "):
            if self.skills_mode not in ("program", "both"):
                return self._invalid(
                    f"program skills are disabled in this env (skills={self.skills_mode!r}); send a command."
                )
            try:
                return self._define(head) if head.startswith("skill ") else self._call(*parse_call(head))
            except SkillError as error:
                return self._invalid(str(error))
        command = action.strip()
        if "\n" in command:
            return self._invalid("one command per turn: only skill definitions may span several lines.")
        return self._command(command)

    def _admissible_commands(self) -> list[str]:
        """The game's admissible commands in its current state, read from the game once per state."""
        if self._admissible is None:
            self._admissible = self._game.admissible_commands()
        return self._admissible

    def _step_game(self, command: str) -> StepResult:
        """One primitive command on the game; the state changes, so its admissible list is read again."""
        result = self._game.step(command)
        self._admissible = None
        if result.score is not None:
            self._score = float(result.score)
        return result

    def _command(self, command: str) -> _Outcome:
        admissible = command in self._admissible_commands()
        result = self._step_game(command)
        if admissible or result.parsed:
            return _Outcome(result.observation, result.won, "command", True, "", 1, lost=result.lost)
        message = f"{command!r} is not an admissible command" + (
            "." if result.parsed is None else " and the game's parser does not read it."
        )
        return _Outcome(result.observation, result.won, "invalid", False, message, 1, lost=result.lost)

    def _define(self, text: str) -> _Outcome:
        """Store a definition; with trailing calls, store it only when they all ran without an error."""
        skill, calls = parse_definition(text, self.limits)
        skill.created_in_task = self._task_index
        skill.created_in_chain = self._chain_counter
        skill.provenance.setdefault("task_id", self._task.task_id)
        if not calls:
            stored = self.library.add(skill)
            observation = f"Defined skill {stored.signature} (version {stored.version})."
            return _Outcome(observation, False, "define", True, "", 0, skills_created=[stored.name])
        if skill.name not in self.library and len(self.library) >= self.library.max_size:
            raise SkillLimitError(
                f"the skill library is full ({self.library.max_size} skills) and {skill.name!r} is a new name, "
                "so its calls were not run; redefine an existing skill instead."
            )
        # The calls try the definition before it is stored (SAGE's create: define, call, save on success).
        outcome = self._run_calls(calls, pending=skill)
        if not outcome.valid:
            outcome.observation = f"Skill {skill.signature} was not stored: a call failed.\n{outcome.observation}"
            # Not stored, so its runs are no use of a library skill (of an older version, say).
            outcome.skills_used = [name for name in outcome.skills_used if name != skill.name]
            return outcome
        stored = self.library.add(skill)
        outcome.observation = f"Defined skill {stored.signature} (version {stored.version}).\n{outcome.observation}"
        outcome.kind = "define"
        outcome.skills_created = [stored.name]
        return outcome

    def _call(self, name: str, args: list[str]) -> _Outcome:
        return self._run_calls([(name, args)])

    def _run_calls(self, calls: list[tuple[str, list[str]]], pending: Skill | None = None) -> _Outcome:
        """Run one turn's calls under one budget; an error or a win stops the turn."""
        result = run_calls(
            self.library,
            calls,
            execute=self._execute,
            entities=self._game.entities,
            limits=self.limits,
            pending=pending,
        )
        lines = [f"> {command}\n{feedback}" for command, feedback in result.trace]
        steps, used = result.primitive_steps, result.skills_called
        # The interpreter stops exactly when a primitive step ended the task: the last step says how.
        won = result.done and self._last_step.won
        lost = result.done and self._last_step.lost
        if result.error is not None:
            lines.append(f"Skill error: {result.error}")
            return _Outcome("\n".join(lines), won, "invalid", False, result.error, steps, used, lost=lost)
        return _Outcome("\n".join(lines), won, "call", True, "", steps, skills_used=used, lost=lost)

    def _execute(self, command: str) -> tuple[str, bool]:
        """Run one primitive command of a skill program; the task ending (won or lost) stops the program."""
        self._last_step = self._step_game(command)
        return self._last_step.observation, self._last_step.done

    def _invalid(self, message: str) -> _Outcome:
        return _Outcome(f"Invalid action: {message}", False, "invalid", False, message, 0)

    def _obs(self, record_uses: bool = False) -> dict[str, str]:
        """Build the observation; ``record_uses`` counts a use of each guidance skill it shows (once per turn)."""
        description = self._game.description
        if description is not self._task_raw:
            self._task_raw, self._task_text = description, _fit(description, MAX_TASK_CHARS)
        kinds = _SHOWN_KINDS[self.skills_mode]
        skills_text = ""
        if kinds and len(self.library):  # an empty library renders as ""
            raw = self.library.render(
                turn=self._turn, last_action=self._last_action, kinds=kinds, record_uses=record_uses
            )
            if raw != self._skills_raw:  # the library caches its text, so this is mostly an identity check
                self._skills_raw, self._skills_text = raw, _fit(raw, MAX_SKILLS_CHARS)
            skills_text = self._skills_text
        return {
            "observation": _fit(self._observation, MAX_OBSERVATION_CHARS),
            "task": self._task_text,
            "skills": skills_text,
        }

    def _info(
        self,
        *,
        action_kind: str,
        action_valid: bool,
        message: str,
        new_task: bool,
        task_index: int | None = None,
        task_success: bool = False,
        task_lost: bool = False,
        task_score: float | None = None,
        primitive_steps: int = 0,
        skills_used: list[str] | None = None,
        skills_created: list[str] | None = None,
        previous_observation: str = "",
    ) -> dict[str, Any]:
        task_index = self._task_index if task_index is None else task_index
        library = self.library
        reuse: list[str] = []
        if skills_used:
            skills_used = list(dict.fromkeys(skills_used))
            for name in skills_used:
                if name in library:
                    library.record_use(name)
            reuse = [
                name
                for name in skills_used
                if name in library
                and library.get(name).created_in_chain == self._chain_counter
                and (library.get(name).created_in_task or 0) < task_index
            ]
        else:
            skills_used = []
        task = self._chain[task_index]
        info = {
            "task_index": task_index,
            "chain_length": len(self._chain),
            "task_type": task.task_type,
            "task_id": task.task_id,
            "task_success": task_success,
            "chain_successes": list(self._chain_successes),
            "action_valid": action_valid,
            "action_kind": action_kind,
            "message": message,
            "admissible_commands": list(self._admissible_commands()),
            "primitive_steps": primitive_steps,
            "skills_used": skills_used,
            "skills_created": list(skills_created) if skills_created else [],
            "skill_library": [
                {
                    "name": s.name,
                    "kind": s.kind,
                    "version": s.version,
                    "created_in_task": s.created_in_task,
                    "uses": s.uses,
                }
                for s in library
            ]
            if len(library)
            else [],
            "skill_reuse": reuse,
            "new_task": new_task,
            "turn": self._turn,
            "previous_observation": previous_observation,
            "task_lost": task_lost,
        }
        if self.domain.scored:  # the task_index task's score: the one that just ended when the chain moved on
            info["task_score"] = self._score if task_score is None else task_score
        if self.expert_plan:
            info["expert_plan"] = list(self._game.expert_plan())
        return info


@dataclass(slots=True)
class _Outcome:
    """What one agent turn produced, before it becomes (obs, reward, terminated, truncated, info)."""

    observation: str
    won: bool
    kind: str
    valid: bool
    message: str
    primitive_steps: int
    skills_used: list[str] = field(default_factory=list)
    skills_created: list[str] = field(default_factory=list)
    lost: bool = False


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InvalidConfigError(f"{name}={value!r} is not one of {choices}.")
