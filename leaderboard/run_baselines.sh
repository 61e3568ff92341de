#!/usr/bin/env bash
# Reproduce the committed baseline results: random, expert (skills) and expert (no skills) on generated
# valid_seen / valid_unseen (100 chains) and, when the data is present, official valid_seen (all 99 chains).
# Protocol of every leaderboard entry: the demo's chains (DemoConfig.env_kwargs: 2 tasks, 30 turns per task).
# ENV_ID=<a registered env id> (default SageChain-ALFWorld-v0) evaluates on that env, on every split of its
# domain after the training one (TextWorld: valid, test), 100 chains each.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ENV_ID=${ENV_ID:-SageChain-ALFWorld-v0}
# The protocol as JSON members (without braces), read from DemoConfig so that the scripts cannot drift, and the
# splits to evaluate (ALFWorld: valid_seen valid_unseen).
{ read -r ENV; read -r SPLITS; } < <("$PY" -c 'import json, sys
from sage_app.demo import DemoConfig
from sage_envs import domain_class
print(json.dumps(DemoConfig(env_id=sys.argv[1]).env_kwargs)[1:-1])
print(*domain_class(sys.argv[1]).splits[1:])' "$ENV_ID")
# A failing entry does not stop the others: it is named at the end, and the script then exits non-zero.
FAILED=()
run() { "$PY" -m leaderboard.evaluate --env "$ENV_ID" --output leaderboard/results "$@" || FAILED+=("$*"); }
for split in $SPLITS; do
  run --agent random --split "$split" --num-chains 100 --env-kwargs "{$ENV}"
  run --agent expert --split "$split" --num-chains 100 --env-kwargs "{$ENV}"
  run --agent expert --label expert-no-skills --split "$split" --num-chains 100 \
      --agent-kwargs '{"use_skills": false}' --env-kwargs "{$ENV, \"skills\": \"none\"}"
done
if [ "$ENV_ID" = SageChain-ALFWorld-v0 ] && [ -d "${ALFWORLD_DATA:-../shared/alfworld}/json_2.1.1" ]; then
  export ALFWORLD_DATA=${ALFWORLD_DATA:-../shared/alfworld}
  run --agent random --split valid_seen --source official --num-chains 1000 --env-kwargs "{$ENV}"
  run --agent expert --split valid_seen --source official --num-chains 1000 --env-kwargs "{$ENV}"
  run --agent expert --label expert-no-skills --split valid_seen --source official --num-chains 1000 \
      --agent-kwargs '{"use_skills": false}' --env-kwargs "{$ENV, \"skills\": \"none\"}"
fi
"$PY" -m leaderboard.render
if [ ${#FAILED[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${FAILED[@]}" >&2
  exit 1
fi
