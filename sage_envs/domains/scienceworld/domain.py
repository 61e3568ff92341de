"""The ScienceWorld domain plug-in: the ``scienceworld`` package's 30 task families, their official variation splits.

One ScienceWorld simulator (a JVM reached over py4j) is started per domain instance, lazily, and reused by every
task the domain loads: starting a JVM costs seconds, loading a task a fraction of one. A chain is ``chain_length``
consecutive variations of one task family within a split (ReSkill's ScienceWorld setting: related tasks of one
family); the chain list interleaves the families, so the first chains of a split span them all.

The expert (:class:`ScienceWorldExpert`) replays ScienceWorld's gold action sequence of each variation. Generating
one takes the simulator from under a second to ~35 s (the Mendelian genetics tasks), so gold sequences are
cached on disk, each generated on a simulator started for it (:func:`gold_sequence`), as are the split's variation
lists (listing them loads all 30 families).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sage_envs.domain import Domain, StepResult, TaskGame, TaskSpec
from sage_envs.domains.plan_expert import PlanExpert
from sage_envs.error import DataNotFoundError, InvalidConfigError, suggest

SPLITS = ("train", "dev", "test")
"""ScienceWorld's variation splits (``get_variations_train/dev/test`` of each task family)."""
DEFAULT_MAX_STEPS_PER_TASK = 200
"""Turns per task: the longest gold sequences (Mendelian genetics) take ~150 commands, ambiguity answers included."""
CACHE_ENV_VAR = "SAGE_CACHE_DIR"
DEFAULT_CACHE_DIR = "~/.cache/sage_envs"
CACHE_SUBDIR = "scienceworld"
ENV_STEP_LIMIT = 10**9
"""ScienceWorld's own step limit, set out of reach: the chain env's ``max_steps_per_task`` bounds a task."""
UNKNOWN_INPUT = "No known action matches that input."
"""ScienceWorld's reply to a command its parser does not read: the state (and its valid actions) is unchanged."""
JAVA_FIX = "install a Java runtime (Debian/Ubuntu: `apt-get install default-jre-headless`; `make java` does it)"
JVM_OPTIONS = "-XX:+UnlockExperimentalVMOptions -XX:hashCode=2"
"""Options of the simulator's JVM: every object's identity hash is the same constant. ScienceWorld keeps a room's and
a container's objects in hash sets, which list them (in observations, in ambiguity prompts, in gold sequences' answers
to them) in identity-hash order, and HotSpot's default hashes vary between JVMs and with what a JVM ran before: the
same variation then read differently (and an ambiguity answer picked another object) after other chains. With one
constant hash, a set lists its objects in the order they were added, which only the variation and the commands
decide (benchmarks/scienceworld_determinism.py measures both effects and the cost)."""
PACKAGE_FIX = "install it with `pip install scienceworld` (or the project's extra: `pip install -e '.[sciworld]'`)"


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<cache>/scienceworld``: ``<cache>`` is ``cache_dir``, else ``$SAGE_CACHE_DIR``, else ``~/.cache/sage_envs``."""
    base = cache_dir if cache_dir is not None else os.environ.get(CACHE_ENV_VAR, DEFAULT_CACHE_DIR)
    return Path(base).expanduser() / CACHE_SUBDIR


_LAUNCH = threading.Lock()
"""Held while a JVM is launched with :data:`JVM_OPTIONS` in the environment."""


def start_simulator(jvm_options: str = JVM_OPTIONS) -> Any:
    """Start one ScienceWorld simulator (a ``scienceworld.ScienceWorldEnv``, a JVM of its own).

    ``scienceworld`` launches its JVM without options; ``jvm_options`` reach it through ``JAVA_TOOL_OPTIONS``
    (after any the user set), set for the launch only.

    Raises:
        DataNotFoundError: the ``scienceworld`` package or a Java runtime is missing (the message names the fix).
    """
    try:
        from scienceworld import ScienceWorldEnv
    except ImportError as error:
        raise DataNotFoundError(f"SageChain-ScienceWorld-v0 needs the scienceworld package: {PACKAGE_FIX}.") from error
    if shutil.which("java") is None:  # py4j would fail with a bare FileNotFoundError
        raise DataNotFoundError(f"ScienceWorld's simulator runs on Java and no `java` is on PATH: {JAVA_FIX}.")
    with _LAUNCH:
        user_options = os.environ.get("JAVA_TOOL_OPTIONS")
        os.environ["JAVA_TOOL_OPTIONS"] = " ".join(filter(None, (user_options, jvm_options)))
        try:
            return ScienceWorldEnv("", envStepLimit=ENV_STEP_LIMIT)
        finally:
            if user_options is None:
                del os.environ["JAVA_TOOL_OPTIONS"]
            else:
                os.environ["JAVA_TOOL_OPTIONS"] = user_options


def task_id(task_name: str, variation: int, simplifications: str) -> str:
    """The id of one task: ``boil/14``, or ``boil/14/easy`` under simplifications (a different game)."""
    return f"{task_name}/{variation}" + (f"/{simplifications}" if simplifications else "")


def parse_task_id(text: str) -> tuple[str, int, str]:
    """The ``(task_name, variation, simplifications)`` of a :func:`task_id`.

    Raises:
        InvalidConfigError: ``text`` is not a ScienceWorld task id.
    """
    parts = text.split("/")
    if len(parts) not in (2, 3) or not parts[1].isdigit():
        raise InvalidConfigError(f"task id {text!r} is not a ScienceWorld task id (task/variation[/simplifications]).")
    return parts[0], int(parts[1]), parts[2] if len(parts) == 3 else ""


def canonical(text: str) -> str:
    """``text`` with each run of tab-indented lines (a room's contents) sorted, so that a room reads in name order.

    The order ScienceWorld lists them in is that of its hash sets: deterministic only under :data:`JVM_OPTIONS`,
    which also orders the lists inside one line that this leaves as they are.
    """
    lines = text.split("\n")
    out: list[str] = []
    run: list[str] = []
    for line in lines:
        if line.startswith("\t"):
            run.append(line)
            continue
        out += sorted(run)
        run = []
        out.append(line)
    return "\n".join(out + sorted(run))


class _JsonCache:
    """A JSON file of computed values, written whole after each addition (small files, one writer per key)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def get(self, key: str, compute: Any) -> Any:
        with self._lock:
            data = json.loads(self.path.read_text()) if self.path.exists() else {}
            if key not in data:
                data[key] = compute()
                self.path.parent.mkdir(parents=True, exist_ok=True)
                temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
                temporary.write_text(json.dumps(data, indent=0))
                temporary.replace(self.path)  # atomic: a concurrent reader sees the old file or the new one
            return data[key]


def gold_sequence(task_name: str, variation: int, simplifications: str, cache_dir: Any = None) -> list[str]:
    """The variation's gold action sequence, cached on disk; a miss is generated on a simulator started for it.

    ScienceWorld's gold-path generator keeps state across the gold paths a JVM generates: the same variation's
    second gold path in one JVM can take other doors (test-conductivity/453 and the paint families), so a cache
    filled on one simulator held sequences that depended on which variations it had generated before, and the
    expert's transcripts on which machine filled it. A fresh simulator per sequence (~1 s to start) makes each a
    function of the variation alone.
    """
    from scienceworld.version import __version__

    # Gold sequences answer ambiguity prompts by position (right only under JVM_OPTIONS), and those cached before
    # the fresh simulator depended on history: each kind has a folder of its own.
    cache = _JsonCache(cache_root(cache_dir) / f"gold-{__version__}-fresh-simulator" / f"{task_name}.json")

    def generate() -> list[str]:
        simulator = start_simulator()
        try:
            simulator.load(task_name, variation, simplifications, generateGoldPath=True)
            return list(simulator.get_gold_action_sequence())
        finally:
            simulator.close()

    return list(cache.get(f"{variation}/{simplifications}", generate))


def variation_splits(cache_dir: str | os.PathLike[str] | None = None) -> dict[str, dict[str, list[int]]]:
    """``{task_name: {split: [variation, ...]}}`` for every task family, read from a simulator once, then cached.

    Raises:
        DataNotFoundError: the package or Java is missing (and nothing is cached yet).
    """
    from scienceworld.version import __version__

    def read() -> dict[str, dict[str, list[int]]]:
        simulator = start_simulator()
        try:
            splits = {}
            for name in sorted(simulator.get_task_names()):
                simulator.load(name, 0, "")
                splits[name] = {
                    "train": simulator.get_variations_train(),
                    "dev": simulator.get_variations_dev(),
                    "test": simulator.get_variations_test(),
                }
            return splits
        finally:
            simulator.close()

    return _JsonCache(cache_root(cache_dir) / "variations.json").get(__version__, read)


class ScienceWorldGame(TaskGame):
    """One ScienceWorld variation on the domain's shared simulator (loaded by :meth:`reset`)."""

    def __init__(self, domain: ScienceWorldDomain, task: TaskSpec) -> None:
        self._domain = domain
        self._task = task
        self._task_name, self._variation, self._simplifications = parse_task_id(task.task_id)
        self._description = ""
        self._admissible: list[str] | None = None
        self._history: list[str] = []
        self._simulator: Any = None

    @property
    def description(self) -> str:
        """ScienceWorld's task description (known after :meth:`reset`)."""
        return self._description

    def reset(self) -> str:
        """Load the variation on the domain's simulator; the opening text is a free ``look around``."""
        self._simulator = self._domain.simulator(owner=self)
        self._simulator.load(self._task_name, self._variation, self._simplifications)
        self._description = str(self._simulator.get_task_description())
        self._admissible = None
        self._history = []
        return canonical(str(self._simulator.look()))

    def step(self, command: str) -> StepResult:
        """One command; won when ScienceWorld completes the task, lost when its score goes negative (a failure)."""
        server = self._check_current().server
        # The wrapper's step() also reads look, inventory, task and the valid actions (5 more JVM calls): the raw
        # server step and score are all a step needs; the valid actions are read once per state, when asked.
        observation = str(server.step(command))
        score = int(round(100 * server.getScore()))
        lost = score < 0  # ScienceWorld's failure (a wrong focus, a dead plant): the score drops to -100
        won = bool(server.getCompleted()) and not lost
        self._history.append(command)
        # The parser reads other names for the valid actions (``examine X``, an ambiguity prompt's ``0``): those
        # are valid too. An unread command changes nothing, so the valid actions stand.
        parsed = observation != UNKNOWN_INPUT
        if parsed:
            self._admissible = None
        # The score is 0-100: a failed task scores 0, as ScienceWorld's evaluations count it.
        return StepResult(canonical(observation), won=won, lost=lost, score=float(max(score, 0)), parsed=parsed)

    def admissible_commands(self) -> list[str]:
        """ScienceWorld's valid action-object combinations in the current state, sorted (one JVM call per state).

        The parser also reads other names for the same actions (``examine X`` for ``look at X``, other referents
        of an object): those commands run, but the chain env flags them as not admissible.
        """
        if self._admissible is None:
            raw = self._check_current().server.getValidActionObjectCombinationsJSON()
            # Sorted: the simulator's order follows object ids, which differ between two loads of a variation.
            self._admissible = sorted(entry["action"] for entry in json.loads(str(raw))["validActions"])
        return list(self._admissible)

    def expert_plan(self) -> list[str]:
        """The rest of the variation's gold sequence while the commands so far followed it, else []."""
        gold = gold_sequence(self._task_name, self._variation, self._simplifications, self._domain.cache_dir)
        return gold[len(self._history) :] if gold[: len(self._history)] == self._history else []

    def _check_current(self) -> Any:
        if self._simulator is None:
            raise RuntimeError("ScienceWorldGame.step() before reset(): call reset() to load the variation.")
        if self._domain.owner is not self:  # another game of the domain was loaded on the shared simulator
            raise RuntimeError(
                f"task {self._task.task_id!r} is no longer loaded: its domain's simulator plays one game at a time "
                "and another game was reset since; reset() this game again to play it."
            )
        return self._simulator


class ScienceWorldDomain(Domain):
    """ScienceWorld's task families, split by its official train / dev / test variations, one simulator per domain.

    Tasks of a split are ``(family, variation)`` pairs in family order, then variation order; ``task_type`` and
    ``scenario`` are the family, so that a chain holds variations of one family.
    """

    name = "scienceworld"
    splits = SPLITS
    scored = True
    entity_pattern = r"\b((?:[a-z]+ )*?(?:[a-z]+ \d+|door to (?:the )?[a-z]+(?: [a-z]+)?))\b"
    """Entity names skill calls may take: numbered objects (``flower pot 3``) and doors (``door to kitchen``)."""

    def __init__(
        self,
        simplifications: str = "",
        task_names: Sequence[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Configure the domain; no simulator starts until a split is listed (uncached) or a task is loaded.

        Args:
            simplifications: ScienceWorld's comma-separated simplifications (``easy`` = all of
                ``teleportAction,openDoors,openContainers,selfWateringFlowerPots,noElectricalAction``); "" for none.
            task_names: the families to play (default all 30, sorted by name).
            cache_dir: the cache of variation lists and gold sequences (default ``$SAGE_CACHE_DIR``, else
                ``~/.cache/sage_envs``).

        Raises:
            InvalidConfigError: an unknown simplification or task family.
        """
        for part in filter(None, simplifications.split(",")):
            if part not in SIMPLIFICATIONS:
                raise InvalidConfigError(
                    f"simplification {part!r} is not one of {SIMPLIFICATIONS}.{suggest(part, SIMPLIFICATIONS)}"
                )
        self.simplifications = simplifications
        self.task_names = None if task_names is None else tuple(task_names)
        self.cache_dir = cache_dir
        self.owner: ScienceWorldGame | None = None
        self._simulator: Any = None

    def simulator(self, owner: ScienceWorldGame | None = None) -> Any:
        """The domain's simulator, started on first use; ``owner`` is the game about to load on it."""
        if self._simulator is None:
            self._simulator = start_simulator()
        self.owner = owner
        return self._simulator

    def tasks(self, split: str) -> list[TaskSpec]:
        """All ``(family, variation)`` tasks of ``split``, family by family.

        Raises:
            InvalidConfigError: ``split`` is not train / dev / test, or a ``task_names`` entry is unknown.
        """
        if split not in SPLITS:
            raise InvalidConfigError(f"split={split!r} is not one of {SPLITS}.{suggest(split, SPLITS)}")
        families = variation_splits(self.cache_dir)
        names = sorted(families) if self.task_names is None else self.task_names
        for name in names:
            if name not in families:
                raise InvalidConfigError(
                    f"task_names has {name!r}, not a ScienceWorld task.{suggest(name, families)} "
                    f"Tasks: {sorted(families)}."
                )
        return [
            TaskSpec(task_id(name, variation, self.simplifications), name, name)
            for name in names
            for variation in families[name][split]
        ]

    def load(self, task: TaskSpec) -> ScienceWorldGame:
        """A game of ``task`` on the domain's simulator (loaded by its ``reset``)."""
        return ScienceWorldGame(self, task)

    def chains(self, split: str, chain_length: int) -> list[tuple[TaskSpec, ...]]:
        """Runs of ``chain_length`` consecutive variations of one family, the families interleaved.

        Chain ``k * F + f`` (``F`` families) is the ``k``-th run of family ``f`` while every family has one; a
        family with fewer runs drops out of the rotation. Every task is in one chain.
        """
        runs_by_family: dict[str, list[tuple[TaskSpec, ...]]] = {}
        for chain in super().chains(split, chain_length):
            runs_by_family.setdefault(chain[0].scenario, []).append(chain)
        families = list(runs_by_family.values())
        longest = max(map(len, families), default=0)
        return [runs[k] for k in range(longest) for runs in families if k < len(runs)]

    @classmethod
    def expert(
        cls, *, use_skills: bool = True, skills: Sequence[str] | None = None, cache_dir: Any = None
    ) -> ScienceWorldExpert:
        """The gold-sequence expert (:class:`ScienceWorldExpert`)."""
        return ScienceWorldExpert(use_skills=use_skills, skills=skills, cache_dir=cache_dir)

    @classmethod
    def skill_templates(cls, **_env_kwargs: Any) -> dict[str, list[str]]:
        """The expert's skill definitions by name (one form each: every variation speaks one grammar)."""
        return {name: [text] for name, text in SKILLS.items()}

    @classmethod
    def vocabulary(cls) -> list[str]:
        """Task descriptions' words, action templates and object names, from the installed package ([] if absent).

        Read from the package's files (its task list and object types), so that no simulator starts.
        """
        try:
            import scienceworld.constants as constants
        except ImportError:  # the scienceworld package is optional for agents built for other domains
            return []
        texts = [" ".join(f"{task['topic']} {task['task']} {task['task_name']}" for task in constants.TASKS)]
        texts.append(" ".join(ACTION_TEMPLATES))
        types = Path(constants.BASEPATH, "object_type_ids.tsv")
        if types.exists():  # class names: scienceworld.objects.containers.BookShelf -> "book shelf"
            classes = (line.split("\t")[0].rsplit(".", 1)[-1] for line in types.read_text().splitlines())
            texts.append(" ".join(re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).lower() for name in classes))
        texts += MESSAGES
        return texts

    def close(self) -> None:
        """Stop the domain's simulator (its JVM)."""
        if self._simulator is not None:
            self._simulator.close()
            self._simulator = None
            self.owner = None


SIMPLIFICATIONS = (
    "easy",
    "teleportAction",
    "openDoors",
    "openContainers",
    "selfWateringFlowerPots",
    "noElectricalAction",
)
"""ScienceWorld's simplifications (``easy`` is all the others)."""
ACTION_TEMPLATES = (
    "activate OBJ", "close OBJ", "connect OBJ to OBJ", "deactivate OBJ", "disconnect OBJ", "dunk OBJ in OBJ",
    "eat OBJ", "flush OBJ", "focus on OBJ", "go to OBJ", "inventory", "look around", "look at OBJ", "look in OBJ",
    "mix OBJ", "move OBJ to OBJ", "open OBJ", "pick up OBJ", "pour OBJ into OBJ", "put down OBJ", "read OBJ",
    "reset task", "task", "use OBJ on OBJ", "wait", "wait1", "teleport to OBJ",
)  # fmt: skip
"""ScienceWorld's action templates (``get_possible_actions`` lists them; teleport under ``teleportAction``)."""
MESSAGES = (
    "This room is called the kitchen. In it, you see: the agent a substance called air. You also see: A door to the "
    "hallway (that is closed). You move to the. You focus on the. The door is now open. You move the to the. "
    "containing nothing, which is turned off, currently reading a temperature of degrees celsius. In your inventory "
    "you see: an orange. Ambiguous request: Please enter the number for the action you intended (or blank to "
    "cancel). No known action matches that input. Your task is to",
)
"""Frequent engine messages, so that a tokenizer knows their words before it sees a game."""


SKILLS = {
    "enter": """skill enter(room):
    # open the door to the room, then walk through it
    open door to {room}
    go to {room}""",
    "measure_temperature": """skill measure_temperature(substance):
    # look at the substance, then read its temperature with the thermometer held in the inventory
    examine {substance}
    use thermometer in inventory on {substance}""",
    "water": """skill water(pot):
    # fill the jug at the sink and pour it into the plant's pot
    activate sink
    move jug to sink
    pour jug into {pot}
    deactivate sink""",
}
"""The expert's skill definitions (the DSL), by name: the routines that recur across the task families' gold
sequences (through a door: most families; a temperature reading: boil, freeze, melt, the melting points; watering:
the growing tasks)."""


def skill_call(commands: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """The skill call of :data:`SKILLS` that sends the first commands of ``commands``, or None.

    ``["open door to kitchen", "go to kitchen", ...]`` gives ``("enter", ("kitchen",))``.
    """
    first, second = (list(commands[:2]) + ["", ""])[:2]
    door = re.fullmatch(r"open door to (.+)", first)
    if door and second == f"go to {door.group(1)}":
        return "enter", (door.group(1),)
    examined = re.fullmatch(r"examine (.+)", first)
    if examined and second == f"use thermometer in inventory on {examined.group(1)}":
        return "measure_temperature", (examined.group(1),)
    pour = re.fullmatch(r"pour jug into (.+)", commands[2]) if len(commands) >= 4 else None
    if pour and [*commands[:2], commands[3]] == ["activate sink", "move jug to sink", "deactivate sink"]:
        return "water", (pour.group(1),)
    return None


class ScienceWorldExpert(PlanExpert):
    """Replays each variation's gold action sequence; with skills, sends its routines as calls of :data:`SKILLS`.

    The loop is :class:`~sage_envs.domains.plan_expert.PlanExpert`'s. The chain env's ``info`` names the task an
    action went to (``task_id``); when a step opens the next task, the id is still the finished one's, so the
    expert takes the next variation of the family in its split, which is how ``ScienceWorldDomain.chains`` builds
    chains.
    """

    definitions = SKILLS
    idle_command = "look around"
    given = "each variation's gold action sequence (privileged: it knows the variation from the task id)"
    """What it is handed, in words (the leaderboard's "given")."""

    def __init__(self, use_skills: bool = True, skills: Sequence[str] | None = None, cache_dir: Any = None) -> None:
        """Create the agent.

        Args:
            use_skills: send skill definitions and calls; False sends plain commands only (``skills="none"``).
            skills: the names of :data:`SKILLS` it may use (None = all).
            cache_dir: the cache of gold sequences (default ``$SAGE_CACHE_DIR``, else ``~/.cache/sage_envs``).

        Raises:
            ValueError: an unknown skill name.
        """
        self.cache_dir = cache_dir
        super().__init__(use_skills, skills)

    def task_key(self, info: Mapping[str, Any]) -> str:
        """The task the next action goes to: ``info["task_id"]``, or the next variation once that task ended."""
        current = str(info["task_id"])
        # After a reset no task has ended yet; after a step that ended task k, chain_successes has k + 1 entries.
        if info.get("new_task") and len(info.get("chain_successes", [])) > info.get("task_index", 0):
            return self._next_task(current)
        return current

    def plan(self, task_key: str) -> list[str]:
        """The variation's gold sequence (cached on disk)."""
        return gold_sequence(*parse_task_id(task_key), cache_dir=self.cache_dir)

    skill_call = staticmethod(skill_call)

    def _next_task(self, finished: str) -> str:
        """The task after ``finished`` in its chain: the next variation of its family in the same split."""
        name, variation, simplifications = parse_task_id(finished)
        for variations in variation_splits(self.cache_dir)[name].values():
            if variation in variations and variations.index(variation) + 1 < len(variations):
                return task_id(name, variations[variations.index(variation) + 1], simplifications)
        return finished
