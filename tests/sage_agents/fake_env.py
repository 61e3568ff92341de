"""A tiny chain env that follows the SageChain contract, for fast agent tests (no engine, no sage_envs)."""

from __future__ import annotations

import re
import string

import gymnasium as gym
from gymnasium import spaces

BOXES = ("box 1", "box 2", "box 3")
ITEMS = ("coin 1", "key 1", "pen 1")
CHARSET = frozenset(string.printable)
FAST_TRAIN = dict(
    group_size=4,
    lr=1e-3,
    constrained=True,
    report_to=["jsonl"],
    progress=False,
    micro_batch_size=8,
)
"""TrainConfig fields of a fast CPU training test on this env (each test file adds what it needs)."""


class FakeChainEnv(gym.Env):
    """Chain of ``chain_length`` tasks "take ITEM from BOX"; a skill can do a task in one call.

    Task k of chain c hides ``ITEMS[(c + k) % 3]`` in ``BOXES[(2 * c + k) % 3]``; the agent must ``go to`` the
    box, then ``take`` the item (``easy=True``: arriving at the right box wins). ``skill NAME(params):``
    blocks and ``call NAME(args)`` run the body with ``{param}`` substituted. ``short_chains`` have one task
    (like a real split's last chain of a scenario, shorter than ``chain_length``).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        chain_length: int = 2,
        max_steps_per_task: int = 3,
        num_chains: int = 4,
        expert_plan=False,
        easy=False,
        short_chains=(),
    ):
        self.short_chains = frozenset(short_chains)
        self.chain_length, self.max_steps_per_task, self.easy = chain_length, max_steps_per_task, easy
        self.num_chains, self.expert = num_chains, expert_plan
        self.tasks = [f"c{c}/t{k}" for c in range(num_chains) for k in range(chain_length)]
        text = spaces.Text(4096, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Dict({"observation": text, "task": text, "skills": text})
        self.action_space = spaces.Text(4096, min_length=0, charset=CHARSET)

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        options = options or {}
        self.chain = options.get("chain", int(self.np_random.integers(self.num_chains)))
        self.length = 1 if self.chain in self.short_chains else self.chain_length
        self.library: dict[str, dict] = {}
        self.successes: list[bool] = []
        self._start(0)
        return self._obs("You are in a room with three boxes."), self._info(new_task=True)

    def step(self, action: str):
        self.turn += 1
        k = self.k
        obs_text, kind, valid, used, created, won, steps = self._dispatch(action)
        reuse = [n for n in used if self.library[n]["created_in_task"] < k]
        new_task = won or self.turn >= self.max_steps_per_task
        terminated = False
        if new_task:
            self.successes.append(won)
            if k + 1 < self.length:
                self._start(k + 1)
                obs_text = "You are in a room with three boxes."
            else:
                terminated = True
        info = self._info(
            task_index=k,
            task_success=won,
            action_valid=valid,
            action_kind=kind,
            skills_used=used,
            skills_created=created,
            skill_reuse=reuse,
            new_task=new_task and not terminated,
            primitive_steps=steps,
        )
        return self._obs(obs_text), 1.0 if won else 0.0, terminated, False, info

    # ------------------------------------------------------------------ internals
    def _start(self, k: int) -> None:
        self.k, self.turn, self.at, self.won = k, 0, None, False
        self.item = ITEMS[(self.chain + k) % 3]
        self.box = BOXES[(2 * self.chain + k) % 3]

    def admissible(self) -> list[str]:
        cmds = [f"go to {b}" for b in BOXES if b != self.at]
        if self.at == self.box:
            cmds.append(f"take {self.item} from {self.box}")
        return cmds + ["look"]

    def _command(self, cmd: str) -> tuple[str, bool]:
        if cmd not in self.admissible():
            return "Nothing happens.", False
        if cmd.startswith("go to "):
            self.at = cmd[6:]
            seen = self.item if self.at == self.box else "nothing"
            self.won = self.easy and self.at == self.box
            return f"You arrive at {self.at}. You see {seen}.", self.won
        if cmd.startswith("take "):
            self.won = True
            return f"You take the {self.item}.", True
        return "You are in a room with three boxes.", False

    def _run(self, name: str, args: list[str]) -> tuple[list[str], bool, int, str | None]:
        skill = self.library.get(name)
        if skill is None or len(args) != len(skill["params"]):
            return [], False, 0, f"cannot call {name}"
        lines, steps = [], 0
        for line in skill["body"]:
            cmd = line
            for p, a in zip(skill["params"], args, strict=True):
                cmd = cmd.replace("{" + p + "}", a)
            feedback, won = self._command(cmd)
            lines.append(f"> {cmd}\n{feedback}")
            steps += 1
            if won:
                return lines, True, steps, None
        return lines, False, steps, None

    def _dispatch(self, action: str):
        text = action.strip()
        calls = []
        created = []
        if text.startswith("skill "):
            head, *rest = text.split("\n")
            m = re.match(r"skill (\w+)\(([^)]*)\):$", head)
            body = [r.strip() for r in rest if r.startswith(" ") and r.strip()]
            calls = [r.strip() for r in rest if r.startswith("call ")]
            if not m or not body:
                return "Invalid action: bad skill.", "invalid", False, [], [], False, 0
            params = [p.strip() for p in m.group(2).split(",") if p.strip()]
            old = self.library.get(m.group(1), {"version": 0})
            self.library[m.group(1)] = {
                "params": params,
                "body": body,
                "created_in_task": self.k,
                "version": old["version"] + 1,
                "uses": 0,
            }
            created = [m.group(1)]
            if not calls:
                return f"Defined skill {m.group(1)}.", "define", True, [], created, False, 0
        elif text.startswith("call "):
            calls = [text]
        else:
            valid = text in self.admissible()
            feedback, won = self._command(text)
            return feedback, "command" if valid else "invalid", valid, [], [], won, 1
        out, used, total, won = [], [], 0, False
        for c in calls:
            m = re.match(r"call (\w+)\(([^)]*)\)$", c)
            if not m:
                return "Invalid action: bad call.", "invalid", False, used, created, False, total
            args = [a.strip() for a in m.group(2).split(",") if a.strip()]
            lines, won, steps, err = self._run(m.group(1), args)
            out += lines
            total += steps
            if err:
                return f"Skill error: {err}", "invalid", False, used, created, False, total
            used.append(m.group(1))
            self.library[m.group(1)]["uses"] += 1
            if won:
                break
        return "\n".join(out), "define" if created else "call", True, used, created, won, total

    def _obs(self, text: str) -> dict[str, str]:
        skills = ""
        if self.library:
            lines = [f"- {n}({', '.join(s['params'])})" for n, s in self.library.items()]
            skills = "Program skills (call NAME(args)):\n" + "\n".join(lines)
        return {
            "observation": text,
            "task": f"take the {self.item} from the box",
            "skills": skills,
        }

    def _info(
        self,
        task_index=None,
        task_success=False,
        action_valid=True,
        action_kind="command",
        skills_used=(),
        skills_created=(),
        skill_reuse=(),
        new_task=False,
        primitive_steps=0,
    ):
        k = self.k if task_index is None else task_index
        info = {
            "task_index": k,
            "chain_length": self.length,
            "task_type": "fetch",
            "task_success": task_success,
            "chain_successes": list(self.successes),
            "action_valid": action_valid,
            "action_kind": action_kind,
            "message": "",
            "admissible_commands": self.admissible(),
            "primitive_steps": primitive_steps,
            "skills_used": list(skills_used),
            "skills_created": list(skills_created),
            "skill_library": [
                {
                    "name": n,
                    "kind": "program",
                    "version": s["version"],
                    "created_in_task": s["created_in_task"],
                    "uses": s["uses"],
                }
                for n, s in self.library.items()
            ],
            "skill_reuse": list(skill_reuse),
            "new_task": new_task,
        }
        if self.expert:
            plan = [] if self.at == self.box else [f"go to {self.box}"]
            info["expert_plan"] = plan + [f"take {self.item} from {self.box}"]
        return info


FETCH_SKILL = "skill fetch(item, box):\n    go to {box}\n    take {item} from {box}"


class ScoredFake(gym.Wrapper):
    """FakeChainEnv as a scored domain reports it: ``task_score`` 0-100, here 25 points per ``go to``."""

    def reset(self, **kwargs):
        self.points = 0.0
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, "task_score": 0.0}  # reset returns the keys every step does

    def step(self, action):
        k = self.env.unwrapped.k
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.points = min(100.0, self.points + 25.0 * action.startswith("go to"))
        info["task_score"] = self.points
        if info["task_index"] != k or info.get("new_task"):
            self.points = 0.0  # the next task starts from 0
        return obs, reward, terminated, truncated, info


class SkillExpert:
    """Expert that defines ``fetch`` in task 1 (define + call) and calls it in later tasks."""

    def act(self, observation, info):
        adm = info["admissible_commands"]
        take = [c for c in adm if c.startswith("take ")]
        if take:
            return take[0]
        env_item = observation["task"].split()[2]
        item = next(i for i in ITEMS if i.startswith(env_item))
        box = info["expert_plan"][0][len("go to ") :] if "expert_plan" in info else "box 1"
        call = f"call fetch({item}, {box})"
        if "fetch(" in observation["skills"]:
            return call
        return f"{FETCH_SKILL}\n{call}"
