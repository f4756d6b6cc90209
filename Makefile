# ctxkernel — the two commands a new machine needs:
#   make demo   build everything, then plan a real session on the embedded SQLite store
#   make test   build everything, then run every test
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO       ?= cargo
TARGET_DIR  := $(or $(CARGO_TARGET_DIR),$(CURDIR)/target)
COMPONENT   := build/ctxkernel.wasm
CTXK        := $(TARGET_DIR)/release/ctxk
# An offline fallback that installs the wasm32-wasip2 std when rustup cannot.
WASIP2_FALLBACK ?=

.PHONY: help toolchain component host-schemas build node python jvm dist dist-pack dist-smoke parity parity-bless parity-check parity-runs parity-stress demo test examples bench eval fuzz clean

help:
	@echo "make demo   build, then replay a recorded 300-turn agent session through the kernel on every host"
	@echo "make test   build, then run every test"
	@echo "make bench  run the benchmarks and rewrite docs/BENCHMARKS.md"
	@echo "make eval   the recall evaluation: ctxkernel against SQLite FTS5, hit@1 / hit@5"
	@echo "make parity run every parity fixture on every host and compare"
	@echo "make dist   the release artifacts of every host in dist/, each installed outside the checkout and run"
	@echo "make fuzz   run each fuzz target for FUZZ_SECONDS (default 60) on a pinned nightly"

toolchain:
	@rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 \
	  || rustup target add wasm32-wasip2 \
	  || { [ -n "$(WASIP2_FALLBACK)" ] && bash "$(WASIP2_FALLBACK)"; }

# The one component artifact every host loads.
component: toolchain
	$(CARGO) build --locked --release -p ctxkernel --target wasm32-wasip2
	@mkdir -p build
	@cmp -s $(TARGET_DIR)/wasm32-wasip2/release/ctxkernel.wasm $(COMPONENT) \
	  || cp $(TARGET_DIR)/wasm32-wasip2/release/ctxkernel.wasm $(COMPONENT)
	@# Every package carries this digest beside the component (or its transpiled modules).
	@cd build && sha256sum ctxkernel.wasm > ctxkernel.wasm.sha256.new && mv ctxkernel.wasm.sha256.new ctxkernel.wasm.sha256

build: component
	$(CARGO) build --locked --release -p ctxkernel-host

# The demo: a recorded 300-turn agent session replayed through `ctxk` on the
# embedded SQLite store, then the same kernel calls through every host.
DEMO := build/demo
demo: build node python jvm
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@echo "== replaying examples/demo/agent-session.json through ctxk ($(DEMO)/store.sqlite)"
	@$(CTXK) --store $(DEMO)/store.sqlite demo examples/demo/agent-session.json --record $(DEMO)/calls.json
	@echo
	@echo "== the same $$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["steps"]))' $(DEMO)/calls.json) kernel calls on every host (digest of responses + final store)"
	@$(CTXK) parity --out $(DEMO)/rust $(DEMO)/calls.json
	@node $(NODE)/scripts/parity.js --out $(DEMO)/node $(DEMO)/calls.json
	@$(PY) -m ctxkernel_sdk.parity --out $(DEMO)/python $(DEMO)/calls.json
	@java -cp $(JAVA_CP) dev.ctxkernel.Parity --out $(DEMO)/jvm $(DEMO)/calls.json
	@for host in rust node python jvm; do \
	  printf '  %-7s %s\n' $$host $$(cat $(DEMO)/$$host/demo.transcript.jsonl $(DEMO)/$$host/demo.dump.jsonl | sha256sum | cut -d' ' -f1); \
	done | tee $(DEMO)/digests.txt
	@[ "$$(awk '{print $$2}' $(DEMO)/digests.txt | sort -u | wc -l)" = 1 ] \
	  && echo "  one digest: every host answered every call identically and wrote the same store" \
	  || { echo "  the hosts disagree: compare $(DEMO)/*/demo.transcript.jsonl"; exit 1; }
	@echo
	@echo "Look around: $(CTXK) --store $(DEMO)/store.sqlite inspect memories (or sessions, tombstones, operations, events)"
	@echo "            $(CTXK) --store $(DEMO)/store.sqlite recall \"when do releases go out\" --scope project:ledger-service"

# The kernel's schemas as hosts type their APIs from them (host-shims/schemas.py).
host-schemas:
	python3 host-shims/schemas.py build/host-schemas

# Node: the component transpiled by jco, typed from wit/schemas.
NODE := host-shims/node
node: component host-schemas
	cd $(NODE) && npm ci --no-audit --no-fund --loglevel=error
	cd $(NODE) && npm run --silent transpile && npm run --silent types
	cp $(COMPONENT).sha256 $(NODE)/gen/

# Python: a virtualenv with the package installed editable, typed from wit/schemas
# as the hosts see them (host-shims/schemas.py).
PY_ENV := build/py
PY := $(PY_ENV)/bin/python
PY_PKG := host-shims/python/src/ctxkernel_sdk
python: component host-schemas
	@[ -x $(PY) ] || python3 -m venv $(PY_ENV)
	$(PY) -m pip install -q --disable-pip-version-check -e 'host-shims/python[test]' datamodel-code-generator==0.89.0 build==1.6.1
	cp $(COMPONENT) $(COMPONENT).sha256 $(PY_PKG)/
	$(PY_ENV)/bin/datamodel-codegen --input build/host-schemas --input-file-type jsonschema --output $(PY_PKG)/envelopes \
	  --output-model-type typing.TypedDict --target-python-version 3.11 --use-standard-collections \
	  --use-union-operator --disable-timestamp --formatters builtin 2>/dev/null

# JVM: the component's core module compiled to JVM bytecode by Chicory's
# build-time compiler, into the jar. The module is the one jco took out of the
# component; the jar carries its digest, and the host checks at load time that
# the packaged component holds that very module.
JVM := host-shims/jvm
MVN := mvn -q -B --no-transfer-progress
jvm: component node host-schemas
	python3 $(JVM)/scripts/envelopes.py build/host-schemas $(JVM)/src/main/java/dev/ctxkernel/Envelopes.java
	cp $(NODE)/gen/ctxkernel.core.wasm build/ctxkernel.core.wasm
	sha256sum build/ctxkernel.core.wasm | cut -d' ' -f1 > build/ctxkernel.core.sha256
	@mkdir -p $(JVM)/src/main/resources/dev/ctxkernel/compiled
	cp $(COMPONENT) $(COMPONENT).sha256 $(JVM)/src/main/resources/
	@# Beside the compiled classes, so a jar brings the digest of its own classes.
	cp build/ctxkernel.core.sha256 $(JVM)/src/main/resources/dev/ctxkernel/compiled/KernelModule.core.sha256
	cd $(JVM) && $(MVN) -DskipTests install && $(MVN) dependency:build-classpath -Dmdep.outputFile=target/classpath.txt

# Release artifacts, all of one version (VERSION; `packaging/version.py`), each
# holding the one component and naming it by its sha256: the Python wheel and
# sdist, the npm tarball, the Maven jar with its sources and pom, and `ctxk`.
# `dist-smoke` installs each outside the checkout and runs them (packaging/).
DIST := dist
VERSION := $(shell cat VERSION)
dist: build node python jvm
	$(MAKE) --no-print-directory dist-pack
	$(MAKE) --no-print-directory dist-smoke

# This one expects every host built and `ctxk` in $(CTXK) (`make dist`, or `make test`).
dist-pack:
	python3 packaging/version.py check
	@rm -rf $(DIST) && mkdir -p $(DIST)
	@# The wheel is built from the sdist, so a file the sdist lacks is missing from the wheel too.
	$(PY) -m build --sdist --wheel --outdir $(DIST) host-shims/python > /dev/null
	cd $(NODE) && npm pack --silent --pack-destination ../../$(DIST) > /dev/null
	cp $(JVM)/target/ctxkernel-$(VERSION).jar $(JVM)/target/ctxkernel-$(VERSION)-sources.jar $(DIST)/
	cp $(JVM)/pom.xml $(DIST)/ctxkernel-$(VERSION).pom
	cp $(CTXK) $(DIST)/ctxk-$(VERSION)-$$(uname -m)-linux
	cp $(COMPONENT).sha256 $(DIST)/
	cd $(DIST) && sha256sum -- * > SHA256SUMS && ls -l

dist-smoke:
	bash packaging/smoke/run.sh $(DIST)

# Parity: every fixture on every host, compared byte for byte (and with the goldens).
PARITY_RUNS := build/parity
FIXTURES := tests/parity/fixtures/*.json
JAVA_CP = $(JVM)/target/classes:$$(cat $(JVM)/target/classpath.txt)
parity: build node python jvm
	$(MAKE) --no-print-directory parity-check

parity-bless: build node python jvm
	$(MAKE) --no-print-directory parity-runs
	python3 tests/parity/compare.py --runs $(PARITY_RUNS) --hosts rust,node,python,jvm --bless

# These two expect every host built (`make parity`, or `make test` after `cargo test`).
parity-check: parity-runs
	python3 tests/parity/compare.py --runs $(PARITY_RUNS) --hosts rust,node,python,jvm

parity-runs:
	@rm -rf $(PARITY_RUNS)
	$(CTXK) parity --out $(PARITY_RUNS)/rust $(FIXTURES)
	node $(NODE)/scripts/parity.js --out $(PARITY_RUNS)/node $(FIXTURES)
	$(PY) -m ctxkernel_sdk.parity --out $(PARITY_RUNS)/python $(FIXTURES)
	java -cp $(JAVA_CP) dev.ctxkernel.Parity --out $(PARITY_RUNS)/jvm $(FIXTURES)
	@# Each host opens the store files the previous host wrote.
	$(CTXK) parity --out $(PARITY_RUNS)/rust --read $(PARITY_RUNS)/jvm $(FIXTURES)
	node $(NODE)/scripts/parity.js --out $(PARITY_RUNS)/node --read $(PARITY_RUNS)/rust $(FIXTURES)
	$(PY) -m ctxkernel_sdk.parity --out $(PARITY_RUNS)/python --read $(PARITY_RUNS)/node $(FIXTURES)
	java -cp $(JAVA_CP) dev.ctxkernel.Parity --out $(PARITY_RUNS)/jvm --read $(PARITY_RUNS)/python $(FIXTURES)

# The same fixtures on every host again while other processes load every core: twice
# each, and five times on the JVM, whose optimizing compiler works to its own timing.
STRESS := python3 tests/parity/stress.py --runs build/parity-stress --reps 2
parity-stress:
	@rm -rf build/parity-stress
	$(STRESS) --host rust -- $(CTXK) parity --out {out} $(FIXTURES)
	$(STRESS) --host node -- node $(NODE)/scripts/parity.js --out {out} $(FIXTURES)
	$(STRESS) --host python -- $(PY) -m ctxkernel_sdk.parity --out {out} $(FIXTURES)
	$(STRESS) --reps 5 --host jvm -- java -cp $(JAVA_CP) dev.ctxkernel.Parity --out {out} $(FIXTURES)

# The Rust tests build `ctxk` themselves (with their own feature set), so
# this depends on the component only: one wasmtime build, not two.
test: component node python jvm
	$(CARGO) test --locked --release --workspace --all-features
	cd $(NODE) && npm test --silent && npm run --silent typecheck && npm run --silent sdk-check
	cd host-shims/python && ../../$(PY) -m pytest -q
	cd $(JVM) && $(MVN) test
	$(MAKE) --no-print-directory examples
	@# `cargo test` built ctxk; reuse it rather than building wasmtime again.
	$(MAKE) --no-print-directory parity-check
	$(MAKE) --no-print-directory parity-stress
	$(MAKE) --no-print-directory dist-pack
	$(MAKE) --no-print-directory dist-smoke

# Each example on its host, with its own runner (the hosts are built by `test`).
examples:
	cd examples/vscode-extension && npm ci --no-audit --no-fund --loglevel=error && npm test --silent
	cd examples/electron-app && npm ci --no-audit --no-fund --loglevel=error && npm test --silent
	cd examples/python-sdk && ../../$(PY) -m pytest -q
	cd examples/jetbrains-plugin && $(MVN) test

bench: build node python jvm
	$(CARGO) bench --locked -p ctxkernel-host --bench kernel -- --write $(CURDIR)/docs/BENCHMARKS.md
	$(CARGO) bench --locked -p ctxkernel-host --bench memory -- --write $(CURDIR)/docs/BENCHMARKS.md

# The recall evaluation alone: hit@1 / hit@5 of the kernel and SQLite FTS5 on
# the same labelled corpus (CTXK_EVAL_MISSES=1 lists the kernel's misses).
eval: build
	$(CARGO) bench --locked -p ctxkernel-host --bench memory -- --only recall-eval

# Fuzzing (docs/FUZZING.md): libFuzzer on a pinned nightly, each target for
# FUZZ_SECONDS. The checked-in fuzz/corpus seeds the run; what it adds goes to
# build/fuzz/corpus, crashes to build/fuzz/artifacts. `make test` replays
# fuzz/corpus and fuzz/regressions on stable.
FUZZ_TOOLCHAIN := nightly-2026-10-01
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= decode commands edges
FUZZ_DIR ?= build/fuzz
fuzz:
	@rustup toolchain list | grep -q '^$(FUZZ_TOOLCHAIN)' || rustup toolchain install $(FUZZ_TOOLCHAIN) --profile minimal
	@command -v cargo-fuzz >/dev/null || $(CARGO) install --locked cargo-fuzz
	@# -a: overflow checks on, so an arithmetic overflow is a finding, not a wrap.
	cd fuzz && $(CARGO) +$(FUZZ_TOOLCHAIN) fuzz build -a -s none --target-dir $(TARGET_DIR)/fuzz
	@bin=$(TARGET_DIR)/fuzz/$$(rustc -vV | sed -n 's/^host: //p')/release; failed=; \
	for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/artifacts/$$t fuzz/regressions/$$t; \
	  case $$t in decode) opts="-max_len=4096 -dict=fuzz/dicts/requests.dict";; edges) opts="-max_len=1024 -dict=fuzz/dicts/edges.dict";; *) opts="-max_len=8192";; esac; \
	  echo "== $$t for $(FUZZ_SECONDS)s (log: $(FUZZ_DIR)/$$t.log)"; \
	  $$bin/$$t $(FUZZ_DIR)/corpus/$$t fuzz/corpus/$$t fuzz/regressions/$$t $$opts -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=3072 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t/ > $(FUZZ_DIR)/$$t.log 2>&1 || failed="$$failed $$t"; \
	  awk -F': *' '/stat::number_of_executed_units/ {n=$$NF} /stat::average_exec_per_sec/ {r=$$NF} \
	    END {printf "   %s execs, %s exec/s\n", n, r}' $(FUZZ_DIR)/$$t.log; \
	done; \
	if [ -n "$$failed" ]; then \
	  echo "new findings in:$$failed: see $(FUZZ_DIR)/artifacts (docs/FUZZING.md says how to minimize and keep one)"; exit 1; \
	fi

clean:
	rm -rf build $(DIST)
	$(CARGO) clean
