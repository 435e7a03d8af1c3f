# Two commands matter: `make local` (the whole stack on this machine) and `make test` (everything
# CI checks). Both create or reuse one Python 3.12 virtual environment, pinned by requirements.lock.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV ?= $(HOME)/.cache/voicestack/venv
PY := $(VENV)/bin/python
export PYTHONPATH := $(CURDIR):$(CURDIR)/images/kokoro
export PYTHONUNBUFFERED := 1

.PHONY: help env system-deps local test lint typecheck unit bench bench-gapless lab weights lock bench-agent-clients

help:
	@echo "make local   - run the local stack (speech server, SageMaker stand-in, agent, browser page)"
	@echo "make test    - lint, type-check and run the whole test suite"
	@echo "make bench   - speech server benchmark (full-size model)"
	@echo "make bench-gapless - playback gaps: naive split vs adaptive schedule, fp32 vs bf16"
	@echo "make lab     - latency lab: batch vs stream, side by side"
	@echo "make bench-agent-clients - agent set-up per call: per-invocation vs per-process clients"

# Reuses the environment when requirements.lock is unchanged; otherwise pip installs the difference.
env:
	@if [ ! -x "$(PY)" ]; then \
	  py312=$$(command -v python3.12 || ls -d $$HOME/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | sort -V | tail -n1); \
	  if [ -z "$$py312" ]; then echo "Python 3.12 is required (pyenv install 3.12)" >&2; exit 1; fi; \
	  echo "creating $(VENV) with $$py312"; \
	  "$$py312" -m venv "$(VENV)"; \
	fi
	@if ! cmp -s requirements.lock "$(VENV)/installed.lock"; then \
	  echo "installing requirements.lock into $(VENV) (first time: a few GB, PyTorch is a CUDA build)"; \
	  "$(PY)" -m pip install -q --disable-pip-version-check -r requirements.lock; \
	  cp requirements.lock "$(VENV)/installed.lock"; \
	fi

# Debian's Chromium for the browser tests (never `playwright install`: it downloads a browser).
system-deps:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

lint: env
	"$(VENV)/bin/ruff" check .
	"$(VENV)/bin/ruff" format --check .

typecheck: env
	"$(VENV)/bin/mypy"

# Tests never wait on a model hub (each failed lookup retries for ~23 s); weights are generated.
unit: export HF_HUB_OFFLINE := 1
unit: env system-deps
	"$(PY)" -m pytest $(PYTEST_ARGS)

test: lint typecheck unit

weights: env
	"$(PY)" -m kokoro_server.fake_weights

local: env
	"$(PY)" -m local.stack

bench: env
	"$(PY)" -m bench.speech $(BENCH_ARGS)

bench-gapless: env
	"$(PY)" -m bench.gapless $(BENCH_ARGS)

lab: env
	"$(PY)" -m bench.lab $(LAB_ARGS)

# Re-resolve the pins from pyproject.toml (needs the package registry).
lock:
	rm -rf /tmp/voicestack-lock && python3.12 -m venv /tmp/voicestack-lock
	/tmp/voicestack-lock/bin/pip install -q -U pip
	/tmp/voicestack-lock/bin/pip install -q '.[speech,agent,standin,infra,dev]'
	/tmp/voicestack-lock/bin/pip freeze --exclude voicestack > requirements.lock

bench-agent-clients: env
	"$(PY)" -m bench.agent_clients $(BENCH_ARGS)
