"""diff's prose fits the terminal: a host's `runs:` list of 50 stacks was one 884-character
line; now every line is wrapped to COLUMNS (100 in a pipe) with nothing dropped."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from envgen.cli import main

FLEET = str(Path(__file__).resolve().parents[1] / "examples/fleet.yaml")


@pytest.mark.parametrize("columns", ["80", "132"])
def test_every_line_of_a_fleet_diff_fits_the_terminal(monkeypatch, capsys, tmp_path, columns):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    monkeypatch.setenv("COLUMNS", columns)
    assert main(["diff", "--driver", "535.274.02..580.95.05", "--fleet", FLEET]) == 0
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= int(columns)
    assert main(["diff", "--driver", "535.274.02..580.95.05", "--fleet", FLEET,
                 "--json"]) == 0
    import json
    doc = json.loads(capsys.readouterr().out)
    host = doc["fleet"]["hosts"][0]
    words = set(re.findall(r"[\w.-]+", out))
    assert set(host["runs"]) <= words      # wrapped, every name still there


def test_a_driver_diffs_summary_fits_the_terminal(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["diff", "--driver", "535.274.02..580.95.05", "--gpu", "H100"]) == 0
    assert max(map(len, capsys.readouterr().out.splitlines())) <= 80
