# The front door: every target installs what it needs first (scripts/bootstrap).
#   make run        build Release and run `attn demo`
#   make test       build Release and run the whole suite with ctest (~7 minutes from scratch
#                   on 2 cores, ~1 once built)
#   make build      build Release; the CLI is then build/release/attn
#   make test-asan  the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer
#                   (~6 minutes: a separate build; CI runs it after make test)
#   make test-tsan  the whole suite again under ThreadSanitizer (a separate build; CI runs it)
#   make test-pip   `pip install .` into a fresh venv, then the installed module against numpy
#                   and the installed CLI (scripts/check_pip_install; ~5 minutes; CI runs it)
#   make fuzz       build the libFuzzer harnesses (clang) and run each for FUZZ_SECONDS (default
#                   60), FUZZ_JOBS at a time (default 2); a finding's input lands in
#                   build/fuzz/findings/
#   make bench      the forward tables (causal and not, 1 and 2 threads), the backward table
#                   and the decode tables
#   make compare    attn next to PyTorch 2.13 and numpy on the same shapes (build/venv), its
#                   tokenizer next to sentencepiece (installs it), its GPT trainer and GPT-2
#                   next to the same models in PyTorch
#   make format     rewrite every C++ file with clang-format under .clang-format
#   make lint       check that every C++ file is so formatted, that every include of src/
#                   and include/attn/ points down the layers (scripts/check_layers.py), that
#                   each file compiles alone, unity batches aside (scripts/check_includes.py,
#                   ~3 minutes), and that clang-tidy finds nothing of .clang-tidy's checks
#                   (scripts/tidy, a few minutes); CI runs it first
#   make fixtures   regenerate tests/fixtures/*.npy and gpt_*.safetensors with numpy and PyTorch
#                   2.13, and tests/fixtures/gpt2/'s ids with tiktoken and transformers'
#                   GPT2TokenizerFast (all in build/venv)
JOBS ?= $(shell nproc)

FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 2

.PHONY: run test build test-asan test-tsan test-pip fuzz bench compare fixtures bootstrap clean format lint

# Every C++ source and header the repository tracks.
CXX_FILES = $(shell git ls-files '*.cpp' '*.hpp' '*.h')

bootstrap:
	@scripts/bootstrap --python

build: bootstrap
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

run: build
	build/release/attn demo

test: build
	ctest --preset release -j $(JOBS)

test-asan: bootstrap
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

test-tsan: bootstrap
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan -j $(JOBS)

test-pip: bootstrap
	scripts/check_pip_install

fuzz:
	@scripts/bootstrap --fuzz
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)
	JOBS=$(FUZZ_JOBS) scripts/fuzz $(FUZZ_SECONDS)

bench: build
	build/release/attn bench forward --seq 256,512,1024,2048,4096,8192,16384 --threads 1,2 --causal
	build/release/attn bench forward --seq 256,512,1024,2048,4096,8192,16384 --threads 1,2
	build/release/attn bench backward --seq 512,1024,2048,4096,8192 --threads 1,2 --causal
	build/release/attn bench decode --threads 1,2
	build/release/attn bench decode --threads 2 --cache-dtype bf16
	build/release/attn bench generate --threads 1,2

compare: build
	@scripts/bootstrap --bench
	build/venv/bin/python bench/compare.py --causal
	PYTHONPATH=build/release/python build/venv/bin/python bench/compare_torch.py
	bench/compare_tokenizer.sh
	bench/compare_gpt.sh
	PYTHONPATH=build/release/python build/venv/bin/python bench/compare_gpt_turns.py
	bench/compare_gpt2.sh

fixtures:
	@scripts/bootstrap --dev --python
	build/venv/bin/python tests/fixtures/make_fixtures.py
	build/venv/bin/python tests/fixtures/make_backward_fixtures.py
	build/venv/bin/python tests/fixtures/make_gpt_fixtures.py
	build/venv/bin/python tests/fixtures/make_npy_dtype_fixtures.py
	build/venv/bin/python tests/fixtures/make_hf_gpt2_fixtures.py
	build/venv/bin/python tests/fixtures/make_gpt2_tokenizer_fixtures.py

format:
	@scripts/bootstrap --lint
	clang-format -i $(CXX_FILES)

lint:
	@scripts/bootstrap --lint --python
	@clang-format --dry-run -Werror $(CXX_FILES)
	@echo "lint: $(words $(CXX_FILES)) C++ files formatted as .clang-format says"
	/usr/bin/python3 scripts/check_layers.py
	/usr/bin/python3 scripts/check_includes.py $(JOBS)
	JOBS=$(JOBS) scripts/tidy

clean:
	rm -rf build
