"""envgen lock: hash pinning, lock-file shape and errors, merging under a file lock (fakes
for Docker and PyPI; the real daemon runs in tests/test_verify.py)."""
import json
import multiprocessing
from pathlib import Path

import pytest
from fakes import FakeDocker, FakeImage  # noqa: F401  (test_verify takes FakeImage from here)

from envgen.cli import main
from envgen.core.errors import InputError
from envgen.lock import write as lk
from envgen.matrix import load_matrix
from envgen.resolve.closure import platform_tags
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import resolve

MINI = Path(__file__).resolve().parent / "fixtures" / "mini.yaml"
SIX_116 = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"


@pytest.fixture(scope="module")
def stack():
    m = load_matrix(MINI)
    return resolve(m, parse_spec("pytorch-cu121", m))


@pytest.fixture(scope="module")
def cu118(stack):
    m = load_matrix(MINI)
    return resolve(m, parse_spec("pytorch-cu118", m))


def probe(packages, direct=None):
    return lk.Probe(python="3.11", packages=packages, tags=platform_tags("3.11"),
                    direct=direct or {})


def index(*files):
    """A fake PEP 691 index: filename → sha256 (None: no hash served)."""
    def fetch(url):
        return {"files": [{"filename": f, "hashes": {"sha256": h} if h else {}}
                          for f, h in files]}
    return fetch


def not_found(url):
    raise LookupError(url)


def unreachable(url):
    raise OSError("timed out")


# ---- hash pinning --------------------------------------------------------------------------

def test_pin_takes_the_hash_of_the_exact_wheel_pip_would_install(stack):
    fetch = index(("six-1.16.0.tar.gz", "aa" * 32), ("six-1.16.0-py2.py3-none-any.whl", SIX_116),
                  ("six-1.17.0-py2.py3-none-any.whl", "bb" * 32))
    e = lk.pin("six", "1.16.0", probe({"six": "1.16.0"}), stack, fetch)
    assert e == {"name": "six", "version": "1.16.0", "hashes": [f"sha256:{SIX_116}"],
                 "file": "six-1.16.0-py2.py3-none-any.whl"}


def test_pin_prefers_the_manylinux_cp311_wheel_over_other_platforms(stack):
    fetch = index(("numpy-2.1.0-cp311-cp311-macosx_14_0_arm64.whl", "11" * 32),
                  ("numpy-2.1.0-cp312-cp312-manylinux_2_17_x86_64.whl", "22" * 32),
                  ("numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                   "33" * 32),
                  ("numpy-2.1.0-cp311-cp311-musllinux_1_1_x86_64.whl", "44" * 32))
    e = lk.pin("numpy", "2.1.0", probe({"numpy": "2.1.0"}), stack, fetch)
    assert e["hashes"] == ["sha256:" + "33" * 32]


def test_local_cuda_variant_version_gets_an_empty_hash_list_and_says_why(cu118):
    e = lk.pin("torch", "2.3.1+cu118", probe({"torch": "2.3.1+cu118"}), cu118, not_found)
    assert e["hashes"] == [] and "2.3.1+cu118 is not on PyPI" in e["hash_note"]
    assert "download.pytorch.org/whl/cu118" in e["hash_note"]


def test_package_missing_from_pypi_or_unreachable_index_is_noted_not_fatal(stack):
    e = lk.pin("in-house-lib", "1.0", probe({"in-house-lib": "1.0"}), stack, not_found)
    assert e["hashes"] == [] and "is not on" in e["hash_note"]
    e = lk.pin("six", "1.16.0", probe({"six": "1.16.0"}), stack, unreachable)
    assert e["hashes"] == [] and "could not be read (timed out)" in e["hash_note"]


def test_index_without_a_sha256_is_noted(stack):
    e = lk.pin("six", "1.16.0", probe({}), stack,
               index(("six-1.16.0-py2.py3-none-any.whl", None)))
    assert e["hashes"] == [] and "serves no sha256" in e["hash_note"]


def test_sdist_only_release_pins_the_sdist_hash_with_a_note(stack):
    e = lk.pin("oldpkg", "0.1", probe({}), stack, index(("oldpkg-0.1.tar.gz", "cc" * 32)))
    assert e["hashes"] == ["sha256:" + "cc" * 32] and "sdist" in e["hash_note"]


def test_venv_bootstrap_and_direct_url_installs_are_not_looked_up(stack):
    def boom(url):
        raise AssertionError("must not fetch")
    e = lk.pin("pip", "23.0.1", probe({}), stack, boom)
    assert e["hashes"] == [] and "python -m venv" in e["hash_note"]
    e = lk.pin("mylib", "0.3", probe({}, {"mylib": "file:///src/mylib"}), stack, boom)
    assert "installed from file:///src/mylib" in e["hash_note"]


def test_requirements_are_sorted_and_each_has_hashes_or_a_note(stack):
    p = probe({"six": "1.16.0", "Jinja2": "3.1.4", "pip": "23.0.1"})
    reqs = lk.requirements(p, stack, fetch=index(("six-1.16.0-py2.py3-none-any.whl",
                                                  SIX_116)))
    assert [r["name"] for r in reqs] == ["Jinja2", "pip", "six"]
    assert all(r["hashes"] or r.get("hash_note") for r in reqs)


# ---- lock entries from (fake) images ----------------------------------------------------------

def FakeClient(*images):
    """A daemon holding `images` (tests/fakes.py)."""
    return FakeDocker(*images)


def image_of(stack, image_id="sha256:" + "1" * 64, tag="envgen/pytorch-cu121:2.3.1-py3.11"):
    labels = {"io.envgen.stack": json.dumps(stack.to_json()),
              "org.opencontainers.image.base.name": "envgen/base:debian-bookworm-abc"}
    return FakeImage(image_id, [tag], labels)


CERT = {"image_id": "sha256:" + "1" * 64, "level": "gpu", "passed": True,
        "created": "2026-11-30T08:00:00Z",
        "host": {"driver": "580.95.05", "gpus": [{"name": "NVIDIA H200"}]}}


def test_lock_entry_records_image_base_packages_and_certificate(stack):
    base = FakeImage("sha256:" + "b" * 64, ["envgen/base:debian-bookworm-abc"], {})
    c = FakeClient(image_of(stack), base)
    name, e = lk.lock_entry(c, "envgen/pytorch-cu121:2.3.1-py3.11",
                            probe=lambda c, ref: probe({"six": "1.16.0"}),
                            fetch=index(("six-1.16.0-py2.py3-none-any.whl", SIX_116)),
                            cert_for=lambda i, content=None: CERT)
    assert name == "pytorch-cu121"
    assert e["stack"] == stack.to_json()
    from envgen.runtime.docker import content_of
    assert e["image"] == {"tag": "envgen/pytorch-cu121:2.3.1-py3.11", "id": CERT["image_id"],
                          "repo_digests": [], "pinned": None, "layers": [],
                          "content": content_of(c.images.get(CERT["image_id"]).attrs)}
    assert e["base"] == {"reference": stack.base.reference,
                         "name": "envgen/base:debian-bookworm-abc", "id": base.id}
    assert e["requirements"][0]["hashes"] == [f"sha256:{SIX_116}"]
    summary = {"image_id": CERT["image_id"], "level": "gpu", "passed": True,
               "created": "2026-11-30T08:00:00Z", "gpus": ["NVIDIA H200"],
               "driver": "580.95.05"}
    assert summary.items() <= e["certificate"].items()
    assert e["certificate"]["host"] == CERT["host"], "the whole certificate travels in the lock"


def test_lock_entry_of_an_image_not_built_by_envgen_is_input_error(stack):
    c = FakeClient(FakeImage("sha256:" + "2" * 64, ["debian:12"], {}))
    with pytest.raises(InputError, match="no io.envgen.stack label"):
        lk.lock_entry(c, "debian:12", probe=None, fetch=None, cert_for=lambda i, content=None: None)


def test_default_lock_takes_the_newest_certificate_per_stack_and_skips_deleted_images():
    certs = [{"image_id": "sha256:new", "stack": {"stack": "pytorch-cu121"}},
             {"image_id": "sha256:old", "stack": {"stack": "pytorch-cu121"}},
             {"image_id": "sha256:gone", "stack": {"stack": "pytorch-cu128"}}]
    refs, skipped = lk.certified_images(lambda: certs, exists=lambda i: i != "sha256:gone")
    assert refs == ["sha256:new"]
    assert skipped[0][0] == "pytorch-cu128" and "no longer" in skipped[0][1]


# ---- the lock file -------------------------------------------------------------------------

def entry(stack, image_id="sha256:" + "1" * 64):
    return {"stack": stack.to_json(), "image": {"tag": "t:1", "id": image_id,
                                                "repo_digests": []},
            "base": {"reference": "envgen/base", "name": None, "id": None},
            "requirements": [{"name": "six", "version": "1.16.0", "hashes": [],
                              "hash_note": "test entry"}],
            "certificate": None}


def test_write_lock_merges_named_stacks_into_an_existing_lock(tmp_path, stack):
    path = tmp_path / "envgen.lock"
    first = lk.write_lock(path, {"a": entry(stack.replace(stack="a"))}, "sha-1")
    second = lk.write_lock(path, {"b": entry(stack.replace(stack="b"))}, "sha-2")
    assert set(second["stacks"]) == {"a", "b"}
    assert second["created"] == first["created"] and second["matrix_sha256"] == "sha-2"
    assert lk.read_lock(path)["lock_version"] == 1


def _writer(path, name, stack_json):
    from envgen.core.model import Stack
    st = Stack.from_json(stack_json).replace(stack=name)   # an entry is named by its stack
    for _ in range(5):
        lk.write_lock(path, {name: entry(st)}, "sha")


def test_concurrent_lock_writers_never_lose_or_corrupt_stacks(tmp_path, stack):
    path = tmp_path / "envgen.lock"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, f"s{i}", stack.to_json()))
             for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    assert set(lk.read_lock(path)["stacks"]) == {f"s{i}" for i in range(8)}


def test_a_corrupt_lock_is_refused_not_overwritten(tmp_path, stack):
    path = tmp_path / "envgen.lock"
    path.write_text('{"lock_version": 1,\n  "stacks": [\n')
    with pytest.raises(InputError) as e:
        lk.write_lock(path, {"a": entry(stack)}, "sha")
    assert e.value.file == str(path) and e.value.line == 3
    assert path.read_text() == '{"lock_version": 1,\n  "stacks": [\n'


@pytest.mark.parametrize("text,line,words", [
    ('{"lock_version": 1,\n "created": "x",\n "stacks": {,}}', 3, "not a valid lock file"),
    ("[1, 2]", 1, "must be a JSON object"),
    ('{"lock_version": 1, "created": "x", "stacks": {}}', 1, "missing key 'matrix_sha256'"),
    ('{"lock_version": 7,\n "created": "x", "matrix_sha256": "y", "stacks": {}}', 1,
     "lock_version 7 is not supported"),
    (('{"lock_version": 1, "created": "2026-12-01T09:40:00Z", "matrix_sha256": "y",\n'
      ' "stacks": {\n  "pytorch-cu121": {"image": {"id": "x", "tag": "t"}}}}'), 3,
     "stack 'pytorch-cu121': missing key 'stack'"),
])
def test_malformed_lock_is_input_error_with_file_and_line(tmp_path, text, line, words):
    path = tmp_path / "envgen.lock"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        lk.read_lock(path)
    assert e.value.file == str(path) and e.value.line == line and words in e.value.message
    assert e.value.exit_code == 2


def test_lock_entry_with_an_unreadable_stack_names_the_missing_key(tmp_path, stack):
    bad = entry(stack)
    del bad["stack"]["framework"]
    path = tmp_path / "envgen.lock"
    path.write_text(json.dumps({"lock_version": 1, "created": "2026-12-01T09:40:00Z",
                                "matrix_sha256": "y", "stacks": {"a": bad}}, indent=2))
    with pytest.raises(InputError, match="missing key 'stack.framework'"):
        lk.read_lock(path)


def test_cli_verify_of_a_malformed_lock_exits_2_with_file_line_and_no_traceback(tmp_path,
                                                                                capsys):
    path = tmp_path / "envgen.lock"
    path.write_text('{\n  "lock_version": 1,\n  "stacks": {\n')
    assert main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:4:" in err and "Traceback" not in err
    assert main(["verify", str(path), "--json"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == "InputError" and out["line"] == 4


def test_cli_verify_of_a_missing_lock_exits_2(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nope.lock")]) == 2
    assert "no such lock file" in capsys.readouterr().err
