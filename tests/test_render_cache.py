"""The render cache: a render it answers is the render Jinja would give, byte for byte, for
every stack; what a render reads besides its arguments (an environment variable that feeds
a label, a template's bytes) reaches its key; an entry that is not this user's alone, or
that does not parse, is not read."""
from __future__ import annotations

import os
import shutil

import pytest
from closures import use_fake_resolver

from envgen.matrix import load_matrix
from envgen.render import cache, views
from envgen.resolve.closure import closure_for
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

M = load_matrix()


def stack(name):
    return resolve(M, parse_spec(name, M), Host())


@pytest.fixture
def home(monkeypatch, tmp_path):
    use_fake_resolver(monkeypatch, tmp_path)
    monkeypatch.delenv("ENVGEN_NO_CACHE", raising=False)
    return tmp_path / "envgen-home"


def no_jinja(monkeypatch):
    def refuse():
        raise AssertionError("Jinja was asked for: the cache did not answer")
    monkeypatch.setattr(views, "environment", refuse)


def test_every_stack_renders_the_same_from_the_cache_as_through_jinja(home, monkeypatch):
    stacks = [stack(n) for n in M.stack_names()]
    closures = [closure_for(s)[0] for s in stacks]
    monkeypatch.setenv("ENVGEN_NO_CACHE", "1")
    plain = [views.render_texts(s, c) for s, c in zip(stacks, closures)]
    monkeypatch.delenv("ENVGEN_NO_CACHE")
    first = [views.render_texts(s, c) for s, c in zip(stacks, closures)]   # fills it
    assert len(list((home / "cache" / "render").glob("*.json"))) == len(set(
        cache.key(views_jobs(s, c), views.template_dir()) for s, c in zip(stacks, closures)))
    no_jinja(monkeypatch)
    again = [views.render_texts(s, c) for s, c in zip(stacks, closures)]
    assert plain == first == again


def views_jobs(s, c):
    """The jobs render_texts hands the cache (for counting keys)."""
    seen = {}
    real = cache.render

    def grab(jobs, template_dir, environment):
        seen.update(jobs)
        return real(jobs, template_dir, environment)
    cache.render = grab
    try:
        views.render_texts(s, c)
    finally:
        cache.render = real
    return seen


def test_a_label_from_the_environment_is_not_served_stale(home, monkeypatch):
    s = stack("pytorch-cu121")
    c = closure_for(s)[0]
    monkeypatch.setenv("ENVGEN_SOURCE_URL", "https://example.org/team/one")
    one = views.render_texts(s, c)["Dockerfile"]
    monkeypatch.setenv("ENVGEN_SOURCE_URL", "https://example.org/team/two")
    two = views.render_texts(s, c)["Dockerfile"]
    assert "team/one" in one and "team/two" in two


def test_an_edited_template_is_rendered_again(home, monkeypatch, tmp_path):
    s = stack("pytorch-cu121")
    c = closure_for(s)[0]
    views.render_texts(s, c)
    copy = tmp_path / "templates"
    shutil.copytree(views.template_dir(), copy)
    text = (copy / "environment.yml.j2").read_text()
    (copy / "environment.yml.j2").write_text("# edited\n" + text)
    monkeypatch.setattr(views, "template_dir", lambda: copy)
    import jinja2

    from envgen.render import env as env_mod

    def edited():
        e = env_mod.environment()
        return e.overlay(loader=jinja2.FileSystemLoader(str(copy)), bytecode_cache=None)
    monkeypatch.setattr(views, "environment", edited)
    assert views.render_texts(s, c)["environment.yml"].startswith("# edited\n")


@pytest.mark.parametrize("spoil", ["group-writable", "not json", "a missing text"])
def test_an_entry_that_is_not_trusted_or_not_whole_is_rendered_again(home, monkeypatch,
                                                                    spoil):
    s = stack("pytorch-cu121")
    c = closure_for(s)[0]
    good = views.render_texts(s, c)
    (entry,) = (home / "cache" / "render").glob("*.json")
    if spoil == "group-writable":
        entry.write_text(entry.read_text().replace("FROM ", "FROM evil/"))
        os.chmod(entry, 0o664)
    elif spoil == "not json":
        entry.write_text("{")
    else:
        entry.write_text('{"Dockerfile": "FROM evil"}')
    assert views.render_texts(s, c) == good


def test_the_folder_keeps_its_newest_entries(home, monkeypatch):
    monkeypatch.setattr(cache, "KEEP", 3)
    d = home / "cache" / "render"
    d.mkdir(parents=True, mode=0o700)
    for i in range(5):
        cache.store(d, f"{i:064x}", {"a": str(i)})
        os.utime(d / f"{i:064x}.json", ns=(i * 10**9, i * 10**9))
    cache.store(d, "f" * 64, {"a": "new"})
    assert sorted(p.stem for p in d.glob("*.json")) == [f"{3:064x}", f"{4:064x}", "f" * 64]
