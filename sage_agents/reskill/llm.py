"""The LLM backend of the skill creator: any ``generate(prompt) -> str`` through three JSON stages.

:class:`LLMCreator` implements ReSkill's creator pipeline (arXiv 2606.01619) with a text generator:

1. **diagnose**: recent failed / successful episodes, the assertion engine's current assertions with their pass
   rates and the live skills -> a diagnosis and up to 5 new assertions (added to the engine's pool);
2. **recommend**: the diagnosis and the re-ranked assertions -> 1-3 add / modify / delete operations (names
   checked against the library and the ``max_active`` cap);
3. **author**: the operations -> text (when to use / action / example) + trigger per skill, then put through the
   pre-test check (:meth:`~sage_agents.reskill.creator.Creator.check`: <= 500 characters, every word known to the
   policy's tokenizer, shown in at least one of the reservoir's failed episodes, trigger fires
   in >= 50% of episodes).

A reply that is not a JSON object, or breaks a rule, is sent back with the reason (``retries`` times); then the
stage gives up and :meth:`LLMCreator.create` returns None with ``last_error`` set. Authoring keeps the skills
that verified and re-asks only for the others.

Generators: :func:`openai_generate` (``POST {endpoint}/v1/chat/completions`` with ``urllib``, no SDK) and
:func:`hf_generate` (a local Hugging Face causal LM, loaded with ``local_files_only``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from sage_agents.reskill.assertions import CHECK_TYPES, PARAMS, Assertion, AssertionEngine, action_key
from sage_agents.reskill.creator import MAX_SKILL_CHARS, MIN_FIRE_RATE, Creator, _clip, skill_text
from sage_agents.reskill.registry import OPS, Bundle, Operation, VersionRegistry
from sage_agents.reskill.reservoir import Episode
from sage_envs import Skill
from sage_envs.error import SkillError
from sage_envs.skills.library import name_problem


# ---------------------------------------------------------------------------------------------- LLM BACKEND
def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in ``text`` (code fences and prose around it are ignored).

    Raises:
        ValueError: no JSON object could be decoded (the message says what was wrong).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the reply was empty")
    decoder = json.JSONDecoder()
    first_error = None
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError as error:
            first_error = first_error or error
            continue
        if isinstance(value, dict):
            return value
    reason = f" ({first_error.msg} at character {first_error.pos})" if first_error else ""
    raise ValueError(f"the reply holds no JSON object{reason}")


def openai_generate(
    endpoint: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    timeout: float = 120.0,
    temperature: float = 0.2,
    max_tokens: int = 1024,
) -> Callable[[str], str]:
    """A ``generate(prompt) -> str`` that calls an OpenAI-compatible ``POST {endpoint}/v1/chat/completions``.

    Args:
        endpoint: base URL such as ``http://127.0.0.1:8000`` (a trailing ``/v1`` is accepted too).
        model: the ``model`` field of the request (``"default"`` when None).
        api_key: sent as ``Authorization: Bearer``; none by default.
        timeout: seconds per request.
        temperature: sampling temperature.
        max_tokens: completion budget.
    """
    import urllib.request

    base = endpoint.rstrip("/")
    url = base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"

    def generate(prompt: str) -> str:
        body = {
            "model": model or "default",
            "messages": [{"role": "user", "content": prompt}],
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (a configured endpoint)
            reply = json.loads(response.read().decode("utf-8"))
        return str(reply["choices"][0]["message"]["content"])

    return generate


def hf_generate(
    model_path: str, *, max_new_tokens: int = 512, temperature: float = 0.0, device: str | None = None
) -> Callable[[str], str]:
    """A ``generate(prompt) -> str`` backed by a local Hugging Face causal LM (loaded once, never downloaded).

    Uses the tokenizer's chat template when it has one. ``temperature=0`` decodes greedily.
    """
    import torch

    from sage_agents.models import load_policy

    model, tokenizer = load_policy(model_path, device=device)
    model.eval()

    def generate(prompt: str) -> str:
        text = prompt
        if getattr(tokenizer, "chat_template", None):
            messages = [{"role": "user", "content": prompt}]
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        inputs = tokenizer(text, return_tensors="pt").to(model.device)
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
        with torch.no_grad():
            out = model.generate(
                **inputs, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, **sampling
            )  # (1, T_prompt + T_new)
        return tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)

    return generate


_CHECK_HELP = "\n".join(
    f"- {check}: params {sorted(PARAMS[check][0])}"
    + (f", optional {sorted(PARAMS[check][1])}" if PARAMS[check][1] else "")
    for check in CHECK_TYPES
)


def _episode_line(tag: str, ep: Episode) -> str:
    actions = " | ".join(_clip(a.splitlines()[0], 60) for a in ep.actions[-12:])
    last = _clip(ep.observations[-1].replace("\n", " "), 160) if ep.observations else ""
    return f"{tag} [{ep.task_type}] {_clip(ep.task, 100)}\n  actions: {actions}\n  last observation: {last}"


def _skills_block(registry: VersionRegistry) -> str:
    lines = []
    for s in registry.active_skills():
        trigger = s.trigger + (f" /{s.pattern}/" if s.pattern else "")
        lines.append(f"- {s.name} [{trigger}] v{s.version}: {_clip(s.text.replace(chr(10), ' '), 160)}")
    return "\n".join(lines) or "(none)"


class LLMCreator(Creator):
    """Creator backed by any ``generate(prompt) -> str``; three JSON stages with retries (module docstring).

    Args:
        generate: the text generator (:func:`openai_generate`, :func:`hf_generate` or any callable).
        engine: the assertion engine.
        min_fire_rate: verification fire-rate threshold.
        max_chars: verification length cap.
        retries: extra attempts per stage after a bad reply (each sent back with the reason).
        examples: failed and successful episodes shown in the diagnosis prompt (each).
        tokenizer: the policy's tokenizer (the pre-test check's vocabulary; None: no vocabulary check).
    """

    name = "llm"

    def __init__(
        self,
        generate: Callable[[str], str],
        engine: AssertionEngine | None = None,
        min_fire_rate: float = MIN_FIRE_RATE,
        max_chars: int = MAX_SKILL_CHARS,
        retries: int = 2,
        examples: int = 3,
        tokenizer: Any = None,
    ):
        super().__init__(engine, min_fire_rate, max_chars, tokenizer)
        self.generate, self.retries, self.examples = generate, retries, examples
        self.calls = 0

    def _ask(self, stage: str, prompt: str, parse: Callable[[dict[str, Any]], Any]) -> Any:
        """Send ``prompt``; parse the JSON reply; on failure resend with the reason; None after the last try."""
        feedback = ""
        for _ in range(self.retries + 1):
            text = prompt
            if feedback:
                text += f"\n\nYOUR PREVIOUS REPLY WAS REJECTED: {feedback}\nReply again with only the JSON object."
            self.calls += 1
            try:
                reply = self.generate(text)
            except Exception as error:  # noqa: BLE001 - any backend failure (network, model) is retried, then skipped
                feedback = f"the generator failed: {type(error).__name__}: {error}"
                continue
            try:
                return parse(extract_json(reply))
            except (ValueError, TypeError, KeyError, SkillError) as error:
                feedback = _clip(str(error), 600)
        self.last_error = f"{stage}: gave up after {self.retries + 1} attempts: {feedback}"
        return None

    def create(
        self, episodes: Sequence[Episode], registry: VersionRegistry, step: int, exclude: Sequence[str] = ()
    ) -> Bundle | None:
        """See :meth:`Creator.create`."""
        self.last_error, self.rejections = "", []
        self.engine.refresh(episodes)
        diagnosis = self._ask("diagnose", self._diagnose_prompt(episodes, registry), self._parse_diagnosis)
        if diagnosis is None:
            return None
        text, proposed = diagnosis
        ranked = self.engine.refresh(episodes, proposed)
        recommended = self._ask(
            "recommend",
            self._recommend_prompt(text, episodes, registry),
            lambda obj: self._parse_operations(obj, registry),
        )
        if recommended is None:
            return None
        ops = self._author(recommended, episodes, registry)
        if not ops:
            self.last_error = self.last_error or "author: no operation survived verification"
            return None
        evidence = {"assertions": [r.to_dict() for r in ranked]}
        return Bundle(ops, creator=self.name, diagnosis=_clip(text, 1000), evidence=evidence)

    # ------------------------------------------------------------------ stage 1: diagnose
    def _diagnose_prompt(self, episodes: Sequence[Episode], registry: VersionRegistry) -> str:
        wins = [ep for ep in episodes if ep.success][-self.examples :]
        losses = [ep for ep in episodes if not ep.success][-self.examples :]
        types = Counter(ep.task_type for ep in episodes)
        per_type = ", ".join(
            f"{t or '?'} {sum(ep.success for ep in episodes if ep.task_type == t) / n:.0%} of {n}"
            for t, n in sorted(types.items())
        )
        rate = sum(ep.success for ep in episodes) / max(1, len(episodes))
        return "\n".join(
            [
                "You are the skill creator of a reinforcement-learning agent that plays text tasks. STAGE: diagnose.",
                f"Recent episodes: {len(episodes)}, success rate {rate:.0%}. By task type: {per_type}.",
                "Failed episodes:",
                *[_episode_line(f"F{i}", ep) for i, ep in enumerate(losses)],
                "Successful episodes:",
                *[_episode_line(f"S{i}", ep) for i, ep in enumerate(wins)],
                "Current assertions (rule-based checks) with pass rates:",
                self.engine.summary(episodes),
                "Current skills:",
                _skills_block(registry),
                "Propose up to 5 new assertions that separate successful from failed episodes. Check types:",
                _CHECK_HELP,
                'Patterns are Python regexes searched in the raw action (or observation) text, e.g. "^heat\\\\b".',
                'Reply with only JSON: {"diagnosis": "<why episodes fail>", "assertions": [{"check": "...", '
                '"params": {...}, "description": "..."}]}',
            ]
        )

    @staticmethod
    def _parse_diagnosis(obj: dict[str, Any]) -> tuple[str, list[Assertion]]:
        if not isinstance(obj.get("diagnosis"), str):
            raise ValueError('the JSON needs a "diagnosis" string')
        raw = obj.get("assertions", [])
        if not isinstance(raw, list):
            raise ValueError('"assertions" must be a list')
        assertions, problems = [], []
        for i, item in enumerate(raw[:5]):
            try:
                assertions.append(Assertion.from_dict(item))
            except ValueError as error:
                problems.append(f"assertion {i}: {error}")
        if problems:
            raise ValueError("; ".join(problems))
        return obj["diagnosis"], assertions

    # ------------------------------------------------------------------ stage 2: recommend
    def _recommend_prompt(self, diagnosis: str, episodes: Sequence[Episode], registry: VersionRegistry) -> str:
        return "\n".join(
            [
                "You are the skill creator of a reinforcement-learning agent. STAGE: recommend.",
                f"Diagnosis: {_clip(diagnosis, 1500)}",
                "Assertions with pass rates:",
                self.engine.summary(episodes),
                f"Current skills ({len(registry.active_skills())} live, at most {registry.max_active}):",
                _skills_block(registry),
                "Recommend 1-3 operations: add (a new skill), modify (rewrite an existing skill), delete (prune a "
                f"skill that no longer helps). At most {registry.max_active} skills may be live afterwards. "
                "Names are lowercase letters, digits and underscores.",
                'Reply with only JSON: {"operations": [{"op": "add|modify|delete", "name": "...", "intent": "...", '
                '"trigger": "general|beginning|action_pattern"}]}',
            ]
        )

    @staticmethod
    def _parse_operations(obj: dict[str, Any], registry: VersionRegistry) -> list[dict[str, str]]:
        raw = obj.get("operations")
        if not isinstance(raw, list) or not 1 <= len(raw) <= 3:
            raise ValueError('"operations" must be a list of 1-3 operations')
        live = {s.name for s in registry.current.library.guidance(status=None)}
        existing = set(registry.current.library.names())
        ops, problems, seen = [], [], set()
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                problems.append(f"operation {i} is not an object")
                continue
            op, name = item.get("op"), item.get("name")
            problem = name_problem(name)
            if op not in OPS:
                problems.append(f"operation {i}: op {op!r} is not one of {OPS}")
            elif problem:
                problems.append(f"operation {i}: {problem}")
            elif name in seen:
                problems.append(f"operation {i}: {name!r} appears twice")
            elif op == "add" and name in existing:
                problems.append(f"operation {i}: {name!r} exists; use modify")
            elif op in ("modify", "delete") and name not in live:
                problems.append(f"operation {i}: no skill named {name!r} (skills: {sorted(live)})")
            else:
                seen.add(name)
                trigger = str(item.get("trigger", ""))[:40]
                ops.append({"op": op, "name": name, "intent": str(item.get("intent", ""))[:500], "trigger": trigger})
        adds = sum(o["op"] == "add" for o in ops) - sum(o["op"] == "delete" for o in ops)
        if not problems and len(live) + adds > registry.max_active:
            problems.append(
                f"the operations leave {len(live) + adds} skills; at most {registry.max_active} are allowed"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return ops

    # ------------------------------------------------------------------ stage 3: author + verify
    def _author_prompt(self, ops: list[dict[str, str]], episodes: Sequence[Episode], registry: VersionRegistry) -> str:
        keys = Counter(k for ep in episodes for k in {action_key(a) for a in ep.actions} if k)
        frequent = ", ".join(f"'{k}' ({n / max(1, len(episodes)):.0%})" for k, n in keys.most_common(10))
        lines = []
        for i, op in enumerate(ops):
            if op["op"] == "delete":
                continue
            line = f"{i + 1}. {op['op'].upper()} {op['name']}: {op['intent']}"
            if op.get("trigger"):
                line += f" (suggested trigger: {op['trigger']})"
            if op["op"] == "modify":
                old = registry.current.library.get(op["name"])
                line += f"\n   current text: {_clip(old.text, 400)}"
            lines.append(line)
        return "\n".join(
            [
                "You are the skill creator of a reinforcement-learning agent. STAGE: author.",
                "Write each skill below. Trigger types: general (shown every turn), beginning (first turn only), "
                "action_pattern (shown on the turn after an action matching the regex `pattern`; the regex sees the "
                "raw action text).",
                f"when_to_use + action + example must total at most {self.max_chars - 40} characters. A trigger must "
                f"fire in at least {self.min_fire_rate:.0%} of recent episodes.",
                f"Frequent action verbs (share of episodes using them): {frequent}.",
                "Skills to write:",
                *lines,
                'Reply with only JSON: {"skills": [{"name": "...", "description": "...", "when_to_use": "...", '
                '"action": "...", "example": "...", "trigger": "...", "pattern": ""}]}',
            ]
        )

    def _build_skills(
        self, obj: dict[str, Any], wanted: list[str], episodes: Sequence[Episode]
    ) -> tuple[dict[str, Skill], dict[str, str]]:
        """The skills of a reply that pass the pre-test check, and the problem of each one that does not."""
        raw = obj.get("skills")
        if not isinstance(raw, list):
            raise ValueError('the JSON needs a "skills" list')
        built: dict[str, Skill] = {}
        problems: dict[str, str] = {}
        # made from the reservoir's failures (the prompt shows some and sums up all through the pass rates)
        sources = [(ep, None) for ep in episodes if not ep.success]
        by_name = {item.get("name"): item for item in raw if isinstance(item, dict)}
        for name in wanted:
            item = by_name.get(name)
            if item is None:
                problems[name] = f"skill {name!r} is missing"
                continue
            try:
                text = skill_text(
                    str(item.get("when_to_use", "")), str(item.get("action", "")), str(item.get("example", ""))
                )
                skill = Skill(
                    name=name,
                    kind="guidance",
                    description=_clip(str(item.get("description", "")), 1024),
                    text=text[:2000],
                    trigger=str(item.get("trigger", "general")),
                    pattern=str(item.get("pattern") or ""),
                )
            except SkillError as error:
                problems[name] = str(error)
                continue
            problem = self.check(skill, episodes, sources)
            if problem:
                problems[name] = problem
            else:
                built[name] = skill
        return built, problems

    def _author(
        self, ops: list[dict[str, str]], episodes: Sequence[Episode], registry: VersionRegistry
    ) -> list[Operation]:
        wanted = [op["name"] for op in ops if op["op"] != "delete"]
        built: dict[str, Skill] = {}
        problems: dict[str, str] = {}
        if wanted:
            prompt, feedback = self._author_prompt(ops, episodes, registry), ""
            for _ in range(self.retries + 1):
                missing = [n for n in wanted if n not in built]
                if not missing:
                    break
                text = prompt + (f"\n\nYOUR PREVIOUS REPLY WAS REJECTED: {feedback}\nReply again with only the JSON "
                                 "object for the skills that failed." if feedback else "")  # fmt: skip
                self.calls += 1
                try:
                    new, found = self._build_skills(extract_json(self.generate(text)), missing, episodes)
                except Exception as error:  # noqa: BLE001 - bad JSON or a failing backend: retry with the reason
                    new, found = {}, {name: f"{type(error).__name__}: {error}" for name in missing}
                built.update(new)
                problems.update(found)
                feedback = _clip("; ".join(dict.fromkeys(found.values())), 800)
            dropped = [n for n in wanted if n not in built]
            for name in dropped:
                self.reject(name, problems.get(name, "not written"))
            if feedback and dropped:
                self.last_error = f"author: dropped {dropped}: {feedback}"
        out = []
        for op in ops:
            if op["op"] == "delete":
                out.append(Operation("delete", op["name"], reason=op["intent"]))
            elif op["name"] in built:
                out.append(Operation(op["op"], op["name"], built[op["name"]], reason=op["intent"]))
        return out
