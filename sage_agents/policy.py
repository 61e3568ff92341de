r"""The LLM policy: prompt building, action parsing, batched KV-cached generation and constrained decoding.

One agent turn = one ``(prompt, completion)`` pair. The prompt is rebuilt every turn (task first, then the
last ``history_turns`` (observation, action) pairs, the skill library, the current observation and the
admissible commands) and the completion is the action text plus EOS; only completion tokens enter a loss.

Two ways to act:

* **free generation** (``constrained=False``): sample up to ``max_new_tokens`` tokens with a KV cache, batched
  over the group (left padding). The action is parsed out of the completion (:func:`parse_action`).
* **constrained decoding** (``constrained=True``): score each candidate action (the admissible commands,
  ``call NAME(`` for every program skill in the library, and optional skill-definition templates as
  ``DEFINITION\ncall NAME(``) by its log-likelihood under the model, reusing one KV cache of the prompt for all
  candidates, then sample a candidate from the model's distribution renormalised over the candidate set (or
  take the best one when greedy). A call's arguments are then chosen one at a time the same way, among the
  entities and types the task, observation and admissible commands name (with ``typed_arguments``, only those
  of a type the task or the parameter's name names). The chosen text's tokens are the completion. This is what
  makes a tiny model act (see docs/agents.md, calibration).

Token log-probabilities everywhere are ``log_softmax(logits / temperature)``, the same distribution the
trainer differentiates, so rollout log-probs and training log-probs agree up to float error.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

ACTION_KINDS = ("command", "define", "call", "none")
PRUNE_PREFIX_TOKENS = 8
"""Tokens of each candidate a greedy constrained choice scores before deciding whether the rest can matter."""
_COMMAND_RE = re.compile(r"^[a-z0-9][a-z0-9 '\-]*$")
_CALL_RE = re.compile(r"^call\s+[A-Za-z_][\w-]*\s*\(.*\)\s*$")
_DEF_RE = re.compile(r"^skill\s+[A-Za-z_][\w-]*\s*\(.*\)\s*:\s*$")
_SIGNATURE_RE = re.compile(r"^-\s*([A-Za-z_][\w-]*)\(([^)]*)\)", re.MULTILINE)
_ENTITY_RE = re.compile(r"\b([a-z]+ \d+)\b")
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


def parse_action(completion: str) -> ParsedAction:
    """Parse one action from a completion: a skill definition block (+ call lines), a call, or a command.

    Leading ``Action:`` / ``>`` prefixes and Markdown code fences are stripped. A command is the first
    non-empty line when it is made of lowercase words, digits, spaces, ``'`` and ``-``; anything else is
    ``none`` and is passed through unchanged, so that the env reports it as an invalid action.
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
    if _COMMAND_RE.match(first):
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
        max_admissible: list at most this many commands.
        max_observation_chars: cut each history observation to this many characters.

    Returns:
        The prompt; it ends with ``"Action:\\n"`` so that the completion starts on a token boundary.
    """
    parts = [f"Task: {task.strip()}"]
    if skills.strip():
        parts.append(f"Skills:\n{skills.strip()}")
    if earlier_actions:
        parts.append("Earlier actions: " + "; ".join(_action_line(a) for a in earlier_actions))
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


def argument_options(task: str, observation: str, admissible: Sequence[str], limit: int = 64) -> list[str]:
    """Values a skill-call argument may take in constrained decoding, task-named first.

    The entities (``word N``) named in the task, the observation and the admissible commands, their types
    (``word``), and the task's content words. Values whose words appear in the task come first; at most
    ``limit`` are offered.
    """
    texts = [task, observation, *admissible]
    entities = [e for text in texts for e in _ENTITY_RE.findall(text.lower())]
    named = _task_words(task)
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
    num_candidates: int = 0
    """Candidates scored (constrained decoding), else 0."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form diagnostics."""


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
        constrained: act by scoring candidates instead of free generation.
        skill_calls: offer ``call NAME(args)`` candidates for library skills (constrained mode).
        skill_templates: skill definitions offered as "define + call" candidates (constrained mode); a policy
            with templates shows :data:`NO_SKILLS_YET` as its Skills section while the library is empty.
        max_argument_options: values offered per skill-call argument (constrained mode).
        typed_arguments: a skill-call argument takes only the values whose type the task or the parameter's name
            names (:func:`typed_options`; constrained mode).
        template_headers: a skill-definition template competes by its header line ``skill NAME(params):``
            alone, and its body follows (constrained mode): choosing a template is one decision, not a bet on
            reproducing ~80 tokens, which a short command would win against at any sensible preference.
        candidate_score: ``sum`` (the candidate's log-likelihood: choices follow the LM's own sequence
            distribution renormalised over the candidates) or ``mean`` (per-token mean: removes the bias of an
            untrained model toward short candidates, at the cost of that exactness).
        prune_greedy: a greedy ``sum`` choice scores the rest of a long candidate (a skill-definition template)
            only when its first tokens still beat the best whole candidate: the same choice, far fewer tokens
            (:meth:`_score_pruned`). The diagnostic ``extra["choice_logprob"]`` then normalises over the pruned
            candidates' prefix scores.
        show_admissible: list the admissible commands in the prompt.
        max_prompt_tokens: drop the oldest history turns until the prompt fits.
        use_chat_template: wrap the prompt as one user message; None = when the tokenizer has a template.
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
        max_argument_options: int = 64,
        typed_arguments: bool = False,
        template_headers: bool = False,
        candidate_score: str = "sum",
        prune_greedy: bool = True,
        show_admissible: bool = True,
        max_prompt_tokens: int = 1024,
        use_chat_template: bool | None = None,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.tokenizer.padding_side = "left"
        self.history_turns, self.earlier_actions, self.max_new_tokens = history_turns, earlier_actions, max_new_tokens
        self.skill_descriptions = skill_descriptions
        self.temperature, self.top_p = temperature, top_p
        self.constrained, self.skill_calls = constrained, skill_calls
        self.skill_templates, self.max_argument_options = list(skill_templates), max_argument_options
        self.typed_arguments, self.template_headers = typed_arguments, template_headers
        if candidate_score not in ("sum", "mean"):
            raise ValueError(f"candidate_score={candidate_score!r} must be 'sum' or 'mean'.")
        self.candidate_score = candidate_score
        self.prune_greedy = prune_greedy
        self.show_admissible, self.max_prompt_tokens = show_admissible, max_prompt_tokens
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.use_chat_template = has_template if use_chat_template is None else use_chat_template
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_id
        self._cache_kw = "cache" if "cache" in _forward_parameters(model) else "past_key_values"

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
        if self.skill_templates:
            names = [t.split("(", 1)[0].removeprefix("skill ").strip() for t in self.skill_templates]
            parts.append(f"{len(names)} skill-definition templates ({', '.join(names)})")
        return "; ".join(parts)

    # ------------------------------------------------------------------ prompts
    def prompt(self, obs: dict[str, str], history: Sequence[tuple[str, str]], admissible: Sequence[str]) -> str:
        """The rendered prompt text of one turn (chat template applied when used)."""
        history = list(history)
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
            text = build_prompt(obs["task"], obs["observation"], history, skills, admissible, earlier_actions=earlier)
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
        """One turn for each env of a batch: build the prompts, then generate or choose among candidates."""
        admissible = [list(info.get("admissible_commands", [])) for info in infos]
        prompts = [self.prompt(o, h, a) for o, h, a in zip(observations, histories, admissible, strict=True)]
        if not self.constrained:
            return self.generate(prompts, greedy=greedy)
        candidates = []
        for obs, adm in zip(observations, admissible, strict=True):
            values = argument_options(obs["task"], obs.get("observation", ""), adm, self.max_argument_options)
            cands: list[str | tuple[str, list[list[str]]]] = list(dict.fromkeys(adm))
            if self.skill_calls:
                task = obs["task"]
                cands += [
                    (text, [typed_options(values, p, task) if self.typed_arguments else values for p in params])
                    for text, params in call_stubs(obs.get("skills", ""), self.skill_templates)
                    if values or not params
                ]
            candidates.append(cands or ["look"])
        return self.choose(prompts, candidates, greedy=greedy)

    def _forward(self, **kwargs: Any) -> Any:
        cache = kwargs.pop("cache", None)
        if cache is not None:
            kwargs[self._cache_kw] = cache
        return self.model(use_cache=True, **kwargs)

    @staticmethod
    def _cache_of(out: Any) -> Any:
        return getattr(out, "cache", None) or getattr(out, "past_key_values", None)

    def _left_pad(self, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        device = self.model.device
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long, device=device)  # (B, P)
        mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)  # (B, P)
        for i, row in enumerate(rows):
            if row:
                ids[i, width - len(row) :] = torch.tensor(row, device=device)
                mask[i, width - len(row) :] = 1
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, P)
        return ids, mask, position_ids

    def _sample(self, logits: torch.Tensor, greedy: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Pick one token per row from ``logits`` (B, V); return (tokens (B,), log-probs (B,))."""
        logp = torch.log_softmax(logits.float() / self.temperature, dim=-1)  # (B, V)
        if greedy:
            tokens = logp.argmax(-1)  # (B,)
        else:
            probs = logp.exp()
            if self.top_p < 1.0:  # nucleus: keep the smallest prefix of sorted probs with mass >= top_p
                sorted_p, order = probs.sort(-1, descending=True)  # (B, V)
                drop = sorted_p.cumsum(-1) - sorted_p > self.top_p
                sorted_p = sorted_p.masked_fill(drop, 0.0)
                probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)  # (B, V)
            tokens = torch.multinomial(probs, 1).squeeze(-1)  # (B,)
        return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)  # (B,)

    @torch.no_grad()
    def generate(self, prompts: Sequence[str], *, greedy: bool = False) -> list[Completion]:
        """Free generation for a batch of prompt texts, with a KV cache; stops per row at EOS."""
        prompt_ids = [self.encode(p) for p in prompts]
        ids, mask, pos = self._left_pad(prompt_ids)
        out = self._forward(input_ids=ids, attention_mask=mask, position_ids=pos)
        cache, logits = self._cache_of(out), out.logits[:, -1]  # (B, V)
        done = torch.zeros(len(prompts), dtype=torch.bool, device=ids.device)  # (B,)
        tokens, logps = [], []
        next_pos = pos[:, -1] + 1  # (B,)
        for step in range(self.max_new_tokens):
            tok, lp = self._sample(logits, greedy)
            tok = tok.masked_fill(done, self.pad_id)
            tokens.append(tok)
            logps.append(lp)
            alive = ~done
            done = done | (tok == self.eos_id)
            if bool(done.all()) or step == self.max_new_tokens - 1:
                break
            mask = torch.cat([mask, alive.long()[:, None]], dim=1)  # (B, P + t + 1)
            out = self._forward(
                input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos[:, None], cache=cache
            )
            cache, logits = self._cache_of(out), out.logits[:, -1]  # (B, V)
            next_pos = next_pos + 1
        tok_mat = torch.stack(tokens, 1).tolist()  # (B, T)
        lp_mat = torch.stack(logps, 1).tolist()  # (B, T)
        results = []
        for i, row in enumerate(tok_mat):
            n = row.index(self.eos_id) + 1 if self.eos_id in row else len(row)
            completion_ids = row[:n]
            text = self.tokenizer.decode(completion_ids, skip_special_tokens=True)
            results.append(Completion(prompt_ids[i], completion_ids, lp_mat[i][:n], text, parse_action(text)))
        return results

    @torch.no_grad()
    def score(
        self,
        prompts: Sequence[str],
        candidates: Sequence[Sequence[str]],
        complete: Sequence[Sequence[bool]] | None = None,
        max_tokens: int | None = None,
    ) -> list[list[list[float]]]:
        """Token log-probs of each candidate after its prompt, sharing one prompt KV cache per prompt.

        Args:
            prompts: B prompt texts.
            candidates: per prompt, the candidate completions.
            complete: per candidate, whether it is a whole completion (scored with EOS appended) or an
                opening (no EOS: its log-likelihood is the probability of any completion starting with it);
                None = all complete.
            max_tokens: score only each candidate's first ``max_tokens`` tokens (EOS included); None = all.

        Returns:
            ``out[b][c]`` = the list of token log-probs of candidate ``c`` of prompt ``b``.
        """
        prompt_ids = [self.encode(p) for p in prompts]
        ids, mask, pos = self._left_pad(prompt_ids)
        out = self._forward(input_ids=ids, attention_mask=mask, position_ids=pos)
        cache, last = self._cache_of(out), out.logits[:, -1]  # (B, V)
        if complete is None:
            complete = [[True] * len(cands) for cands in candidates]
        rows = [
            (b, (self.encode(c) + [self.eos_id] * whole)[:max_tokens])
            for b, (cands, flags) in enumerate(zip(candidates, complete, strict=True))
            for c, whole in zip(cands, flags, strict=True)
        ]
        vocab = last.shape[-1]
        # Chunks of similar length: a short command padded to a 300-token skill definition costs 60x its work.
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][1]))
        flat: list[list[float]] = [[] for _ in rows]
        start = 0
        while start < len(order):
            width = len(rows[order[min(start + 255, len(order) - 1)]][1])
            chunk_size = max(1, min(256, (1 << 24) // max(1, width * vocab)))  # bound the (n, C, V) logits
            index = order[start : start + chunk_size]
            chunk = [rows[i] for i in index]
            start += len(chunk)
            width = max(len(r) for _, r in chunk)
            owner = torch.tensor([b for b, _ in chunk], device=ids.device)  # (n,)
            cand = torch.full((len(chunk), width), self.pad_id, dtype=torch.long, device=ids.device)  # (n, C)
            cmask = torch.zeros_like(cand)  # (n, C)
            for i, (_, r) in enumerate(chunk):
                cand[i, : len(r)] = torch.tensor(r, device=ids.device)
                cmask[i, : len(r)] = 1
            sub = _select_cache(cache, owner)
            full_mask = torch.cat([mask[owner], cmask], dim=1)  # (n, P + C)
            cpos = pos[owner, -1:] + 1 + torch.arange(width, device=ids.device)  # (n, C)
            out2 = self._forward(input_ids=cand, attention_mask=full_mask, position_ids=cpos, cache=sub)
            logits = torch.cat([last[owner][:, None], out2.logits[:, :-1]], dim=1)  # (n, C, V)
            logp = torch.log_softmax(logits.float() / self.temperature, -1).gather(-1, cand[..., None])  # (n, C, 1)
            logp = logp.squeeze(-1)  # (n, C)
            for i, (row, (_, r)) in enumerate(zip(index, chunk, strict=True)):
                flat[row] = logp[i, : len(r)].tolist()
        result, k = [], 0
        for cands in candidates:
            result.append(flat[k : k + len(cands)])
            k += len(cands)
        return result

    @torch.no_grad()
    def choose(
        self,
        prompts: Sequence[str],
        candidates: Sequence[Sequence[str | tuple[str, Sequence[Sequence[str]]]]],
        *,
        greedy: bool = False,
    ) -> list[Completion]:
        """Constrained decoding: pick one candidate per prompt from the model's renormalised distribution.

        A candidate is a whole action (a string, or ``(text, [])``) or a skill-call opening ``(text, values)``
        whose i-th argument takes one of ``values[i]`` (:func:`call_stubs`, :func:`argument_options`). Whole
        actions are scored with EOS, openings without (their score is the probability of any completion starting
        with them). When an opening wins, its arguments are chosen one at a time the same way, each scored after
        the text chosen so far (``a,`` between arguments, `` a)`` + EOS for the last), so a call costs n small
        choices instead of a product of argument tuples, and a long skill definition is not re-scored for every
        option. With ``template_headers``, a skill definition competes by its header line alone (its body
        follows from the template). The completion's token log-probs are those of the final text under the model.
        """
        rows = [[c if isinstance(c, tuple) else (c, []) for c in cands] for cands in candidates]
        texts_of = [[self._scored_part(text) for text, _ in row] for row in rows]
        complete = [
            [not values and part == text for part, (text, values) in zip(parts, row, strict=True)]
            for parts, row in zip(texts_of, rows, strict=True)
        ]
        if greedy and self.prune_greedy and self.candidate_score == "sum":
            scores = self._score_pruned(prompts, texts_of, complete)
        else:
            scores = self.score(prompts, texts_of, complete)
        texts, pending, token_lps, choice_logprob, scored, grown = [], [], [], [], [], []
        for b, (row, parts, lps) in enumerate(zip(rows, texts_of, scores, strict=True)):
            k, logprob = self._pick(lps, greedy, mean=self.candidate_score == "mean")
            texts.append(row[k][0])
            pending.append(list(row[k][1]))
            token_lps.append(lps[k])
            choice_logprob.append(logprob)
            scored.append(len(row))
            if pending[b] or parts[k] != texts[b]:  # arguments or a template's body to come: re-scored whole below
                grown.append(b)
        active = [b for b in range(len(prompts)) if pending[b]]
        while active:  # one argument of every open call: scored after the text so far, which joins the prompt
            options = {
                b: [
                    f"{' ' if texts[b].endswith(',') else ''}{v}{')' if len(pending[b]) == 1 else ','}"
                    for v in pending[b][0]
                ]
                for b in active
            }
            scores = self.score(
                [prompts[b] + texts[b] for b in active],
                [options[b] for b in active],
                [[len(pending[b]) == 1] * len(options[b]) for b in active],
            )
            for b, lps in zip(active, scores, strict=True):
                k, logprob = self._pick(lps, greedy, mean=False)
                texts[b] += options[b][k]
                pending[b].pop(0)
                choice_logprob[b] += logprob
                scored[b] += len(options[b])
            active = [b for b in active if pending[b]]
        if grown:  # the completion's own token log-probs (the loss needs the whole text's, not the pieces')
            for b, lps in zip(
                grown, self.score([prompts[b] for b in grown], [[texts[b]] for b in grown]), strict=True
            ):
                token_lps[b] = lps[0]
        results = []
        for b, prompt in enumerate(prompts):
            completion_ids = self.encode(texts[b]) + [self.eos_id]
            extra = {"choice_logprob": choice_logprob[b]}
            results.append(
                Completion(
                    self.encode(prompt),
                    completion_ids,
                    token_lps[b],
                    texts[b],
                    parse_action(texts[b]),
                    scored[b],
                    extra,
                )
            )
        return results

    def _scored_part(self, candidate: str) -> str:
        """What of a candidate competes in a choice: a definition's header line (``template_headers``), else all."""
        if self.template_headers and candidate.startswith("skill "):
            return candidate.split("\n", 1)[0]
        return candidate

    def _score_pruned(
        self, prompts: Sequence[str], candidates: Sequence[Sequence[str]], complete: Sequence[Sequence[bool]]
    ) -> list[list[list[float]]]:
        """:meth:`score` for a greedy choice: a long candidate is scored in full only if its prefix can still win.

        Every candidate's first ``PRUNE_PREFIX_TOKENS`` tokens are scored; one that is longer is scored in full
        only when that prefix's log-likelihood is at least the best whole candidate's. Log-probs are <= 0, so a
        prefix bounds its candidate from above and a pruned one cannot be the argmax: the choice is the one full
        scoring makes, at the cost of a few tokens for each skill-definition template that is not in question.
        A pruned candidate keeps its prefix's token log-probs.
        """
        scores = self.score(prompts, candidates, complete, max_tokens=PRUNE_PREFIX_TOKENS)
        unfinished: dict[int, list[int]] = {}  # prompt -> candidates whose prefix may still win
        for b, lps in enumerate(scores):
            # Only a candidate scored to the limit can have been cut: re-encode just those to know their length.
            cut = [
                len(lp) == PRUNE_PREFIX_TOKENS and len(self.encode(c)) + whole > PRUNE_PREFIX_TOKENS
                for lp, c, whole in zip(lps, candidates[b], complete[b], strict=True)
            ]
            best = max((sum(lp) for lp, was_cut in zip(lps, cut, strict=True) if not was_cut), default=-float("inf"))
            keep = [k for k, (lp, was_cut) in enumerate(zip(lps, cut, strict=True)) if was_cut and sum(lp) >= best]
            if keep:
                unfinished[b] = keep
        if unfinished:
            rest = self.score(
                [prompts[b] for b in unfinished],
                [[candidates[b][k] for k in ks] for b, ks in unfinished.items()],
                [[complete[b][k] for k in ks] for b, ks in unfinished.items()],
            )
            for (b, ks), lps in zip(unfinished.items(), rest, strict=True):
                for k, lp in zip(ks, lps, strict=True):
                    scores[b][k] = lp
        return scores

    @staticmethod
    def _pick(token_lps: Sequence[Sequence[float]], greedy: bool, *, mean: bool) -> tuple[int, float]:
        """Index of the chosen candidate and its log-probability under the renormalised distribution."""
        seq = torch.tensor([sum(lps) for lps in token_lps])  # (N,) log-likelihoods
        if mean:
            seq = seq / torch.tensor([max(1, len(lps)) for lps in token_lps])  # (N,)
        k = int(seq.argmax()) if greedy else int(torch.multinomial(torch.softmax(seq, -1), 1))
        return k, float(torch.log_softmax(seq, -1)[k])


def _select_cache(cache: Any, index: torch.Tensor) -> Any:
    """A cache holding rows ``index`` (n,) of ``cache`` (B, ...); ``cache`` itself is left untouched."""
    if hasattr(cache, "layers") and hasattr(cache, "batch_select_indices"):
        sub = copy.copy(cache)
        sub.layers = [copy.copy(layer) for layer in cache.layers]  # layers re-bind keys/values: shallow is safe
        sub.batch_select_indices(index)
        return sub
    if isinstance(cache, tuple):  # legacy ((k, v), ...) with k: (B, heads, P, d)
        return tuple(tuple(t[index] for t in layer) for layer in cache)
    sub = copy.deepcopy(cache)
    sub.batch_select_indices(index)
    return sub


def _forward_parameters(model: Any) -> Any:
    """The ``forward`` parameters of the causal LM under ``model`` (DDP and peft wrappers take ``**kwargs``)."""
    inner = getattr(model, "module", model)  # DistributedDataParallel
    inner = inner.get_base_model() if hasattr(inner, "get_base_model") else inner  # peft
    return inspect.signature(inner.forward).parameters


def completion_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    temperature: float = 1.0,
    pad_id: int = 0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Differentiable ``log pi(completion token | prompt, earlier tokens)`` for a batch of rows.

    Rows are left-padded ``prompt + completion`` (position ids count real tokens only, as in generation), so
    every completion ends at the last column and the LM head runs only on the last ``T + 1`` positions
    (``logits_to_keep``, where the model takes it): prompt (environment) tokens never get logits, never reach
    the loss, and a long prompt costs no (L, V) logits tensor.

    Returns:
        ``(logp, mask, entropy)``: (B, T) log-probs of the completion tokens, (B, T) float mask of real
        tokens, and (B, T) token entropies (or None).
    """
    device = next(model.parameters()).device
    rows = [list(p) + list(c) for p, c in zip(prompt_ids, completion_ids, strict=True)]
    width = max(len(r) for r in rows)
    tmax = max(len(c) for c in completion_ids)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)  # (B, L)
    attn = torch.zeros_like(ids)  # (B, L)
    for i, r in enumerate(rows):
        ids[i, width - len(r) :] = torch.tensor(r, device=device)
        attn[i, width - len(r) :] = 1
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)  # (B, L)
    keep = min(tmax + 1, width)  # the positions that predict a completion token (+1 if a prompt is empty)
    if "logits_to_keep" in _forward_parameters(model):
        logits = model(input_ids=ids, attention_mask=attn, position_ids=position_ids, logits_to_keep=keep).logits
    else:
        logits = model(input_ids=ids, attention_mask=attn, position_ids=position_ids).logits[:, -keep:]
    # logits: (B, K) over columns width-K .. width-1
    clen = torch.tensor([len(c) for c in completion_ids], device=device)  # (B,)
    steps = torch.arange(tmax, device=device)  # (T,)
    mask = (steps[None] < clen[:, None]).float()  # (B, T)
    tok_col = (width - clen[:, None] + steps[None]).clamp(max=width - 1)  # (B, T): column of each token
    pred_idx = (tok_col - 1 - (width - keep)).clamp(min=0)  # (B, T): its predicting column, in the kept block
    sel = logits.gather(1, pred_idx[..., None].expand(-1, -1, logits.shape[-1])).float()  # (B, T, V)
    logp_all = F.log_softmax(sel / temperature, dim=-1)  # (B, T, V)
    targets = ids.gather(1, tok_col)  # (B, T)
    logp = logp_all.gather(-1, targets[..., None]).squeeze(-1) * mask  # (B, T)
    entropy = None
    if with_entropy:
        entropy = -(logp_all.exp() * logp_all).sum(-1).detach() * mask  # (B, T)
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
