"""A team's own package index: the sha256 of each file comes from the index uv took it from
(uv's first-index strategy: the extra indexes in their order, then the stack's index), and
the project's install steps name those indexes so the file can be fetched there and checked
against that hash."""
from __future__ import annotations

import pytest

import envgen.resolve.closure as cl
import envgen.resolve.project_closure as pc

MAIN, TEAM, MORE = ("https://pypi.org/simple", "https://pkgs.example.com/simple",
                    "https://more.example.com/simple/")
WHEEL = "teamlib-1.2.0-py3-none-any.whl"


def index(served: dict):
    """A fetch that answers as the indexes in `served` do: url → files, or an exception."""
    asked = []

    def fetch(url):
        asked.append(url)
        at = url.rsplit("/", 2)[0]
        got = served.get(at)
        if got is None:
            raise LookupError(url)
        if isinstance(got, Exception):
            raise got
        return {"files": got}
    return fetch, asked


def files(sha):
    return [{"filename": WHEEL, "hashes": {"sha256": sha}}]


def test_the_first_extra_index_that_serves_the_project_gives_the_hash():
    fetch, asked = index({TEAM: files("a" * 64), MAIN: files("b" * 64)})
    p = cl.hash_pin("teamlib", "1.2.0", "3.11", "manylinux_2_36_x86_64", MAIN, fetch=fetch,
                    extra=(MORE, TEAM))
    assert p.sha256 == "a" * 64 and p.file == WHEEL
    # the extra indexes first, in their order (a trailing slash is the same index)
    assert asked == [f"{MORE.rstrip('/')}/teamlib/", f"{TEAM}/teamlib/"]


def test_a_project_no_extra_index_serves_comes_from_the_stacks_index():
    fetch, asked = index({MAIN: files("b" * 64)})
    p = cl.hash_pin("teamlib", "1.2.0", "3.11", "manylinux_2_36_x86_64", MAIN, fetch=fetch,
                    extra=(TEAM,))
    assert p.sha256 == "b" * 64 and asked[-1] == f"{MAIN}/teamlib/"


def test_no_index_serving_it_names_every_index_asked():
    fetch, _ = index({})
    p = cl.hash_pin("teamlib", "1.2.0", "3.11", "manylinux_2_36_x86_64", MAIN, fetch=fetch,
                    extra=(TEAM,))
    assert p.sha256 is None and p.note == f"teamlib is not on any of {TEAM}, {MAIN}"


def test_an_extra_index_that_cannot_be_read_is_a_passing_fault_not_a_fall_through():
    # falling through to the next index would pin a file from an index uv did not use
    fetch, asked = index({TEAM: OSError("timed out"), MAIN: files("b" * 64)})
    p = cl.hash_pin("teamlib", "1.2.0", "3.11", "manylinux_2_36_x86_64", MAIN, fetch=fetch,
                    extra=(TEAM,))
    assert p.sha256 is None and p.note.startswith(f"{TEAM} could not be read for teamlib")
    assert asked == [f"{TEAM}/teamlib/"]


def test_the_project_closure_caches_nothing_when_an_extra_index_did_not_answer(
        tmp_path, monkeypatch):
    from envgen.core.errors import EnvironmentMissing
    inputs = {"requirements": ["teamlib"], "constraints": [], "python": "3.11",
              "platform": "manylinux_2_36_x86_64", "index_url": MAIN,
              "extra_index_urls": [TEAM]}
    monkeypatch.setattr(pc, "project_inputs", lambda stack, layer: inputs)
    monkeypatch.setattr(cl, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(cl, "probe_index", lambda index: None)
    monkeypatch.setattr(cl, "compile_pins", lambda inputs: ({"teamlib": "1.2.0"}, "uv 0"))
    fetch, _ = index({TEAM: OSError("timed out"), MAIN: files("b" * 64)})
    monkeypatch.setattr(cl, "fetch_json", fetch)
    monkeypatch.setattr(cl.hash_pin, "__defaults__", (fetch, ()))
    with pytest.raises(EnvironmentMissing, match="nothing was cached"):
        pc.project_closure(None, None)
    assert list(tmp_path.iterdir()) == []


def test_the_project_layer_names_the_teams_indexes(tmp_path):
    from envgen.core.model import Pin
    from envgen.matrix import load_matrix
    from envgen.render import views
    from envgen.resolve import project
    from envgen.resolve.closure import closure_for
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import host_from_flags, resolve
    m = load_matrix()
    stack = resolve(m, parse_spec("pytorch-cu121", m), host_from_flags(m))
    f = tmp_path / "envgen.yaml"
    f.write_text(f"stack: pytorch-cu121\nname: trainer\npip: []\nindexes: [{TEAM}]\n")
    layer = project.load(f).layer
    applied = project.apply(stack, layer)
    closure = closure_for(stack, resolve=False)[0]
    pin = Pin("teamlib", "1.2.0", file=WHEEL, sha256="a" * 64)
    template = views.environment().get_template("requirements.txt.j2")
    text = template.render(**views.requirements_view(
        applied, closure, [pin], "project packages", {"dir": views.PROJECT_DIR}))
    assert f"--extra-index-url {TEAM}\n" in text
    # the plain stack's own layers name no index of the team's
    plain = template.render(**views.requirements_view(
        applied, closure, [pin], "framework", {"dir": "3-framework"}))
    assert "--extra-index-url" not in plain


def test_an_sdist_from_the_teams_index_is_fetched_from_that_index(tmp_path, monkeypatch):
    """The sdist whose build backends the closure pins comes from the index its hash came
    from: the team's extra index first, then the stack's (it was looked for on the stack's
    index alone, and a team's private sdist was never found)."""
    from envgen.core.model import Pin, ProjectLayer
    asked = []
    got = tmp_path / "teamlib-1.2.0.tar.gz"

    def index_file(at, name, wanted):
        asked.append(at)
        ok = wanted({"filename": got.name, "hashes": {"sha256": "a" * 64}})
        return got if at == TEAM and ok else None
    monkeypatch.setattr(cl, "index_file", index_file)
    layer = ProjectLayer(name="t", indexes=(MORE, TEAM))
    pins = [Pin("teamlib", "1.2.0", file=got.name, sha256="a" * 64)]
    assert pc._sdist_paths(pins, layer, MAIN) == {"teamlib": got}
    assert asked == [MORE.rstrip("/"), TEAM]
    # another file of the same name or another hash is not taken from any index
    assert pc._sdist_paths([Pin("teamlib", "1.2.0", file=got.name, sha256="b" * 64)],
                           layer, MAIN) == {"teamlib": None}
    assert asked[2:] == [MORE.rstrip("/"), TEAM, MAIN]


@pytest.mark.parametrize("page", [
    {"files": [{"filename": "x-1.0.tar.gz", "hashes": ["sha256:" + "a" * 64]}]},
    {"files": [{"filename": "x-1.0.tar.gz", "hashes": {"sha256": 5}, "url": "x"}]},
    {"files": [{"filename": "x-1.0.tar.gz", "hashes": {"sha256": "../" * 22}}]},
    {"files": ["x-1.0.tar.gz"]}, {"files": "x-1.0.tar.gz"}, ["x"], None])
def test_an_index_page_of_the_wrong_shape_gives_no_file_not_a_crash(monkeypatch, page):
    monkeypatch.setattr(cl, "fetch_json", lambda url: page)
    assert cl.index_file("https://idx.example/simple", "x",
                         lambda f: f["filename"].endswith(".tar.gz")) is None
