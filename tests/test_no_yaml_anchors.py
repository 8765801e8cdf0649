"""No YAML envgen writes for another tool carries PyYAML's &anchors and *aliases (a reader
sees one whole mapping per place): run profiles for Compose and Kubernetes in every GPU
mode and the GitHub workflows (the fleet's Kubernetes Jobs: tests/test_fleet.py). A guard:
PyYAML's safe_dump makes an anchor as soon as one object is placed twice."""
from __future__ import annotations

import pytest
import yaml

from envgen.cli import main

SOURCE = "git+https://github.com/ORG/envgen@" + "0123456789abcdef" * 2 + "01234567"


def anchors(text: str) -> list[str]:
    return [e.anchor for e in yaml.parse(text) if getattr(e, "anchor", None)]


def test_the_anchor_check_finds_what_safe_dump_makes():
    shared = {"a": 1}
    assert anchors(yaml.safe_dump({"x": shared, "y": shared}))


@pytest.mark.parametrize("argv", [
    ["profile", "pytorch-cu121", "--format", fmt, *more]
    for fmt in ("compose", "kubernetes")
    for more in ([], ["--gpus", "0,1"], ["--gpu-access", "cdi"], ["--gpus", "none"])] + [
    ["profile", "pytorch-cpu", "--format", "kubernetes"],
    ["ci", "github", "pytorch-cu121", "pytorch-cu128", "--envgen-source", SOURCE],
    ["ci", "github", "--refresh", "--envgen-source", SOURCE],
])
def test_generated_yaml_has_no_anchors(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert yaml.safe_load(out) and anchors(out) == []
