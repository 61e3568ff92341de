# Two commands do everything on a fresh machine: `make demo` (the main job) and `make test`.
# Override TORCH_SPEC for another build, e.g. `make test TORCH_SPEC="torch==2.13.0+cu128 --index-url ..."`.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-quick demo-long expert-demo test install browser java lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check $(TORCH_SPEC)
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[agents,dev,sciworld]" $(TORCH_SPEC)
	@command -v java >/dev/null || echo "note: no Java runtime; SageChain-ScienceWorld-v0 needs one (make java, or apt-get install default-jre-headless) and its tests skip without it"
	touch $(STAMP)

# Headless Chromium (Debian's package) for the leaderboard site's browser tests, which skip without it; needs root.
browser:
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

# A Java runtime for ScienceWorld's simulator (SageChain-ScienceWorld-v0; its tests skip without one); needs root.
java:
	command -v java >/dev/null || { apt-get update -qq && apt-get install -y -qq default-jre-headless; }

# The main job (sage_app/demo.py): expert chains -> SFT -> GRPO vs SAGE vs ReSkill -> evaluation table and plots.
demo: $(STAMP)
	$(BIN)/sage demo --output-dir runs/demo

demo-quick: $(STAMP)
	$(BIN)/sage demo --quick --output-dir runs/demo-quick

# The learning run: every arm 200 RL steps from one SFT checkpoint, held-out TGC every 10 (resumable; docs/demo.md).
demo-long: $(STAMP)
	$(BIN)/sage demo --long --output-dir runs/demo-long

expert-demo: $(STAMP)
	$(BIN)/python examples/play_expert.py --chains 3

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

LINTED := sage_envs sage_agents leaderboard sage_app tests examples benchmarks

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

clean:
	rm -rf $(VENV) .pytest_cache
