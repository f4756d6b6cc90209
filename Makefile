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

.PHONY: help toolchain component build node demo test bench clean

help:
	@echo "make demo   build, then plan a long recorded session under a 32k window"
	@echo "make test   build, then run every test"
	@echo "make bench  run the benchmarks and rewrite docs/BENCHMARKS.md"

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

build: component
	$(CARGO) build --locked --release -p ctxkernel-host

DEMO_STORE := build/demo.sqlite
demo: build
	@rm -f $(DEMO_STORE) $(DEMO_STORE)-wal $(DEMO_STORE)-shm
	@echo "== appending the recorded session to $(DEMO_STORE)"
	$(CTXK) --store $(DEMO_STORE) append examples/demo/session.json
	@echo "== planning it under a 32k window"
	$(CTXK) --store $(DEMO_STORE) plan --all examples/demo/plan-32k.json

# Node: the component transpiled by jco, typed from wit/schemas.
NODE := host-shims/node
node: component
	cd $(NODE) && npm ci --no-audit --no-fund --loglevel=error
	cd $(NODE) && npm run --silent transpile && npm run --silent types

# The Rust tests build `ctxk` themselves (with their own feature set), so
# this depends on the component only: one wasmtime build, not two.
test: component node
	$(CARGO) test --locked --release --workspace --all-features
	cd $(NODE) && npm test --silent && npm run --silent typecheck

bench: build
	$(CARGO) bench --locked -p ctxkernel-host --bench kernel -- --write $(CURDIR)/docs/BENCHMARKS.md

clean:
	rm -rf build
	$(CARGO) clean
