"""tools/bootstrap.sh: `make demo` installs what envgen needs, `make test` also what only the
tests use; dockerd starts with its limits raised; pip's warnings about this machine's own
configuration stay out of the output."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = (ROOT / "tools" / "bootstrap.sh").read_text()
TEST_ONLY = ("chromium", "slurm-wlm", "munge", "docker-registry")


def _make_n(target):
    return subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True,
                          timeout=30).stdout


def test_the_demo_installs_only_what_envgen_needs_and_the_tests_the_rest():
    assert "tools/bootstrap.sh --tests" not in _make_n("demo")
    assert "tools/bootstrap.sh --tests" in _make_n("test")
    block = SCRIPT.split('if [ -n "$tests" ]; then', 1)[1].split("\nfi\n", 1)[0]
    for package in TEST_ONLY:
        added = [line for line in SCRIPT.splitlines() if f"need+=({package})" in line]
        assert added and all(line in block for line in added), package
    # the venv of the demo gets envgen alone; torch and the test tools come with --tests
    demo = SCRIPT.split("# ---- what only the tests need ----", 1)[0]
    assert "torch" not in demo.split("(Re)install when the venv", 1)[1]
    assert '[ -n "$tests" ] || {' in demo and "exit 0" in demo


def test_dockerd_starts_with_its_memlock_limit_raised():
    start = next(line for line in SCRIPT.splitlines() if "setsid dockerd" in line)
    assert re.search(r"ulimit -l unlimited\b.*exec setsid dockerd", start), start


def test_pip_runs_through_the_filter_of_its_location_warnings():
    calls = [line for line in SCRIPT.splitlines()
             if ".venv/bin/pip " in line and not line.lstrip().startswith("#")]
    assert calls == ['  .venv/bin/pip "$@" 2> >(grep -v "^WARNING: Location '
                     "'.*' is ignored\" >&2)"]
    script = SCRIPT.split("pip() {", 1)[1].split("\n}\n", 1)[0]
    warn = ("WARNING: Location 'file:///opt/pypi-more/simple' is ignored: it is either a "
            "non-existing path")
    r = subprocess.run(["bash", "-c", f"fake() {{ echo {warn!r} >&2; echo 'ERROR: real' >&2; "
                        f"return 3; }}\nf() {{ {script.replace('.venv/bin/pip', 'fake')}\n}}\n"
                        "f; echo rc=$?"], capture_output=True, text=True, timeout=30)
    assert r.stdout.strip() == "rc=3" and r.stderr.strip() == "ERROR: real"
