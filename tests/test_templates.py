"""Templates decide nothing (style.md): no comparisons, no calls, no version tables; every
value that reaches a build instruction goes through a quoting filter; StrictUndefined."""
from __future__ import annotations

import re

import jinja2
import pytest
from jinja2 import nodes

from envgen.render import environment, template_dir
from envgen.render.env import dockerquote, sh, token

TEMPLATES = sorted(p.name for p in template_dir().glob("*.j2"))
QUOTING = {"sh", "token", "dockerquote", "tojson", "labelvalue"}
VERSION_LIKE = re.compile(r"(?<![\w.])\d+\.\d+(\.\d+)*(?![\w.])")
# View values that are constants of envgen itself, not matrix data: safe bare. (`name` in
# Dockerfile.j2 is an ENV/LABEL key, a literal in views.py.)
# envgen's own command strings (render/views.py constants), no value from a matrix or user
CONSTANTS = {"uid", "payload_dir", "envgen_version", "stamp", "compile", "layer.pip",
             "uv", "uv_shared", "uv_fetch", "bootstrap_pip", "layer.cuda_home_setup",
             "project_build.pip"}
DOCKERFILE_CONSTANTS = CONSTANTS | {"name"}
# Known gap, tested on its own below (strict xfail).
CMD_PAYLOAD = "Dockerfile.j2: CMD {{ payload }}"


def _ast(name: str) -> nodes.Template:
    env = environment()
    source, _, _ = env.loader.get_source(env, name)
    return env.parse(source)


def test_templates_exist():
    assert {"Dockerfile.j2", "requirements.txt.j2", "environment.yml.j2"} <= set(TEMPLATES)


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_makes_no_comparisons(name):
    found = list(_ast(name).find_all(nodes.Compare))
    assert not found, f"{name}: comparisons belong in resolve/views, not templates: {found}"


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_calls_no_functions(name):
    """No `raise`-like helpers, no method calls: only expressions and known filters."""
    calls = list(_ast(name).find_all(nodes.Call))
    assert not calls, f"{name}: calls {calls}"
    env = environment()
    for f in _ast(name).find_all(nodes.Filter):
        assert f.name in env.filters, f"{name}: unknown filter {f.name}"


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_holds_no_version_literals(name):
    tree = _ast(name)
    for const in tree.find_all(nodes.Const):
        assert not (isinstance(const.value, str) and VERSION_LIKE.search(const.value)), \
            f"{name}: version-looking literal {const.value!r}"
    for data in tree.find_all(nodes.TemplateData):
        assert not VERSION_LIKE.search(data.data), \
            f"{name}: version-looking text {VERSION_LIKE.search(data.data).group()!r}"


def _unquoted_outputs(name: str) -> list[str]:
    """Expressions printed into a non-comment line without a quoting filter."""
    env = environment()
    source, _, _ = env.loader.get_source(env, name)
    bad = []
    for lineno, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith("#") or "{{" not in line:
            continue
        for expr in re.findall(r"\{\{(.*?)\}\}", line):
            expr = expr.strip()
            filters = {f.strip().split("(")[0] for f in expr.split("|")[1:]}
            root = expr.split("|")[0].strip()
            constants = DOCKERFILE_CONSTANTS if name == "Dockerfile.j2" else CONSTANTS
            if not filters & QUOTING and root not in constants:
                where = line.split()[0] if line.split() else ""
                bad.append(f"{name}: {where} {{{{ {expr} }}}}")
    return bad


# Build-file templates quote each value for the shell or Dockerfile; the HTML report is
# autoescaped instead (tests/test_report.py checks that).
BUILD_TEMPLATES = [n for n in TEMPLATES if not n.endswith(".html.j2")]


@pytest.mark.parametrize("name", BUILD_TEMPLATES)
def test_every_value_in_a_build_line_is_quoted(name):
    assert [b for b in _unquoted_outputs(name) if b != CMD_PAYLOAD] == []


def test_cmd_payload_is_quoted():
    assert CMD_PAYLOAD not in _unquoted_outputs("Dockerfile.j2")


def test_strict_undefined_refuses_a_missing_variable():
    env = environment()
    assert env.undefined is jinja2.StrictUndefined
    for name in TEMPLATES:
        with pytest.raises(jinja2.UndefinedError):
            env.get_template(name).render()


# ---- quoting filters ----------------------------------------------------------------------

@pytest.mark.parametrize("value", ["a\nb", "a\rb", "x\x00y", "2.4.1\n"])
def test_sh_refuses_line_breaks(value):
    with pytest.raises(ValueError):
        sh(value)


def test_sh_quotes_shell_metacharacters():
    assert sh("torch==2.4.1") == "torch==2.4.1"
    assert sh("a b") == "'a b'"
    assert sh("$(id)") == "'$(id)'"
    assert sh("x'y") == "'x'\"'\"'y'"


@pytest.mark.parametrize("value", ["2.4.1;id", "2.4.1 id", "$HOME", "$(id)", "a`id`", "a'b",
                                   'a"b', "a\nb", "a|b", "a&b", ""])
def test_token_refuses_anything_but_a_plain_token(value):
    with pytest.raises(ValueError):
        token(value)


@pytest.mark.parametrize("value", ["torch==2.4.1+cu121", "nvidia-cublas==13.1.1.3.*",
                                   "https://download.pytorch.org/whl/cu121",
                                   "nvidia/cuda:13.0.1-runtime-ubuntu24.04",
                                   "nvidia-nvjitlink<14,>=13.0.88"])
def test_token_passes_pins_urls_and_images(value):
    assert token(value) == value


def test_token_refuses_a_trailing_newline():
    with pytest.raises(ValueError):
        token("2.4.1\n")


def test_dockerquote_escapes_quote_backslash_and_dollar():
    assert dockerquote('a"b') == '"a\\"b"'
    assert dockerquote("a\\b") == '"a\\\\b"'
    assert dockerquote("$PATH") == '"\\$PATH"'
    assert dockerquote('\\"$') == '"\\\\\\"\\$"'


def test_dockerquote_serialises_non_strings_as_json_and_refuses_newlines():
    assert dockerquote({"b": 1, "a": "x"}) == '"{\\"a\\":\\"x\\",\\"b\\":1}"'
    with pytest.raises(ValueError):
        dockerquote("a\nb")
