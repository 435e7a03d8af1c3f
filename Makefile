# Two commands matter: `make local` (the whole stack on this machine) and `make test` (everything
# CI checks). Both create or sync one Python 3.12 virtual environment from uv.lock with uv.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV ?= $(HOME)/.cache/voicestack/venv
PY := $(VENV)/bin/python
# uv builds the environment from uv.lock. Where it is not installed, it is bootstrapped once from the
# package registry with the machine's Python 3.12 (pip, pinned version) into the same cache folder.
UV_VERSION := 0.13.9
UV_HOME := $(HOME)/.cache/voicestack/uv-$(UV_VERSION)
UV ?= $(shell command -v uv 2>/dev/null || echo $(UV_HOME)/bin/uv)
export UV
# Python 3.12 comes from the machine (PATH or pyenv); uv never downloads an interpreter.
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
# Prints the machine's Python 3.12 (the PATH first, then the newest under pyenv), or fails saying so. It
# prints the interpreter itself, never a pyenv shim: uv recreates the environment when --python names
# another path than the one the environment was made with.
FIND_PY312 = for p in python3.12 $$(ls -d $$HOME/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | sort -rV); do \
	  "$$p" -c 'import sys; assert sys.version_info[:2] == (3, 12); print(sys.executable)' 2>/dev/null && exit 0; \
	done; echo "Python 3.12 is required (for example: pyenv install 3.12)" >&2; exit 1
export PYTHONPATH := $(CURDIR):$(CURDIR)/images/kokoro
export PYTHONUNBUFFERED := 1

.PHONY: help env system-deps local test lint typecheck unit bench bench-gapless lab weights lock bench-bargein bench-segmenters bench-soak bench-hostile bench-peers bench-agent-clients bench-threads bench-page bench-windows bench-fused

help:
	@echo "make local   - run the local stack (speech server, SageMaker stand-in, agent, browser page)"
	@echo "make test    - lint, type-check and run the whole test suite"
	@echo "make bench   - speech server benchmark (full-size model)"
	@echo "make bench-gapless - playback gaps: naive split vs adaptive schedule, fp32 vs bf16"
	@echo "make bench-soak - 50 sessions x 20 messages with random cancels: audio lost, RSS, /ping p99"
	@echo "make bench-hostile - pathological 5,000-character texts: /ping p50/p99/max while synthesized"
	@echo "make lab     - latency lab: batch vs stream, side by side"
	@echo "make page STACK=dev - the browser page on this machine, speaking to a deployed stack (PAGE_ARGS: --profile, --port)"
	@echo "make talk ARGS='\"question\"' - speak with the agent (local stack; ARGS='--stack dev' for a deployed one)"
	@echo "make bench-bargein - barge-in: Stop, new question, hang-up; page silent and speech server idle"
	@echo "make bench-segmenters - sentence splitters: exact score and CPU per delta (BENCH_ARGS=--golden PATH)"
	@echo "make bench-peers BENCH_ARGS='--peer-url URL' - this server beside Kokoro-FastAPI, one table"
	@echo "make bench-agent-clients - agent set-up per call: per-invocation vs per-process clients"
	@echo "make bench-threads - the engine alone: syntheses at once x intra-op threads, audio-s per s (the concurrency rule)"
	@echo "make bench-fused - the engine alone: Kokoro's modules as published vs fused, s per audio s and first piece"
	@echo "make bench-page - the page in Chromium, stream vs batch: underruns and first audio (full-size model)"
	@echo "make bench-windows - a first chunk's windows by vocoder speed, fixed vs sized plan (add BENCH_ARGS=--measure)"
	@echo "make lock    - after changing dependencies in pyproject.toml: re-resolve uv.lock, re-export image pins"
	@echo "make preflight STACK=dev - before pulumi up: what would fail on AWS, each failing line with its fix"
	@echo "make deployer-policy - regenerate the deployer's least-privilege IAM policies (infra/deployer-policy/)"
	@echo "make add-user STACK=dev EMAIL=name@example.com - an account on a stack open to people (Cognito mails it)"

# Syncs the environment with uv.lock, exactly (all extras; packages the lock does not name are removed).
# Costs well under a second when nothing changed.
env: $(UV)
	@py312=$$($(FIND_PY312)); \
	"$(UV)" sync --frozen --all-extras --quiet --python "$$py312"

$(UV_HOME)/bin/uv:
	@py312=$$($(FIND_PY312)); \
	echo "bootstrapping uv $(UV_VERSION) into $(UV_HOME)"; \
	"$$py312" -m venv "$(UV_HOME)" && "$(UV_HOME)/bin/pip" install -q --disable-pip-version-check "uv==$(UV_VERSION)"

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

# `voicestack talk` (voicestack/talk): the local stack's agent by default; ARGS='--stack dev' or
# ARGS='--runtime-arn ARN' for a deployed runtime, a quoted question for one turn, none for a conversation.
.PHONY: talk
talk: env
	"$(PY)" -m voicestack talk $(ARGS)

# After a change to the dependencies in pyproject.toml: re-resolve uv.lock (keeping every pin that still
# fits) and re-export the images' requirement files from it. `make lock UPGRADE=1` moves every package
# to the newest release pyproject.toml allows.
lock: $(UV)
	py312=$$($(FIND_PY312)); "$(UV)" lock $(if $(UPGRADE),--upgrade) --python "$$py312"
	$(MAKE) env
	"$(PY)" -m local.lock_exports

bench-bargein: env system-deps
	"$(PY)" -m bench.bargein $(BENCH_ARGS)

bench-segmenters: env
	"$(PY)" -m bench.segmenters $(BENCH_ARGS)

bench-soak: env
	"$(PY)" -m bench.soak $(BENCH_ARGS)

bench-hostile: env
	"$(PY)" -m bench.hostile $(BENCH_ARGS)

bench-peers: env
	"$(PY)" -m bench.peers $(BENCH_ARGS)

bench-agent-clients: env
	"$(PY)" -m bench.agent_clients $(BENCH_ARGS)

bench-page: env system-deps
	"$(PY)" -m bench.page $(BENCH_ARGS)

bench-threads: env
	"$(PY)" -m bench.threads $(BENCH_ARGS)

bench-fused: env
	"$(PY)" -m bench.fused $(BENCH_ARGS)

bench-windows: env
	"$(PY)" -m bench.windows $(BENCH_ARGS)

# Commands against a deployed stack name it: STACK=<pulumi stack> (no default: the wrong stack is a costly typo).
REQUIRE_STACK = @test -n "$(STACK)" || { echo "make $@ needs STACK=<pulumi stack>, e.g. make $@ STACK=dev" >&2; exit 2; }

# Deploying (infra/README.md). The preflight reads the stack through the Pulumi CLI and makes read-only AWS
# calls; the deployer policy is generated by running the program offline under the test harness's mocks.
.PHONY: preflight deployer-policy

preflight: env
	$(REQUIRE_STACK)
	"$(PY)" -m voicestack preflight --stack "$(STACK)"

deployer-policy: env
	"$(PY)" -m tests.infra.deployer_policy_file

# The page on this machine against a deployed stack: its runtime ARN and region from `pulumi stack
# output`, credentials from the AWS SDK's standard configuration (environment, AWS_PROFILE, SSO).
# Extra launcher flags in PAGE_ARGS, e.g. PAGE_ARGS='--profile dev --port 8001'.
.PHONY: page
page: env
	$(REQUIRE_STACK)
	"$(PY)" -m local.webserver --remote --stack "$(STACK)" $(PAGE_ARGS)

# A stack open to people (publicAccess): Cognito creates the account and mails a temporary password.
.PHONY: add-user
EMAIL ?=
add-user: env
	$(REQUIRE_STACK)
	"$(PY)" -m voicestack add-user --stack "$(STACK)" --email "$(EMAIL)"
