"""The full closure: what decides its key, what a stored closure may hold (it reaches a
RUN line and a lock), how the exact file and its hash are chosen, and the resolver edge."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from packaging.version import Version

from envgen.core.errors import EnvironmentMissing, InputError, Unsatisfiable
from envgen.core.model import Pin
from envgen.matrix import load_matrix
from envgen.resolve import closure as cl
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

M = load_matrix()
BUNDLED = sorted(cl.bundled_dir().glob("*.json"))


def stack(spec="pytorch-cu121"):
    return resolve(M, parse_spec(spec, M), Host())


def test_inputs_pin_the_stack_and_add_the_venv_tools_and_the_cuda_line():
    inputs = cl.inputs_for(stack())
    assert "torch==2.4.1" in inputs["requirements"]
    assert {"pip", "setuptools"} <= set(inputs["requirements"])
    assert inputs["constraints"] == ["nvidia-nvjitlink-cu12==12.1.*"]
    assert inputs["python"] == "3.11" and inputs["platform"] == "manylinux_2_36_x86_64"


def test_the_key_changes_with_every_input_and_only_with_them():
    inputs = cl.inputs_for(stack())
    assert cl.key_of(inputs) == cl.key_of(json.loads(json.dumps(inputs)))
    for k, v in (("python", "3.12"), ("platform", "manylinux_2_39_x86_64"),
                 ("index_url", "https://mirror.example/simple"), ("constraints", [])):
        assert cl.key_of({**inputs, k: v}) != cl.key_of(inputs), k


@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_every_bundled_closure_is_valid_and_matches_the_matrix(path):
    c = cl.load_closure(path)
    name, _, kind = path.stem.partition(".")
    st = stack(name) if kind != "base" else stack(name).base_stack()   # NAME.base.json
    assert c.key == cl.key_of(cl.inputs_for(st)), \
        f"{path.name} is stale: run `envgen matrix refresh closures`"
    assert c.key == cl.key_of(c.inputs)
    versions = {p.name: p.version for p in c.pins}
    for name, version in st.pip_packages.items():
        if version[:1] not in "<>=!~":
            assert Version(versions[name]) == Version(version), name
    assert all(p.sha256 for p in c.pins), "PyPI publishes a sha256 for every file"
    assert {"pip", "setuptools"} <= set(versions)


def test_a_nemo_stack_on_trixie_needs_no_resolver_run_either(monkeypatch, tmp_path):
    # its base stack (pytorch-cu124 on Python 3.13) is no stack of the matrix: stored beside
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    monkeypatch.setattr(cl, "resolve_closure", lambda *a, **k: pytest.fail("resolved"))
    st = stack("nemo-cu124")
    assert st.base.name == "debian-trixie"
    assert cl.closure_for(st.base_stack())[1] == "bundled closure nemo-cu124.base.json"
    assert cl.closure_for(st)[1] == "bundled closure nemo-cu124.json"


def test_the_bundled_stacks_need_no_resolver_run(monkeypatch, tmp_path):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    monkeypatch.setattr(cl, "resolve_closure", lambda *a, **k: pytest.fail("resolved"))
    c, origin = cl.closure_for(stack())
    assert origin == "bundled closure pytorch-cu121.json" and len(c.pins) > 20


def test_a_new_spec_resolves_once_and_is_then_cached(monkeypatch, tmp_path):
    from closures import fake_closure
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(cl, "resolve_closure", lambda st, **k: calls.append(1) or
                        fake_closure(st))
    st = stack("pytorch-cu121,python=3.10")
    first, o1 = cl.closure_for(st)
    second, o2 = cl.closure_for(st)
    assert calls == [1] and o1.startswith("resolved now") and o2.startswith("cached closure")
    assert first.to_json() == second.to_json()
    cached = tmp_path / "closures" / f"{first.key}.json"
    assert stat.S_IMODE(cached.stat().st_mode) == 0o644


def test_a_cached_closure_whose_inputs_are_not_its_key_is_resolved_again(monkeypatch,
                                                                          tmp_path):
    """A closure copied under another stack's key (or edited by hand) is passed over: the
    key is recomputed from the inputs the file holds, not taken from its name."""
    from closures import fake_closure
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(cl, "resolve_closure", lambda st, **k: calls.append(st.python) or
                        fake_closure(st))
    py310, py39 = stack("pytorch-cu121,python=3.10"), stack("pytorch-cu121,python=3.9")
    first, _ = cl.closure_for(py310)
    key39 = cl.stored_key(py39, cl.inputs_for(py39, resolve=False))
    folder = tmp_path / "closures"
    forged = json.loads((folder / f"{first.key}.json").read_text())
    (folder / f"{key39}.json").write_text(json.dumps(forged))   # 3.10's under 3.9's key
    again, where = cl.closure_for(py39)
    assert calls == ["3.10", "3.9"] and where.startswith("resolved now")
    assert again.inputs["python"] == "3.9"
    forged["key"] = key39   # its own key field made to agree: the inputs still do not
    (folder / f"{key39}.json").write_text(json.dumps(forged))
    assert cl.closure_for(py39)[1].startswith("resolved now") and len(calls) == 3
    assert cl.closure_for(py310)[1].startswith("cached closure")   # the true one still read


def test_without_a_stored_closure_and_no_resolving_it_says_how_to_get_one(monkeypatch,
                                                                           tmp_path):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    with pytest.raises(InputError, match="envgen closure"):
        cl.closure_for(stack("pytorch-cu121,python=3.10"), resolve=False)


# ---- validation: a closure reaches RUN lines and locks ------------------------------------

def good():
    return json.loads(BUNDLED[0].read_text())


@pytest.mark.parametrize("mutate,words", [
    (lambda d: d.update(key="abc"), "'key' must be 64 hex digits"),
    (lambda d: d.update(closure_version=2), "closure_version"),
    (lambda d: d.update(created="yesterday"), "'created'"),
    (lambda d: d.update(packages=[]), "empty only when nothing was required"),
    (lambda d: d["packages"][0].update(name="six; rm -rf /"), "packages[0].name"),
    (lambda d: d["packages"][0].update(version="1.0 --index-url=http://evil"), ".version"),
    (lambda d: d["packages"][0].update(file="../../etc/passwd.whl"), ".file"),
    (lambda d: d["packages"][0].update(hashes=["sha256:" + "0" * 63]), "hashes[0]"),
    (lambda d: d["packages"][0].update(hashes=["md5:" + "0" * 32]), "hashes[0]"),
    (lambda d: d["packages"][0].update(hashes=[], hash_note=None), "no sha256 and no"),
    (lambda d: d["packages"][0].update(hashes=[], hash_note="a\nRUN id"), "one short line"),
    (lambda d: d["packages"].append(dict(d["packages"][0])), "listed twice"),
])
def test_a_hostile_closure_is_refused_with_the_field(mutate, words):
    d = good()
    mutate(d)
    with pytest.raises(InputError) as e:
        cl.parse_closure(d, "x.json")
    assert words in e.value.message and e.value.file == "x.json"


# ---- the exact file and its hash ---------------------------------------------------------

def index(*files):
    return lambda url: {"files": [{"filename": f, "hashes": {"sha256": h}} for f, h in files]}


def test_the_most_specific_wheel_for_the_image_wins():
    fetch = index(("numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl", "a" * 64),
                  ("numpy-2.1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "b" * 64),
                  ("numpy-2.1.0-cp311-cp311-manylinux_2_39_x86_64.whl", "c" * 64),
                  ("numpy-2.1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "d" * 64),
                  ("numpy-2.1.0.tar.gz", "e" * 64))
    p = cl.hash_pin("numpy", "2.1.0", "3.11", "manylinux_2_36_x86_64", "https://x", fetch)
    assert p.file.endswith("manylinux_2_28_x86_64.whl") and p.sha256 == "b" * 64
    newer = cl.hash_pin("numpy", "2.1.0", "3.11", "manylinux_2_39_x86_64", "https://x", fetch)
    assert newer.sha256 == "c" * 64


def test_an_index_without_hashes_gives_a_reason_never_silence():
    def fetch(url):
        return {"files": [{"filename": "six-1.16.0-py2.py3-none-any.whl",
                                        "hashes": {}}]}
    p = cl.hash_pin("six", "1.16.0", "3.11", "manylinux_2_36_x86_64", "https://m", fetch)
    assert p.sha256 is None and "no sha256" in p.note

    def unreadable(url):
        raise OSError("HTTP 503")
    q = cl.hash_pin("six", "1.16.0", "3.11", "manylinux_2_36_x86_64", "https://m", unreadable)
    assert q.sha256 is None and "could not be read" in q.note and "HTTP 503" in q.note


def test_an_html_simple_page_gives_the_hashes_of_its_url_fragments():
    # the shape of download.pytorch.org/whl/cu118/torch/ (PEP 503)
    page = cl.simple_html(
        '<html><body><a href="/whl/cu118/torch-2.3.1%2Bcu118-cp311-cp311-linux_x86_64.whl'
        '#sha256=' + "ab" * 32 + '">torch-2.3.1+cu118-cp311-cp311-linux_x86_64.whl</a><br/>'
        '<a href="torch-2.3.1%2Bcu118-cp312-cp312-linux_x86_64.whl">no hash</a></body></html>')
    p = cl.hash_pin("torch", "2.3.1+cu118", "3.11", "manylinux_2_36_x86_64",
                    "https://download.pytorch.org/whl/cu118", lambda url: page)
    assert p.sha256 == "ab" * 32 and p.file == "torch-2.3.1+cu118-cp311-cp311-linux_x86_64.whl"
    q = cl.hash_pin("torch", "2.3.1+cu118", "3.12", "manylinux_2_36_x86_64", "https://x",
                    lambda url: page)
    assert q.sha256 is None and "no sha256" in q.note


# ---- the resolver edge, with a stand-in uv ----------------------------------------------

def fake_uv(tmp_path: Path, out: str, err: str = "", code: int = 0) -> str:
    script = tmp_path / "uv"
    script.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'uv 9.9.9'; exit 0; fi\n"
                      f"cat <<'EOF'\n{out}\nEOF\ncat >&2 <<'EOF'\n{err}\nEOF\nexit {code}\n")
    script.chmod(0o755)
    return str(script)


def test_uv_output_becomes_exact_pins(tmp_path):
    uv = fake_uv(tmp_path, "six==1.16.0\nnumpy==2.1.0 ; python_version >= '3.10'\n")
    pins, version = cl.compile_pins(cl.inputs_for(stack()), uv)
    assert pins == {"six": "1.16.0", "numpy": "2.1.0"} and version == "uv 9.9.9"


def test_a_package_built_from_source_is_the_only_one_uv_may_take_as_an_sdist(tmp_path):
    """DeepSpeed has no Linux wheel: uv reads its sdist's metadata (--no-binary deepspeed)
    while every other package stays --only-binary; only such a stack's key gains the field."""
    argv = tmp_path / "argv"
    uv = fake_uv(tmp_path, "deepspeed==0.19.8")
    Path(uv).write_text(Path(uv).read_text().replace(
        "cat <<'EOF'", f"printf '%s\\n' \"$@\" > {argv}\ncat <<'EOF'", 1))
    ds = cl.inputs_for(stack("deepspeed-cu121"))
    assert ds["from_source"] == ["deepspeed"] and "from_source" not in cl.inputs_for(stack())
    cl.compile_pins(ds, uv)
    args = argv.read_text().split("\n")
    i = args.index("--no-binary")
    assert args[i + 1] == "deepspeed" and args.count("--no-binary") == 1
    assert args[args.index("--only-binary") + 1] == ":all:"


def test_an_extra_is_resolved_with_its_package_and_only_that_stack_key_changes():
    """nemo-toolkit[asr]==V: the extra's dependencies are in the hash-pinned closure; the
    base closure's fsspec is left for uv to resolve anew (lightning 2.4.0 excludes it)."""
    nemo = stack("nemo-cu128")
    inputs = cl.inputs_for(nemo)
    assert f"nemo-toolkit[asr]=={nemo.version}" in inputs["requirements"]
    assert not any(r.startswith("nemo-toolkit==") for r in inputs["requirements"])
    assert not any(c.startswith("fsspec==") for c in inputs["constraints"])
    assert any(c.startswith("torch==") for c in inputs["constraints"])   # the base's held
    assert dict(nemo.extras) == {"nemo-toolkit": "asr"} and nemo.unpinned == ("fsspec",)
    for plain in ("pytorch-cu128", "transformers-cu128", "deepspeed-cu121"):
        data = stack(plain).to_json()
        assert "extras" not in data and "unpinned" not in data, plain
        assert not any("[" in r for r in cl.inputs_for(stack(plain))["requirements"])
    # Lightning unpins packaging (2.3 caps it below 25): where the base closure pins none,
    # its closure is the stored one, unchanged
    light = stack("lightning-cu128")
    assert light.unpinned == ("packaging",) and "extras" not in light.to_json()
    assert cl.closure_for(light, resolve=False)[1] == "bundled closure lightning-cu128.json"
    pinned = cl.closure_for(nemo, resolve=False)[0]   # the bundled closure has the extra's
    assert {"lightning", "hydra-core", "antlr4-python3-runtime"} <= {p.name for p in
                                                                     pinned.pins}


def test_no_solution_is_unsatisfiable_and_a_network_failure_is_the_environment(tmp_path):
    with pytest.raises(Unsatisfiable, match="No solution found"):
        cl.compile_pins(cl.inputs_for(stack()),
                        fake_uv(tmp_path, "", "× No solution found when resolving", 1))
    with pytest.raises(EnvironmentMissing, match="could not resolve"):
        cl.compile_pins(cl.inputs_for(stack()),
                        fake_uv(tmp_path, "", "error: Failed to fetch: pypi.org", 2))


def test_a_line_uv_should_never_print_is_refused(tmp_path):
    with pytest.raises(EnvironmentMissing, match="cannot read"):
        cl.compile_pins(cl.inputs_for(stack()), fake_uv(tmp_path, "-e git+https://x/y\n"))


# ---- the real resolver --------------------------------------------------------------------

@pytest.mark.network
def test_uv_resolves_the_full_hash_pinned_closure_of_pytorch_cu121_from_pypi():
    if os.environ.get("ENVGEN_OFFLINE"):
        pytest.skip("ENVGEN_OFFLINE is set")
    st = stack()
    c = cl.resolve_closure(st)
    versions = {p.name: p.version for p in c.pins}
    for name, version in st.pip_packages.items():
        assert versions[name] == version
    # the transitive ones the matrix does not name are pinned too, on the stack's CUDA line
    assert {"sympy", "networkx", "filelock", "triton", "pip", "setuptools"} <= set(versions)
    assert versions["nvidia-nvjitlink-cu12"].startswith("12.1.")
    assert all(isinstance(p, Pin) and p.sha256 and p.file for p in c.pins)
    bundled = cl.load_closure(cl.bundled_dir() / "pytorch-cu121.json")
    assert c.key == bundled.key


def test_an_addon_has_stacks_only_where_one_of_its_releases_admits_the_base():
    names = M.stack_names()
    assert {"nemo-cu124", "nemo-cu128", "nemo-cu132"} <= set(names)
    assert "nemo-cu121" not in names and "nemo-cu117" not in names   # torch>=2.6: none
    assert {"lightning-cu117", "deepspeed-cu117", "pytorch-cu121"} <= set(names)


def test_a_stack_round_trips_its_extras_and_unpinned_pins():
    from envgen.core.model import Stack
    from envgen.matrix.wire import stack_problems
    nemo = stack("nemo-cu126")
    data = json.loads(json.dumps(nemo.to_json()))
    assert stack_problems(data) == [] and Stack.from_json(data).to_json() == data
    assert data["extras"] == {"nemo-toolkit": "asr"} and data["unpinned"] == ["fsspec"]


def test_a_lightning_range_nemo_excludes_is_refused_in_one_sentence(capsys):
    from envgen.cli import main
    assert main(["resolve", "nemo,lightning>=2.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no lightning release matching >=2.5 agrees with nemo 3.0.0" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1
