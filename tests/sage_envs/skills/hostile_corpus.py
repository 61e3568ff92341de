"""Hostile skill turns: programs written to make one env step as slow or as long as possible.

Shared by ``tests/sage_envs/skills/test_hostile.py`` (each turn must stop, invalid, within the limits, leaving the
library unchanged) and ``benchmarks/hostile_turns.py`` (each turn's wall time on ALFWorld). The programs only use
the primitive ``look`` and one domain collection, named by the caller, so they run in any domain.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostileTurn:
    """One attack: definitions sent first (each must be accepted), then the turn under test."""

    name: str
    """Short id, used as the pytest id and the benchmark's row label."""
    setup: tuple[str, ...]
    """Actions sent before the attack, in order; each is a valid definition."""
    attack: str
    """The turn under test."""
    stops_with: str
    """A phrase the turn's ``info["message"]`` must contain: the limit or rule that stopped it."""


def _fan(name: str, callee: str, args: str = "") -> str:
    """A skill that calls ``callee`` 59 times (header + 59 lines = the 60-line program limit)."""
    params = "x" if args else ""
    return f"skill {name}({params}):\n" + f"    call {callee}({args})\n" * 59


def _fan_chain(leaf: str, args: str = "") -> tuple[str, ...]:
    """Three fan-out skills over ``leaf``: ``f2`` calls ``f1`` 59 times, ``f1`` calls ``f0``, ``f0`` calls ``leaf``."""
    return tuple(_fan(f"f{k}", leaf if k == 0 else f"f{k - 1}", args) for k in range(3))


IF_SKILL = "skill ifs():\n" + "".join(f'    if "needle {i}" in observation:\n        look\n' for i in range(29))
"""29 ``if`` tests that never hold (the issue's "skill of if tests")."""

SUBSTITUTION_IFS = "skill subst(x):\n" + '    if "{x}b" in "{x}{x}{x}":\n        look\n' * 29
"""29 tests of a ~1000-character needle against a ~3000-character haystack built from the argument."""

SEARCH_IFS = "skill search(x):\n" + f'    if "{{x}}d" in "{"{x}" * 20}b":\n        look\n' * 29
"""29 tests with a short needle and a ~4000-character haystack: the substring search's slowest shape."""


def hostile_turns(collection: str) -> list[HostileTurn]:
    """The corpus, with every ``for`` loop iterating over ``collection`` (e.g. ``receptacles`` in ALFWorld)."""
    nested_fors = "skill deep():\n" + "".join(
        "    " * (level + 1) + f"for v{level} in {collection}:\n" for level in range(6)
    )
    nested_fors += "    " * 7 + 'if "zz" in "{v0}{v5}":\n' + "    " * 8 + "look\n"
    loop_of_ifs = f"skill scan():\n    for r in {collection}:\n" + "".join(
        f'        if "{{r}} {i}" in observation:\n            look\n' for i in range(29)
    )
    return [
        HostileTurn(
            "issue_59_cubed_calls_of_ifs",
            (IF_SKILL, *_fan_chain("ifs")),
            "call f2()",
            "statement limit reached",
        ),
        HostileTurn(
            "issue_58_trailing_calls_of_the_fan_out",
            (IF_SKILL, *_fan_chain("ifs")),
            "skill go():\n    return\n" + "call f2()\n" * 58,
            "statement limit reached",
        ),
        HostileTurn(
            "issue_30_looks_then_29_call_lines",
            (),
            "skill looks():\n" + "    look\n" * 30 + "call looks()\n" * 29,
            "primitive step limit reached",
        ),
        HostileTurn(
            "fan_out_of_returns",
            ("skill ret():\n    return\n", *_fan_chain("ret")),
            "call f2()",
            "statement limit reached",
        ),
        HostileTurn(
            "long_substitutions_in_ifs",
            (SUBSTITUTION_IFS, *_fan_chain("subst", "{x}")),
            "call f2(" + "a" * 999 + ")",
            "statement limit reached",
        ),
        HostileTurn(
            "search_worst_case_in_ifs",
            (SEARCH_IFS, *_fan_chain("search", "{x}")),
            "call f2(" + "a" * 198 + "c)",
            "statement limit reached",
        ),
        HostileTurn(
            "looks_rereading_the_collections",
            (
                f"skill reread():\n    for r in {collection}:\n        look\n"
                f"        for s in {collection}:\n            break",
                *_fan_chain("reread"),
            ),
            "call f2()",
            "limit reached",  # primitive steps or iterations, whichever the collection's size reaches first
        ),
        HostileTurn(
            "argument_doubling",
            tuple(f"skill g{k}(x):\n    call g{k + 1}({{x}}{{x}})\n" for k in range(3)) + ("skill g3(x):\n    look\n",),
            "call g0(" + "a" * 600 + ")",
            "substituted text exceeds",
        ),
        HostileTurn("for_nested_6_deep", (nested_fors,), "call deep()", "loop iteration limit reached"),
        HostileTurn(
            "loop_of_ifs_called_59_cubed_times",
            (loop_of_ifs, *_fan_chain("scan")),
            "call f2()",
            "limit reached",  # iterations or statements, whichever the collection's size reaches first
        ),
        HostileTurn(
            "self_recursion",
            ("skill rec():\n    look\n    call rec()\n",),
            "call rec()",
            "call depth limit",
        ),
        HostileTurn(
            "mutual_recursion_fanned",
            ("skill ping():\n" + "    call pong()\n" * 30, "skill pong():\n" + "    call ping()\n" * 30),
            "call ping()",
            "call depth limit",
        ),
        HostileTurn(
            "recursive_definition_with_trailing_call",
            (),
            "skill again():\n    look\n    call again()\ncall again()",
            "call depth limit",
        ),
        HostileTurn(
            "looks_in_a_loop_in_trailing_calls",
            (),
            f"skill walk():\n    for r in {collection}:\n        look\n" + "call walk()\n" * 40,
            "limit reached",  # primitive steps or iterations, whichever the collection's size reaches first
        ),
    ]
