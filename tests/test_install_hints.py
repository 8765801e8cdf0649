"""Every hint that tells a user to install envgen names envgen's own distribution,
envgen-gpu: the package index's "envgen" is another project."""
from __future__ import annotations

import re
from pathlib import Path

import tomllib

import envgen
from envgen.cli import main

ROOT = Path(__file__).resolve().parents[1]
STRANGER = re.compile(r"""pip install\s+['"]?envgen(?!-gpu)(?=[\[=<>~!\s'"`]|$)""")


def test_the_distribution_name_is_pyprojects():
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["name"] == envgen.DISTRIBUTION == "envgen-gpu"


def test_smoke_without_torch_names_envgen_gpu(monkeypatch, capsys):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["smoke"]) == 3
    err = capsys.readouterr().err
    assert "pip install 'envgen-gpu[torch]'" in err and "'envgen[" not in err


def test_no_hint_installs_a_strangers_package():
    files = [*(ROOT / "envgen").rglob("*.py"), *(ROOT / "templates").rglob("*.j2"),
             ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "Makefile"]
    bad = [f"{p.relative_to(ROOT)}:{n}"
           for p in files for n, line in enumerate(p.read_text().splitlines(), 1)
           if STRANGER.search(line)]
    assert bad == []
    assert STRANGER.search("pip install 'envgen[torch]'")
    assert STRANGER.search("pip install envgen==0.2.0")
    assert not STRANGER.search("pip install 'envgen-gpu[torch]'")
