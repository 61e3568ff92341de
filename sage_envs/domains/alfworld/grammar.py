"""TextWorld's ``.twl2`` grammar files and their context-sensitive text templates, reimplemented.

A game's ``grammar`` field (ALFWorld's ``alfred.twl2`` with the task sentence filled in) holds

* ``action NAME { template :: "..."; feedback :: "#rule#"; grammar :: <json>; }`` blocks: the command form
  of each PDDL action and the rule that produces its feedback;
* top-level ``grammar :: <json>;`` blocks (the JSON in triple quotes): named production rules, each a list of
  alternatives ``{"condition": "pred(x:type) & ...", "rhs": "text"}``.

An ``rhs`` mixes four kinds of symbols (TextWorld's ``textgen.ebnf``):

* plain text;
* ``#rule#``: expands to the first alternative of ``rule`` whose condition has a match in the current state;
* ``{expr}`` or ``{expr | query}``: evaluates ``expr`` (``o.name``, ``o.indefinite + ' ' + o.name`` or a
  ``#rule#``) once per match of ``query``, each match binding the query's placeholders;
* ``[{expr | query}]``: the same matches rendered as an English list ("a, b, and c"; separators are the rules
  ``list_separator`` / ``list_last_separator``, an empty list is ``list_empty``).

Queries are conjunctions of predicates over placeholders (``inreceptacle(o:object, r:receptacle)``), matched
the way ``textworld.logic.State.all_assignments`` matches them: predicate by predicate, each against the
facts of the state in sorted order, already-bound placeholders constraining the match and distinct
placeholders never binding the same entity. Facts named ``not_<pred>`` are plain facts (the engine records
them when an action deletes an atom): ``not_inreceptacle(o, r)`` means "``o`` was taken out of ``r``", not
"``o`` is not in ``r``".

Quirks of TextWorld's TatSu parser that change the text are reproduced on purpose:

* an rhs is parsed only as far as the symbol grammar allows; the rest is silently dropped (ALFWorld's
  ``overview(o, r)`` rule ends in a stray ``}``);
* whitespace (or a ``//`` comment line) at the very start of an rhs is eaten by TatSu's end-of-line comment
  rule, so ALFWorld's ``help`` text starts with "Available commands" rather than a newline;
* in an action's ``grammar`` block, lines starting with ``#`` are comments; at the top level of the file too.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sage_envs.domains.alfworld.pddl import FactStore

Placeholder = tuple[str, str]
"""A query placeholder ``(name, type)``, e.g. ``("r", "receptacle")``."""


class GrammarError(ValueError):
    """A grammar text cannot be read, or a rule cannot be expanded (TextWorld would raise too)."""


# ------------------------------------------------------------------------------------------------------------
# Entities
# ------------------------------------------------------------------------------------------------------------


class Entity:
    """What a template sees of a PDDL object (TextWorld's ``EntityInfo`` as the PDDL engine fills it in)."""

    __slots__ = ("id", "name", "type", "definite", "indefinite", "noun", "adj", "desc")

    def __init__(self, id: str, name: str, type: str):  # noqa: A002 - TextWorld's attribute name
        """Entity ``id`` of PDDL ``type``, shown as ``name``; articles always "the" / "a" (as TextWorld's)."""
        self.id = id
        self.name = name
        self.type = type
        self.definite = "the"
        self.indefinite = "a"
        self.noun = self.adj = self.desc = None

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Entity({self.id!r}, {self.name!r}, {self.type!r})"


# ------------------------------------------------------------------------------------------------------------
# Queries
# ------------------------------------------------------------------------------------------------------------

_PREDICATE = re.compile(r"\s*([\w/-]+)\s*\(([^()]*)\)\s*")


@dataclass(frozen=True)
class Query:
    """A conjunctive query ``p(x:t, y:u) & q(y:u)``."""

    text: str
    predicates: tuple[tuple[str, tuple[Placeholder, ...]], ...]
    plans: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    """Matching plans, one per set of placeholders bound beforehand (see :func:`_plan`)."""

    @classmethod
    def parse(cls, text: str) -> Query:
        """Parse ``text``; predicate and placeholder names are kept as written."""
        predicates = []
        for part in text.split("&"):
            match = _PREDICATE.fullmatch(part)
            if not match:
                raise GrammarError(f"cannot read the query {text!r} (at {part!r})")
            params = []
            for param in filter(None, (p.strip() for p in match.group(2).split(","))):
                name, _, type_name = param.partition(":")
                if not type_name:
                    raise GrammarError(f"placeholder {param!r} of query {text!r} has no type")
                params.append((name.strip(), type_name.strip()))
            predicates.append((match.group(1), tuple(params)))
        return cls(text.strip(), tuple(predicates))

    @property
    def predicate_names(self) -> frozenset[str]:
        """The predicates the query reads."""
        return frozenset(name for name, _ in self.predicates)


class World:
    """What queries run against: the facts, the entities and the type hierarchy of one game."""

    def __init__(
        self, facts: FactStore, entities: Mapping[str, Entity], is_subtype: Callable[[str, str], bool]
    ) -> None:
        """Wrap ``facts`` (swappable through :attr:`facts`), the ``entities`` by id and a subtype test."""
        self.facts = facts
        self.entities = entities
        self._is_subtype = is_subtype
        self._subtype_cache: dict[tuple[str, str], bool] = {}

    def type_ok(self, entity_id: str, type_name: str) -> bool:
        """Whether the entity may fill a placeholder of ``type_name``."""
        entity = self.entities.get(entity_id)
        key = (entity.type if entity else "object", type_name)
        ok = self._subtype_cache.get(key)
        if ok is None:
            ok = self._subtype_cache[key] = self._is_subtype(*key)
        return ok

    def assignments(self, query: Query, mapping: Mapping[Placeholder, str]) -> Iterator[dict[Placeholder, str]]:
        """Every extension of ``mapping`` that satisfies ``query``, in TextWorld's order.

        Mirrors ``State._all_applicable_assignments``: predicates in order; for each, the matching facts in
        sorted order; a placeholder already bound must agree, a new one must not take an entity that another
        placeholder holds (nor one of the wrong type).
        """
        key = frozenset(mapping)
        plan = query.plans.get(key)
        if plan is None:
            plan = query.plans[key] = _plan(query, mapping)
        mapping = dict(mapping)
        yield from self._assign(plan, 0, mapping, set(mapping.values()))

    def _assign(self, plan, depth, mapping, used) -> Iterator[dict[Placeholder, str]]:
        if depth == len(plan):
            yield dict(mapping)
            return
        pred, arity, known, new, repeated = plan[depth]
        candidates = self.facts.matching(pred, {i: mapping[ph] for i, ph in known})
        if len(candidates) > 1:
            candidates = sorted(candidates)
        type_ok = self.type_ok
        for fact in candidates:
            if len(fact) != arity:
                continue
            ok = True
            for i, ph, type_name in new:
                value = fact[i]
                if value in used or (type_name is not None and not type_ok(value, type_name)):
                    ok = False
                    break
                mapping[ph] = value
                used.add(value)
            if ok:
                for i, ph in repeated:
                    if mapping[ph] != fact[i]:
                        ok = False
                        break
            if ok:
                yield from self._assign(plan, depth + 1, mapping, used)
            for _, ph, _ in new:
                if ph in mapping:
                    used.discard(mapping.pop(ph))

    def satisfiable(self, query: Query, mapping: Mapping[Placeholder, str]) -> bool:
        """Whether ``query`` has at least one match extending ``mapping``."""
        for _ in self.assignments(query, mapping):
            return True
        return False


def _plan(query: Query, mapping: Mapping[Placeholder, str]) -> tuple:
    """Per predicate: (name, arity, placeholders known before it, new ones to bind, repeats to compare).

    "Known" placeholders (bound by ``mapping`` or an earlier predicate) select facts through the index; a new
    placeholder is bound at its first position in the predicate and compared at the later ones.
    """
    bound = set(mapping)
    plan = []
    for name, params in query.predicates:
        known = tuple((i, ph) for i, ph in enumerate(params) if ph in bound)
        new, repeated, fresh = [], [], set()
        for i, ph in enumerate(params):
            if ph in bound:
                continue
            if ph in fresh:
                repeated.append((i, ph))
            else:
                fresh.add(ph)
                new.append((i, ph, None if ph[1] == "object" else ph[1]))  # everything is an object
        bound |= fresh
        plan.append((name, len(params), known, tuple(new), tuple(repeated)))
    return tuple(plan)


# ------------------------------------------------------------------------------------------------------------
# Symbols
# ------------------------------------------------------------------------------------------------------------


@dataclass
class Context:
    """The bindings a symbol is rendered under: placeholders -> entity ids, names -> entities."""

    mapping: dict[Placeholder, str] = field(default_factory=dict)
    variables: dict[str, Entity] = field(default_factory=dict)

    def extended(self, mapping: dict[Placeholder, str], world: World) -> Context:
        """A copy with ``mapping`` (a full query match) as the bindings; variables follow the placeholders."""
        variables = dict(self.variables)
        for (name, _), value in mapping.items():
            variables[name] = world.entities[value]
        return Context(mapping, variables)


class Symbol:
    """One piece of an rhs."""

    def render(self, grammar: Grammar, world: World, context: Context, out: list[str]) -> None:
        """Append this symbol's text under ``context`` to ``out``."""
        raise NotImplementedError

    def queries(self) -> Iterator[Query]:
        """The queries this symbol runs directly (not through rules it names)."""
        return iter(())

    def rule_names(self) -> Iterator[str]:
        """The rules this symbol names directly."""
        return iter(())


@dataclass
class Text(Symbol):
    """Plain text."""

    text: str

    def render(self, grammar, world, context, out):  # noqa: D102
        out.append(self.text)


@dataclass
class Rule(Symbol):
    """``#name#``: the first alternative of rule ``name`` whose condition matches."""

    name: str

    def render(self, grammar, world, context, out):  # noqa: D102
        for alternative in grammar.alternatives(self.name):
            if alternative.condition is None or world.satisfiable(alternative.condition, context.mapping):
                for symbol in alternative.rhs:
                    symbol.render(grammar, world, context, out)
                return
        raise GrammarError(f"no alternative of #{self.name}# applies (TextWorld raises IndexError here)")

    def rule_names(self):  # noqa: D102
        yield self.name


@dataclass
class Expression(Symbol):
    """``o.name``, ``o.indefinite + ' ' + o.name``, ``r.name or r.id``: read from the bound entities."""

    code: str
    evaluate: Callable[[Mapping[str, Entity]], Any]

    def render(self, grammar, world, context, out):  # noqa: D102
        out.append(str(self.evaluate(context.variables)))


@dataclass
class Conditional(Symbol):
    """``{expr}`` or ``{expr | query}``: ``expr`` once per match of ``query`` (once without a query)."""

    expression: Symbol
    given: Query | None

    def contexts(self, world: World, context: Context) -> list[Context]:
        """One context per match, in TextWorld's order."""
        if self.given is None:
            return [context]
        return [context.extended(m, world) for m in world.assignments(self.given, context.mapping)]

    def render(self, grammar, world, context, out):  # noqa: D102
        for item in self.contexts(world, context):
            self.expression.render(grammar, world, item, out)

    def queries(self):  # noqa: D102
        if self.given is not None:
            yield self.given

    def rule_names(self):  # noqa: D102
        yield from self.expression.rule_names()


@dataclass
class ListOf(Symbol):
    """``[{expr | query}]``: the matches as an English list (``textgen.display_list``)."""

    item: Conditional

    def render(self, grammar, world, context, out):  # noqa: D102
        items = self.item.contexts(world, context)
        if not items:
            Rule("list_empty").render(grammar, world, context, out)
            return
        last = len(items) - 1
        for index, item in enumerate(items):
            if index:
                separator = "list_last_separator" if index == last else "list_separator"
                Rule(separator).render(grammar, world, context, out)
            self.item.expression.render(grammar, world, item, out)

    def queries(self):  # noqa: D102
        yield from self.item.queries()

    def rule_names(self):  # noqa: D102
        yield from ("list_empty", "list_separator", "list_last_separator")
        yield from self.item.rule_names()


# ------------------------------------------------------------------------------------------------------------
# Expressions: the Python TextWorld eval()s, restricted to attribute reads, string literals, + and or/and
# ------------------------------------------------------------------------------------------------------------


def compile_expression(code: str) -> Callable[[Mapping[str, Entity]], Any]:
    """Compile an ``{expr}`` statement into a function of the bound variables.

    Unsupported syntax compiles to a function that raises :class:`GrammarError` when (and only if) the rule is
    used, as TextWorld's ``eval`` would fail only then.
    """
    try:
        tree = ast.parse(code.strip(), mode="eval").body
        return _compile_node(tree)
    except (SyntaxError, GrammarError) as error:
        message = f"unsupported template expression {code!r}: {error}"

        def fail(variables: Mapping[str, Entity]) -> Any:
            raise GrammarError(message)

        return fail


def _compile_node(node: ast.AST) -> Callable[[Mapping[str, Entity]], Any]:
    if isinstance(node, ast.Constant):
        value = node.value
        return lambda variables: value
    if isinstance(node, ast.Name):
        name = node.id

        def lookup(variables: Mapping[str, Entity]) -> Any:
            try:
                return variables[name]
            except KeyError:
                raise GrammarError(f"name {name!r} is not bound in this template") from None

        return lookup
    if isinstance(node, ast.Attribute):
        base, attribute = _compile_node(node.value), node.attr
        return lambda variables: getattr(base(variables), attribute)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _compile_node(node.left), _compile_node(node.right)
        return lambda variables: left(variables) + right(variables)
    if isinstance(node, ast.BoolOp):
        parts = [_compile_node(value) for value in node.values]
        if isinstance(node.op, ast.Or):

            def either(variables: Mapping[str, Entity]) -> Any:
                value = None
                for part in parts:
                    value = part(variables)
                    if value:
                        return value
                return value

            return either

        def both(variables: Mapping[str, Entity]) -> Any:
            value = None
            for part in parts:
                value = part(variables)
                if not value:
                    return value
            return value

        return both
    raise GrammarError(f"{type(node).__name__} is not supported")


# ------------------------------------------------------------------------------------------------------------
# The symbol parser (TextWorld's textgen.ebnf)
# ------------------------------------------------------------------------------------------------------------

_LITERAL = re.compile(r'[^;|"<>\[\]#{}]*')
_TAG = re.compile(r"[\w()/!<>\-\s,.]+")
_STATEMENT = re.compile(r"[^|\[\]{}\n<>]+")
_GIVEN = re.compile(r"[^;|{}\n\[\]#]+")
_BAR = re.compile(r"\s*\|\s*")
_LEADING_COMMENT = re.compile(r"(//.*|\s*)\n?")


def parse_symbols(text: str) -> list[Symbol]:
    """Parse an rhs (or a template) into symbols, stopping silently where the symbol grammar stops."""
    position = _LEADING_COMMENT.match(text).end()
    symbols: list[Symbol] = []
    while position < len(text):
        parsed = _parse_symbol(text, position)
        if parsed is None:
            break
        symbol, position = parsed
        if symbol is not None:
            symbols.append(symbol)
    return symbols


def _parse_symbol(text: str, position: int) -> tuple[Symbol | None, int] | None:
    char = text[position]
    if char == "[":
        parsed = _parse_conditional(text, position + 1)
        if parsed and parsed[1] < len(text) and text[parsed[1]] == "]":
            return ListOf(parsed[0]), parsed[1] + 1
        return None
    if char == "{":
        return _parse_conditional(text, position)
    if char == "#":
        return _parse_rule(text, position)
    if char == '"':
        match = _LITERAL.match(text, position + 1)
        if match.end() < len(text) and text[match.end()] == '"':
            return Text(match.group()), match.end() + 1
        return None
    match = _LITERAL.match(text, position)
    if match.end() == position:
        return None
    return Text(match.group()), match.end()


def _parse_rule(text: str, position: int) -> tuple[Rule, int] | None:
    match = _TAG.match(text, position + 1)
    if not match or match.end() >= len(text) or text[match.end()] != "#":
        return None
    return Rule(match.group()), match.end() + 1


def _parse_conditional(text: str, position: int) -> tuple[Conditional, int] | None:
    if position >= len(text) or text[position] != "{":
        return None
    position += 1
    expression: Symbol
    if position < len(text) and text[position] == "#":
        parsed = _parse_rule(text, position)
        if parsed is None:
            return None
        expression, position = parsed
    else:
        match = _STATEMENT.match(text, position)
        if not match:
            return None
        expression = Expression(match.group(), compile_expression(match.group()))
        position = match.end()
    given = None
    bar = _BAR.match(text, position)
    if bar and bar.end() > position and "|" in bar.group():
        match = _GIVEN.match(text, bar.end())
        if match:
            given = Query.parse(match.group())
            position = match.end()
    if position >= len(text) or text[position] != "}":
        return None
    return Conditional(expression, given), position + 1


# ------------------------------------------------------------------------------------------------------------
# The .twl2 document
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alternative:
    """One alternative of a rule: an optional condition and the rhs symbols."""

    condition: Query | None
    rhs: tuple[Symbol, ...]


@dataclass(frozen=True)
class ActionText:
    """The text side of one PDDL action: its command template and its feedback rule."""

    name: str
    """The action's name as written in the grammar (``GotoLocation``)."""
    template: tuple[Symbol, ...]
    """The command form, e.g. ``take {o} from {r}``."""
    feedback: tuple[Symbol, ...]
    """The feedback, e.g. ``#PickupObject.feedback#``."""
    template_text: str
    feedback_text: str


_DOC_TOKEN = re.compile(
    r"(?P<skip>\s+|#[^\n]*)"  # whitespace and "#" comments (outside strings)
    r'|(?P<block>"""(?:.|\n)*?""")'
    r'|(?P<str>"[^"]*")'
    r"|(?P<sep>::|;|\{|\})"
    r"|(?P<name>[\w/-]+)"
)


def _document_tokens(text: str) -> list[tuple[str, str]]:
    tokens = []
    position = 0
    while position < len(text):
        match = _DOC_TOKEN.match(text, position)
        if not match:
            raise GrammarError(f"cannot read the grammar file at {text[position : position + 40]!r}")
        position = match.end()
        if match.lastgroup != "skip":
            tokens.append((match.lastgroup, match.group()))
    return tokens


def _block(token: str) -> str:
    return textwrap.dedent(token[3:-3])


class Grammar:
    """A parsed ``.twl2`` grammar: the actions' templates and feedback, and the named production rules."""

    def __init__(self, actions: dict[str, ActionText], rules: dict[str, list[Alternative]]):
        """Use :meth:`parse`."""
        self.actions = actions
        """Lower-cased action name (as fast-downward names operators) -> its text side."""
        self.rules = rules
        """Rule name -> alternatives, in order."""

    @classmethod
    def parse(cls, text: str) -> Grammar:
        """Read a ``.twl2`` text (TextWorld's ``PddlLogic`` grammar)."""
        tokens = _document_tokens(text)
        data: dict[str, list] = {}
        raw_actions: dict[str, tuple[str, str, str]] = {}
        position = 0

        def expect(kind: str, value: str | None = None) -> str:
            nonlocal position
            if position >= len(tokens) or tokens[position][0] != kind or (value and tokens[position][1] != value):
                found = tokens[position] if position < len(tokens) else "end of file"
                raise GrammarError(f"grammar file: expected {value or kind}, found {found}")
            position += 1
            return tokens[position - 1][1]

        while position < len(tokens):
            keyword = expect("name")
            if keyword == "grammar":
                expect("sep", "::")
                data.update(json.loads(_block(expect("block"))))
                expect("sep", ";")
            elif keyword == "action":
                name = expect("name")
                expect("sep", "{")
                fields: dict[str, str] = {}
                while tokens[position] != ("sep", "}"):
                    key = expect("name")
                    expect("sep", "::")
                    kind, value = tokens[position]
                    position += 1
                    expect("sep", ";")
                    fields[key] = value[1:-1] if kind == "str" else _block(value) if kind == "block" else value
                expect("sep", "}")
                if "template" not in fields or "feedback" not in fields:
                    raise GrammarError(f"action {name} has no template or no feedback")
                raw_actions[name.lower()] = (name, fields["template"], fields["feedback"])
                # An action's own grammar: lines starting with "#" are comments (TextWorld drops them).
                block = fields.get("grammar", "{}")
                block = "\n".join(line for line in block.split("\n") if not line.lstrip().startswith("#"))
                data.update(json.loads(block))
            else:
                raise GrammarError(f"grammar file: unexpected {keyword!r} (expected 'action' or 'grammar')")

        rules = {
            name: [
                Alternative(
                    Query.parse(alt["condition"]) if alt.get("condition") else None,
                    tuple(parse_symbols(alt["rhs"])),
                )
                for alt in alternatives
            ]
            for name, alternatives in data.items()
        }
        actions = {
            key: ActionText(name, tuple(parse_symbols(template)), tuple(parse_symbols(feedback)), template, feedback)
            for key, (name, template, feedback) in raw_actions.items()
        }
        return cls(actions, rules)

    def alternatives(self, name: str) -> list[Alternative]:
        """The alternatives of rule ``name``."""
        try:
            return self.rules[name]
        except KeyError:
            raise GrammarError(f"Can't find symbol '#{name}#' in the set of production rules.") from None

    def render(self, symbols: tuple[Symbol, ...] | list[Symbol], world: World, context: Context) -> str:
        """The text of ``symbols`` under ``context``."""
        out: list[str] = []
        for symbol in symbols:
            symbol.render(self, world, context, out)
        return "".join(out)

    def predicates_read(self, symbols: tuple[Symbol, ...] | list[Symbol]) -> frozenset[str]:
        """Every predicate that rendering ``symbols`` may query, following the rules they name."""
        names: set[str] = set()
        seen_rules: set[str] = set()
        stack = list(symbols)
        while stack:
            symbol = stack.pop()
            for query in symbol.queries():
                names |= query.predicate_names
            for rule in symbol.rule_names():
                if rule in seen_rules or rule not in self.rules:
                    continue
                seen_rules.add(rule)
                for alternative in self.rules[rule]:
                    if alternative.condition is not None:
                        names |= alternative.condition.predicate_names
                    stack.extend(alternative.rhs)
        return frozenset(names)

    def all_predicates(self) -> frozenset[str]:
        """Every predicate any rule or action text may query."""
        symbols: list[Symbol] = [Rule(name) for name in self.rules]
        for action in self.actions.values():
            symbols += [*action.template, *action.feedback]
        return self.predicates_read(symbols)
