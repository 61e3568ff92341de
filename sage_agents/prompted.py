"""Prompted agents with no weight updates: ``react`` (ReAct, no skills) and ``memory`` (workflow memory).

* ``react``: any local Hugging Face causal LM, prompted to write a short ``Think:`` line, then ``Action:``
  (ReAct, arXiv 2210.03629). It never sees the observation's ``skills`` field and never sends a skill
  definition or call. With ``constrained=True`` it scores the admissible commands only (no thought).
* ``memory``: the same policy plus a bounded memory of abstract *workflows* (Agent Workflow Memory, arXiv
  2409.07429; ExpeL, arXiv 2308.10144). After each successful task its trajectory is distilled into the task
  sentence and the command sequence with entities (``word N``) replaced by ``{objK}`` / ``{placeK}``; at each new
  task the ``top_k`` workflows most similar to the task sentence go into the prompt under ``Workflows:``.

Both are registered in the entry-point group ``sage_agents.agents`` (``make_react_agent``,
``make_memory_agent``); see docs/agents.md.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sage_agents.decoding import Plan
from sage_agents.policy import Completion, LLMPolicy, ParsedAction, PolicyAgent, build_prompt, parse_action

REACT_INSTRUCTION = (
    "Solve the task. Reply with one short line 'Think: <your reasoning>', then one line "
    "'Action: <one admissible command>'."
)
_ACTION_RE = re.compile(r"^\s*action\s*:", re.IGNORECASE | re.MULTILINE)
_THINK_RE = re.compile(r"^\s*think\s*:.*$", re.IGNORECASE | re.MULTILINE)
_ENTITY_RE = re.compile(r"\b([a-z][a-z_-]*) (\d+)\b")
_PLACE_CONTEXT_RE = re.compile(r"(?:\b(?:to|from|in|on|into|onto|with|at)|^(?:open|close))\s*$")
_PLACEHOLDER_RE = re.compile(r"\{[a-z]+\d*\}")


# ---------------------------------------------------------------------------------------------- ReAct
def parse_react(completion: str) -> ParsedAction:
    """Parse a ReAct completion: the action after the first ``Action:`` (same line or the next one).

    Without ``Action:``, ``Think:`` lines are dropped and the rest is parsed by
    :func:`~sage_agents.policy.parse_action`. Only a domain command is an action here: a skill definition or
    call is never sent (a completion that starts with one goes out behind an ``Action:`` prefix, which the env
    flags invalid), and anything unparseable is passed through unchanged for the env to flag.
    """
    match = _ACTION_RE.search(completion)
    rest = completion[match.end() :] if match else _THINK_RE.sub("", completion)
    parsed = parse_action(rest)
    if parsed.kind == "command":
        return parsed
    if completion.lstrip().startswith(("skill ", "call ")):
        return ParsedAction(f"Action: {completion.strip()}", "none")
    return ParsedAction(completion, "none")


def react_prompt(
    task: str,
    observation: str,
    history: Sequence[tuple[str, str]] = (),
    admissible: Sequence[str] = (),
    workflows: Sequence[str] = (),
    *,
    think: bool = True,
) -> str:
    """The ReAct prompt: :func:`~sage_agents.policy.build_prompt` with no skills, plus workflows and a thought.

    Args:
        task: the current task sentence.
        observation: the engine's text this turn.
        history: earlier ``(observation, action)`` pairs of this task, oldest first.
        admissible: the admissible commands (empty: the section is left out).
        workflows: rendered workflows, put under ``Workflows:`` right after the task.
        think: ask for ``Think:`` then ``Action:`` (free generation); False ends with ``Action:`` (constrained).
    """
    text = build_prompt(task, observation, history, "", admissible)
    head = f"Task: {task.strip()}"
    if workflows:
        text = head + "\nWorkflows:\n" + "\n".join(workflows) + text[len(head) :]
    if think:
        text = REACT_INSTRUCTION + "\n" + text.removesuffix("Action:\n") + "Think:"
    return text


class ReactPolicy(LLMPolicy):
    """An :class:`~sage_agents.policy.LLMPolicy` with the ReAct prompt, no skills and ReAct parsing.

    The observation's ``skills`` field is ignored; skill-call candidates and templates are refused.
    ``observation["workflows"]`` (a list of rendered workflows, set by :class:`MemoryAgent`) is shown when the
    prompt has room: the oldest history turns go first, then the least similar workflows.
    """

    def __init__(self, model: Any, tokenizer: Any, **kwargs: Any):
        if kwargs.pop("skill_calls", False) or kwargs.pop("skill_templates", ()):
            raise ValueError("the react policy has no skills: leave skill_calls and skill_templates unset.")
        super().__init__(model, tokenizer, skill_calls=False, skill_templates=(), **kwargs)

    @property
    def given(self) -> str:
        """:attr:`LLMPolicy.given` of the ReAct prompt (no skills; a thought before the action when free)."""
        prompt = "ReAct prompt (no skills)" if self.constrained else "ReAct prompt with a thought (no skills)"
        return f"{prompt}; {super().given}"

    def prompt(self, obs: dict[str, Any], history: Sequence[tuple[str, str]], admissible: Sequence[str]) -> str:
        """The rendered ReAct prompt of one turn, cut to ``max_prompt_tokens`` when it can be."""
        history = list(history)[-self.history_turns :] if self.history_turns > 0 else []
        admissible = admissible if self.show_admissible else ()
        workflows = list(obs.get("workflows") or [])
        while True:
            text = react_prompt(
                obs["task"], obs["observation"], history, admissible, workflows, think=not self.constrained
            )
            text = self.render(text)
            if not (history or workflows) or len(self.encode(text)) <= self.max_prompt_tokens:
                return text
            history, workflows = (history[1:], workflows) if history else (history, workflows[:-1])

    def act_batch(
        self,
        observations: Sequence[dict[str, Any]],
        infos: Sequence[dict[str, Any]],
        histories: Sequence[Sequence[tuple[str, str]]],
        *,
        greedy: bool = False,
    ) -> list[Completion]:
        """One turn per env, with the ``skills`` field of every observation blanked."""
        observations = [{**obs, "skills": ""} for obs in observations]
        return super().act_batch(observations, infos, histories, greedy=greedy)

    def generate(
        self,
        prompts: Sequence[str],
        *,
        greedy: bool = False,
        plans: Sequence[Plan] | None = None,
        commands: Sequence[Collection[str]] | None = None,
    ) -> list[Completion]:
        """Free generation is parsed with :func:`parse_react`; constrained decoding's action is already one."""
        completions = super().generate(prompts, greedy=greedy, plans=plans, commands=commands)
        for completion in completions if plans is None else ():
            completion.action = parse_react(completion.text)
        return completions


def make_react_agent(model_path: str | os.PathLike | None = None, *, greedy: bool = True, **kwargs: Any) -> PolicyAgent:
    """A local Hugging Face causal LM prompted ReAct-style (no weight updates).

    Args:
        model_path: a local folder written by ``save_pretrained`` (required; never downloaded).
        greedy: act greedily instead of sampling.
        **kwargs: :class:`~sage_agents.policy.LLMPolicy` options, e.g. ``constrained=True``.
    """
    from sage_agents.models import load_policy

    if not model_path:
        raise ValueError(
            "this agent needs model_path, a local Hugging Face causal LM folder (it never downloads), e.g. "
            '--agent-kwargs \'{"model_path": "runs/sft/final", "constrained": true}\'.'
        )
    model, tokenizer = load_policy(model_path)  # local folders only (local_files_only=True)
    model.eval()
    agent = PolicyAgent(ReactPolicy(model, tokenizer, **kwargs), greedy=greedy)
    agent.model_id = str(model_path)
    return agent


make_react_agent.forwards_kwargs_to = LLMPolicy  # the registry checks agent kwargs against LLMPolicy's names


# ---------------------------------------------------------------------------------------------- workflows
@dataclass
class Workflow:
    """A distilled, abstract task solution."""

    task: str
    """The task sentence with entity names replaced by their placeholders."""
    actions: list[str]
    """The command sequence with entities replaced by ``{objK}`` / ``{placeK}``."""
    task_type: str = ""
    """The env's ``task_type`` of the task it came from."""
    count: int = 1
    """How many successful tasks distilled to this same workflow."""

    def render(self) -> str:
        """The prompt text: ``* task`` then one indented command per line."""
        return "\n".join([f"* {self.task}", *(f"  {action}" for action in self.actions)])


def abstract_trajectory(task: str, actions: Sequence[str]) -> tuple[str, list[str]]:
    """Replace the entities of a trajectory (``word N``, e.g. ``apple 1``) by placeholders.

    An entity first met after ``to``/``from``/``in``/``on``/``into``/``onto``/``with``/``at`` or ``open``/``close``
    is a place (``{place1}``, ``{place2}``, ...), any other an object (``{obj1}``, ...), numbered in order of first
    appearance in the actions. In the task sentence an entity, or its bare name (``apple``), gets the
    placeholder of its first entity of that name. Unnumbered names stay as they are.
    """
    names: dict[str, str] = {}
    counts = {"obj": 0, "place": 0}

    def placeholder(match: re.Match[str], line: str) -> str:
        if match.group(0) not in names:
            role = "place" if _PLACE_CONTEXT_RE.search(line[: match.start()]) else "obj"
            counts[role] += 1
            names[match.group(0)] = f"{{{role}{counts[role]}}}"
        return names[match.group(0)]

    out = []
    for action in actions:
        line = " ".join(action.lower().split())
        out.append(_ENTITY_RE.sub(lambda m, line=line: placeholder(m, line), line))
    task = " ".join(task.lower().split())
    bare = {}
    for entity, ph in names.items():
        bare.setdefault(entity.rsplit(" ", 1)[0], ph)
    lookup = {**bare, **names}
    if lookup:
        alternatives = "|".join(re.escape(k) for k in sorted(lookup, key=len, reverse=True))
        task = re.sub(rf"\b(?:{alternatives})\b", lambda m: lookup[m.group(0)], task)
    return task, out


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", _PLACEHOLDER_RE.sub(" ", text.lower())))


def similarity(query: str, text: str) -> float:
    """Jaccard overlap of the two texts' lowercase word sets (placeholders left out); 0 when both are empty."""
    a, b = _words(query), _words(text)
    return len(a & b) / len(a | b) if a | b else 0.0


class WorkflowMemory:
    """A bounded list of :class:`Workflow`, deduplicated by abstract form, retrieved by :func:`similarity`.

    Adding a workflow whose (task, actions) is already stored raises its ``count`` and makes it the most
    recent; past ``max_size`` the workflow with the lowest count (the oldest among equals) is evicted, never the
    one just added.

    Args:
        max_size: the most workflows kept.
        max_actions: commands kept per workflow (the first ones).
    """

    def __init__(self, max_size: int = 50, max_actions: int = 30, workflows: Iterable[Workflow] = ()):
        if max_size < 1 or max_actions < 1:
            raise ValueError(f"max_size={max_size} and max_actions={max_actions} must both be >= 1.")
        self.max_size, self.max_actions = max_size, max_actions
        self.workflows: list[Workflow] = []  # oldest first
        for workflow in workflows:
            self._insert(workflow)

    def __len__(self) -> int:
        return len(self.workflows)

    def add(self, task: str, actions: Sequence[str], task_type: str = "") -> Workflow | None:
        """Distil one successful trajectory and store it; None when it holds no plain command.

        Skill definitions/calls and multi-line actions are dropped before abstraction.
        """
        commands = [a.strip() for a in actions if a.strip() and "\n" not in a.strip()]
        commands = [a for a in commands if not a.startswith(("skill ", "call "))][: self.max_actions]
        if not commands:
            return None
        abstract_task, abstract_actions = abstract_trajectory(task, commands)
        return self._insert(Workflow(abstract_task, abstract_actions, task_type))

    def _insert(self, workflow: Workflow) -> Workflow:
        for i, old in enumerate(self.workflows):
            if (old.task, old.actions) == (workflow.task, workflow.actions):
                old.count += workflow.count
                self.workflows.append(self.workflows.pop(i))
                return old
        self.workflows.append(workflow)
        if len(self.workflows) > self.max_size:
            self.workflows.remove(min(self.workflows[:-1], key=lambda w: w.count))  # min: the oldest among equals
        return workflow

    def retrieve(self, task: str, k: int = 3) -> list[Workflow]:
        """The ``k`` workflows most similar to ``task`` (score > 0; ties: higher count, then more recent)."""
        scored = [(similarity(task, w.task), w.count, i) for i, w in enumerate(self.workflows)]
        ranked = sorted((s for s in scored if s[0] > 0), reverse=True)
        return [self.workflows[i] for _, _, i in ranked[:k]]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (read back by :meth:`from_dict`)."""
        return {"max_size": self.max_size, "max_actions": self.max_actions,
                "workflows": [asdict(w) for w in self.workflows]}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkflowMemory:
        """Rebuild a memory from :meth:`to_dict` output (only the known fields are read)."""
        workflows = [
            Workflow(
                str(w["task"]), [str(a) for a in w["actions"]], str(w.get("task_type", "")), int(w.get("count", 1))
            )
            for w in data.get("workflows", [])
        ]
        return cls(int(data.get("max_size", 50)), int(data.get("max_actions", 30)), workflows)

    def save(self, path: str | os.PathLike) -> None:
        """Write the memory as JSON (atomically)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> WorkflowMemory:
        """Read a memory written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text()))


# ---------------------------------------------------------------------------------------------- memory agent
@dataclass
class _Slot:
    """What the memory agent tracks for one env of a batch."""

    task: str = ""
    actions: list[str] = field(default_factory=list)
    pending: str | None = None
    workflows: list[str] = field(default_factory=list)


class MemoryAgent:
    """Workflow memory around a prompted policy agent; learns online from its own successes.

    Each ``act`` first *observes* the transition its ``info`` reports: the last action is kept if the env found
    it valid; when ``info["task_success"]`` the task's kept actions are distilled into the memory (``learn``);
    when a task starts (``info["new_task"]``) the ``top_k`` workflows for its sentence are retrieved and shown in
    every prompt of that task. The evaluator never calls ``act`` after the last step of a chain, so online
    learning there misses the last task of each chain; :meth:`train` sees every task end.

    Args:
        agent: the policy agent (e.g. from :func:`make_react_agent`); observations reach it with a
            ``workflows`` list added.
        memory: the workflow memory.
        top_k: workflows retrieved per task.
        learn: distil successful tasks into the memory (False: a frozen memory).
        memory_path: JSON file that :meth:`save` and the end of :meth:`train` write.
    """

    def __init__(
        self,
        agent: PolicyAgent,
        memory: WorkflowMemory,
        *,
        top_k: int = 3,
        learn: bool = True,
        memory_path: str | os.PathLike | None = None,
    ):
        self.agent, self.memory, self.top_k, self.learn = agent, memory, top_k, learn
        self.memory_path = memory_path
        self.model_id = getattr(agent, "model_id", "memory")
        self._slots: dict[int, _Slot] = {}

    @property
    def given(self) -> str:
        """What the agent is handed, in words: the wrapped agent's, plus the retrieved workflows."""
        learning = "learned online from its successes" if self.learn else "frozen"
        return f"{self.agent.given}; top {self.top_k} workflows from a memory {learning}"

    @property
    def tokens_generated(self) -> int:
        """Completion tokens generated so far (read by the evaluator)."""
        return self.agent.tokens_generated

    @property
    def last_tokens(self) -> list[int]:
        """Completion tokens of each slot in the latest ``act_batch`` (read by the batched evaluator)."""
        return getattr(self.agent, "last_tokens", [])

    def reset(self, seed: int | None = None) -> None:
        """Start a chain: forget the per-env state (the memory stays)."""
        self.agent.reset(seed=seed)
        self._slots = {}

    def observe(self, observation: dict[str, Any], info: dict[str, Any], slot: int = 0) -> None:
        """Update from one transition (also for the final step of a chain, which ``act`` never sees)."""
        state = self._slots.setdefault(slot, _Slot())
        if state.pending is not None and info.get("action_valid", True):
            state.actions.append(state.pending)
        state.pending = None
        ended = bool(info.get("task_success") or info.get("new_task"))
        if info.get("task_success") and self.learn and state.task:
            self.memory.add(state.task, state.actions, str(info.get("task_type", "")))
        if ended:
            state.task, state.actions = "", []
        if info.get("new_task") or not (state.task or ended):
            state.task = observation["task"]
            state.workflows = [w.render() for w in self.memory.retrieve(state.task, self.top_k)]

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> str:
        """The action text for ``env.step``."""
        return self.act_batch([observation], [info])[0]

    def act_batch(
        self,
        observations: Sequence[dict[str, Any]],
        infos: Sequence[dict[str, Any]],
        slots: Sequence[int] | None = None,
    ) -> list[str]:
        """One action per observation; ``slots`` name the env of each (default ``0 .. n-1``, see PolicyAgent)."""
        slots = range(len(observations)) if slots is None else slots
        for slot, obs, info in zip(slots, observations, infos, strict=True):
            self.observe(obs, info, slot)
        shown = [{**obs, "workflows": self._slots[s].workflows} for s, obs in zip(slots, observations, strict=True)]
        actions = self.agent.act_batch(shown, infos, slots=slots)
        for slot, action in zip(slots, actions, strict=True):
            self._slots[slot].pending = action
        return actions

    def train(
        self, env: Any, num_chains: int | None = None, seeds: Sequence[int] = (0,), teacher: Any = None
    ) -> dict[str, int]:
        """Fill the memory by playing chains ``0 .. num_chains-1`` of ``env`` once per seed (AWM offline).

        Args:
            env: a chain env (``reset(options={"chain": i})``), e.g. on the train split.
            num_chains: chains per seed; None = all of the split.
            seeds: episode seeds.
            teacher: an agent that acts instead of this one (e.g. ``make_agent("expert", use_skills=False)``);
                its successful tasks are distilled. None = this agent acts and learns from its own successes.

        Returns:
            ``{"tasks", "successes", "workflows"}``; the memory is saved to ``memory_path`` when set. It learns
            here even when ``learn`` is False (that switch only freezes the memory while acting).
        """
        total = env.unwrapped.num_chains if num_chains is None else min(num_chains, env.unwrapped.num_chains)
        learn, self.learn = self.learn, True
        tasks = successes = 0
        for seed in seeds:
            for chain in range(total):
                obs, info = env.reset(seed=seed, options={"chain": chain})
                self.reset(seed=seed * 1_000_003 + chain)
                if teacher is not None and hasattr(teacher, "reset"):
                    teacher.reset()
                done = False
                while not done:
                    if teacher is None:
                        action = self.act(obs, info)
                    else:
                        self.observe(obs, info)
                        action = self._slots[0].pending = teacher.act(obs, info)
                    obs, _, terminated, truncated, info = env.step(action)
                    done = terminated or truncated
                    tasks += bool(info.get("new_task") or terminated)
                    successes += bool(info.get("task_success"))
                self.observe(obs, info)
        self.learn = learn
        if self.memory_path:
            self.save()
        return {"tasks": tasks, "successes": successes, "workflows": len(self.memory)}

    def save(self, path: str | os.PathLike | None = None) -> None:
        """Write the memory as JSON to ``path`` (default: ``memory_path``)."""
        path = path or self.memory_path
        if not path:
            raise ValueError("no path: pass save(path) or build the agent with memory_path.")
        self.memory.save(path)


def make_memory_agent(
    model_path: str | os.PathLike | None = None,
    *,
    memory_path: str | os.PathLike | None = None,
    top_k: int = 3,
    max_workflows: int = 50,
    learn: bool = True,
    greedy: bool = True,
    **kwargs: Any,
) -> MemoryAgent:
    """The ReAct agent plus a memory of workflows from completed tasks, shown in later prompts.

    Args:
        model_path: a local HF causal LM folder (required; never downloaded).
        memory_path: JSON memory file, loaded when it exists (and written by ``save``/``train``).
        top_k: workflows retrieved per task.
        max_workflows: memory size bound (for a new memory).
        learn: distil successful tasks online.
        greedy: act greedily instead of sampling.
        **kwargs: :class:`~sage_agents.policy.LLMPolicy` options, e.g. ``constrained=True``.
    """
    agent = make_react_agent(model_path, greedy=greedy, **kwargs)
    if memory_path and Path(memory_path).exists():
        memory = WorkflowMemory.load(memory_path)
    else:
        memory = WorkflowMemory(max_workflows)
    return MemoryAgent(agent, memory, top_k=top_k, learn=learn, memory_path=memory_path)


make_memory_agent.forwards_kwargs_to = make_react_agent  # its **kwargs go on to make_react_agent
