"""The bad-input corpus: every file in tests/bad_inputs/ is one hostile input to one
command (flags, specs, lock, fleet and certificate files, FIFOs, devices, huge numbers,
deep nesting, environment values) with what envgen must answer:

    why: what a user relies on
    argv: [verify, "{dir}/envgen.lock"]        ({dir}: the case's own folder)
    env: {ENVGEN_HOME: "{dir}/home"}           (optional)
    files: {envgen.lock: {kind: text, text: ...}}   kinds: text, template, fifo,
                                                  nested-json, nested-yaml
    expect: {exit: 2, message: "...", line: 4, max_length: 400}

Texts may hold {digits:N} (N nines) and argv {repeat:C:N}. Every case runs with DOCKER_HOST
on a socket nothing listens on: a case that expects exit 2 so proves it is refused before
any daemon is asked, and none may take longer than 20 s (no hang)."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
import yaml

from envgen.cli import main

CORPUS = Path(__file__).parent / "bad_inputs"
_TOKEN = re.compile(r"\{(dir|digits:(\d+)|repeat:(.):(\d+))\}")


def _expand(text: str, folder: Path) -> str:
    def sub(m):
        if m.group(1) == "dir":
            return str(folder)
        if m.group(2):
            return "9" * int(m.group(2))
        return m.group(3) * int(m.group(4))
    return _TOKEN.sub(sub, text)


def _make(folder: Path, name: str, spec: dict) -> None:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = spec["kind"]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "nested-json":
        path.write_text('{"a":' * spec["depth"] + "1" + "}" * spec["depth"])
    elif kind == "nested-yaml":
        path.write_text("[" * spec["depth"] + "]" * spec["depth"])
    elif kind in ("text", "template"):
        path.write_text(_expand(spec["text"], folder) if kind == "template" else spec["text"])
    else:
        raise AssertionError(f"unknown file kind {kind!r}")


def _cases():
    return list(_iter_cases())


def _iter_cases():
    for path in sorted(CORPUS.glob("*.yaml")):
        yield pytest.param(yaml.safe_load(path.read_text()), id=path.stem)


def test_corpus_is_large_and_well_formed():
    cases = [c.values[0] for c in _cases()]
    assert len(cases) >= 30
    for case in cases:
        assert {"why", "argv", "expect"} <= set(case), case
        assert {"exit", "message"} <= set(case["expect"]), case


@pytest.mark.parametrize("case", _cases())
def test_bad_input_is_one_sentence_with_its_exit_code(case, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing-listens.sock")
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "envgen-home"))
    monkeypatch.setenv("ENVGEN_DOCKER_PING_TIMEOUT", "3")
    for key, value in (case.get("env") or {}).items():
        monkeypatch.setenv(key, _expand(value, tmp_path))
    for name, spec in (case.get("files") or {}).items():
        _make(tmp_path, name, spec)
    argv = [_expand(a, tmp_path) for a in case["argv"]]
    started = time.monotonic()
    rc = main(argv)
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    expect = case["expect"]
    assert "Traceback" not in out + err
    assert rc == expect["exit"], err or out
    assert took < 20, f"took {took:.0f} s"
    lines = err.splitlines()
    assert lines and lines[0].startswith("envgen: error: "), err
    first = lines[0]
    assert expect["message"] in first, first[:500]
    if "line" in expect:
        assert f":{expect['line']}: " in first, first[:300]
    if "max_length" in expect:
        assert len(first) <= expect["max_length"], len(first)
