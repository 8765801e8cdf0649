"""A rebuild with identical layers is recognised as certified: certificates and locks name
the image's content (its layers and its config without the build's clock) beside its ID, so
an image built again from the same lock, which gets another image ID from the daemon's
clock, is found certified. Old certificates keyed by image ID alone are still found."""
import copy
import json
import subprocess
import tarfile
import time
import uuid

import pytest
from certificates import made
from fakes import FakeDocker as FakeClient
from test_lock import entry, image_of
from test_verify import PASSED, lock_of, probe_of, stack  # noqa: F401  (a fixture)

from envgen.certs import store as certs
from envgen.certs.trust import lock_problem
from envgen.lock import verify as vf
from envgen.lock.read import entry_problems
from envgen.runtime.docker import content_of

LAYERS = ["sha256:" + "a" * 64, "sha256:" + "b" * 64]
FIRST, REBUILT = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def attrs(**over):
    a = {"Id": FIRST, "Created": "2026-12-03T10:00:00.1Z", "Architecture": "amd64",
         "Os": "linux", "RootFS": {"Type": "layers", "Layers": list(LAYERS)},
         "Config": {"User": "envgen", "Env": ["PATH=/usr/bin"], "Cmd": ["python"],
                    "Labels": {"io.envgen.stack": "{}"}, "Image": "sha256:" + "c" * 64,
                    "Hostname": "abc123"},
         "ContainerConfig": {"Hostname": "abc123"}}
    return {**a, **over}


def test_content_ignores_the_clock_and_the_build_container_but_not_the_bits():
    same = attrs(Id=REBUILT, Created="2026-12-04T11:11:11Z",
                 Config={**attrs()["Config"], "Image": "sha256:" + "d" * 64, "Hostname": "x"},
                 ContainerConfig={"Hostname": "x"})
    assert content_of(same) == content_of(attrs())
    assert content_of(attrs(RootFS={"Layers": LAYERS[:1]})) != content_of(attrs())
    env = attrs(Config={**attrs()["Config"], "Env": ["PATH=/bin"]})
    assert content_of(env) != content_of(attrs())
    labels = attrs(Config={**attrs()["Config"], "Labels": {"io.envgen.stack": "[]"}})
    assert content_of(labels) != content_of(attrs())
    assert content_of(attrs(Architecture="arm64")) != content_of(attrs())


def _store_one(tmp_path, monkeypatch, **over):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    cert = made(image_id=FIRST, **over)
    certs.store(cert)
    return cert


def test_a_rebuild_with_the_same_content_is_found_certified(tmp_path, monkeypatch):
    content = content_of(attrs())
    _store_one(tmp_path, monkeypatch, image_content=content)
    assert certs.latest_for(REBUILT) is None            # by image ID alone: another image
    found = certs.latest_for(REBUILT, content)
    assert found is not None and found["image_id"] == FIRST
    assert certs.find(REBUILT, content)["image_id"] == FIRST
    assert certs.latest_for(REBUILT, "sha256:" + "9" * 64) is None


def test_an_old_certificate_without_content_is_still_found_by_image_id(tmp_path, monkeypatch):
    _store_one(tmp_path, monkeypatch)
    assert certs.latest_for(FIRST, content_of(attrs()))["image_id"] == FIRST
    assert certs.latest_for(REBUILT, content_of(attrs())) is None


def test_a_malformed_image_content_is_refused_at_every_door(tmp_path, monkeypatch):
    from envgen.certs.certificate import form_problem
    assert "image_content" in form_problem(made(image_content="sha256:xyz"))
    assert form_problem(made(image_content=content_of(attrs()))) is None


def _rebuilt_image(st, content_attrs):
    img = image_of(st, image_id=REBUILT, tag="t:1")
    img.attrs = {**content_attrs, "RepoTags": img.tags, "RepoDigests": [],
                 "Config": {**content_attrs["Config"], **img.attrs["Config"]}}
    return img


def test_verify_finds_a_rebuild_of_a_certified_lock_certified(stack):  # noqa: F811
    img = _rebuilt_image(stack, attrs())
    e = entry(stack, image_id=FIRST)
    e["image"]["content"] = content_of(img.attrs)
    e["certificate"] = {**PASSED, "image_id": FIRST, "image_content": content_of(img.attrs)}
    r = vf.verify(FakeClient(img), lock_of(stack, **{"pytorch-cu121": e}),
                  probe=probe_of({"six": "1.16.0"}), cert_for=lambda i, c=None: None)
    assert r["ok"], r["stacks"]["pytorch-cu121"]["drift"]
    # the same rebuild against a lock that pins other bits is drift, as before
    e2 = copy.deepcopy(e)
    e2["image"]["content"] = "sha256:" + "9" * 64
    r = vf.verify(FakeClient(img), lock_of(stack, **{"pytorch-cu121": e2}),
                  probe=probe_of({"six": "1.16.0"}), cert_for=lambda i, c=None: None)
    assert "image-id" in [d["kind"] for d in r["stacks"]["pytorch-cu121"]["drift"]]


def test_the_lock_entry_names_the_content_and_takes_a_certificate_of_it(stack):  # noqa: F811
    e = entry(stack)
    e["image"]["content"] = "sha256:" + "e" * 64
    assert entry_problems("pytorch-cu121", e) == []
    e["image"]["content"] = "not a digest"
    assert "image.content must be sha256:<64 hex digits>" in entry_problems("pytorch-cu121", e)
    e = entry(stack, image_id=FIRST)
    e["image"]["content"] = "sha256:" + "e" * 64
    lock = {"stacks": {"pytorch-cu121": e}}
    cert = made(image_id=REBUILT, stack=stack.to_json(), image_content="sha256:" + "e" * 64)
    assert lock_problem(cert, lock) is None
    assert "the lock pins" in lock_problem({**cert, "image_content": None}, lock)


@pytest.mark.docker
def test_two_imports_of_the_same_bits_differ_in_image_id_but_not_in_content(tmp_path):
    """What a cold rebuild does on this daemon: the same layer, another `created`."""
    docker = pytest.importorskip("docker")
    (tmp_path / "hello").write_text("the same bytes\n")
    with tarfile.open(tmp_path / "root.tar", "w") as tar:
        info = tar.gettarinfo(tmp_path / "hello", "hello")
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        with open(tmp_path / "hello", "rb") as f:
            tar.addfile(info, f)
    repo = f"envgen-test-content-{uuid.uuid4().hex[:8]}"
    c = docker.from_env()
    try:
        ids = []
        for n in (1, 2):
            subprocess.run(["docker", "import", "--change", "LABEL io.envgen.test=content",
                            str(tmp_path / "root.tar"), f"{repo}:{n}"], check=True,
                           capture_output=True, timeout=120)
            ids.append(c.images.get(f"{repo}:{n}"))
            time.sleep(1.1)   # the config's `created` has a resolution finer than this
        a, b = ids
        assert a.id != b.id                       # what keyed certificates apart before
        assert a.attrs["RootFS"]["Layers"] == b.attrs["RootFS"]["Layers"]
        assert content_of(a.attrs) == content_of(b.attrs)
        print(json.dumps({"ids": [a.id[:19], b.id[:19]], "content": content_of(a.attrs)}))
    finally:
        for n in (1, 2):
            subprocess.run(["docker", "rmi", f"{repo}:{n}"], capture_output=True,
                           timeout=120)
