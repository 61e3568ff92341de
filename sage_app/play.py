"""``sage play``: a person plays chains in the terminal, and the transcript becomes a leaderboard entry.

Each turn shows the task, the observation and the skill library (rich), then reads one action: a command
(Tab completes the admissible ones and ``call NAME(`` of the library's program skills; Up and Down walk the
history, GNU readline's), a skill definition (a first line ending in ``:`` continues, one line per prompt,
until an empty line: the DSL's ``skill NAME(params):`` header, its indented body and optional ``call`` lines,
docs/skills.md) or a call. ``?`` lists the admissible commands; ``quit``, Ctrl-D or Ctrl-C ends the session.

Chains are played by :func:`sage_agents.evaluation.play_chains` with the person as the agent, and the records
are written by :func:`leaderboard.evaluate.append_episodes` and summarized by :func:`leaderboard.evaluate.summarize`
under the agent name ``human``: the log and the summary are ordinary leaderboard files (render, resummarize).
A chain left by ``quit`` keeps the turns played, its record holds ``agent_error`` of type ``Quit`` and its
unplayed tasks count as failed; a chain quit before its first action is not recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

HUMAN = "human"
"""The agent name of a person's entries (summary ``agent``, file stem)."""
GIVEN = "a person at a terminal: task, observation, skill library, Tab completion of the admissible commands"
"""The summary's ``given``: what the player sees besides the task and the observation."""
QUIT_WORDS = ("quit", "exit")
"""Lines that end the session (as do Ctrl-D and Ctrl-C)."""


class Quit(Exception):  # noqa: N818  (its name is the agent_error type a quit chain's record holds)
    """The player ended the session (``quit``, Ctrl-D or Ctrl-C)."""


def read_action(read_line: Callable[[str], str], prompt: str = "> ", more: str = "... ") -> str:
    """Read one action; a first line ending in ``:`` (a skill header) continues until an empty line.

    Args:
        read_line: ``input``-like: shows its argument, returns one line, raises EOFError at the end of input.
        prompt: the first line's prompt.
        more: the prompt of each continuation line.

    Returns:
        The action text: one line, or the block's lines joined with newlines (indentation kept).
    """
    first = read_line(prompt)
    if not first.rstrip().endswith(":"):
        return first.strip()
    lines = [first.rstrip()]
    while True:
        try:
            line = read_line(more)
        except EOFError:  # the end of input ends the block; the session ends at the next prompt
            break
        if not line.strip():
            break
        lines.append(line.rstrip())
    return "\n".join(lines)


def completions(text: str, info: dict[str, Any]) -> list[str]:
    """The entries that complete ``text`` (the line so far): admissible commands, skill calls, ``?``, ``quit``."""
    calls = [f"call {s['name']}(" for s in info.get("skill_library", []) if s.get("kind") == "program"]
    candidates = [*info.get("admissible_commands", []), *calls, "skill ", "?", *QUIT_WORDS]
    return sorted({c for c in candidates if c.startswith(text)})


class HumanPlayer:
    """An agent whose actions a person types (the registry's agent protocol: ``reset`` and ``act``).

    Args:
        chains: the chains of the session in play order (shown in the status line).
        max_steps: the env's turns per task.
        console: where the screens go.
        read_line: ``input``-like line reader (readline's ``input`` on a terminal).
    """

    def __init__(self, chains: list[int], max_steps: int, console: Console, read_line: Callable[[str], str] = input):
        self.chains, self.max_steps, self.console, self.read_line = chains, max_steps, console, read_line
        self.started = -1  # index into chains of the chain being played
        self.info: dict[str, Any] = {}  # the latest info, for completion

    def reset(self) -> None:
        """A chain starts (the evaluator calls this at each chain start)."""
        self.started += 1

    def complete(self, text: str, state: int) -> str | None:
        """The readline completer: the ``state``-th completion of ``text``."""
        matches = completions(text, self.info)
        return matches[state] if state < len(matches) else None

    def act(self, observation: dict[str, str], info: dict[str, Any]) -> str:
        """Show the turn, read the player's action; raises :class:`Quit` when the player ends the session."""
        self.info = info
        self.show(observation, info)
        while True:
            try:
                action = read_action(self.read_line)
            except (EOFError, KeyboardInterrupt):
                self.console.print()
                raise Quit("the player ended the session (Ctrl-D / Ctrl-C)") from None
            if action in QUIT_WORDS:
                raise Quit(f"the player ended the session ({action!r})")
            if action == "?":
                self.console.print(Text("\n".join(info.get("admissible_commands", [])), style="cyan"))
            elif action:
                return action

    def show(self, observation: dict[str, str], info: dict[str, Any]) -> None:
        """Print the turn: the previous task's end, an invalid action's message, observation, task, skills."""
        out = self.console
        task, n = info["task_index"], info["chain_length"]  # the task the previous action went to
        if info.get("new_task") and info.get("chain_successes"):  # it ended, and the observation opens the next
            won = info["chain_successes"][-1]
            out.print(Text(info.get("previous_observation", ""), style="dim"))
            out.print(
                Text(f"Task {task + 1} {'completed' if won else 'failed'}.", style="bold green" if won else "red")
            )
            task += 1
        if not info.get("action_valid", True):
            out.print(Text(f"Invalid action: {info.get('message', '')}", style="bold red"))
        chain = self.chains[self.started] if 0 <= self.started < len(self.chains) else "?"
        status = f"chain {chain} · task {task + 1}/{n} · turn {info.get('turn', 0) + 1}/{self.max_steps}"
        out.print(Panel(Text(observation["observation"]), title=status, title_align="left"))
        out.print(Text.assemble(("Task: ", "bold"), observation["task"]))
        if observation.get("skills"):
            out.print(Panel(Text(observation["skills"]), title="skill library", title_align="left", style="blue"))
        out.print(Text("Tab completes, ? lists the admissible commands, quit or Ctrl-D ends.", style="dim"))


def _install_readline(player: HumanPlayer) -> Callable[[str], str]:
    """Tab completion and history through the standard library's readline, when there is one; returns ``input``."""
    try:
        import readline
    except ImportError:  # no readline (Windows): plain input, no completion
        return input
    readline.set_completer(player.complete)
    readline.set_completer_delims("")  # complete the whole line: commands hold spaces
    binding = "bind ^I rl_complete" if "libedit" in (readline.__doc__ or "") else "tab: complete"
    readline.parse_and_bind(binding)
    return input


def _played(env: Any, player: HumanPlayer, todo: list[tuple[int, int]], console: Console) -> Iterator[dict[str, Any]]:
    """The records of the chains played, up to and including the one the player quit (not yielded if unplayed)."""
    from sage_agents.evaluation import play_chains

    for record in play_chains([env], player, todo):
        quit_ = record.get("agent_error", {}).get("type") == Quit.__name__
        if not quit_ or any(record["steps"]):
            won = sum(record["success"])
            console.print(Text(f"Chain {record['chain']}: {won}/{len(record['success'])} tasks completed.", "bold"))
            yield record
        if quit_:
            return


def play(
    env_id: str = "SageChain-ALFWorld-v0",
    split: str = "valid_unseen",
    chains: list[int] | None = None,
    seed: int = 0,
    skills: str = "program",
    source: str | None = None,
    output: str | Path = "leaderboard/results",
    console: Console | None = None,
    read_line: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """Play ``chains`` of ``env_id``/``split`` at the terminal; append them to the ``human`` log, write its summary.

    Args:
        env_id: the env id.
        split: the split.
        chains: the chains to play, in order (default: chain 0).
        seed: the episode seed of every chain.
        skills: the env's skill mode (``program``, ``guidance``, ``both``, ``none``).
        source: ALFWorld's game source (``generated`` / ``official``); None keeps the env's default.
        output: the results folder (``<run name>.episodes.jsonl`` and ``<run name>.json``).
        console: where the screens go (default: the terminal).
        read_line: ``input``-like line reader (default: ``input`` with readline's completion and history).

    Returns:
        The summary written: every chain of this configuration the log holds (earlier sessions' too), in
        (seed, chain) order.

    Raises:
        ValueError: a chain outside the split.
    """
    import gymnasium as gym

    from leaderboard.evaluate import EvalConfig, append_episodes, read_episodes, summarize, write_summary

    console = console or Console()
    chains = [0] if chains is None else list(chains)
    config = EvalConfig(HUMAN, env_id, split, max(1, len(chains)), str(output), [seed], source,
                        env_kwargs={"skills": skills})  # fmt: skip
    env = gym.make(env_id, **config.make_kwargs)
    try:
        bad = [c for c in chains if not 0 <= c < env.unwrapped.num_chains]
        if bad:
            raise ValueError(f"chains {bad} are not in {split!r}, which has chains 0..{env.unwrapped.num_chains - 1}")
        player = HumanPlayer(chains, env.unwrapped.max_steps_per_task, console)
        player.read_line = read_line or _install_readline(player)
        out = Path(output)
        out.mkdir(parents=True, exist_ok=True)
        log = out / f"{config.run_name}.episodes.jsonl"
        for _ in append_episodes(log, _played(env, player, [(seed, c) for c in chains], console), config):
            pass
        full_length = env.unwrapped.chain_length
        played_source = str(getattr(env.unwrapped.domain, "source", "default"))
    finally:
        env.close()
    records = [record for _, record in sorted(read_episodes(log, config.config_hash).items())]
    if not records:
        console.print("Nothing was played; nothing saved.")
        return {}
    summary = summarize(records, config, model=HUMAN, source=played_source, token_unit="words",
                        full_length=full_length, model_name=HUMAN, given=GIVEN)  # fmt: skip
    write_summary(out / f"{config.run_name}.json", summary)
    console.print(
        f"Saved {len(records)} chain(s) of {HUMAN!r}: TGC {100 * summary['tgc']:.1f}%, SGC {100 * summary['sgc']:.1f}%"
        f"\n  episodes: {log}\n  summary:  {out / f'{config.run_name}.json'}"
    )
    return summary
