"""libyaml's parser reads the matrix (it is that much faster); PyYAML's own parser is what
runs where PyYAML has no libyaml. Both must give the same documents and lines, and fail on
the same files at the same line, for the whole bad-matrix corpus and the bundled matrix.
A syntax error's wording is each parser's own ("did not find expected key" where PyYAML
says "expected <block end>"); the corpus's expected messages hold for both."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envgen.core.errors import MatrixError
from envgen.matrix import yamlfile

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted([*(ROOT / "tests" / "bad_matrices").iterdir(),
                *(ROOT / "matrices").glob("*.yaml")])


def outcome(path: Path):
    try:
        doc = yamlfile.load_file(path)
    except MatrixError as e:
        if "nested too deeply" in e.message:   # libyaml names the line; Python's stack cannot
            return ("error", e.message)
        syntax = e.message.startswith("invalid YAML: ")
        return ("error", "invalid YAML" if syntax else e.message, e.line)
    def lines(x):   # the documents and every line they remember
        if isinstance(x, yamlfile.LDict):
            return ("map", x.line, tuple((k, x.lines[k], lines(v)) for k, v in x.items()))
        if isinstance(x, yamlfile.LList):
            return ("seq", x.line, tuple(x.lines), tuple(lines(v) for v in x))
        return x
    return ("doc", lines(doc))


@pytest.fixture
def pure_python(monkeypatch):
    monkeypatch.setattr(yaml, "__with_libyaml__", False)
    yamlfile._loader.cache_clear()
    yield
    yamlfile._loader.cache_clear()


def test_libyaml_is_what_reads_the_matrix_here():
    if not yaml.__with_libyaml__:
        pytest.skip("this PyYAML has no libyaml")
    from yaml.cyaml import CParser
    assert issubclass(yamlfile._loader(), CParser)


@pytest.fixture(scope="module")
def with_c():
    yamlfile._loader.cache_clear()
    return {p.name: outcome(p) for p in FILES}


def test_both_parsers_give_the_same_documents_lines_and_errors(with_c, pure_python):
    assert len(FILES) > 60
    assert yamlfile._loader().__mro__[1].__module__ != "_yaml"
    python = {p.name: outcome(p) for p in FILES}
    differ = [n for n in python if python[n] != with_c[n]]
    assert not differ, {n: (with_c[n][:3], python[n][:3]) for n in differ[:3]}
