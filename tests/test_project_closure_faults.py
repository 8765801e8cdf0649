"""A team's closure is cached only when every file of it is hash-pinned: an index that did
not answer for one file (a read timeout) is exit 3 and leaves nothing in the cache, so the
next run asks again instead of building from an unhashed pin."""
from __future__ import annotations

import pytest

import envgen.resolve.closure as cl
import envgen.resolve.project_closure as pc
from envgen.core.errors import EnvironmentMissing
from envgen.core.model import Pin

INDEX = "https://pypi.org/simple"


@pytest.mark.parametrize("note,words", [
    (f"{INDEX} could not be read for numpy (The read operation timed out)", "timed out"),
    # uv took numpy from the index; the index then lists it for no one (a 404, a page of
    # other files): a contradiction, never cached as an unhashed pin
    (f"numpy is not on {INDEX}", "is not on"),
    (f"{INDEX} has no file of numpy 2.4.6 for Python 3.11 on manylinux_2_36_x86_64",
     "has no file of"),
])
def test_an_index_timeout_while_hashing_caches_nothing(tmp_path, monkeypatch, note, words):
    inputs = {"requirements": ["numpy"], "constraints": [], "python": "3.11",
              "platform": "manylinux_2_36_x86_64", "index_url": INDEX,
              "extra_index_urls": []}
    monkeypatch.setattr(pc, "project_inputs", lambda stack, layer: inputs)
    monkeypatch.setattr(cl, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(cl, "probe_index", lambda index: None)
    monkeypatch.setattr(cl, "compile_pins", lambda inputs: ({"numpy": "2.4.6"}, "uv 0"))
    monkeypatch.setattr(cl, "hash_pin", lambda name, version, *a, **k: Pin(
        name, version, note=note))
    with pytest.raises(EnvironmentMissing) as e:
        pc.project_closure(None, None)
    assert words in e.value.message and "nothing was cached" in e.value.message
    assert list(tmp_path.iterdir()) == []


def test_the_project_resolution_holds_the_plain_stacks_cuda_libraries_tools_and_framework():
    """The project's packages go over the plain stack's layers as they are: the plain
    closure's CUDA libraries, packaging tools, triton and framework pins are constraints
    (a team's `setuptools<70` or `nvidia-cudnn-cu12>=9.3` cannot move them), while the
    rest is only preferred."""
    from envgen.core.model import ProjectLayer
    from envgen.matrix import load_matrix
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import Host, resolve
    m = load_matrix()
    stack = resolve(m, parse_spec("pytorch-cu121", m), Host())
    plain = cl.closure_for(stack, resolve=False)[0]
    layer = ProjectLayer(name="team", requirements=("einops>=0.8", "setuptools<70"))
    inputs = pc.project_inputs(stack, layer)
    want = {p.requirement for p in plain.pins if p.name.startswith("nvidia-")
            or p.name in ("torch", "triton", "pip", "setuptools")}
    assert len(want) >= 14 and want <= set(inputs["constraints"])
    fsspec = next(p.requirement for p in plain.pins if p.name == "fsspec")
    assert fsspec in inputs["prefer"] and fsspec not in inputs["constraints"]
    assert "einops>=0.8" in inputs["requirements"]


INPUTS = {"requirements": ["flash-attn==2.8.3"], "constraints": [], "python": "3.11",
          "platform": "manylinux_2_36_x86_64", "index_url": None, "extra_index_urls": []}


def test_a_kernel_build_tool_the_index_did_not_answer_for_caches_nothing(tmp_path,
                                                                         monkeypatch):
    """The kernel-build stage's compiler and tools are pinned like the closure's own pins:
    one whose index page timed out stops the resolution with nothing cached (a cached
    closure with it unhashed was refused at every later run)."""
    monkeypatch.setattr(pc, "project_inputs", lambda stack, layer: INPUTS)
    monkeypatch.setattr(cl, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(cl, "probe_index", lambda index: None)
    monkeypatch.setattr(cl, "compile_pins", lambda inputs, **k: ({"flash-attn": "2.8.3"},
                                                                  "uv 0"))
    monkeypatch.setattr(cl, "hash_pin", lambda n, v, *a, **k: Pin(
        n, v, file="flash_attn-2.8.3.tar.gz", sha256="a" * 64))
    monkeypatch.setattr(pc, "_kernels", lambda stack, layer, pins, index: (
        ("flash-attn",), (Pin("ninja", "1.13.0", note="https://pypi.org/simple could not "
                                                      "be read for ninja (timed out)"),)))
    with pytest.raises(EnvironmentMissing, match="could not be read for ninja.*nothing was "
                                                 "cached"):
        pc.project_closure(None, None)
    assert list(tmp_path.iterdir()) == []


def test_a_cached_project_closure_that_no_longer_reads_is_resolved_again(tmp_path,
                                                                         monkeypatch):
    (tmp_path / f"{cl.key_of(INPUTS)}.json").write_text('{"closure_version": 1}')
    monkeypatch.setattr(pc, "project_inputs", lambda stack, layer: INPUTS)
    monkeypatch.setattr(cl, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(cl, "probe_index", lambda index: "asked")
    with pytest.raises(EnvironmentMissing, match="does not answer \\(asked\\)"):
        pc.project_closure(None, None)


def test_a_git_references_marker_stays_on_its_exact_pin(tmp_path, monkeypatch):
    """`root @ git+...@C ; sys_platform == "win32"` becomes `root==9.9 ; sys_platform ==
    "win32"` for uv: the line's condition is kept (it was dropped, and a Windows-only
    package was installed on Linux)."""
    from envgen.core.model import ProjectLayer
    from envgen.matrix import load_matrix
    from envgen.resolve import gitref
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import Host, resolve
    m = load_matrix()
    stack = resolve(m, parse_spec("pytorch-cu121", m), Host())
    commit = "0" * 40
    line = f'root @ git+https://git.example/mono.git@{commit} ; sys_platform == "win32"'
    monkeypatch.setattr(gitref, "archive", lambda name, repo, c: (
        tmp_path / "root-9.9.tar.gz", "a" * 64, "9.9"))
    monkeypatch.setattr(gitref, "references", lambda reqs: [
        ("root", "https://git.example/mono.git", commit)])
    layer = ProjectLayer(name="t", requirements=(line, "einops"))
    reqs = pc.project_inputs(stack, layer)["requirements"]
    assert 'root==9.9 ; sys_platform == "win32"' in reqs
    assert not any(r.startswith("root @") or r == "root==9.9" for r in reqs)
