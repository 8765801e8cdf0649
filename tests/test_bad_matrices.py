"""The bad-matrix corpus: every file in tests/bad_matrices/ is one broken matrix (the mini
matrix with one thing broken) whose header comments hold what envgen must answer:

    # expect-exit: 2
    # expect-line: 7                       (optional: the message names <file>:<line>)
    # expect-message: duplicate key 'version'
    # argv: matrix validate
    # xfail: bug: ...                      (optional: a known envgen bug, strict xfail)

`.bin` cases hold bytes that are not UTF-8 (or a NUL); the header is ASCII either way.
Cases too big for the repository (a 5 MB file, a huge value) are generated below."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from envgen.cli import main

CORPUS = Path(__file__).parent / "bad_matrices"
MINI = Path(__file__).parent / "fixtures" / "mini.yaml"
_HEADER = re.compile(r"^# ([a-z-]+): (.*)$")


def _expectations(path: Path) -> dict[str, str]:
    head = {}
    for raw in path.read_bytes().decode("latin-1").splitlines():
        m = _HEADER.match(raw)
        if not m:
            break
        head[m.group(1)] = m.group(2)
    return head


def _cases() -> list:
    return list(_iter_cases())


def _iter_cases():
    for path in sorted(CORPUS.iterdir()):
        if path.suffix not in (".yaml", ".bin"):
            continue
        head = _expectations(path)
        marks = [pytest.mark.xfail(strict=True, reason=head["xfail"])] if "xfail" in head \
            else []
        yield pytest.param(path, head, id=path.stem, marks=marks)


def _run(capsys, path: Path, argv: list[str]) -> tuple[int, str, str]:
    rc = main(["--matrix", str(path), *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_corpus_is_large_and_well_formed():
    cases = list(_cases())
    assert len(cases) >= 40
    for case in cases:
        path, head = case.values
        assert {"expect-exit", "expect-message", "argv"} <= set(head), path.name


@pytest.mark.parametrize("path,head", _cases())
def test_bad_matrix_fails_with_exit_code_location_and_message(capsys, path, head):
    rc, out, err = _run(capsys, path, shlex.split(head["argv"]))
    assert "Traceback" not in out + err
    assert rc == int(head["expect-exit"]), err or out
    first = err.splitlines()[0] if err else ""
    assert first.startswith("envgen: error: "), err
    if "expect-line" in head:
        assert f"{path.name}:{head['expect-line']}:" in first
    else:
        assert path.name in first
    assert head["expect-message"] in first


@pytest.mark.parametrize("path,head", _cases())
def test_bad_matrix_json_error_names_file_line_and_exit_code(capsys, path, head):
    rc, out, err = _run(capsys, path, [*shlex.split(head["argv"]), "--json"])
    assert "Traceback" not in out + err
    assert rc == int(head["expect-exit"])
    data = json.loads(out)
    assert {"error", "message", "file", "line", "exit_code"} <= set(data)
    assert data["exit_code"] == rc
    assert Path(data["file"]).name == path.name
    if "expect-line" in head:
        assert data["line"] == int(head["expect-line"])
    assert head["expect-message"] in data["message"]


def test_five_megabyte_matrix_is_refused_before_parsing(capsys, tmp_path):
    big = tmp_path / "big.yaml"
    padding = "# " + "x" * 1021 + "\n"
    big.write_text(MINI.read_text() + padding * (5 * 1024))
    assert big.stat().st_size > 5 * 1024 * 1024
    rc, out, err = _run(capsys, big, ["matrix", "validate"])
    assert rc == 2
    assert "big.yaml" in err and "larger than" in err
    assert "Traceback" not in out + err


def test_huge_value_gives_a_short_error_line(capsys, tmp_path):
    bad = tmp_path / "huge.yaml"
    bad.write_text(MINI.read_text().replace('version: "2.3.1"', 'version: "2' + "1" * 1_000_000
                                            + '"', 1))
    rc, _out, err = _run(capsys, bad, ["matrix", "validate"])
    assert rc == 2 and "huge.yaml:" in err
    assert len(err.splitlines()[0]) < 1000


@pytest.mark.parametrize("text", ["", "\n\n", "---\n"], ids=["empty", "blank", "document-start"])
def test_empty_matrix_file_fails_cleanly(capsys, tmp_path, text):
    """An empty file offers nothing to resolve: refused with its name, not 'valid, 0 entries'."""
    empty = tmp_path / "empty.yaml"
    empty.write_text(text)
    rc, _out, err = _run(capsys, empty, ["matrix", "validate"])
    assert rc == 2 and "empty.yaml" in err and "Traceback" not in err


def test_empty_file_beside_a_full_matrix_is_reported(capsys, tmp_path):
    """A stray empty file in a matrix folder is a mistake worth naming, not silently skipped."""
    (tmp_path / "a.yaml").write_text(MINI.read_text())
    (tmp_path / "b.yaml").write_text("")
    rc, _out, err = _run(capsys, tmp_path, ["matrix", "validate"])
    assert rc == 2 and "b.yaml" in err


def test_every_problem_is_collected_before_failing(capsys, tmp_path):
    bad = tmp_path / "two.yaml"
    bad.write_text(MINI.read_text().replace('cc: "9.0"', 'cc: "9"')
                   .replace('latest: "535.274.02"', 'latest: "535.x"'))
    rc, out, _err = _run(capsys, bad, ["matrix", "validate", "--json"])
    assert rc == 2
    problems = json.loads(out)["problems"]
    assert len(problems) == 2
    assert all(p["file"].endswith("two.yaml") and p["line"] for p in problems)


def test_missing_matrix_path_is_a_clean_error(capsys, tmp_path):
    rc, _out, err = _run(capsys, tmp_path / "nope.yaml", ["matrix", "validate"])
    assert rc == 2 and "nope.yaml" in err and "Traceback" not in err
