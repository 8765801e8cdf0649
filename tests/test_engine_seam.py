"""The engine seam (runtime/engine.py): Docker behind the Engine protocol, over the one
fake daemon of the unit tests; engine_for picks Apptainer for a SIF file."""
import json

import pytest
from fakes import FakeContainer, FakeDocker, FakeImage
from test_verify import stack  # noqa: F401  (a fixture)

from envgen.core.errors import InputError
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
