"""A tiny in-memory domain for fast chain-env tests: find a named item in boxes and put it in the bin."""

from __future__ import annotations

from sage_envs.chain import SageChainEnv
from sage_envs.domain import Domain, StepResult, TaskGame, TaskSpec

BOXES = ("box 1", "box 2", "box 3")


class ToyGame(TaskGame):
    """Items hidden in boxes; the goal is ``put ITEM in bin``. Deterministic given the task."""

    def __init__(self, item: str, box: str):
        self.item, self.box = item, box

    @property
    def description(self) -> str:
        return f"put the {self.item} in the bin"

    def reset(self) -> str:
        self.location, self.holding, self.won = None, None, False
        return "You are in a room. You see " + ", ".join(BOXES) + " and a bin."

    def admissible_commands(self) -> list[str]:
        commands = [f"go to {b}" for b in BOXES if b != self.location]
        if self.location == self.box and self.holding is None:
            commands.append(f"take {self.item} from {self.box}")
        if self.holding:
            commands.append(f"put {self.holding} in bin")
        return commands + ["look"]

    def step(self, command: str) -> StepResult:
        if command not in self.admissible_commands():
            return StepResult("Nothing happens.", self.won)
        if command.startswith("go to "):
            self.location = command[len("go to ") :]
            content = self.item if self.location == self.box and self.holding is None else "nothing"
            return StepResult(f"You arrive at {self.location}. You see {content}.", self.won)
        if command.startswith("take "):
            self.holding = self.item
            return StepResult(f"You pick up the {self.item}.", self.won)
        if command.startswith("put "):
            self.won = True
            return StepResult(f"You put the {self.item} in the bin.", True)
        return StepResult("You are in a room.", self.won)

    def entities(self):
        return {"boxes": list(BOXES)}

    def expert_plan(self) -> list[str]:
        if self.holding:
            return [f"put {self.item} in bin"]
        plan = [] if self.location == self.box else [f"go to {self.box}"]
        return plan + [f"take {self.item} from {self.box}", f"put {self.item} in bin"]


class ToyDomain(Domain):
    """Two households, each with three tasks; items differ per task."""

    name = "toy"

    def tasks(self, split: str) -> list[TaskSpec]:
        items = ("key", "coin", "pen")
        return [
            TaskSpec(f"{split}/h{h}/{item}", "find_and_bin", f"h{h}", {"box": BOXES[(h + i) % 3], "item": item})
            for h in range(2)
            for i, item in enumerate(items)
        ]

    def load(self, task: TaskSpec) -> ToyGame:
        return ToyGame(task.extra["item"], task.extra["box"])

    @classmethod
    def expert(cls, *, use_skills: bool = True, skills=None, **kwargs) -> ToyExpert:
        return ToyExpert()

    @classmethod
    def vocabulary(cls) -> list[str]:
        return ["put the key coin pen in the bin", "you arrive at box 1 2 3 you see nothing zorblax"]


class ToyExpert:
    """Acts on what it observes: visits the boxes in order until it sees the item, takes it, bins it."""

    skills = frozenset()  # it plays with plain commands only

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.task, self.visited = None, set()

    def act(self, observation, info) -> str:
        if info["new_task"] or observation["task"] != self.task:
            self.task, self.visited = observation["task"], set()
        item = observation["task"].removeprefix("put the ").removesuffix(" in the bin")
        for prefix in ("put ", f"take {item} from "):
            for command in info["admissible_commands"]:
                if command.startswith(prefix):
                    return command
        box = next(b for b in BOXES if b not in self.visited)
        self.visited.add(box)
        return f"go to {box}"


class ToyChainEnv(SageChainEnv):
    """The toy domain as a registrable env (a SageChainEnv subclass that names its domain class)."""

    domain_class = ToyDomain

    def __init__(self, **kwargs):
        super().__init__(ToyDomain(), **kwargs)


class RiskyToyGame(ToyGame):
    """The toy game that can be lost (``smash bin``) and scores progress: 50 once the item is held, 100 when won."""

    def admissible_commands(self) -> list[str]:
        return super().admissible_commands() + ["smash bin"]

    def step(self, command: str) -> StepResult:
        if command == "smash bin":
            return StepResult("The bin smashes. You lost.", False, lost=True, score=0.0)
        result = super().step(command)
        score = 100.0 if result.won else 50.0 if self.holding else 0.0
        return StepResult(result.observation, result.won, score=score)


class RiskyToyDomain(ToyDomain):
    """The toy households with games that can be lost and are scored, on ScienceWorld-like split names."""

    name = "risky-toy"
    splits = ("train", "dev", "test")
    scored = True
    entity_pattern = r"\b(box \d|bin)\b"

    def load(self, task: TaskSpec) -> RiskyToyGame:
        return RiskyToyGame(task.extra["item"], task.extra["box"])


class RiskyToyChainEnv(SageChainEnv):
    """The chain env over :class:`RiskyToyDomain` (register it under an id to reach it through ``gym.make``)."""

    domain_class = RiskyToyDomain

    def __init__(self, **kwargs):
        super().__init__(RiskyToyDomain(), **kwargs)
