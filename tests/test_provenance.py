"""The OCI source/revision labels: from envgen's variables, else GitHub Actions', else left
out; a malformed value is refused, never written into a label."""
from __future__ import annotations

import pytest

from envgen.core import provenance
from envgen.core.errors import InputError
from envgen.core.model import Closure
from envgen.matrix import load_matrix
from envgen.render.views import image_labels
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import resolve

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_unknown_without_any_variable():
    assert provenance.current({}) == (None, None)


def test_github_actions_variables():
    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "team/models",
           "GITHUB_SHA": SHA}
    assert provenance.current(env) == ("https://github.com/team/models", SHA)


def test_envgen_variables_win():
    env = {"ENVGEN_SOURCE_URL": "https://git.example.com/ml/stack", "ENVGEN_REVISION": "abc1234",
           "GITHUB_REPOSITORY": "team/models", "GITHUB_SHA": SHA}
    assert provenance.current(env) == ("https://git.example.com/ml/stack", "abc1234")


@pytest.mark.parametrize("env", [
    {"ENVGEN_SOURCE_URL": "http://example.com/a"},
    {"ENVGEN_SOURCE_URL": "https://example.com/a\nLABEL x=y"},
    {"ENVGEN_SOURCE_URL": "https://example.com/a b"},
    {"ENVGEN_REVISION": "HEAD"},
    {"ENVGEN_REVISION": "abc1234; rm -rf /"},
    {"GITHUB_REPOSITORY": "a/b/c"},
    {"GITHUB_REPOSITORY": "team/models", "GITHUB_SERVER_URL": "https://gh.example.com/$(id)"},
])
def test_malformed_values_are_refused(env):
    with pytest.raises(InputError):
        provenance.current(env)


def _labels(monkeypatch, **env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    m = load_matrix()
    st = resolve(m, parse_spec("pytorch-cu121", m))
    closure = Closure(key="k" * 64, inputs={}, resolver="uv", created="2026-11-20T10:00:00Z",
                      stack=st.stack)
    return dict(image_labels(st, st.base.reference, closure))


def test_labels_carry_what_is_known_and_nothing_made_up(monkeypatch):
    labels = _labels(monkeypatch)
    assert labels["org.opencontainers.image.created"] == "2026-11-20T10:00:00Z"
    assert "org.opencontainers.image.source" not in labels
    assert "org.opencontainers.image.revision" not in labels
    assert "org.opencontainers.image.vendor" not in labels
    labels = _labels(monkeypatch, GITHUB_REPOSITORY="team/models", GITHUB_SHA=SHA)
    assert labels["org.opencontainers.image.source"] == "https://github.com/team/models"
    assert labels["org.opencontainers.image.revision"] == SHA
