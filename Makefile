# envgen: `make demo` builds and certifies the default stack; `make test` runs the tests.
PY := .venv/bin/python
ENVGEN := .venv/bin/envgen

.PHONY: bootstrap bootstrap-tests demo test test-fast test-unit test-docker test-all test-map lint bench bench-cli bench-all golden closures clean

# What envgen needs (make demo); bootstrap-tests adds what only the tests use (Chromium,
# Slurm and munge, a registry, the test extra, torch).
bootstrap:
	@tools/bootstrap.sh

bootstrap-tests:
	@tools/bootstrap.sh --tests

demo: bootstrap
	$(ENVGEN) build pytorch-cu121 --certify

# The real Docker tests one at a time (they share one daemon, its build cache and the
# registry and Slurm services they start), the unit tests beside them in one process
# (tools/test.sh prints their output when both are done).
test: bootstrap-tests
	@PY=$(PY) tools/test.sh

# The unit tests (no Docker), on every core: the loop while changing a module. FILES=...
# narrows it to some test files (tests/README.md maps modules to their tests).
test-fast: bootstrap-tests
	$(PY) -m pytest -q -x -n auto -m "not docker and not gpu and not slow" $(FILES)

# Everything CI runs plus the opt-in sweeps (slow); gpu stays on the lent GPU machine.
test-all: bootstrap-tests
	ENVGEN_SLOW=1 $(PY) -m pytest -q --durations=25 -m "not gpu"

test-map:
	$(PY) tools/test_map.py

lint:
	$(PY) -m ruff check envgen tests bench tools

test-unit: bootstrap-tests
	$(PY) -m pytest -q -m "not docker and not gpu and not slow"

test-docker: bootstrap-tests
	$(PY) -m pytest -q -m docker

# bench.py goes last: it compares every figure (the other two's too) with the last run.
# BENCH_FLAGS=--fail-on-regression makes a figure that got worse fail it.
bench: bootstrap
	$(PY) bench/reproducible.py --out bench/reproducible.json --markdown docs/benchmarks.md
	$(PY) bench/layer_sharing.py --out bench/layer-sharing.json
	$(PY) bench/intake/run.py --out bench/intake.json
	$(PY) bench/bench.py --out bench/results.json --markdown docs/benchmarks.md $(BENCH_FLAGS)

# The CLI's latency and render --all only: no Docker, a minute.
bench-cli: bootstrap
	$(PY) bench/bench.py --only cli --out bench/results.json --markdown docs/benchmarks.md $(BENCH_FLAGS)

bench-all: bootstrap
	$(PY) bench/build_all.py
	$(PY) bench/release_range.py
	$(PY) bench/arm64_emulated.py --cold

golden:
	ENVGEN_UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/test_render_golden.py

closures: bootstrap
	$(ENVGEN) matrix refresh closures

clean:
	rm -rf .pytest_cache build dist *.egg-info
