# envgen: `make demo` builds and certifies the default stack; `make test` runs the tests.
PY := .venv/bin/python
ENVGEN := .venv/bin/envgen

.PHONY: bootstrap demo test test-unit test-docker bench bench-cli bench-all golden closures clean

bootstrap:
	@tools/bootstrap.sh

demo: bootstrap
	$(ENVGEN) build pytorch-cu121 --certify

test: bootstrap
	$(PY) -m pytest -q --durations=25 -m "not gpu and not slow"

test-unit: bootstrap
	$(PY) -m pytest -q -m "not docker and not gpu and not slow"

test-docker: bootstrap
	$(PY) -m pytest -q -m docker

# bench.py goes last: it compares every figure (the other two's too) with the last run.
# BENCH_FLAGS=--fail-on-regression makes a figure that got worse fail it.
bench: bootstrap
	$(PY) bench/reproducible.py --out bench/reproducible.json --markdown docs/benchmarks.md
	$(PY) bench/layer_sharing.py --out bench/layer-sharing.json
	$(PY) bench/bench.py --out bench/results.json --markdown docs/benchmarks.md $(BENCH_FLAGS)

# The CLI's latency and render --all only: no Docker, a minute.
bench-cli: bootstrap
	$(PY) bench/bench.py --only cli --out bench/results.json --markdown docs/benchmarks.md $(BENCH_FLAGS)

bench-all: bootstrap
	$(PY) bench/build_all.py

golden:
	ENVGEN_UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/test_render_golden.py

closures: bootstrap
	$(ENVGEN) matrix refresh closures

clean:
	rm -rf .pytest_cache build dist *.egg-info
