# The front door: every target installs what it needs first (scripts/bootstrap).
#   make run        build Release and run `attn demo`
#   make test       build Release, run the whole suite with ctest, then the suite under ASan+UBSan
#   make build      build Release; the CLI is then build/release/attn
#   make test-fast  the Release suite only (no sanitizer build)
#   make test-asan  the sanitizer suite only
#   make fixtures   regenerate tests/fixtures/*.npy with numpy (needs scripts/bootstrap --dev)
JOBS ?= $(shell nproc)

.PHONY: run test build test-fast test-asan fixtures bootstrap clean

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

run: build
	build/release/attn demo

test-fast: build
	ctest --preset release -j $(JOBS)

test-asan: bootstrap
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

test: test-fast test-asan

fixtures:
	@scripts/bootstrap --dev
	/usr/bin/python3 tests/fixtures/make_fixtures.py

clean:
	rm -rf build
