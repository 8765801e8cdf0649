"""The engine seam (runtime/engine.py): Docker behind the Engine protocol, over the one
fake daemon of the unit tests; engine_for picks Apptainer for a SIF file. The build wing
builds through the engine it is given (a fake one, Docker's classic builder); Apptainer
builds nothing."""
import json
import os

import pytest
from fakes import FakeContainer, FakeDocker, FakeEngine, FakeImage
from test_verify import stack  # noqa: F401  (a fixture)

from envgen.core.errors import BuildFailed, InputError
from envgen.runtime.docker import content_of
from envgen.runtime.engine import ApptainerEngine, DockerEngine, engine_for

ID = "sha256:" + "ab" * 32


def test_docker_behind_the_seam_inspects_runs_tags_and_removes(stack):  # noqa: F811
    img = FakeImage(ID, ["envgen/x:1"], {"io.envgen.stack": json.dumps(stack.to_json())})
    ct = FakeContainer({"passed": True})
    c = FakeDocker(img, container=ct, info={"ServerVersion": "20.10.24",
                                            "DefaultRuntime": "runc", "KernelVersion": "6.1"})
    e = engine_for("envgen/x:1", client=c)
    assert isinstance(e, DockerEngine) and e.name == "docker"
    t = e.inspect("envgen/x:1")
    assert t.image_id == ID and t.stack.stack == stack.stack
    assert t.content == content_of(img.attrs)
    code, out, _ = e.run(ID, ["python", "-V"], 60, labels={"io.envgen.test": "1"})
    assert code == 0 and json.loads(out)["passed"] and ct.started and ct.removed
    assert c.create_kwargs["labels"]["io.envgen.test"] == "1"
    e.tag(ID, "envgen/x:2")
    assert "envgen/x:2" in c.images.get(ID).tags
    e.remove("envgen/x:2")
    assert "envgen/x:2" not in c.images.get(ID).tags
    assert e.host() == {"docker": "20.10.24", "runtime": "runc", "kernel": "6.1"}
    with pytest.raises(InputError, match="no image"):
        e.inspect("envgen/none:1")


def test_a_sif_goes_to_apptainer_which_neither_tags_nor_deletes(tmp_path):
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"not really")
    e = engine_for(str(sif))
    assert isinstance(e, ApptainerEngine) and e.name == "apptainer"
    with pytest.raises(InputError):
        e.tag("sha256:" + "0" * 64, "x:1")
    with pytest.raises(InputError):
        e.remove(str(sif))
    assert sif.exists()


# ---- building behind the seam ------------------------------------------------------------

BUILT = "sha256:" + "cd" * 32


@pytest.fixture
def arm(tmp_path, monkeypatch):
    """An arm64 stack whose local base this daemon has, ENVGEN_HOME a fresh folder."""
    from envgen.matrix import load_matrix
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    m = load_matrix()
    return resolve(m, parse_spec("pytorch-cpu-arm64", m))


def _build(st, engine, c, **kw):
    from envgen.build.buildkit import build
    from envgen.resolve.closure import closure_for
    said = []
    res = build(st, tag="envgen-test/arm:1", progress=said.append, client=c, engine=engine,
                closure=closure_for(st, resolve=False)[0], **kw)
    return res, said


def test_the_build_wing_builds_through_the_engine_it_is_given(arm, tmp_path, monkeypatch):
    from envgen.core import home
    from envgen.resolve.closure import CA_BUNDLE
    netrc = tmp_path / "netrc"
    monkeypatch.setenv("ENVGEN_NETRC", str(netrc))
    monkeypatch.setenv("ENVGEN_BUILD_NETWORK", "host")
    c = FakeDocker(FakeImage(arm.base.local_tag, [arm.base.local_tag]),
                   FakeImage(BUILT, layers=["sha256:" + "1" * 64]))
    e = FakeEngine(built=BUILT, build_lines=[
        "#7 [stage-0 3/8] RUN --mount=type=bind,source=install/3-framework,target=/i x\n",
        None, "#7 DONE 4.4s\n"])
    res, said = _build(arm, e, c)
    (call,) = e.builds
    ctx = home.contexts_dir() / arm.stack
    assert call["context"] == ctx and (ctx / "Dockerfile").is_file()
    assert call["platform"] == "linux/arm64" and call["builder"] == "auto"
    # no shared `.STACK.iid` beside the context: two builds of one stack would overwrite
    # each other's; the engine keeps a private file per build (test_build_review.py)
    assert call.get("iidfile") is None
    assert call["secrets"] == ((("ca", CA_BUNDLE),) if os.path.exists(CA_BUNDLE) else ()) \
        + (("netrc", str(netrc)),)
    assert call["network"] == "host" and call["no_cache"] is False
    assert call["log"] == res.log and "3-framework" in open(res.log).read()
    assert (res.image_id, res.builder, res.layers) == (BUILT, "fake builder",
                                                        ("sha256:" + "1" * 64,))
    assert "envgen-test/arm:1" in c.images.get(BUILT).tags
    assert any("framework" in str(s) for s in said)


def test_a_failed_build_is_told_in_the_build_wings_words(arm):
    c = FakeDocker(FakeImage(arm.base.local_tag, [arm.base.local_tag]))
    e = FakeEngine(built=None, build_lines=[
        "#9 [stage-0 5/8] RUN --mount=type=bind,source=install/3-framework,target=/i x\n",
        "#9 ERROR: process did not complete successfully: exit code: 1\n"])
    with pytest.raises(BuildFailed, match=r"build failed at #9 \[stage-0 5/8\].*the log is"):
        _build(arm, e, c)


def test_docker_builds_with_the_classic_builder_when_asked(arm):
    c = FakeDocker(FakeImage(arm.base.local_tag, [arm.base.local_tag]), FakeImage(BUILT),
                   build=[{"stream": "Step 1/8 : FROM x\n"}, {"aux": {"ID": BUILT}}])
    res, said = _build(arm, DockerEngine(c), c, builder="classic", tag_it=False)
    assert (res.image_id, res.builder) == (BUILT, "docker SDK classic builder")
    assert c.api.build_kwargs["platform"] == "linux/arm64"
    assert c.api.build_kwargs["dockerfile"] == "Dockerfile"
    assert any(s.startswith("no BuildKit") for s in said)
    assert any(s.startswith("Step 1/8 : FROM x [") for s in said)
    c.api.build_chunks = [{"error": "boom"}]
    with pytest.raises(BuildFailed, match="build failed: boom; the log is"):
        _build(arm, DockerEngine(c), c, builder="classic")


def test_apptainer_builds_nothing(tmp_path):
    e = ApptainerEngine()
    with pytest.raises(InputError, match="envgen sif"):
        e.build(tmp_path)
    with pytest.raises(InputError, match="envgen sif"):
        e.builder("auto")
