"""A framework is data (its matrix file), a payload and one registration: the modules that
resolve, render, build, certify, lock and diff never branch on a framework's name."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from envgen.matrix import load_matrix
from envgen.smoke import payload_files

ENVGEN = Path(__file__).resolve().parents[1] / "envgen"
MODULES = ["resolve/stack.py", "resolve/over.py", "resolve/compat.py", "resolve/closure.py",
           "render/views.py", "build/context.py", "build/buildkit.py", "certify/run.py",
           "lock/write.py", "lock/verify.py", "diff.py",
           "doctor.py", "commands/build.py", "commands/certify.py", "commands/lock.py"]
M = load_matrix()
NAMES = {f.name for f in M.frameworks} | {f.package for f in M.frameworks}


@pytest.mark.parametrize("module", MODULES)
def test_no_branch_on_a_framework_name(module):
    tree = ast.parse((ENVGEN / module).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            consts = [c.value for c in (node.left, *node.comparators)
                      if isinstance(c, ast.Constant)]
            named = [c for c in consts if c in NAMES]
            assert not named, f"{module}:{node.lineno} compares with framework name {named}"


@pytest.mark.parametrize("fw", M.frameworks, ids=lambda f: f.name)
def test_every_framework_has_releases_and_a_payload(fw):
    assert M.releases_of(fw.name), f"{fw.name}: no releases"
    files = payload_files(fw.smoke)
    assert files and files[0] == f"{fw.smoke}_smoke.py", f"{fw.name}: no payload"
    if fw.builds_on:   # a framework over another's stack needs that one's checks too
        base = M.framework(fw.builds_on)
        assert f"{base.smoke}_smoke.py" in files
