"""The ``sage`` command line: ``sage train``, ``sage eval``, ``sage agents``, ``sage leaderboard {evaluate,render}``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(add_completion=False, help="Train and evaluate LLM agents on the SageChain envs.")


def _parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``["lr=1e-4", "total_steps=10"]`` -> dict (JSON values, else strings)."""
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


@app.command()
def train(
    config: Annotated[Path | None, typer.Option(help="JSON file of TrainConfig fields.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a TrainConfig field: KEY=VALUE (JSON value).")
    ] = None,
) -> None:
    """Train with GRPO, SAGE or ReSkill (``--set algo=reskill``; ``--set backend=trl``: TRL; docs/agents.md)."""
    from sage_agents.config import TrainConfig

    fields = json.loads(config.read_text()) if config else {}
    cfg = TrainConfig.from_dict({**fields, **_parse_overrides(set_ or [])})
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
    constrained: Annotated[bool, typer.Option(help="Score admissible commands + skill calls.")] = True,
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
    candidate_score: Annotated[str, typer.Option(help="Constrained-decoding score: sum or mean.")] = "sum",
) -> None:
    """Greedy evaluation of a local model; prints the env/ metrics as JSON.

    The prompt options must match the ones the model was trained with (TrainConfig ``history_turns``,
    ``earlier_actions``, ``show_admissible``, ``candidate_score``); the defaults are TrainConfig's.
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
        candidate_score=candidate_score,
    )
    env = gym.make(env_id, split=split, **json.loads(env_kwargs))
    chains = list(range(min(num_chains, env.unwrapped.num_chains)))
    _, stats = evaluate_policy(policy, [env], chains, [seed + chain for chain in chains])
    typer.echo(json.dumps(stats, indent=2, sort_keys=True))


@app.command()
def demo(
    quick: Annotated[bool, typer.Option(help="Smoke run of every stage (about two minutes).")] = False,
    output_dir: Annotated[str, typer.Option(help="Where every stage writes; a rerun resumes.")] = "runs/demo",
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a DemoConfig field: KEY=VALUE (JSON value).")
    ] = None,
) -> None:
    """The main job: expert chains -> SFT -> GRPO vs SAGE vs ReSkill -> table and plots (sage_app/demo.py)."""
    from sage_app.demo import DemoConfig, run_demo

    run_demo(DemoConfig(quick=quick, output_dir=output_dir, **_parse_overrides(set_ or [])))


@app.command("agents")
def agents() -> None:
    """List the registered agents (entry-point group ``sage_agents.agents``)."""
    from sage_agents.registry import list_agents

    for name in list_agents():
        typer.echo(name)


leaderboard_app = typer.Typer(add_completion=False, help="Evaluate agents and render LEADERBOARD.md.")
app.add_typer(leaderboard_app, name="leaderboard")
_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


@leaderboard_app.command("evaluate", context_settings=_PASS_THROUGH)
def leaderboard_evaluate(ctx: typer.Context) -> None:
    """Same arguments as ``python -m leaderboard.evaluate`` (``sage leaderboard evaluate --help`` lists them)."""
    from leaderboard.evaluate import main as evaluate_main

    evaluate_main(ctx.args)


@leaderboard_app.command("render", context_settings=_PASS_THROUGH)
def leaderboard_render(ctx: typer.Context) -> None:
    """Same arguments as ``python -m leaderboard.render``."""
    from leaderboard.render import main as render_main

    render_main(ctx.args)


def main() -> None:
    """Console-script entry point (``sage``)."""
    app()


if __name__ == "__main__":
    main()
