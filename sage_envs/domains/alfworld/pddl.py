"""A small PDDL reader for ALFWorld games: the problem's objects, initial facts and goal, the domain's types.

This is what the native engine (:mod:`sage_envs.domains.alfworld.native_engine`) needs from a ``game.tw-pddl``
file, read the way fast-downward's translator reads it (the translator is what TextWorld's PDDL engine runs):

* every token is lower-cased (``Apple_bar__minus_00_dot_24`` becomes ``apple_bar__minus_00_dot_24``);
* ``;`` starts a comment that runs to the end of the line;
* typed lists are ``name name - type``; a name without a type is an ``object``;
* a type list such as ``?l - location, ?r - receptacle`` makes ``location,`` a type (the comma is part of the
  token). No object has that type, so whatever quantifies over it never holds: ALFRED's ``examineObject``
  relies on this by accident (only held objects can be examined).

Goals are evaluated on a :class:`FactStore` by :class:`GoalChecker` (compiled into joins that bind
existential variables from the facts), with the PDDL meaning of ``and``/``or``/``not``/``imply``/``exists``/
``forall``/``=``. Numeric fluents and ``:constants`` play no part in ALFWorld and are not read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

Fact = tuple[str, ...]
"""The arguments of a ground atom (entity ids), e.g. ``("apple_bar_...", "countertop_bar_...")``."""

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class PddlSyntaxError(ValueError):
    """A PDDL text does not have the structure this reader expects."""


def parse_sexpr(text: str) -> list:
    """Parse PDDL text into nested lists of lower-cased tokens (``;`` comments dropped).

    Returns the list of top-level expressions (usually one ``(define ...)``). Extra closing parentheses at the
    end are ignored, as fast-downward's reader ignores them (some problems close ``define`` twice).
    """
    text = "\n".join(line.split(";", 1)[0] for line in text.split("\n"))
    stack: list[list] = [[]]
    for token in _TOKEN.findall(text.lower()):
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                break
            closed = stack.pop()
            stack[-1].append(closed)
        else:
            stack[-1].append(token)
    if len(stack) != 1:
        raise PddlSyntaxError(f"unbalanced parentheses: {len(stack) - 1} left open")
    return stack[0]


def typed_list(items: list) -> list[tuple[str, str]]:
    """``["a", "b", "-", "t", "c"]`` -> ``[("a", "t"), ("b", "t"), ("c", "object")]``."""
    result: list[tuple[str, str]] = []
    pending: list[str] = []
    position = 0
    while position < len(items):
        item = items[position]
        if item == "-":
            if position + 1 >= len(items):
                raise PddlSyntaxError(f"typed list ends with '-': {items}")
            type_name = items[position + 1]
            result += [(name, type_name) for name in pending]
            pending = []
            position += 2
        else:
            pending.append(item)
            position += 1
    return result + [(name, "object") for name in pending]


def _section(define: list, key: str) -> list | None:
    for part in define:
        if isinstance(part, list) and part and part[0] == key:
            return part
    return None


# ------------------------------------------------------------------------------------------------------------
# Domain
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PddlAction:
    """One ``(:action ...)`` of a domain, kept as parsed s-expressions."""

    name: str
    parameters: tuple[tuple[str, str], ...]
    """``(("?a", "agent"), ...)`` in declaration order."""
    precondition: list | None
    effect: list | None


@dataclass
class PddlDomain:
    """The parts of a domain the native engine reads: the type hierarchy and the actions."""

    name: str
    parents: dict[str, str]
    """type -> parent type (``object`` is the root)."""
    actions: dict[str, PddlAction]
    """Lower-cased action name -> action, in declaration order."""

    @classmethod
    def parse(cls, text: str) -> PddlDomain:
        """Parse a domain text (``(define (domain ...) ...)``)."""
        (define,) = [e for e in parse_sexpr(text) if isinstance(e, list) and e and e[0] == "define"]
        name = define[1][1]
        types = _section(define, ":types")
        parents = {t: p for t, p in typed_list(types[1:] if types else [])}
        parents.pop("object", None)  # `object` is the root even when the domain lists it
        actions = {}
        for part in define:
            if isinstance(part, list) and part and part[0] == ":action":
                fields = dict(zip(part[2::2], part[3::2], strict=False))
                params = tuple(typed_list(fields.get(":parameters", [])))
                actions[part[1]] = PddlAction(
                    part[1], params, fields.get(":precondition") or None, fields.get(":effect") or None
                )
        return cls(name, parents, actions)

    def is_subtype(self, type_name: str, ancestor: str) -> bool:
        """Whether ``type_name`` is ``ancestor`` or below it (every type is below ``object``)."""
        if ancestor == "object":
            return True
        seen = set()
        while type_name not in seen:
            if type_name == ancestor:
                return True
            seen.add(type_name)
            type_name = self.parents.get(type_name, "object")
        return False


# ------------------------------------------------------------------------------------------------------------
# Facts
# ------------------------------------------------------------------------------------------------------------


class FactStore:
    """A set of ground atoms, indexed by predicate and by (predicate, argument position, value).

    Predicate names are the lower-cased PDDL names; TextWorld's engine also keeps ``not_<pred>`` facts for
    atoms that an action deleted, and the engine stores them here the same way.
    """

    __slots__ = ("_by_pred", "_by_arg")

    def __init__(self, facts: Iterable[tuple[str, Fact]] = ()):
        """Start with ``facts`` (``(predicate, args)`` pairs)."""
        self._by_pred: dict[str, set[Fact]] = {}
        self._by_arg: dict[str, dict[tuple[int, str], set[Fact]]] = {}
        for pred, args in facts:
            self.add(pred, args)

    def copy(self, shared: Iterable[str] = ()) -> FactStore:
        """A copy; the facts of the ``shared`` predicates are shared with this store, not copied.

        Share only predicates that neither store will change (the static ones): resetting a game then copies
        just its few dynamic facts.
        """
        shared = set(shared)
        clone = FactStore.__new__(FactStore)
        clone._by_pred = {k: v if k in shared else set(v) for k, v in self._by_pred.items()}
        clone._by_arg = {
            k: v if k in shared else {key: set(facts) for key, facts in v.items()} for k, v in self._by_arg.items()
        }
        return clone

    def add(self, pred: str, args: Fact) -> None:
        """Make ``pred(args)`` true."""
        facts = self._by_pred.get(pred)
        if facts is None:
            facts = self._by_pred[pred] = set()
            self._by_arg[pred] = {}
        elif args in facts:
            return
        facts.add(args)
        index = self._by_arg[pred]
        for key in enumerate(args):
            bucket = index.get(key)
            if bucket is None:
                index[key] = {args}
            else:
                bucket.add(args)

    def discard(self, pred: str, args: Fact) -> None:
        """Make ``pred(args)`` false (no error when it already is)."""
        facts = self._by_pred.get(pred)
        if not facts or args not in facts:
            return
        facts.discard(args)
        index = self._by_arg[pred]
        for key in enumerate(args):
            index[key].discard(args)

    def __contains__(self, atom: tuple[str, Fact]) -> bool:
        facts = self._by_pred.get(atom[0])
        return bool(facts) and atom[1] in facts

    def has(self, pred: str, args: Fact) -> bool:
        """Whether ``pred(args)`` is true."""
        facts = self._by_pred.get(pred)
        return facts is not None and args in facts

    def of(self, pred: str) -> set[Fact]:
        """All argument tuples of ``pred`` (do not mutate)."""
        return self._by_pred.get(pred) or _EMPTY

    def with_arg(self, pred: str, position: int, value: str) -> set[Fact]:
        """The argument tuples of ``pred`` whose ``position``-th argument is ``value`` (do not mutate)."""
        index = self._by_arg.get(pred)
        return (index.get((position, value)) if index else None) or _EMPTY

    def matching(self, pred: str, bound: Mapping[int, str]) -> Iterable[Fact]:
        """Argument tuples of ``pred`` agreeing with ``bound`` (position -> value), in no particular order."""
        if not bound:
            return self.of(pred)
        index = self._by_arg.get(pred)
        if not index:
            return _EMPTY
        best = None
        for key in bound.items():
            candidates = index.get(key)
            if not candidates:
                return _EMPTY
            if best is None or len(candidates) < len(best):
                best = candidates
        if len(bound) == 1:
            return best
        return [f for f in best if all(f[p] == v for p, v in bound.items())]

    def items(self) -> Iterator[tuple[str, Fact]]:
        """All ``(predicate, args)`` pairs."""
        for pred, facts in self._by_pred.items():
            for args in facts:
                yield pred, args

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_pred.values())


_EMPTY: set = frozenset()  # type: ignore[assignment]


# ------------------------------------------------------------------------------------------------------------
# Problem
# ------------------------------------------------------------------------------------------------------------


@dataclass
class PddlProblem:
    """A problem: declared objects, initial atoms and the goal formula."""

    name: str
    objects: dict[str, str]
    """Object id -> declared type, in declaration order."""
    init: list[tuple[str, Fact]]
    """Initial atoms ``(predicate, args)`` in file order (numeric ``(= ...)`` assignments left out)."""
    goal: list | None
    """The goal formula as a nested list, or None."""

    @classmethod
    def parse(cls, text: str) -> PddlProblem:
        """Parse a problem text (``(define (problem ...) ...)``)."""
        defines = [e for e in parse_sexpr(text) if isinstance(e, list) and e and e[0] == "define"]
        if not defines:
            raise PddlSyntaxError("no (define (problem ...)) in the problem text")
        define = defines[0]
        name = define[1][1] if isinstance(define[1], list) and len(define[1]) > 1 else ""
        objects_part = _section(define, ":objects")
        objects = dict(typed_list(objects_part[1:] if objects_part else []))
        init_part = _section(define, ":init")
        init = []
        for atom in init_part[1:] if init_part else []:
            if not isinstance(atom, list) or not atom or atom[0] == "=":
                continue  # numeric fluents (distances, total-cost) play no part in the text game
            if any(isinstance(a, list) for a in atom[1:]):
                raise PddlSyntaxError(f"unsupported initial atom {atom}")
            init.append((atom[0], tuple(atom[1:])))
        goal_part = _section(define, ":goal")
        goal = goal_part[1] if goal_part and len(goal_part) > 1 else None
        return cls(name, objects, init, goal)


# ------------------------------------------------------------------------------------------------------------
# Formula evaluation (goals)
# ------------------------------------------------------------------------------------------------------------


def _is_var(term: str) -> bool:
    return term.startswith("?")


def _conjuncts(formula: list) -> list[list]:
    if formula and formula[0] == "and":
        return [c for part in formula[1:] for c in _conjuncts(part)]
    return [formula]


def _merge_exists(formula: list) -> list:
    """Pull nested ``exists`` up into the enclosing ``exists`` when no variable name clashes.

    ``(exists (?r) (exists (?o) (and A B)))`` becomes ``(exists (?r ?o) (and A B))``, so that one join binds
    ``?r`` and ``?o`` together instead of trying every receptacle for ``?r`` first.
    """
    if not isinstance(formula, list) or not formula:
        return formula
    head = formula[0]
    if head in ("and", "or", "not", "imply"):
        return [head, *(_merge_exists(part) for part in formula[1:])]
    if head in ("forall",):
        return [head, formula[1], _merge_exists(formula[2])]
    if head != "exists":
        return formula
    variables = list(formula[1])
    names = {name for name, _ in typed_list(variables)}
    body = []
    for conjunct in _conjuncts(_merge_exists(formula[2])):
        if conjunct and conjunct[0] == "exists":
            inner = typed_list(conjunct[1])
            if not names & {name for name, _ in inner}:
                for name, type_name in inner:
                    variables += [name, "-", type_name]
                    names.add(name)
                body += _conjuncts(conjunct[2])
                continue
        body.append(conjunct)
    return ["exists", variables, ["and", *body]]


class GoalChecker:
    """Evaluates a PDDL goal formula on a :class:`FactStore`, as fast-downward's ``check_goal`` decides it.

    The formula is compiled once into closures. An ``exists`` becomes a join plan fixed at compile time: its
    positive atoms in greedy order (the atom with the most known arguments first), each enumerating the
    matching facts through the per-argument indexes and binding its new variables; a variable in no positive
    atom ranges over every object of its type; the remaining conjuncts are checked once everything is bound.
    """

    def __init__(self, goal: list | None, objects: Mapping[str, str], domain: PddlDomain):
        """Prepare ``goal`` for the problem's ``objects`` (id -> type) under ``domain``'s type hierarchy."""
        self.goal = _merge_exists(goal) if goal is not None else None
        self.objects = dict(objects)
        self.domain = domain
        self._of_type: dict[str, list[str]] = {}
        self.predicates: frozenset[str] = frozenset(_atom_predicates(self.goal)) if self.goal else frozenset()
        """The predicates the goal reads: it cannot change unless one of them does."""
        self._check = self._compile(self.goal, frozenset()) if self.goal is not None else None

    def objects_of_type(self, type_name: str) -> list[str]:
        """Object ids whose declared type is ``type_name`` or below it, sorted."""
        if type_name not in self._of_type:
            self._of_type[type_name] = sorted(
                o for o, t in self.objects.items() if self.domain.is_subtype(t, type_name)
            )
        return self._of_type[type_name]

    def __call__(self, facts: FactStore) -> bool:
        """Whether the goal holds in ``facts`` (no goal: False)."""
        if self._check is None:
            return False
        return self._check({}, facts)

    def _compile(self, formula: list, bound: frozenset[str]) -> Callable[[dict, FactStore], bool]:
        head = formula[0] if formula else "and"
        if head in ("and", "or"):
            parts = [self._compile(part, bound) for part in formula[1:]]
            if head == "and":
                return lambda b, f: all(part(b, f) for part in parts)
            return lambda b, f: any(part(b, f) for part in parts)
        if head == "not":
            inner = self._compile(formula[1], bound)
            return lambda b, f: not inner(b, f)
        if head == "imply":
            premise, conclusion = self._compile(formula[1], bound), self._compile(formula[2], bound)
            return lambda b, f: (not premise(b, f)) or conclusion(b, f)
        if head == "forall":
            negated = self._compile(["exists", formula[1], ["not", formula[2]]], bound)
            return lambda b, f: not negated(b, f)
        if head == "exists":
            return self._compile_exists(typed_list(formula[1]), _conjuncts(formula[2]), bound)
        terms = formula[1:]
        for term in terms:
            if _is_var(term) and term not in bound:
                raise PddlSyntaxError(f"free variable {term} in goal atom {formula}")
        getters = [(lambda b, t=t: b[t]) if _is_var(t) else (lambda b, t=t: t) for t in terms]
        if head == "=":
            left, right = getters
            return lambda b, f: left(b) == right(b)
        if not any(_is_var(t) for t in terms):
            constant = tuple(terms)
            return lambda b, f: f.has(head, constant)
        return lambda b, f: f.has(head, tuple(get(b) for get in getters))

    def _compile_exists(
        self, variables: list[tuple[str, str]], conjuncts: list[list], outer: frozenset[str]
    ) -> Callable[[dict, FactStore], bool]:
        types = dict(variables)
        known = set(outer - set(types))  # an inner variable shadows an outer one of the same name
        generators: list[tuple] = []
        used: set[int] = set()
        while any(v not in known for v in types):
            best, best_score = None, -1
            for number, conjunct in enumerate(conjuncts):
                head = conjunct[0] if conjunct else ""
                if number in used or head in _CONNECTIVES:
                    continue
                terms = conjunct[1:]
                if not any(_is_var(t) and t not in known for t in terms):
                    continue
                score = sum(1 for t in terms if not _is_var(t) or t in known)
                if score > best_score:
                    best, best_score = number, score
            if best is None:
                variable = next(v for v in types if v not in known)
                generators.append(("each", variable, tuple(self.objects_of_type(types[variable]))))
                known.add(variable)
                continue
            used.add(best)
            pred, terms = conjuncts[best][0], conjuncts[best][1:]
            bound_terms = tuple((i, t) for i, t in enumerate(terms) if not _is_var(t) or t in known)
            new_terms = []
            for i, t in enumerate(terms):
                if _is_var(t) and t not in known:
                    allowed = None if types[t] == "object" else frozenset(self.objects_of_type(types[t]))
                    new_terms.append((i, t, allowed))
                    known.add(t)
            generators.append(("facts", pred, bound_terms, tuple(new_terms)))
        scope = frozenset(outer | set(types))
        residual = [self._compile(c, scope) for n, c in enumerate(conjuncts) if n not in used]

        def search(level: int, b: dict, f: FactStore) -> bool:
            if level == len(generators):
                return all(check(b, f) for check in residual)
            generator = generators[level]
            if generator[0] == "each":
                variable = generator[1]
                for value in generator[2]:
                    b[variable] = value
                    if search(level + 1, b, f):
                        del b[variable]
                        return True
                b.pop(variable, None)
                return False
            _, pred, bound_terms, new_terms = generator
            query = {i: (b[t] if _is_var(t) else t) for i, t in bound_terms}
            for fact in list(f.matching(pred, query)):
                ok = True
                for i, t, allowed in new_terms:
                    value = fact[i]
                    if (allowed is not None and value not in allowed) or b.get(t, value) != value:
                        ok = False
                        break
                    b[t] = value
                if ok and search(level + 1, b, f):
                    for _, t, _ in new_terms:
                        b.pop(t, None)
                    return True
                for _, t, _ in new_terms:
                    b.pop(t, None)
            return False

        def check(b: dict, f: FactStore) -> bool:
            saved = {v: b.pop(v) for v in types if v in b}  # outer bindings this scope shadows
            found = search(0, b, f)
            b.update(saved)
            return found

        return check


_CONNECTIVES = frozenset({"and", "or", "not", "imply", "exists", "forall", "="})


def _atom_predicates(formula: list) -> Iterator[str]:
    if not isinstance(formula, list) or not formula:
        return
    head = formula[0]
    if head in ("and", "or", "not", "imply"):
        for part in formula[1:]:
            yield from _atom_predicates(part)
    elif head in ("exists", "forall"):
        yield from _atom_predicates(formula[2])
    elif head != "=":
        yield head
