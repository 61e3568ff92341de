#!/usr/bin/env bash
# Reproduce the committed results of the LLM agents: the demo's SFT model (`policy`), its GRPO and SAGE
# checkpoints, and the prompted `react` and `memory` agents on that same SFT model, on generated valid_seen /
# valid_unseen (100 chains) and, when the data is present, official valid_seen (all 99 chains). Run `make demo`
# first (DEMO=its --output-dir). Same protocol as run_baselines.sh (chain_length 2, 50 turns per task); the
# prompt options are the demo's (sage_agents/demo.py, DemoConfig.prompt_kwargs). `memory` learns while it is
# evaluated, so it runs in one process: its results then do not depend on how chains are spread over workers.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DEMO=${DEMO:-runs/demo}
WORKERS=${WORKERS:-2}
BATCH=${BATCH:-8}  # chains per process in lockstep (one batched generation per turn)
# The demo's prompt options as JSON members (without braces), read from DemoConfig so the two cannot drift.
PROMPT=$("$PY" -c 'import json; from sage_agents.demo import DemoConfig
print(json.dumps({"constrained": True, **DemoConfig().prompt_kwargs})[1:-1])')
TEMPLATES=$("$PY" -c 'import json; from sage_agents.demo import skill_templates; print(json.dumps(skill_templates()))')
GRPO=$DEMO/grpo/checkpoints/$(cat "$DEMO/grpo/checkpoints/latest")  # each arm's last checkpoint
SAGE=$DEMO/sage/checkpoints/$(cat "$DEMO/sage/checkpoints/latest")
run() { "$PY" -m leaderboard.evaluate --output leaderboard/results --batch-size "$BATCH" "$@"; }
splits=("--split valid_seen" "--split valid_unseen")
if [ -d "${ALFWORLD_DATA:-../shared/alfworld}/json_2.1.1" ]; then
  export ALFWORLD_DATA=${ALFWORLD_DATA:-../shared/alfworld}
  splits+=("--split valid_seen --source official")
fi
for split in "${splits[@]}"; do
  # shellcheck disable=SC2086  # $split is two or four words on purpose
  run --agent policy --label sft $split --workers "$WORKERS" --env-kwargs '{"skills": "none"}' \
      --agent-kwargs "{\"model_path\": \"$DEMO/sft/model\", $PROMPT}"
  run --agent grpo $split --workers "$WORKERS" --env-kwargs '{"skills": "none"}' \
      --agent-kwargs "{\"model_path\": \"$GRPO/model\", $PROMPT}"
  run --agent sage $split --workers "$WORKERS" --env-kwargs '{"skills": "program"}' \
      --agent-kwargs "{\"model_path\": \"$SAGE/model\", \"skills_path\": \"$SAGE/skill_library\", \"skill_templates\": $TEMPLATES, $PROMPT}"
  run --agent react $split --workers "$WORKERS" --env-kwargs '{"skills": "none"}' \
      --agent-kwargs "{\"model_path\": \"$DEMO/sft/model\", $PROMPT}"
  run --agent memory $split --workers 1 --env-kwargs '{"skills": "none"}' \
      --agent-kwargs "{\"model_path\": \"$DEMO/sft/model\", \"top_k\": 3, $PROMPT}"
done
"$PY" -m leaderboard.render
