"""Any mutation of a valid matrix either loads or fails as an EnvgenError that names the file:
never a KeyError, TypeError, RecursionError or a library's own exception."""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envgen.core.errors import EnvgenError
from envgen.matrix import load_matrix

MINI_TEXT = (Path(__file__).parent / "fixtures" / "mini.yaml").read_text()
LINES = MINI_TEXT.splitlines(keepends=True)
# Scalars a mutation may replace: quoted strings, bare words and numbers after `: `.
SCALAR = re.compile(r'(?<=: )("[^"\n]*"|[A-Za-z0-9_.:/-]+)')
SCALAR_SPOTS = [m.span() for m in SCALAR.finditer(MINI_TEXT)]

yaml_values = st.one_of(
    st.text(max_size=12).map(lambda s: '"' + s.replace("\\", "").replace('"', "") + '"'),
    st.text(alphabet="abcxyz0123456789.-+;$ ", min_size=1, max_size=10),
    st.integers(-10**6, 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["null", "~", "true", "[]", "{}", "[1, 2]", '["3.11"]', "{a: 1}",
                     "[x, [y]]", "-", "&a x", "*a", "<<", "!!python/object:os.system",
                     "!!binary AA==", "2024-01-01", "0x1F", ".inf"]),
)


@st.composite
def mutation(draw, text: str) -> str:
    kind = draw(st.sampled_from(["delete_line", "duplicate_line", "replace_scalar", "swap",
                                 "insert_char", "truncate"]))
    lines = text.splitlines(keepends=True)
    if not lines:
        return draw(st.text(max_size=20))
    if kind == "delete_line":
        i = draw(st.integers(0, len(lines) - 1))
        return "".join(lines[:i] + lines[i + 1:])
    if kind == "duplicate_line":
        i = draw(st.integers(0, len(lines) - 1))
        return "".join(lines[:i + 1] + lines[i:])
    if kind == "replace_scalar":
        spans = [m.span() for m in SCALAR.finditer(text)] or [(0, 0)]
        a, b = draw(st.sampled_from(spans))
        return text[:a] + draw(yaml_values) + text[b:]
    if kind == "swap":
        i = draw(st.integers(0, max(0, len(text) - 2)))
        j = draw(st.integers(0, max(0, len(text) - 1)))
        chars = list(text)
        if chars:
            chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)
    if kind == "insert_char":
        i = draw(st.integers(0, len(text)))
        return text[:i] + draw(st.characters(codec="utf-8")) + text[i:]
    return text[:draw(st.integers(0, len(text)))]


@st.composite
def mutated_matrix(draw) -> str:
    text = MINI_TEXT
    for _ in range(draw(st.integers(1, 3))):
        text = draw(mutation(text))
    return text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_matrix())
def test_mutated_matrix_loads_or_fails_with_a_located_envgen_error(text):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "mutated.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            load_matrix(path)
        except EnvgenError as e:
            assert e.file is not None, e
            assert str(path) in e.file
            assert e.exit_code == 2
            assert e.message


def test_control_character_is_reported_on_one_line_with_its_line(tmp_path):
    path = tmp_path / "ctl.yaml"
    path.write_text(MINI_TEXT.replace('branch: "520"', 'branch: "\x1f"'))
    with pytest.raises(EnvgenError) as e:
        load_matrix(path)
    assert e.value.line == 3
    assert "\n" not in e.value.message


def test_unmutated_mini_matrix_loads():
    m = load_matrix(Path(__file__).parent / "fixtures" / "mini.yaml")
    assert m.stack_names()
