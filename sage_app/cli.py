"""The sage command line: sage train, eval, demo, agents, play, skills {show,export,validate}, leaderboard.

sage train and sage demo take one option per field of their config dataclass (TrainConfig, DemoConfig), made from
the fields themselves by :func:`config_options`: a new field is an option, with its default and its docstring as
help, with no change here.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from sage_agents.config import TrainConfig
from sage_app.demo import DemoConfig

app = typer.Typer(add_completion=False, help="Train and evaluate LLM agents on the SageChain envs.")


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["lr=1e-4", "total_steps=10"]`` -> dict (JSON values, else strings): the ``--set KEY=VALUE`` options."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise typer.BadParameter(f"--set {pair!r} is not KEY=VALUE; e.g. --set lr=1e-4")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def plain(text: str) -> str:
    """``text`` without reST markup: ``:class:`X``` -> X, ````x```` -> x."""
    return re.sub(r":\w+:`~?([^`]*)`", r"\1", text).replace("``", "")


def field_docs(cls: type) -> dict[str, str]:
    """The docstring written right below each field of dataclass ``cls``, on one line, as :func:`plain` text."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {
        node.target.id: plain(" ".join(following.value.value.split()))
        for node, following in zip(body, body[1:], strict=False)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
    }


def _json_value(text: str) -> Any:
    """An option's JSON value (lists and dicts)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise typer.BadParameter(f'{text!r} is not JSON ({error}); e.g. \'["a", "b"]\' or \'{{"k": 1}}\'') from None


def _option(hint: Any, default: Any, help_text: str, panel: str) -> Any:
    """``Annotated[type, typer.Option]`` of one field (its own default None means "not given").

    A bool is a --x/--no-x flag, a str, int or float is typed, the rest (lists, dicts) is JSON.
    """
    kinds = [t for t in typing.get_args(hint) if t is not type(None)] if _is_optional(hint) else [hint]
    shown = default if isinstance(default, str) else "None" if default is None else json.dumps(default)
    option = {"help": escape(f"{help_text} [default: {shown}]"), "show_default": False, "rich_help_panel": panel}
    if len(kinds) == 1 and kinds[0] in (bool, int, float, str):
        return Annotated[kinds[0] | None, typer.Option(**option)]
    return Annotated[Any, typer.Option(parser=_json_value, metavar="JSON", **option)]


def _is_optional(hint: Any) -> bool:
    """``X | None`` or ``Optional[X]``."""
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def config_options(cls: type) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a typer command one option per field of dataclass ``cls``; it receives the given ones as ``**fields``.

    An option left out is not passed, so a ``--config`` file's or ``--set``'s value stands; ``--help`` shows each
    field's default and docstring (:func:`field_docs`) under "<cls> fields".
    """
    hints, docs = typing.get_type_hints(cls), field_docs(cls)
    added = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=_option(hints[f.name], _default(f), docs.get(f.name, ""), f"{cls.__name__} fields"),
        )
        for f in dataclasses.fields(cls)
    ]

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.kind != p.VAR_KEYWORD]
        names = {p.name for p in own}

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> None:
            given = {k: v for k, v in kwargs.items() if k not in names and v is not None}
            command(**{k: kwargs[k] for k in names}, **given)

        wrapper.__signature__ = inspect.Signature(own + added)  # type: ignore[attr-defined]  (what typer reads)
        wrapper.__annotations__ = {p.name: p.annotation for p in own + added}
        return wrapper

    return decorate


def _default(field: dataclasses.Field) -> Any:
    """A field's default value (its factory's value for a list or dict)."""
    return field.default_factory() if field.default is dataclasses.MISSING else field.default  # type: ignore[misc]


def _fields(config: Path | None, sets: list[str] | None, options: dict[str, Any]) -> dict[str, Any]:
    """The --config file's fields, overridden by --set's, then by the field options; one field both ways is refused."""
    overrides = parse_overrides(sets or [])
    both = sorted(set(overrides) & set(options))
    if both:
        raise typer.BadParameter(f"{both} given both by --set and by its own option; keep one of them.")
    return {**(json.loads(config.read_text()) if config else {}), **overrides, **options}


@app.command()
@config_options(TrainConfig)
def train(
    config: Annotated[Path | None, typer.Option(help="JSON file of TrainConfig fields.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a TrainConfig field: KEY=VALUE (JSON value).")
    ] = None,
    **options: Any,
) -> None:
    """Train with GRPO, SAGE or ReSkill (--algo reskill; --backend trl: TRL's GRPOTrainer; docs/agents.md).

    Every TrainConfig field is an option below; lists and dicts take JSON (--env-kwargs '{"chain_length": 2}'),
    and --set KEY=null sets a field to None.
    """
    cfg = TrainConfig.from_dict(_fields(config, set_, options))
    if cfg.backend == "trl":
        from sage_agents.integrations.trl import train_trl

        train_trl(cfg)
        return
    from sage_agents.trainer import Trainer

    trainer = Trainer(cfg)
    try:
        trainer.train()
    finally:
        trainer.close()


@app.command("eval")
def evaluate(
    model_path: Annotated[Path, typer.Argument(help="Local folder of a causal LM (save_pretrained).")],
    env_id: Annotated[str, typer.Option(help="Gymnasium id.")] = "SageChain-ALFWorld-v0",
    split: Annotated[str, typer.Option(help="Env split.")] = "valid_seen",
    num_chains: Annotated[int, typer.Option(help="Chains 0..N-1 are played once.")] = 10,
    constrained: Annotated[bool, typer.Option(help="Decode among admissible commands + skill calls.")] = True,
    env_kwargs: Annotated[str, typer.Option(help="JSON dict of gymnasium.make kwargs.")] = "{}",
    seed: Annotated[int, typer.Option(help="Reset seed base.")] = 0,
    history_turns: Annotated[
        int, typer.Option(help="(observation, action) pairs of the current task in the prompt (as in training).")
    ] = 3,
    earlier_actions: Annotated[
        int, typer.Option(help="Earlier actions listed beyond the history window (0 = none; as in training).")
    ] = 20,
    show_admissible: Annotated[
        bool, typer.Option(help="List the admissible commands in the prompt (as in training).")
    ] = True,
    untried_commands: Annotated[
        str | None,
        typer.Option(help="List the admissible commands with this prefix not yet sent in the task (as in training)."),
    ] = None,
    skip_repeated_actions: Annotated[
        bool, typer.Option(help="Do not offer a command already sent at the same observation in the task.")
    ] = False,
) -> None:
    """Greedy evaluation of a local model; prints the env/ metrics as JSON.

    The prompt options must match the ones the model was trained with (TrainConfig's history_turns,
    earlier_actions, show_admissible, untried_commands); the defaults are TrainConfig's. --skip-repeated-actions is a
    decoding rule, not a prompt option: `make demo`'s ALFWorld models are evaluated with it.
    """
    import gymnasium as gym

    import sage_envs  # noqa: F401  (registers the env ids)
    from sage_agents.evaluation import evaluate_policy
    from sage_agents.models import load_policy
    from sage_agents.policy import LLMPolicy

    model, tokenizer = load_policy(model_path)
    model.eval()
    policy = LLMPolicy(
        model,
        tokenizer,
        constrained=constrained,
        history_turns=history_turns,
        earlier_actions=earlier_actions,
        show_admissible=show_admissible,
        untried_commands=untried_commands,
        skip_repeated_actions=skip_repeated_actions,
    )
    env = gym.make(env_id, split=split, **json.loads(env_kwargs))
    chains = list(range(min(num_chains, env.unwrapped.num_chains)))
    _, stats = evaluate_policy(policy, [env], chains, [seed + chain for chain in chains])
    typer.echo(json.dumps(stats, indent=2, sort_keys=True))


@app.command()
@config_options(DemoConfig)
def demo(
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a DemoConfig field: KEY=VALUE (JSON value).")
    ] = None,
    **options: Any,
) -> None:
    """The main job: expert chains -> SFT -> GRPO vs SAGE vs ReSkill -> table and plots (sage_app/demo.py)."""
    from sage_app.demo import run_demo

    run_demo(DemoConfig(**_fields(None, set_, options)))


@app.command("agents")
def agents() -> None:
    """List the registered agents with their one-line descriptions (entry-point group sage_agents.agents)."""
    from sage_agents.registry import agent_description, list_agents

    names = list_agents()
    width = max(map(len, names), default=0)
    for name in names:
        typer.echo(f"{name:<{width}}  {plain(agent_description(name)) or '-'}")


def _chain_list(text: str) -> list[int]:
    """``"0,1,5"`` -> ``[0, 1, 5]``."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of chain numbers; e.g. 0,1") from None


@app.command()
def play(
    env_id: Annotated[str, typer.Option(help="Gymnasium id.")] = "SageChain-ALFWorld-v0",
    split: Annotated[str, typer.Option(help="Env split.")] = "valid_unseen",
    chains: Annotated[str, typer.Option(help="Chains to play, in order, comma-separated (e.g. 0,1).")] = "0",
    seed: Annotated[int, typer.Option(help="Episode seed of every chain.")] = 0,
    skills: Annotated[str, typer.Option(help="Skill mode: program, guidance, both or none.")] = "program",
    source: Annotated[
        str | None, typer.Option(help="ALFWorld game source (generated / official); default: the env's.")
    ] = None,
    output: Annotated[Path, typer.Option(help="Results folder for the episode log and the summary.")] = Path(
        "leaderboard/results"
    ),
) -> None:
    """Play chains yourself in the terminal; the transcript is saved as a leaderboard entry of agent human.

    Tab completes the admissible commands, a line ending in ':' starts a skill definition (ended by an empty
    line), ? lists the commands, quit or Ctrl-D ends the session and saves what was played (sage_app/play.py).
    """
    from sage_app.play import play as play_session

    try:
        play_session(env_id, split, _chain_list(chains), seed, skills, source, output)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None


skills_app = typer.Typer(add_completion=False, help="Show, export and validate skill libraries, checkpoints and runs.")
app.add_typer(skills_app, name="skills")
_SKILLS_PATH = "A SKILL.md library folder, a checkpoint folder or a run's output_dir (its newest checkpoint)."


@skills_app.command("show")
def skills_show(
    path: Annotated[Path, typer.Argument(help=_SKILLS_PATH)],
    diff: Annotated[
        tuple[str, int, int] | None,
        typer.Option(metavar="NAME V1 V2", help="Print the diff between two versions of one skill instead."),
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="Draw ReSkill's lifecycle into this PNG.")] = None,
) -> None:
    """Each skill with its version, status, uses and provenance; ReSkill's lifecycle when the run has one."""
    from rich.console import Console
    from rich.table import Table

    from sage_agents.reskill.lifecycle import plot_lifecycle, read_lifecycle
    from sage_app.skills_cli import lifecycle_lines, resolve, show_rows, version_diff

    found = _resolved(path, resolve)
    if diff is not None:
        try:
            typer.echo(version_diff(found, *diff) or f"versions {diff[1]} and {diff[2]} of {diff[0]} are the same")
        except KeyError as error:
            raise typer.BadParameter(error.args[0], param_hint="--diff") from None
        return
    console = Console()
    console.print(f"{found.source}")
    for shelf in found.shelves:
        rows = show_rows(shelf)
        table = Table(title=f"{shelf.label}: {len(rows)} skills", title_justify="left")
        for column in ("skill", "kind", "version", "versions", "status", "uses", "provenance", "description"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*map(escape, row.values()))
        console.print(table)
    if found.lifecycle is None:
        if plot is not None:
            raise typer.BadParameter(f"{path} has no ReSkill lifecycle log to plot", param_hint="--plot")
        return
    events = read_lifecycle(found.lifecycle)
    console.print(f"ReSkill lifecycle ({found.lifecycle}): {len(events)} events")
    for line in lifecycle_lines(events):
        console.print(escape(line), highlight=False)
    drawn = found.lifecycle.with_suffix(".png")
    if plot is not None:
        drawn = plot_lifecycle(events, plot)
    console.print(f"plot: {drawn}" if drawn.is_file() else "plot: none drawn yet (--plot OUT.png draws it)")


def _resolved(path: Path, resolve: Callable[[Path], Any]) -> Any:
    """``resolve(path)``, its errors as a clean usage error."""
    from sage_envs.error import SkillError

    try:
        return resolve(path)
    except (FileNotFoundError, SkillError, ValueError) as error:
        raise typer.BadParameter(str(error), param_hint="PATH") from None


@skills_app.command("export")
def skills_export(
    src: Annotated[Path, typer.Argument(help=_SKILLS_PATH)],
    dest: Annotated[Path, typer.Argument(help="New or empty folder for the Agent Skills folders.")],
) -> None:
    """Write the live version of every skill as an Agent Skills folder (DEST/<name>/SKILL.md)."""
    from sage_app.skills_cli import export, resolve
    from sage_envs.error import SkillError

    try:
        written = export(_resolved(src, resolve), dest)
    except (FileExistsError, SkillError) as error:
        raise typer.BadParameter(str(error), param_hint="DEST") from None
    typer.echo(f"wrote {len(written)} skill folders into {dest}")


@skills_app.command("validate")
def skills_validate(
    folder: Annotated[Path, typer.Argument(help="A folder of SKILL.md folders, or one skill's folder.")],
) -> None:
    """Check each skill folder as the library loader does; print why each rejected one is; exit 1 if any is."""
    from sage_app.skills_cli import validate

    verdicts = validate(folder)
    for verdict in verdicts:
        typer.echo(f"ok        {verdict.name}" if verdict.skill else f"rejected  {verdict.name}: {verdict.reason}")
    rejected = sum(v.skill is None for v in verdicts)
    typer.echo(f"{len(verdicts) - rejected} accepted, {rejected} rejected")
    if rejected:
        raise typer.Exit(1)


leaderboard_app = typer.Typer(add_completion=False, help="Evaluate agents and render LEADERBOARD.md.")
app.add_typer(leaderboard_app, name="leaderboard")
_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


@leaderboard_app.command("evaluate", context_settings=_PASS_THROUGH)
def leaderboard_evaluate(ctx: typer.Context) -> None:
    """Same arguments as python -m leaderboard.evaluate (sage leaderboard evaluate --help lists them)."""
    from leaderboard.evaluate import main as evaluate_main

    evaluate_main(ctx.args)


@leaderboard_app.command("render", context_settings=_PASS_THROUGH)
def leaderboard_render(ctx: typer.Context) -> None:
    """Same arguments as python -m leaderboard.render."""
    from leaderboard.render import main as render_main

    render_main(ctx.args)


def main() -> None:
    """Console-script entry point (sage)."""
    app()


if __name__ == "__main__":
    main()
