"""Where PyTorch's own indexes are out of reach: `envgen init` starts from a stack whose
closure ships with envgen, `matrix list` says which stacks those are, and a stack that must
resolve against an index that does not answer fails at once with one sentence (exit 3)
instead of uv's chain of DNS errors, asking the index once per process."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from envgen.cli import main
from envgen.core import fetching
from envgen.core.errors import EnvironmentMissing
from envgen.matrix import load_matrix
from envgen.resolve import closure as cl
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

ROOT = Path(__file__).resolve().parents[1]
M = load_matrix()


def stack(spec):
    return resolve(M, parse_spec(spec, M), Host())


def test_init_defaults_to_a_stack_whose_closure_is_bundled(tmp_path):
    r = subprocess.run([sys.executable, "-m", "envgen", "init", "--json"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    default = json.loads(r.stdout)["stack"]
    found = cl.find(stack(default))
    assert found is not None and found[1] == f"bundled closure {default}.json"


@pytest.fixture
def no_index(monkeypatch):
    """Every HTTP request fails as a name without DNS does; counts them."""
    calls = []

    def urlopen(req, timeout=None):
        calls.append(req.full_url)
        raise urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))
    monkeypatch.setattr(fetching, "urlopen", urlopen)
    monkeypatch.setattr(cl, "_UNREACHABLE", {})
    monkeypatch.setattr(cl, "compile_pins", lambda *a, **k: pytest.fail("uv ran"))
    return calls


def test_an_index_that_does_not_answer_is_one_sentence_and_exit_3_asked_once(no_index):
    st = stack("pytorch-cpu")
    assert cl.find(st) is None, "the premise: pytorch-cpu has no bundled closure"
    for _ in range(3):
        with pytest.raises(EnvironmentMissing) as e:
            cl.resolve_closure(st)
        assert e.value.exit_code == 3
        assert e.value.message == (
            "pytorch-cpu has no bundled closure and resolving one needs "
            f"{st.index_url.rstrip('/')}, which does not answer (no DNS answer for "
            "download.pytorch.org); the stacks `envgen matrix list` marks bundled build "
            "without it")
    assert no_index == [st.index_url.rstrip("/") + "/"]
    with pytest.raises(EnvironmentMissing, match="does not answer"):   # the same host
        cl.resolve_closure(stack("pytorch-cu118"))
    assert len(no_index) == 1


def test_an_index_that_answers_anything_is_left_to_uv(monkeypatch):
    monkeypatch.setattr(cl, "_UNREACHABLE", {})

    def urlopen(req, timeout=None):
        raise urllib.error.HTTPError(req.full_url, 403, "Forbidden", {}, None)
    monkeypatch.setattr(fetching, "urlopen", urlopen)
    assert cl.probe_index("https://mirror.example/simple") is None
    assert cl.probe_index("file:///srv/simple") is None


def test_a_refused_connection_is_said_plainly():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # nothing listens there once closed
    assert cl.probe_index(f"http://127.0.0.1:{port}/simple") == "connection refused"


def test_matrix_list_marks_the_stacks_whose_closure_is_bundled(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")   # the table fits the terminal: room for every name
    assert main(["matrix", "list", "--json"]) == 0
    rows = {r["stack"]: r for r in json.loads(capsys.readouterr().out)["stacks"]}
    assert rows["pytorch-cu121"]["closure_bundled"] is True
    assert rows["jax-cpu"]["closure_bundled"] is True
    need = sorted(n for n, r in rows.items() if r.get("closure_bundled") is False)
    assert need == ["pytorch-cpu", "pytorch-cu116", "pytorch-cu118", "pytorch-cu129"]
    assert main(["matrix", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-2:] == ["bundled", "base"]
    bundled = {line.split()[0]: line.split()[-2] for line in lines[2:]}
    assert bundled["pytorch-cu121"] == "yes" and bundled["pytorch-cpu"] == "no"
