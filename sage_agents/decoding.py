"""Generation on Hugging Face ``generate``, free or constrained to a grammar of choices.

A constrained turn follows a *plan*: a generator that yields the options of one choice (:class:`Option`: a
text, and whether taking it ends the action) and is sent back the text taken; the next choice may depend on it
(a call's arguments follow its name). Decoding walks a token trie of the current choice's options: the allowed
next tokens are the children of the trie node reached so far (an ending option's tokens are followed by EOS),
and the model samples among them through ``generate(prefix_allowed_tokens_fn=...)`` (transformers'
``PrefixConstrainedLogitsProcessor``). When a non-ending option is complete the plan is sent its text and
yields the next choice; a plan that returns ends the action with EOS.

So each constrained token is drawn from the model's softmax *restricted to the allowed tokens*, and that is the
log-prob recorded here and the one the trainer differentiates (:func:`sage_agents.policy.completion_logprobs`
with ``allowed``). A token with a single allowed id is *forced*: its restricted log-prob is 0 and it carries no
gradient, so the loss leaves it out (a skill template's body after its name is chosen, a call's ``)``).
The options of one choice must be prefix-free as texts (an ending option is, through its EOS); a choice that
is not raises ``ValueError``. Options that the tokenizer maps to the same tokens (unknown words) are one
option: the first.

Constrained decoding has a second form, by whole options (:func:`decode_options`): a choice's option is scored
as a whole by its tokens' full-vocabulary log-likelihood (all options of a batch in one forward by tree
attention); greedy takes the best, sampling draws from the softmax over the scores. Then the policy's unit is the
choice, not the token: ``log pi(option) = score(option) - logsumexp(scores of the choice's options)``, recorded at
the option's first token (the others are forced and carry 0), and the trainer differentiates that same quantity
(:func:`choice_logprobs`, from the :class:`Choice` records).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch


class Option(NamedTuple):
    """One option of a constrained choice."""

    text: str
    """The text it adds to the completion."""
    ends: bool
    """Taking it ends the action (EOS follows its tokens)."""
    group: str = ""
    """The kind of action it begins, where a choice offers several kinds (a command, a skill call, a skill
    definition): greedy decoding by whole options weighs each group by its options' total probability before it
    weighs the options (:func:`decode_options`)."""


Plan = Generator[list[Option], str, None]
"""A constrained turn: yields each choice's options, is sent the text of the option taken."""


def call_plan(
    commands: Sequence[str],
    calls: Sequence[tuple[str, Sequence[Sequence[str]]]],
    define: Callable[[], Plan] | None = None,
) -> Plan:
    """The plan of one constrained agent turn: a command, a skill call, or a skill definition written piecewise.

    A call's arguments follow its opening one by one (:func:`arguments_plan`).

    Args:
        commands: whole actions (the admissible commands); each ends the action.
        calls: ``(opening, values)``: a call's opening (``call NAME(``, possibly after a skill definition) and,
            per parameter, the values it may take; an opening without parameters is a whole action.
        define: the plan of a definition after its first word ``skill`` (:meth:`SkillGrammar.plan
            <sage_agents.skill_grammar.SkillGrammar.plan>`); None = the turn may not write one.
    """
    params = {opening: list(values) for opening, values in calls}
    first = [Option(c, True, "command") for c in commands] + [Option(o, not v, "call") for o, v in params.items()]
    taken = yield first + [Option("skill", False, "skill")] * (define is not None)
    if taken == "skill" and define is not None:
        yield from define()
        return
    yield from arguments_plan(params.get(taken, []))


def arguments_plan(values: Sequence[Sequence[str]]) -> Plan:
    """A call's arguments after its opening, one choice each among ``values[i]``.

    Written ``a,`` `` b)``: the last one closes the call and ends the action.
    """
    for i, options in enumerate(values):
        last = i == len(values) - 1
        yield [Option(f"{' ' if i else ''}{v}{')' if last else ','}", last) for v in dict.fromkeys(options)]


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    option: Option | None = None  # set on the node where an option's tokens end


def _trie(options: Sequence[Option], encode: Callable[[str], Sequence[int]], eos_id: int) -> _Node:
    """The token trie of one choice; raises ``ValueError`` when an option's tokens are a prefix of another's."""
    root = _Node()
    for option in dict.fromkeys(options):
        tokens = [*encode(option.text), *[eos_id] * option.ends]
        node = root
        for token in tokens:
            if node.option is not None:
                raise ValueError(f"option {node.option.text!r} is a prefix of {option.text!r} in one choice")
            node = node.children.setdefault(token, _Node())
        if node.option is not None and not node.children:
            continue  # the same tokens as an earlier option (words the tokenizer does not know): keep that one
        if node.children or not tokens:
            raise ValueError(f"option {option.text!r} is empty or a prefix of another option in one choice")
        node.option = option
    return root


class ConstrainedRow:
    """One row of a constrained batch: follows its plan token by token.

    Args:
        plan: the turn's :data:`Plan`.
        encode: text -> token ids (no special tokens).
        eos_id: the EOS token id.
    """

    def __init__(self, plan: Plan, encode: Callable[[str], Sequence[int]], eos_id: int):
        self.plan, self.encode, self.eos_id = plan, encode, eos_id
        self.done = False
        self.text = ""  # the options taken so far
        self.allowed_log: list[list[int]] = []  # the allowed ids before each token taken
        self.node = self._choice(next(plan, None))

    def _choice(self, options: list[Option] | None) -> _Node:
        if options is None:  # the plan has returned: end the action
            return _trie([Option("", True)], lambda _: [], self.eos_id)
        if not options:
            raise ValueError("a constrained choice has no options")
        return _trie(options, self.encode, self.eos_id)

    def allowed(self) -> list[int]:
        """Token ids that may come next."""
        return list(self.node.children)

    def advance(self, token: int) -> None:
        """Take ``token`` (one of :meth:`allowed`)."""
        self.allowed_log.append(self.allowed())
        self.node = self.node.children[token]
        option = self.node.option
        if option is None:
            return
        self.text += option.text
        if option.ends:
            self.done = True
            return
        try:
            self.node = self._choice(self.plan.send(option.text))
        except StopIteration:
            self.node = self._choice(None)


@dataclass
class Generated:
    """One row of :func:`generate`'s output."""

    completion_ids: list[int]
    """The tokens generated, EOS included when produced."""
    logprobs: list[float]
    """``log pi(token)`` of each, under the distribution it was sampled from (restricted when constrained)."""
    allowed: list[list[int]] | None
    """Per token, the ids the constraint allowed (one id: forced); None for free generation."""
    text: str | None
    """Constrained: the texts of the options taken (exact, whatever the tokenizer decodes); None for free."""
    choices: list[Choice] | None = None
    """Decoded by whole options (:func:`decode_options`): each choice, what it offered and what was taken."""


@dataclass
class Choice:
    """One choice of a turn decoded by whole options: what it offered, what was taken."""

    start: int
    """Index in the completion of the taken option's first token."""
    options: list[list[int]]
    """Each option's tokens (an ending option's end with EOS)."""
    taken: int
    """Index in ``options`` of the option taken."""


@torch.no_grad()
def generate(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    *,
    eos_id: int,
    pad_id: int,
    max_new_tokens: int,
    greedy: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    plans: Sequence[Plan] | None = None,
    encode: Callable[[str], Sequence[int]] | None = None,
) -> list[Generated]:
    """Sample completions of left-padded prompts with ``model.generate`` (KV cache, batched).

    Args:
        model: a Hugging Face causal LM (a DDP / accelerate wrapper is unwrapped).
        prompt_ids: B prompts' token ids.
        eos_id: EOS (ends a row).
        pad_id: padding id.
        max_new_tokens: generation budget per row.
        greedy: argmax instead of sampling.
        temperature: softmax temperature (sampling and log-probs).
        top_p: nucleus threshold when sampling (1.0 = off); log-probs ignore it.
        plans: one :data:`Plan` per row for constrained decoding (see the module docstring); None = free.
        encode: text -> token ids, needed with ``plans``.

    Returns:
        One :class:`Generated` per prompt.
    """
    from transformers import GenerationConfig

    model = getattr(model, "module", model)
    device = next(model.parameters()).device
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long, device=device)  # (B, P)
    mask = torch.zeros_like(ids)  # (B, P)
    for i, row in enumerate(prompt_ids):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row, device=device)
            mask[i, width - len(row) :] = 1
    rows = None
    if plans is not None:
        assert encode is not None, "constrained generation needs encode"
        rows = [ConstrainedRow(plan, encode, eos_id) for plan in plans]

    def allowed_tokens(b: int, sent: torch.Tensor) -> list[int]:
        row = rows[b]
        for token in sent[width + len(row.allowed_log) :].tolist():  # the token taken since the last call
            if not row.done:
                row.advance(token)
        return [pad_id] if row.done else row.allowed()  # a finished row's tokens are replaced by padding

    sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
    config = GenerationConfig(
        max_new_tokens=max_new_tokens, eos_token_id=eos_id, pad_token_id=pad_id, return_dict_in_generate=True,
        output_logits=True, **({"do_sample": False} if greedy else sampling),
    )  # fmt: skip
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        generation_config=config,
        prefix_allowed_tokens_fn=allowed_tokens if rows is not None else None,
    )
    tokens = out.sequences[:, width:]  # (B, T)
    logits = torch.stack(out.logits, 1).float() / temperature  # (B, T, V)
    if rows is not None:
        for b in range(len(rows)):  # the last token is taken after generate's last call
            allowed_tokens(b, out.sequences[b])
        keep = allowed_mask([row.allowed_log for row in rows], logits.shape, logits.device)  # (B, T, V)
        logits = logits.masked_fill(~keep, float("-inf"))
    logp = torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)  # (B, T)
    results = []
    for b, row_tokens in enumerate(tokens.tolist()):
        n = row_tokens.index(eos_id) + 1 if eos_id in row_tokens else len(row_tokens)
        allowed, text = (rows[b].allowed_log[:n], rows[b].text) if rows is not None else (None, None)
        results.append(Generated(row_tokens[:n], logp[b, :n].tolist(), allowed, text))
    return results


@torch.no_grad()
def decode_options(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    plans: Sequence[Plan],
    *,
    encode: Callable[[str], Sequence[int]],
    eos_id: int,
    greedy: bool = False,
    temperature: float = 1.0,
) -> list[Generated]:
    """Constrained decoding by whole options: each choice of a plan takes (greedy) or draws one option as a whole.

    An option's score is the sum of its tokens' log-probs under the model's full-vocabulary softmax (EOS
    included for an ending option), so every option is weighed by what the model would write unconstrained, and
    ``pi(option) = softmax(scores)`` over the choice. Greedy takes the argmax (of the scores at temperature 1, so
    the choice does not depend on the temperature) within the group of options (:attr:`Option.group`) that has the
    largest total probability (:func:`_likeliest`). Token-by-token decoding (:func:`generate`) renormalises over
    the allowed tokens at each step instead, so its first token commits before the rest is weighed: a model that
    would write ``take apple 1`` but sees no apple still picks ``take`` when "take" is its likeliest first word,
    then whichever object is offered (docs/demo.md, "Whole-option greedy decoding"). A choice with one option (a
    forced text) is taken without the model.

    Recorded per token: ``log pi(option)`` (at ``temperature``) at each option's first token, 0 at its others
    and at forced texts, what :func:`choice_logprobs` recomputes with gradient from the returned ``choices``.

    Args:
        model: a Hugging Face causal LM (a DDP / accelerate wrapper is unwrapped).
        prompt_ids: B prompts' token ids.
        plans: one :data:`Plan` per prompt.
        encode: text -> token ids (no special tokens).
        eos_id: the EOS token id.
        greedy: take each choice's likeliest option instead of drawing one.
        temperature: the scores' softmax temperature (token logits divided by it).

    Returns:
        One :class:`Generated` per prompt, with its ``choices``.
    """
    model = getattr(model, "module", model)
    rows = [ConstrainedRow(plan, encode, eos_id) for plan in plans]
    taken: list[list[int]] = [[] for _ in rows]
    logprobs: list[list[float]] = [[] for _ in rows]
    choices: list[list[Choice]] = [[] for _ in rows]
    while True:
        choosing = []  # (row, its choice's flattened trie) of the rows at a choice with several options
        for b, row in enumerate(rows):
            while not row.done:
                trie = _FlatTrie.of(row.node)
                if len(trie.options) > 1:
                    choosing.append((b, trie))
                    break
                choices[b].append(Choice(len(taken[b]), trie.paths, 0))
                for token in trie.paths[0]:  # forced: pi = 1
                    row.advance(token)
                    taken[b].append(token)
                    logprobs[b].append(0.0)
        if not choosing:
            break
        prefixes = [[*prompt_ids[b], *taken[b]] for b, _ in choosing]
        at_ends = [[(len(prefix), trie)] for prefix, (_, trie) in zip(prefixes, choosing, strict=True)]
        # greedy argmaxes the untempered scores (scored once more only when the temperature is not 1)
        temperatures = (temperature, 1.0) if greedy and temperature != 1.0 else (temperature,)
        scores = _option_scores(model, prefixes, at_ends, temperatures)  # (N,) per temperature: every option's
        counts = [len(trie.options) for _, trie in choosing]
        log_pis = _per_choice_log_pi(scores[0], counts)
        plain = scores[-1].split(counts)
        for (b, trie), log_pi, own in zip(choosing, log_pis, plain, strict=True):
            paths = trie.paths
            pick = _likeliest(own, trie.groups) if greedy else int(torch.multinomial(log_pi.exp(), 1))
            choices[b].append(Choice(len(taken[b]), paths, pick))
            for i, token in enumerate(paths[pick]):
                logprobs[b].append(float(log_pi[pick]) if i == 0 else 0.0)
                rows[b].advance(token)
                taken[b].append(token)
    return [
        Generated(ids, lps, row.allowed_log, row.text, own)
        for ids, lps, row, own in zip(taken, logprobs, rows, choices, strict=True)
    ]


def _likeliest(scores: torch.Tensor, groups: Sequence[str]) -> int:
    """The likeliest option (by ``scores``, log-probs) of the group with the largest total probability.

    Where one option stands for many actions (``skill`` opens every definition, ``call NAME(`` every call of it
    with any arguments) and the others are whole commands, option against option would weigh the model's
    probability of writing *some* definition against that of one command, so a model unsure which command fits
    would write a definition where it gives acting, all commands together, more probability. Grouped, the decision
    is first what kind of action, by the probability the sampler gives it, then which (docs/agents.md, "Which
    kind of action first", measures what it changed).
    """
    members: dict[str, list[int]] = {}
    for i, group in enumerate(groups):
        members.setdefault(group, []).append(i)
    best = max(members.values(), key=lambda m: float(torch.logsumexp(scores[m], 0)))
    return best[int(scores[best].argmax())]


def choice_logprobs(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    choices: Sequence[Sequence[Choice]],
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Differentiable ``log pi(option taken | prompt, earlier choices)`` of rows decoded by :func:`decode_options`.

    One forward per batch: row b is its prompt and completion (up to its last choice), and each choice's option
    trie hangs off the completion where the choice began (tree attention: :func:`_option_logits`), so every
    option of every choice is scored after exactly the text it was scored after when decoded.

    Returns:
        ``(logp, mask, entropy)`` as :func:`sage_agents.policy.completion_logprobs` lays them out, (B, T) each:
        a choice's ``log pi`` at its first token and 0 elsewhere, 1 in ``mask`` at the first token of each choice
        that had several options (forced texts carry no gradient), and each such choice's entropy over its
        options (or None).
    """
    device = next(model.parameters()).device
    tmax = max(len(c) for c in completion_ids)
    scored = [[c for c in own if len(c.options) > 1] for own in choices]
    sequences = [
        [*prompt, *completion[: max((c.start for c in own), default=0)]]
        for prompt, completion, own in zip(prompt_ids, completion_ids, scored, strict=True)
    ]
    tries = [[_FlatTrie.of_paths(c.options) for c in own] for own in scored]
    attachments = [
        [(len(prompt) + c.start, trie) for c, trie in zip(own, own_tries, strict=True)]
        for prompt, own, own_tries in zip(prompt_ids, scored, tries, strict=True)
    ]
    at, values, entropies = [], [], []
    if any(scored):
        [scores] = _option_scores(model, sequences, attachments, (temperature,))  # (N,)
        flat = [(b, c, trie) for b, own in enumerate(scored) for c, trie in zip(own, tries[b], strict=True)]
        log_pis = _per_choice_log_pi(scores, [len(trie.options) for *_, trie in flat])
        for (b, choice, trie), log_pi in zip(flat, log_pis, strict=True):
            at.append((b, choice.start))
            values.append(log_pi[trie.paths.index(choice.options[choice.taken])])
            entropies.append(-(log_pi.exp() * log_pi).sum().detach())
    logp = torch.zeros(len(completion_ids), tmax, device=device)
    mask, entropy = torch.zeros_like(logp), torch.zeros_like(logp)
    if at:
        index = tuple(torch.tensor(at, device=device).T)
        logp = logp.index_put(index, torch.stack(values))
        mask[index] = 1.0
        entropy[index] = torch.stack(entropies)
    return logp, mask, entropy if with_entropy else None


@dataclass
class _FlatTrie:
    """A choice's token trie (below a :class:`_Node`) as flat lists, nodes in depth-first order (parents first)."""

    tokens: list[int] = field(default_factory=list)
    """Each node's token."""
    parents: list[int] = field(default_factory=list)
    """Each node's parent node (-1: a child of the root)."""
    depths: list[int] = field(default_factory=list)
    """Each node's depth (0: a child of the root)."""
    options: list[list[int]] = field(default_factory=list)
    """Each option's nodes, root to end, in trie order."""
    groups: list[str] = field(default_factory=list)
    """Each option's :attr:`Option.group`."""

    @classmethod
    def of(cls, root: _Node) -> _FlatTrie:
        """The trie below ``root``, flattened."""
        flat = cls()
        stack = [(root, -1, [])]  # (node, its node index, the nodes above and at it)
        while stack:
            node, index, nodes = stack.pop()
            if node.option is not None:
                flat.options.append(nodes)
                flat.groups.append(node.option.group)
                continue
            for token, child in reversed(node.children.items()):  # popped in insertion order
                stack.append((child, len(flat.tokens), [*nodes, len(flat.tokens)]))
                flat.tokens.append(token)
                flat.parents.append(index)
                flat.depths.append(len(nodes))
        return flat

    @classmethod
    def of_paths(cls, paths: Sequence[Sequence[int]]) -> _FlatTrie:
        """The trie of prefix-free token paths (a :class:`Choice`'s options), flattened."""
        root = _Node()
        for path in paths:
            node = root
            for token in path:
                node = node.children.setdefault(token, _Node())
            node.option = Option("", True)  # marks where a path ends; its text is not needed
        return cls.of(root)

    @property
    def paths(self) -> list[list[int]]:
        """Each option's tokens."""
        return [[self.tokens[n] for n in nodes] for nodes in self.options]


TREE_ATTENTION = ("sdpa", "eager")
"""Attention implementations that take a custom 4D additive mask, hence :func:`_option_logits`' tree attention."""

MAX_TREE_CELLS = 2**24
"""Attention cells (rows x positions^2) of one forward of :func:`_option_scores`: the rows are scored in chunks of
similar length under it, so one long skill definition's tries do not pad every row of its batch to their length."""


MAX_TRIE_NODES = 512
"""Trie nodes scored after one copy of their prefix. A larger trie (ScienceWorld offers up to thousands of commands
a turn) is cut into runs of consecutive options of at most this many nodes, each scored in a row of its own after
the same prefix: a row's attention grows with the square of its length, so the pieces cost far less than one long
row, and each option's score is the same (up to float rounding): 2.1x faster on ScienceWorld's turns of 2,000+
commands, the same below 1,000 (``benchmarks/option_scoring.py``). ALFWorld's tries have at most ~170 nodes, so
nothing changes there."""


def _trie_pieces(trie: _FlatTrie) -> list[_FlatTrie]:
    """``trie`` cut into tries of consecutive options of at most :data:`MAX_TRIE_NODES` nodes each.

    ``[trie]`` when it fits; an option longer than the budget is a piece of its own. The pieces' options, in order,
    are ``trie``'s.
    """
    budget = MAX_TRIE_NODES
    if len(trie.tokens) <= budget:
        return [trie]
    runs, run, nodes = [], [], set()
    for option in trie.options:
        grown = nodes.union(option)
        if run and len(grown) > budget:
            runs.append(run)
            run, grown = [], set(option)
        run.append(option)
        nodes = grown
    runs.append(run)
    return [_FlatTrie.of_paths([[trie.tokens[n] for n in option] for option in run]) for run in runs]


class _OptionIndex(NamedTuple):
    """Where each option's tokens are predicted in a logits tensor (B, K, V).

    Option n's token k is ``tokens[n, k]``, predicted at ``[rows[n], columns[n, k]]``; ``real[n, k]`` is False past
    the option's end.
    """

    rows: torch.Tensor
    columns: torch.Tensor
    tokens: torch.Tensor
    real: torch.Tensor

    @classmethod
    def of(cls, rows: Sequence[int], columns: Sequence[Sequence[int]], paths: Sequence[Sequence[int]], device: Any):
        longest = max(len(path) for path in paths)
        pad = lambda values: [[*v, *[0] * (longest - len(v))] for v in values]  # noqa: E731
        real = [[k < len(path) for k in range(longest)] for path in paths]
        tensors = (rows, pad(columns), pad(paths), real)
        return cls(*(torch.tensor(t, device=device) for t in tensors))


def _option_scores(
    model: Any,
    sequences: Sequence[Sequence[int]],
    attachments: Sequence[Sequence[tuple[int, _FlatTrie]]],
    temperatures: Sequence[float],
) -> list[torch.Tensor]:
    """Per temperature, (N,) every option's score, options in :func:`_option_logits`' order.

    A score is the sum of the option's tokens' log-probs under the full-vocabulary softmax of the logits divided by
    the temperature. A trie over :data:`MAX_TRIE_NODES` is scored in pieces, each in its own row. Rows run in chunks
    of at most :data:`MAX_TREE_CELLS` (differentiable: the chunks' graphs add up); a token's log-prob is gathered as
    a scalar, never as an (options, length, V) copy of the logits.
    """
    rows = []  # a row whose tries all fit stays as it is; one with a larger trie becomes a row per piece
    for sequence, own in zip(sequences, attachments, strict=True):
        cut = [(point, piece) for point, trie in own for piece in _trie_pieces(trie)]
        rows += [(sequence, own)] if len(cut) == len(own) else [(sequence, [piece]) for piece in cut]
    sequences, attachments = [sequence for sequence, _ in rows], [own for _, own in rows]
    sizes = [len(s) + sum(len(trie.tokens) for _, trie in own) for s, own in zip(sequences, attachments, strict=True)]
    chunks: list[list[int]] = []  # rows by size, each chunk's rows padded to its last (largest) one
    for b in sorted(range(len(sequences)), key=sizes.__getitem__):
        if chunks and (len(chunks[-1]) + 1) * sizes[b] ** 2 <= MAX_TREE_CELLS:
            chunks[-1].append(b)
        else:
            chunks.append([b])
    by_row: list[list[torch.Tensor]] = [[] for _ in sequences]  # per row, its options' scores per temperature
    for chunk in chunks:
        logits, index = _option_logits(model, [sequences[i] for i in chunk], [attachments[i] for i in chunk])
        per_temperature = []
        for temperature in temperatures:
            logp = torch.log_softmax(logits.float() / temperature, -1)  # (B, K, V)
            picked = logp[index.rows[:, None], index.columns, index.tokens]  # (n, L): scalars, not (n, L, V)
            per_temperature.append((picked * index.real).sum(-1))  # (n,)
        counts = [sum(len(trie.options) for _, trie in attachments[i]) for i in chunk]
        for i, parts in zip(chunk, zip(*(t.split(counts) for t in per_temperature), strict=True), strict=True):
            by_row[i] = list(parts)
    return [torch.cat([row[t] for row in by_row]) for t in range(len(temperatures))]


def _per_choice_log_pi(scores: torch.Tensor, counts: Sequence[int]) -> list[torch.Tensor]:
    """``log pi`` over each choice's options: ``scores`` (N,) cut into consecutive choices of ``counts`` options."""
    return [torch.log_softmax(own, -1) for own in scores.split(list(counts))]


def _option_logits(
    model: Any, sequences: Sequence[Sequence[int]], attachments: Sequence[Sequence[tuple[int, _FlatTrie]]]
) -> tuple[torch.Tensor, _OptionIndex]:
    """Logits (B, K, V) and where in them each token of every option's path is predicted.

    ``attachments[b]`` lists ``(point, trie)``: the trie's options continue ``sequences[b][:point]`` (point >= 1).
    Options come out row by row, attachment by attachment, each trie's in its order. One forward for all rows:
    row b is its sequence (left-padded) followed by its tries, one position per node, under a 4D attention mask by
    which a node attends to its sequence's first ``point`` tokens and its own ancestors only, at position point +
    depth (tree attention, as speculative decoders verify a tree of drafts): each path's logits are those of its
    own text after its prefix, and the paths' shared beginnings run once. A model whose attention takes no custom
    mask (flash attention) runs every path after its whole prefix instead.
    """
    inner = getattr(model, "module", model)
    if getattr(inner.config, "_attn_implementation", "eager") not in TREE_ATTENTION:
        flat = [(b, point, trie) for b, own in enumerate(attachments) for point, trie in own]
        return _whole_path_logits(model, [sequences[b][:point] for b, point, _ in flat], [t.paths for *_, t in flat])
    device = next(model.parameters()).device
    width = max(len(sequence) for sequence in sequences)
    size = width + max(sum(len(trie.tokens) for _, trie in own) for own in attachments)
    ids = torch.zeros(len(sequences), size, dtype=torch.long, device=device)  # (B, T): sequence | trie nodes
    positions = torch.zeros_like(ids)
    see = torch.zeros(len(sequences), size, size, dtype=torch.bool, device=device)  # (B, T, T): query attends key
    causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
    rows, columns, paths = [], [], []  # per option: its row, the columns whose logits predict its tokens, its tokens
    for b, (sequence, own) in enumerate(zip(sequences, attachments, strict=True)):
        start = width - len(sequence)
        ids[b, start:width] = torch.tensor(list(sequence), device=device)
        positions[b, start:width] = torch.arange(len(sequence), device=device)
        see[b, start:width, start:width] = causal[start:, start:]
        offset = width
        for point, trie in own:
            end = offset + len(trie.tokens)
            ids[b, offset:end] = torch.tensor(trie.tokens, device=device)
            positions[b, offset:end] = point + torch.tensor(trie.depths, device=device)
            see[b, offset:end, start : start + point] = True  # every node sees the sequence up to its point
            for node, parent in enumerate(trie.parents):  # a parent's row is complete before its children's
                see[b, offset + node, offset + node] = True
                if parent >= 0:
                    see[b, offset + node, offset:end] |= see[b, offset + parent, offset:end]
            for option in trie.options:  # its first token is predicted by the point's last token
                rows.append(b)
                columns.append([start + point - 1, *(offset + n for n in option[:-1])])
                paths.append([trie.tokens[n] for n in option])
            offset = end
    see |= torch.eye(size, dtype=torch.bool, device=device)  # padding sees itself (no empty softmax row)
    dtype = inner.dtype
    mask = torch.zeros(see.shape, dtype=dtype, device=device).masked_fill(~see, torch.finfo(dtype).min)
    earliest = min(column[0] for column in columns)  # no logits before it are read
    keep = {"logits_to_keep": size - earliest} if "logits_to_keep" in forward_parameters(model) else {}
    out = model(input_ids=ids, attention_mask=mask[:, None], position_ids=positions, **keep).logits
    columns = [[c - earliest for c in column] for column in columns]
    return out[:, earliest - size :], _OptionIndex.of(rows, columns, paths, device)


def _whole_path_logits(
    model: Any, prefixes: Sequence[Sequence[int]], paths: Sequence[Sequence[Sequence[int]]]
) -> tuple[torch.Tensor, _OptionIndex]:
    """:func:`_option_logits` without tree attention: every path after its whole prefix, one left-padded batch."""
    device = next(model.parameters()).device
    rows = [[*prefix, *path] for prefix, own in zip(prefixes, paths, strict=True) for path in own]
    flat = [path for own in paths for path in own]
    width = max(len(row) for row in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long, device=device)  # (N, W) left-padded
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, width - len(row) :] = torch.tensor(row, device=device)
        mask[i, width - len(row) :] = 1
    logits = model(input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)).logits
    # row i's path ends at the last column: its token k is predicted at column W - 1 - len + k
    columns = [[width - 1 - len(path) + k for k in range(len(path))] for path in flat]
    return logits, _OptionIndex.of(range(len(rows)), columns, flat, device)


def forward_parameters(model: Any) -> Any:
    """The ``forward`` parameters of the causal LM under ``model`` (DDP and peft wrappers take ``**kwargs``)."""
    inner = getattr(model, "module", model)  # DistributedDataParallel
    inner = inner.get_base_model() if hasattr(inner, "get_base_model") else inner  # peft
    return inspect.signature(inner.forward).parameters


def allowed_mask(
    allowed: Sequence[Sequence[Sequence[int]] | None], shape: Sequence[int], device: Any = None
) -> torch.Tensor:
    """(B, T, V) bool: True where token id v may be drawn at step t of row b.

    ``allowed[b][t]`` lists the ids step t of row b was drawn among; a row that is None, and the steps past its
    list (padding), allow every id. Built in two writes: one per constrained token, one per allowed id.
    """
    keep = torch.ones(tuple(shape), dtype=torch.bool, device=device)
    drawn = [(b, t) for b, row in enumerate(allowed) for t in range(len(row or ()))]
    taken = [(b, t, v) for b, row in enumerate(allowed) for t, ids in enumerate(row or ()) for v in ids]
    if drawn:
        keep[tuple(torch.tensor(drawn, device=device).T)] = False
        keep[tuple(torch.tensor(taken, device=device).T)] = True
    return keep


def trained_tokens(
    completion_ids: Sequence[int], allowed: Sequence[Sequence[int]] | None, choices: Sequence[Choice] | None = None
) -> list[bool]:
    """Per completion token, whether it enters a loss.

    Every token of free generation; the unforced ones (more than one allowed id) of constrained decoding; the
    first token of each choice with several options of decoding by whole options (``choices``).
    """
    if choices is not None:
        starts = {choice.start for choice in choices if len(choice.options) > 1}
        return [t in starts for t in range(len(completion_ids))]
    if allowed is None:
        return [True] * len(completion_ids)
    return [len(a) > 1 for a in allowed]
