# splitter: the two commands a user needs are `make demo` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
APT_PACKAGES := gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm chromium ccache cmake
STAMP := $(VENV)/.installed

.PHONY: test test-all demo check models system-deps venv clean bench code-sizes costs fuzz kill-test docs docs-examples docs-images

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Debian packages for the firmware toolchain, the emulator, the browser the report test opens
# report.html in (chromium, headless), ccache (the suite's firmware builds share their
# identical compiles, tests/conftest.py) and cmake (the device projects' CMakeLists.txt,
# tests/test_cmake_build.py): installed when missing and root,
# otherwise the install command is printed and the target fails.
system-deps:
	@missing=""; \
	command -v arm-none-eabi-gcc >/dev/null || missing="$$missing gcc-arm-none-eabi libnewlib-arm-none-eabi"; \
	test -f /usr/lib/arm-none-eabi/include/stdint.h || missing="$$missing libnewlib-arm-none-eabi"; \
	command -v qemu-system-arm >/dev/null || missing="$$missing qemu-system-arm"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v ccache >/dev/null || missing="$$missing ccache"; \
	command -v cmake >/dev/null || missing="$$missing cmake"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  else \
	    echo "missing system packages; run: sudo apt-get install --no-install-recommends $(APT_PACKAGES)"; exit 1; \
	  fi; \
	fi

test: system-deps $(STAMP) check
	$(VENV)/bin/pytest -n 2 -q -m "not extended" --durations=30 tests

# Everything, including the extended sweeps (the large ONNX zoo graphs; about 10 more minutes).
test-all: system-deps $(STAMP) check
	$(VENV)/bin/pytest -n 2 -q tests

demo: system-deps $(STAMP)
	$(VENV)/bin/splitter compile models/mobilenet_v1_025.onnx --target models/boards/demo.toml -o demo-out --force
	$(VENV)/bin/splitter build demo-out --no-emulator
	@echo "results in $$(pwd)/demo-out (plan.json, report.md, submodels/, firmware/<board>/build/)"

check: $(STAMP)
	$(VENV)/bin/ruff check splitter tests benchmarks
	$(VENV)/bin/ruff format --check splitter tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The documentation site (MkDocs Material, mkdocs.yml) into site/, warnings as errors.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# Re-run every example of README.md and docs/ and rewrite the output shown where it drifted
# (tests/docs_examples.py); review the diff (git diff README.md docs/) and keep the `...` you want.
docs-examples: system-deps $(STAMP)
	$(PY) tests/docs_examples.py $(FILES)

# The README's report picture (docs/img/report.png), redrawn from the demo.
docs-images: system-deps $(STAMP)
	$(PY) docs/make_images.py

models: $(STAMP)
	$(PY) models/build.py

bench: $(STAMP)
	$(PY) benchmarks/solvers.py
	$(PY) benchmarks/inspect_speed.py

clean:
	rm -rf $(VENV) demo-out site .pytest_cache .mypy_cache

# The firmware code / runtime RAM size table the planner uses (splitter/cost/code_sizes.json),
# measured from real arm-none-eabi-gcc builds; tests/test_code_table.py says when it is stale.
code-sizes: system-deps $(STAMP)
	PYTHONPATH=$(CURDIR) $(PY) -m splitter.measure.code_table

# The kernel cost table the planner's compute estimate uses (splitter/cost/kernel_costs.json):
# every layer of models/ and a shape grid run under QEMU -icount, per-kernel fits;
# tests/test_kernel_table.py says when it is stale.
costs: system-deps $(STAMP)
	PYTHONPATH=$(CURDIR) $(PY) -m splitter.measure.kernel_table

# Coverage-guided fuzzing (atheris) of the importers, the boards / profile parsers, the manifest
# readers and the frame decoder: FUZZ_SECONDS per target, numbers in benchmarks/results/fuzz.md,
# crashes (minimised) in tests/fuzz_crashes/, replayed by tests/test_fuzz_coverage.py.
FUZZ_SECONDS ?= 60
fuzz: $(STAMP)
	$(PY) benchmarks/fuzz.py all --seconds $(FUZZ_SECONDS) --report benchmarks/results/fuzz.md

# Every crash point of compile / segment / build and timed SIGKILLs (benchmarks/results/kill_test.md).
kill-test: system-deps $(STAMP)
	$(PY) benchmarks/kill_test.py --report benchmarks/results/kill_test.md
