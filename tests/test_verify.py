"""envgen verify: drift against envgen.lock. Fakes for the daemon, plus one real run that
builds two tiny images (six 1.16.0, then 1.17.0 under the same tag) on the local base."""
import json
import os
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from certificates import made
from test_lock import FakeClient, FakeImage, entry, image_of

from envgen.cli import main
from envgen.core.errors import CheckFailed
from envgen.lock import verify as vf
from envgen.lock import write as lk
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import resolve

MINI = Path(__file__).resolve().parent / "fixtures" / "mini.yaml"
PINNED = "sha256:" + "1" * 64


def _mini_stack():
    m = load_matrix(MINI)
    return resolve(m, parse_spec("pytorch-cu121", m))


# a pass of the stack the entries pin, on a GPU: what verify takes as certified
PASSED = {"passed": True, "level": "cuda", "created": "2026-11-30T08:00:00Z",
          "stack": _mini_stack().to_json()}


@pytest.fixture(scope="module")
def stack():
    return _mini_stack()


def probe_of(packages):
    return lambda c, ref: lk.Probe(python="3.11", packages=packages)


def lock_of(stack, **entries):
    return {"lock_version": 1, "created": "x", "matrix_sha256": "y", "stacks": entries}


def kinds(result, name="pytorch-cu121"):
    return [d["kind"] for d in result["stacks"][name]["drift"]]


def test_package_drift_reports_changed_added_and_removed_with_versions():
    locked = [{"name": "six", "version": "1.16.0", "hashes": []},
              {"name": "Jinja2", "version": "3.1.4", "hashes": []}]
    drift = vf.package_drift(locked, {"six": "1.17.0", "jinja2": "3.1.4", "idna": "3.10"})
    assert [(d["kind"], d["package"], d["old"], d["new"]) for d in drift] == [
        ("package-added", "idna", None, "3.10"),
        ("package-changed", "six", "1.16.0", "1.17.0")]
    assert drift[1]["message"] == "six 1.16.0 → 1.17.0"
    drift = vf.package_drift(locked, {"six": "1.16.0"})
    assert drift[0]["kind"] == "package-removed" and drift[0]["package"] == "Jinja2"


def test_verify_passes_when_image_id_certificate_and_packages_match(stack):
    e = entry(stack)
    e["image"]["tag"] = "envgen/pytorch-cu121:2.3.1-py3.11"
    c = FakeClient(image_of(stack))
    r = vf.verify(c, lock_of(stack, **{"pytorch-cu121": e}),
                  probe=probe_of({"six": "1.16.0"}), cert_for=lambda i: PASSED)
    assert r["ok"] and r["stacks"] == {"pytorch-cu121": {"ok": True, "drift": [],
                                                         "pulled": False}}
    assert any("base.id" in s for s in r["not_checked"]), "says what it does not check"


def test_verify_catches_a_retagged_image_and_its_package_change(stack):
    e = entry(stack)
    e["image"]["tag"] = "envgen/pytorch-cu121:2.3.1-py3.11"
    c = FakeClient(image_of(stack, image_id="sha256:" + "9" * 64))
    r = vf.verify(c, lock_of(stack, **{"pytorch-cu121": e}),
                  probe=probe_of({"six": "1.17.0"}), cert_for=lambda i: PASSED)
    assert not r["ok"]
    assert kinds(r) == ["image-id", "package-changed"]


def test_verify_reports_a_missing_image_and_no_certificate(stack):
    r = vf.verify(FakeClient(), lock_of(stack, **{"pytorch-cu121": entry(stack)}),
                  probe=probe_of({}), cert_for=lambda i: None)
    assert kinds(r) == ["missing-image", "certificate"]
    assert "no certificate for the pinned image" in r["stacks"]["pytorch-cu121"]["drift"][1][
        "message"]


def test_verify_reports_a_failed_certificate_and_a_lost_tag(stack):
    c = FakeClient(FakeImage(PINNED, [], {}))
    r = vf.verify(c, lock_of(stack, **{"pytorch-cu121": entry(stack)}),
                  probe=probe_of({"six": "1.16.0"}), cert_for=lambda i: {**PASSED,
                                                                           "passed": False})
    assert kinds(r) == ["tag-missing", "certificate"]
    assert "failed" in r["stacks"]["pytorch-cu121"]["drift"][1]["message"]


def test_verify_reports_when_packages_cannot_be_listed(stack):
    def broken(c, ref):
        raise CheckFailed("cannot list the packages in x: python exited 127")
    c = FakeClient(FakeImage(PINNED, ["t:1"], {}))
    r = vf.verify(c, lock_of(stack, **{"pytorch-cu121": entry(stack)}), probe=broken,
                  cert_for=lambda i: PASSED)
    assert kinds(r) == ["probe-failed"]


def test_verify_rebuild_compares_the_rebuilt_packages_and_removes_its_tag(stack):
    c = FakeClient(FakeImage(PINNED, ["t:1"], {}))
    built = []

    def rebuild(st, tag, closure):
        built.append((st.stack, tag))
        c.images.add(FakeImage("sha256:" + "7" * 64, [tag], {}))
        return "sha256:" + "7" * 64, ["sha256:" + "9" * 64]

    def probe(c, ref):
        return lk.Probe("3.11", {"six": "1.17.0" if ref.endswith("7" * 64) else "1.16.0"})
    r = vf.verify(c, lock_of(stack, **{"pytorch-cu121": entry(stack)}), probe=probe,
                  cert_for=lambda i: PASSED, rebuild=rebuild)
    assert built == [("pytorch-cu121", "envgen-verify/pytorch-cu121:rebuild")]
    assert kinds(r) == ["rebuild-package-changed"]
    assert c.images.removed == ["envgen-verify/pytorch-cu121:rebuild"]
    # an entry named in capitals still gets a tag a daemon takes (a repository is lowercase)
    c.images.removed.clear()
    vf.verify_stack(c, "PyTorch-cu121", entry(stack), probe=probe, cert_for=lambda i: PASSED,
                    rebuild=rebuild)
    assert c.images.removed == ["envgen-verify/pytorch-cu121:rebuild"]


def test_a_rebuild_that_gives_back_the_pinned_image_does_not_delete_it(stack):
    """With a warm cache the rebuild is the lock's own image: when that image had no other
    name (its tag gone or moved), removing the rebuild's tag deleted the pinned image."""
    c = FakeClient(FakeImage(PINNED, [], {}))

    def rebuild(st, tag, closure):
        c.images.get(PINNED).attrs["RepoTags"].append(tag)   # build() tags what it built
        return PINNED, ["sha256:" + "9" * 64]
    vf.verify_stack(c, "pytorch-cu121", entry(stack), probe=probe_of({}),
                    cert_for=lambda i: PASSED, rebuild=rebuild)
    assert c.images.get(PINNED) and c.images.removed == []
    # with another name too, only the rebuild's tag goes
    c.images.get(PINNED).attrs["RepoTags"][:] = ["team/x:1"]
    vf.verify_stack(c, "pytorch-cu121", entry(stack), probe=probe_of({}),
                    cert_for=lambda i: PASSED, rebuild=rebuild)
    assert c.images.get(PINNED).tags == ["team/x:1"]


# ---- the real daemon -----------------------------------------------------------------------

def _client_or_none():
    if not os.path.exists("/var/run/docker.sock"):
        return None
    try:
        from envgen.runtime import docker as engine
        return engine.client()
    except Exception:
        return None


def _local_base(c):
    tags = [t for img in c.images.list("envgen/base") for t in img.tags
            if t.startswith("envgen/base:debian-bookworm-")]
    return tags[0] if tags else None


DOCKERFILE = """\
FROM {base}
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=secret,id=ca \\
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \\
 && pip install --no-cache-dir --progress-bar off six=={six}
"""


def _build_tiny(base: str, tag: str, six: str, stack_json: str) -> str:
    from envgen.runtime import docker as engine
    cli = engine.buildkit_cli()
    if cli is None:
        pytest.skip("no docker CLI that can build with BuildKit")
    with tempfile.TemporaryDirectory() as ctx, tempfile.TemporaryDirectory() as out:
        Path(ctx, "Dockerfile").write_text(DOCKERFILE.format(base=base, six=six))
        iid = Path(out, "iid")
        r = subprocess.run([*cli.argv, "--secret",
                            "id=ca,src=/etc/ssl/certs/ca-certificates.crt",
                            "--label", f"io.envgen.stack={stack_json}", "--iidfile", str(iid),
                            "-t", tag, ctx], capture_output=True, text=True, timeout=600,
                           env={**os.environ, **dict(cli.env)}, check=False)
        if r.returncode != 0:
            pytest.skip(f"cannot build the tiny image (network?): {r.stderr[-300:]}")
        return iid.read_text().strip()


@pytest.mark.docker
@pytest.mark.network
def test_verify_catches_a_package_changed_inside_a_pinned_image(tmp_path, monkeypatch,
                                                                capsys, stack):
    c = _client_or_none()
    if c is None:
        pytest.skip("no Docker daemon answers")
    base = _local_base(c)
    if base is None:
        pytest.skip("no local envgen/base:debian-bookworm-* image (run `envgen build` once)")
    from envgen.certs import store as certs
    from envgen.runtime.docker import remove_image
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    name = f"verify-test-{uuid.uuid4().hex[:8]}"
    st = stack.replace(stack=name)
    tag = f"envgen-test/{name}:1"
    stack_json = json.dumps(st.to_json(), sort_keys=True, separators=(",", ":"))
    ids = []
    try:
        ids.append(_build_tiny(base, tag, "1.16.0", stack_json))
        # a pass on a GPU (the real H200 run's record): a CUDA stack needs one
        certs.save(made(image_id=ids[0], tags=[tag], stack=st.to_json(),
                        created="2026-11-30T08:00:00Z"))
        lock = tmp_path / "envgen.lock"
        assert main(["lock", tag, "-o", str(lock), "--json"]) == 0
        capsys.readouterr()
        e = lk.read_lock(lock)["stacks"][name]
        six = next(r for r in e["requirements"] if r["name"] == "six")
        assert six["version"] == "1.16.0"
        assert six["file"] == "six-1.16.0-py2.py3-none-any.whl"
        assert six["hashes"] == [("sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f"
                                 "8aa26e0254")]
        assert e["image"]["id"] == ids[0] and e["certificate"]["passed"] is True
        assert e["base"]["name"] is None     # the tiny image carries no base label

        assert main(["verify", str(lock)]) == 0
        capsys.readouterr()

        ids.append(_build_tiny(base, tag, "1.17.0", stack_json))
        assert main(["verify", str(lock), "--json"]) == 1
        r = json.loads(capsys.readouterr().out)
        drift = r["stacks"][name]["drift"]
        assert not r["ok"]
        assert {"kind": "package-changed", "message": "six 1.16.0 → 1.17.0", "package": "six",
                "old": "1.16.0", "new": "1.17.0"} in drift
        assert any(d["kind"] == "image-id" for d in drift)
        assert main(["verify", str(lock)]) == 1
        assert "six 1.16.0 → 1.17.0" in capsys.readouterr().out
    finally:
        remove_image(c, tag)
        for i in ids:
            remove_image(c, i)
    leftovers = c.containers.list(all=True, filters={"label": "io.envgen.probe=1"})
    assert leftovers == []


def test_a_lock_certificate_for_another_image_is_drift(stack):
    e = entry(stack)
    e["certificate"] = {"image_id": "sha256:" + "9" * 64, "passed": True, "level": "cuda"}
    c = FakeClient(FakeImage(PINNED, ["t:1"], {}))
    r = vf.verify(c, lock_of(stack, **{"pytorch-cu121": e}),
                  probe=probe_of({"six": "1.16.0"}), cert_for=lambda i: PASSED)
    assert kinds(r) == ["certificate"]
    assert "not the pinned image" in r["stacks"]["pytorch-cu121"]["drift"][0]["message"]


def test_a_zeroed_hash_in_the_lock_is_drift_against_the_closure_in_the_image(stack):
    e = entry(stack)
    e["requirements"] = [{"name": "six", "version": "1.16.0", "hashes": ["sha256:" + "0" * 64]}]
    e["closure"] = {"key": "k" * 64, "resolver": "uv", "created": "2026-12-01T00:00:00Z"}
    inside = {"closure_version": 1, "stack": "pytorch-cu121", "key": "a" * 64, "inputs": {},
              "resolver": "uv", "created": "2026-12-01T00:00:00Z",
              "packages": [{"name": "six", "version": "1.16.0",
                            "hashes": ["sha256:" + "8" * 64]}]}
    c = FakeClient(FakeImage(PINNED, ["t:1"], {}))
    def probe(c, ref):
        return lk.Probe("3.11", {"six": "1.16.0"}, closure=inside)
    r = vf.verify(c, lock_of(stack, **{"pytorch-cu121": e}), probe=probe,
                  cert_for=lambda i: PASSED)
    assert kinds(r) == ["hash"]


@pytest.mark.parametrize("name", sorted(p.stem for p in (
    Path(__file__).resolve().parents[1] / "matrices" / "closures").glob("*.json")
    if "." not in p.stem))   # a stack's own; NAME.base.json is the stack it is built over
def test_a_rebuild_from_the_lock_renders_byte_for_byte_what_the_build_rendered(name):
    """What `verify --rebuild` hands the build (the label's stack, the lock's closure) must
    render every file the first build rendered, closure.json included: a stored closure
    whose inputs were written in another key order once gave a teammate's rebuild another
    payload layer."""
    from envgen.core.model import Stack
    from envgen.render.views import render_texts
    from envgen.resolve.closure import closure_for
    m = load_matrix()
    st = resolve(m, parse_spec(name, m))
    cl = closure_for(st, resolve=False)[0]
    label = json.loads(json.dumps(st.to_json()))
    entry = {"stack": label, "requirements": [p.to_json() for p in cl.pins],
             "closure": {"key": cl.key, "resolver": cl.resolver, "created": cl.created}}
    first, again = render_texts(st, cl), render_texts(Stack.from_json(label),
                                                      vf.lock_closure(entry))
    assert sorted(first) == sorted(again)
    assert [k for k in first if first[k] != again[k]] == []


def test_a_lock_claiming_another_certified_images_content_borrows_no_pass(stack):
    """The certificate is looked up by the content of the image found here, not by the
    lock's word for it: a lock that copies the content key of an image this host certified
    is drift (image-content, no certificate), with the pass of the real bits still found."""
    from envgen.runtime.docker import content_of
    img = image_of(stack)
    real = content_of(img.attrs)
    other = "sha256:" + "c" * 64
    store = {other: dict(PASSED, image_id="sha256:" + "9" * 64, image_content=other),
             real: dict(PASSED, image_id=PINNED, image_content=real)}

    def cert_for(image_id, content=None):
        return store.get(content) if content else None
    e = entry(stack)
    e["image"]["tag"] = "envgen/pytorch-cu121:2.3.1-py3.11"
    e["image"]["content"] = other
    r = vf.verify(FakeClient(img), lock_of(stack, **{"pytorch-cu121": e}),
                  probe=probe_of({"six": "1.16.0"}), cert_for=cert_for)
    assert kinds(r) == ["image-content", "certificate"], r
    assert r["stacks"]["pytorch-cu121"]["drift"][0]["new"] == real
    # the same certificate embedded in the lock is not taken either
    e["certificate"] = store[other]
    r = vf.verify(FakeClient(img), lock_of(stack, **{"pytorch-cu121": e}),
                  probe=probe_of({"six": "1.16.0"}), cert_for=cert_for)
    assert kinds(r) == ["image-content", "certificate"], r
    # the lock that names the image's own content finds its own pass
    e["image"]["content"], e["certificate"] = real, None
    r = vf.verify(FakeClient(img), lock_of(stack, **{"pytorch-cu121": e}),
                  probe=probe_of({"six": "1.16.0"}), cert_for=cert_for)
    assert r["ok"], r
