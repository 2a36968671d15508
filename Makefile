# latnet: two commands on a fresh machine.
#   make demo   install everything (apt, .venv with pip packages, Rust build) and run the demo
#   make test   the same set-up, then lint, Rust tests and Python tests
# Other targets: setup, build, lint, fuzz, bench, reproduce, clean.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
LATNET := $(VENV)/bin/latnet
CARGO ?= cargo
FUZZ_SECONDS ?= 60

.PHONY: demo test setup apt venv build lint rust-test py-test fuzz bench reproduce clean

demo: setup
	$(LATNET) run experiments/demo.toml --out out/demo --plot

# The Rust tests run beside the Python tests, at idle priority as the Python tests not marked
# realtime do (scripts/py-test.sh); either failing fails the target.
test: setup lint
	PY_TEST_BESIDE="$(RUST_TEST)" scripts/py-test.sh $(VENV)/bin/pytest

setup: apt venv build

apt:
	@scripts/apt-deps.sh

venv: $(VENV)/.deps-stamp

$(VENV)/.deps-stamp: requirements-dev.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# maturin builds the Rust core (release) and installs the package in development mode,
# with the `latnet` command in .venv/bin.
build: venv
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH \
	  $(VENV)/bin/maturin develop --release --quiet
	$(CARGO) build --release --quiet -p latnet-switch -p latnet-ctld
	target="$$($(CARGO) metadata --format-version 1 --no-deps | \
	  $(PY) -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"; \
	  install -m 755 "$$target/release/latnet-switch" "$$target/release/latnet-ctld" $(VENV)/bin/

lint: venv
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --quiet -- -D warnings
	$(VENV)/bin/ruff check python bench
	$(VENV)/bin/ruff format --check python bench

RUST_TEST = $(CARGO) test --workspace --quiet
rust-test:
	$(RUST_TEST)

# The real-time tests alone, the others beside them at idle priority (scripts/py-test.sh).
py-test: build
	scripts/py-test.sh $(VENV)/bin/pytest

fuzz:
	fuzz/run.sh $(FUZZ_SECONDS)
	$(CARGO) test -p latnet-dataplane --release --test classifier -- --ignored

bench: setup
	$(CARGO) bench --workspace
	$(PY) bench/ns3_cbr_chain.py
	$(PY) bench/chameleon_runtime.py
	$(PY) bench/ns3_tcp_dumbbell.py
	$(PY) bench/sweep_dask.py
	$(PY) bench/chameleon_service.py

# Every reproduction runs, even after one fails; the target fails if any did, naming them. The
# emulated ones need root (namespaces, veth) and are skipped, said, without it.
reproduce: setup
	@failed=""; \
	for s in lbf l4s ffp pacing chameleon; do \
	  $(LATNET) reproduce $$s --out out/reproduce || failed="$$failed $$s"; done; \
	if [ "$$(id -u)" = 0 ]; then \
	  for s in lbf pacing; do \
	    $(LATNET) reproduce $$s --emulated --out out/reproduce || failed="$$failed $$s--emulated"; \
	  done; \
	else echo "reproduce lbf / pacing --emulated: skipped, they need root (namespaces, veth)"; fi; \
	if [ -n "$$failed" ]; then echo "make reproduce: failed:$$failed" >&2; exit 1; fi

clean:
	$(CARGO) clean
	rm -rf $(VENV) out
