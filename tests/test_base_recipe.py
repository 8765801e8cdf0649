"""Local bases: named by their recipe (no network to find a cached one), made from a mirror
that serves exactly the pinned snapshot, by the same script `envgen render` writes."""
from __future__ import annotations

import pytest

from envgen.build import base as base_image
from envgen.core.errors import EnvironmentMissing
from envgen.matrix import load_matrix
from envgen.render.views import render_base_script

M = load_matrix()
BOOKWORM = next(b for b in M.bases if b.name == "debian-bookworm")


def test_the_base_tag_is_named_by_suite_snapshot_and_recipe_alone():
    tag = BOOKWORM.local_tag
    assert tag.startswith("envgen/base:debian-bookworm-") and len(tag.split("-")[-1]) == 12
    other = BOOKWORM.__class__(**{**BOOKWORM.__dict__, "snapshot": "20260801T000000Z"})
    assert other.local_tag != tag, "another archive state is another base"


def test_the_default_mirror_is_used_only_when_it_serves_the_pinned_snapshot(monkeypatch):
    monkeypatch.delenv("ENVGEN_DEBIAN_MIRROR", raising=False)
    def same(mirror, suite):
        return BOOKWORM.snapshot
    def newer(mirror, suite):
        return "20991231T000000Z"
    assert base_image.choose_mirror(BOOKWORM, same) == base_image.DEFAULT_MIRROR
    assert base_image.choose_mirror(BOOKWORM, newer) == \
        "https://snapshot.debian.org/archive/debian/20260711T101637Z"
    assert base_image.choose_mirror(BOOKWORM, lambda m, s: None).startswith(
        "https://snapshot.debian.org/")


def test_a_mirror_asked_for_that_serves_another_state_is_refused(monkeypatch):
    monkeypatch.setenv("ENVGEN_DEBIAN_MIRROR", "http://mirror.example/debian")
    with pytest.raises(EnvironmentMissing, match="pinned to snapshot 20260711T101637Z"):
        base_image.choose_mirror(BOOKWORM, lambda m, s: "20261201T000000Z")
    assert base_image.choose_mirror(BOOKWORM, lambda m, s: BOOKWORM.snapshot) == \
        "http://mirror.example/debian"


def test_the_recipe_is_the_script_render_writes_and_quotes_every_value():
    text = render_base_script(BOOKWORM)
    assert text.startswith("#!/bin/sh") and "set -eu" in text
    assert f"TAG={BOOKWORM.local_tag}" in text
    assert "SOURCE_DATE_EPOCH=1783764997 mmdebstrap --variant=minbase" in text
    assert "https://snapshot.debian.org/archive/debian/20260711T101637Z" in text
    assert "'LABEL io.envgen.base.snapshot=20260711T101637Z'" in text
