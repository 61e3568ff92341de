#!/usr/bin/env bash
# Reproduce the committed results of the LLM agents: the demo's SFT model (`policy`), its GRPO and SAGE
# checkpoints, and the prompted `react` and `memory` agents on that same SFT model, on generated valid_seen /
# valid_unseen (100 chains) and, when the data is present, official valid_seen (all 99 chains). Run `make demo`
# first (DEMO=its --output-dir). Same protocol as run_baselines.sh (the demo's chains: 2 tasks, 30 turns per
# task); the prompt options and SAGE's skill options are the demo run's own (its demo_config.json). The demo's own
# valid_unseen episodes are copied in first: entries with the same settings resume from them instead of replaying
# (the evaluator keeps only episodes whose config hash matches). `memory` learns while it is evaluated, so it runs
# in one process: its results then do not depend on how chains are spread over workers.
# The env is the demo's (its DemoConfig.env_id; ALFWorld for runs saved before the field existed): on another env
# the entries are evaluated on its domain's splits after the training one, the demo's eval_split first.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEMO=${DEMO:-runs/demo}
WORKERS=${WORKERS:-2}
CHAINS=${CHAINS:-}  # CHAINS=N: only each split's first N chains (a quick check; the committed entries play them all)
AGENTS=${AGENTS:-"sft grpo react memory reskill sage sage-persistent"}  # the entries to (re)compute; reskill needs RESKILL
# SPLITS="valid" evaluates only those generated splits (no official set); by default the demo's eval_split, the
# domain's other splits but the training one, and on ALFWorld official valid_seen where the games are.
ONLY_SPLITS=${SPLITS:-}
want() { [[ " $AGENTS " == *" $1 "* ]]; }
# The demo run's env, splits, protocol, policy options and SAGE's skill options (templates, write_skills) as JSON
# members (without braces), read from the DemoConfig it saved (demo_config.json), so the entries are evaluated as
# that run evaluated its agents.
{ read -r ENV_ID; read -r SPLITS; read -r ENV; read -r PROMPT; read -r SAGE_KWARGS; read -r BANK; read -r DEMO_BATCH; } < <("$PY" -c '
import json, sys
from sage_app.demo import DemoConfig
from sage_envs import domain_class
cfg = DemoConfig.load(sys.argv[1] + "/demo_config.json")
print(cfg.env_id)
print(cfg.eval_split, *[s for s in domain_class(cfg.env_id).splits[1:] if s != cfg.eval_split])
print(json.dumps(cfg.env_kwargs)[1:-1])
print(json.dumps(cfg.policy_kwargs)[1:-1])
print(json.dumps(cfg.sage_kwargs)[1:-1])
print(int(cfg.sage_eval_bank))
print(cfg.eval_batch_size)' "$DEMO")
# Chains per process in lockstep (one batched generation per turn): by default the demo's own, as the batch size is
# part of an entry's config hash; with another one the demo's copied episodes below would not be resumed from.
BATCH=${BATCH:-$DEMO_BATCH}
EVAL_SPLIT=${SPLITS%% *}
SPLITS=${ONLY_SPLITS:-$SPLITS}
# GRPO=<the output_dir of a `sage train --algo grpo` run> (e.g. `examples/learning_curve.py --output`) plays in
# place of the demo's GRPO arm, SAGE=<that of a `--algo sage` run> in place of its SAGE arm (as `sage` and
# `sage-persistent`); LABEL_SUFFIX=-x names every entry <agent>-x, so that runs of another recipe sit beside the
# demo's entries instead of replacing them.
SUFFIX=${LABEL_SUFFIX:-}
last_checkpoint() { echo "$1/checkpoints/$(cat "$1/checkpoints/latest")"; }  # an arm's (a training run's)
if want grpo; then GRPO_CKPT=$(last_checkpoint "${GRPO:-$DEMO/grpo}"); fi  # only the arms asked for need a checkpoint
if want sage || want sage-persistent; then
  SAGE_CKPT=$(last_checkpoint "${SAGE:-$DEMO/sage}")
  SKILLS=""  # SAGE starts from the skills its reward paid for in training when the demo evaluated it so
  if [ "$BANK" = 1 ] && [ -d "$SAGE_CKPT/skill_library" ]; then SKILLS="\"skills_path\": \"$SAGE_CKPT/skill_library\", "; fi
fi
# RESKILL=<the output_dir of a `sage train --algo reskill` run> adds its last checkpoint as `reskill`, acting with
# the prompt options it was trained with (TrainConfig.policy_kwargs) and the library it had accepted, and as
# `reskill-weights` without that library (every chain starts with none), to separate the weights from the guidance.
if [ -n "${RESKILL:-}" ]; then
  RESKILL_CKPT=$(last_checkpoint "$RESKILL")
  { read -r RESKILL_SKILLS; read -r RESKILL_AGENT; read -r RESKILL_WEIGHTS; } < <("$PY" -c 'import json, os, sys
from sage_agents.config import TrainConfig
ckpt = sys.argv[1]
cfg = TrainConfig.from_dict(json.load(open(os.path.join(ckpt, "trainer_state.json")))["config"])
weights = {"model_path": os.path.join(ckpt, "model"), **cfg.policy_kwargs}
agent = dict(weights)
if os.path.isdir(os.path.join(ckpt, "reskill_library")):
    agent["skills_path"] = os.path.join(ckpt, "reskill_library")
print(cfg.env_kwargs.get("skills", "guidance"), json.dumps(agent), json.dumps(weights), sep="\n")' "$RESKILL_CKPT")
fi
mkdir -p leaderboard/results
# Not with LABEL_SUFFIX: the label is part of an entry's config hash, so renamed entries could not resume from them.
if [ -z "$SUFFIX" ]; then COPIED="sft grpo sage sage-persistent"; else COPIED=""; fi
for label in $COPIED; do
  episodes=$DEMO/results/${label}__${ENV_ID}__${EVAL_SPLIT}__default.episodes.jsonl
  if [ -f "$episodes" ] && [ ! -f "leaderboard/results/$(basename "$episodes")" ]; then
    cp "$episodes" leaderboard/results/
  fi
done
# A failing entry does not stop the others: it is named at the end, and the script then exits non-zero.
FAILED=()
run() {
  "$PY" -m leaderboard.evaluate --env "$ENV_ID" --output leaderboard/results --batch-size "$BATCH" \
      ${CHAINS:+--num-chains "$CHAINS"} "$@" ||
    FAILED+=("$*")
}
splits=()  # the demo's eval_split first (ALFWorld: valid_unseen, then valid_seen): mostly the demo's own episodes
for split in $SPLITS; do splits+=("--split $split"); done
if [ -z "$ONLY_SPLITS" ] && [ "$ENV_ID" = SageChain-ALFWorld-v0 ] && [ -d "${ALFWORLD_DATA:-../shared/alfworld}/json_2.1.1" ]; then
  export ALFWORLD_DATA=${ALFWORLD_DATA:-../shared/alfworld}
  splits+=("--split valid_seen --source official")
fi
for split in "${splits[@]}"; do
  # shellcheck disable=SC2086  # $split is two or four words on purpose
  want sft && run --agent policy --label "sft$SUFFIX" $split --workers "$WORKERS" \
      --env-kwargs "{$ENV, \"skills\": \"none\"}" --agent-kwargs "{\"model_path\": \"$DEMO/sft/model\", $PROMPT}"
  want grpo && run --agent grpo --label "grpo$SUFFIX" $split --workers "$WORKERS" \
      --env-kwargs "{$ENV, \"skills\": \"none\"}" --agent-kwargs "{\"model_path\": \"$GRPO_CKPT/model\", $PROMPT}"
  want react && run --agent react --label "react$SUFFIX" $split --workers "$WORKERS" \
      --env-kwargs "{$ENV, \"skills\": \"none\"}" --agent-kwargs "{\"model_path\": \"$DEMO/sft/model\", $PROMPT}"
  want memory && run --agent memory --label "memory$SUFFIX" $split --workers 1 --env-kwargs "{$ENV, \"skills\": \"none\"}" \
      --agent-kwargs "{\"model_path\": \"$DEMO/sft/model\", \"top_k\": 3, $PROMPT}"
  if want reskill && [ -n "${RESKILL:-}" ]; then
    run --agent reskill --label "reskill$SUFFIX" $split --workers "$WORKERS" \
        --env-kwargs "{$ENV, \"skills\": \"$RESKILL_SKILLS\"}" --agent-kwargs "$RESKILL_AGENT"
    # The same weights without the library it accepted: what RL taught the weights, apart from the guidance.
    run --agent reskill --label "reskill-weights$SUFFIX" $split --workers "$WORKERS" \
        --env-kwargs "{$ENV, \"skills\": \"$RESKILL_SKILLS\"}" --agent-kwargs "$RESKILL_WEIGHTS"
  fi
done
# SAGE last: its skill prompt makes a turn dearer (a chosen template's body is generated token by token;
# docs/agents.md, "Evaluation speed").
for split in "${splits[@]}"; do
  # shellcheck disable=SC2086
  want sage && run --agent sage --label "sage$SUFFIX" $split --workers "$WORKERS" \
      --env-kwargs "{$ENV, \"skills\": \"program\"}" \
      --agent-kwargs "{\"model_path\": \"$SAGE_CKPT/model\", $SKILLS$SAGE_KWARGS, $PROMPT}"
  # The same checkpoint with one library kept across the chains, played in order one at a time (docs/leaderboard.md)
  # shellcheck disable=SC2086
  want sage-persistent && run --agent sage --label "sage-persistent$SUFFIX" $split --workers 1 --batch-size 1 \
      --env-kwargs "{$ENV, \"skills\": \"program\", \"library_scope\": \"persistent\"}" \
      --agent-kwargs "{\"model_path\": \"$SAGE_CKPT/model\", $SKILLS$SAGE_KWARGS, $PROMPT}"
done
"$PY" -m leaderboard.render
if [ ${#FAILED[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${FAILED[@]}" >&2
  exit 1
fi
