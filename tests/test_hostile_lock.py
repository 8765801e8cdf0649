"""A lock file comes from pull requests: every value read from it is validated like a
matrix value before anything uses it, and the CLI answers with file:line and exit 2.
A matrix folder's symbolic links are refused, never followed and echoed."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from certificates import made

from envgen.cli import main
from envgen.core.errors import InputError
from envgen.lock.write import read_lock
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

M = load_matrix()
STACK = resolve(M, parse_spec("pytorch-cu121", M), Host()).to_json()
ID = "sha256:" + "a" * 64


def lock_text(**change) -> dict:
    entry = {"stack": copy.deepcopy(STACK),
             "image": {"tag": "envgen/pytorch-cu121:2.4.1", "id": ID, "repo_digests": [],
                       "pinned": None, "layers": []},
             "base": {"reference": "envgen/base", "name": None, "id": None},
             "requirements": [{"name": "six", "version": "1.16.0", "file":
                               "six-1.16.0-py2.py3-none-any.whl",
                               "hashes": ["sha256:" + "b" * 64]}],
             "certificate": made(image_id=ID, stack=copy.deepcopy(STACK), gpus=[])}
    return {"lock_version": 1, "created": "2026-12-01T00:00:00Z", "matrix_sha256": "x",
            "stacks": {"pytorch-cu121": entry}}


def write(tmp_path, data) -> Path:
    p = tmp_path / "envgen.lock"
    p.write_text(json.dumps(data, indent=2))
    return p


def test_a_valid_lock_reads(tmp_path):
    assert read_lock(write(tmp_path, lock_text()))["stacks"]


HOSTILE = {
    "stack name that is a path": lambda e: e["stack"].update(stack="../../.."),
    "absolute stack name": lambda e: e["stack"].update(stack="/tmp/x"),
    "suite that is an option": lambda e: e["stack"]["base"].update(suite="--setup-hook=id"),
    "base image with a space": lambda e: e["stack"]["base"].update(image="x y"),
    "python with a newline": lambda e: e["stack"].update(python="3.11\nRUN id"),
    "package version with a shell": lambda e: e["stack"]["packages"].update(torch="$(id)"),
    "index url with a quote": lambda e: e["stack"].update(index_url="https://x/'; id; '"),
    "snapshot that is not a date": lambda e: e["stack"]["base"].update(snapshot="now; id"),
    "image id that is a name": lambda e: e["image"].update(id="../etc"),
    "tag with a space": lambda e: e["image"].update(tag="a b"),
    "pinned that is not a digest": lambda e: e["image"].update(pinned="x@sha256:123"),
    "a zero-length hash": lambda e: e["requirements"][0].update(hashes=["sha256:"]),
    "a requirement name with a semicolon": lambda e: e["requirements"][0].update(
        name="six;id"),
    "a certificate for nothing": lambda e: e["certificate"].update(image_id=7),
    "a reason with a newline": lambda e: e["stack"]["reasons"].append("a\nb"),
    # a source build's variables reach a RUN line
    "a build variable with a shell": lambda e: e["stack"].update(from_source={
        "packages": ["deepspeed"], "env": {"DS_BUILD_OPS": "0; id"}}),
    "a build variable named as an option": lambda e: e["stack"].update(from_source={
        "packages": ["deepspeed"], "env": {"--x": "0"}}),
    "a source build of an option": lambda e: e["stack"].update(from_source={
        "packages": ["--index-url=https://x"], "env": {}}),
    "a source build that is not an object": lambda e: e["stack"].update(from_source="all"),
    # an extra becomes part of a requirement uv and pip read: nemo-toolkit[asr]==3.0.0
    "an extra with a bracket": lambda e: e["stack"].update(extras={"torch": "asr]==1; x"}),
    "an extra named as an option": lambda e: e["stack"].update(extras={"torch": "--pre"}),
    "an extra in capitals": lambda e: e["stack"].update(extras={"torch": "ASR"}),
    "an extra too long": lambda e: e["stack"].update(extras={"torch": "a" * 41}),
    "extras that are a list": lambda e: e["stack"].update(extras=["asr"]),
    "an extra of an option": lambda e: e["stack"].update(extras={"--index-url": "asr"}),
    "an unpinned name with a shell": lambda e: e["stack"].update(unpinned=["fsspec;id"]),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_lock_value_is_refused_with_file_and_line(tmp_path, case, capsys):
    data = lock_text()
    HOSTILE[case](data["stacks"]["pytorch-cu121"])
    path = write(tmp_path, data)
    with pytest.raises(InputError) as e:
        read_lock(path)
    line = path.read_text().splitlines().index('    "pytorch-cu121": {') + 1
    assert e.value.file == str(path) and e.value.line == line  # the entry's line
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["verify", str(path), "--rebuild"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}:" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing written"


def test_a_hostile_entry_name_is_refused(tmp_path):
    data = lock_text()
    data["stacks"]["../x"] = data["stacks"].pop("pytorch-cu121")
    with pytest.raises(InputError, match="plain name"):
        read_lock(write(tmp_path, data))


def test_a_lock_that_is_a_symlink_is_refused(tmp_path):
    target = write(tmp_path, lock_text())
    link = tmp_path / "link.lock"
    link.symlink_to(target)
    with pytest.raises(InputError, match="symbolic link"):
        read_lock(link)


def test_a_symlink_in_a_matrix_folder_is_refused_and_its_target_never_printed(tmp_path,
                                                                             capsys):
    folder = tmp_path / "m"
    folder.mkdir()
    for f in Path(M.files[0]).parent.glob("*.yaml") if hasattr(M, "files") else \
            (Path(__file__).resolve().parents[1] / "matrices").glob("*.yaml"):
        (folder / f.name).write_text(f.read_text())
    secret = tmp_path / "secret"
    secret.write_text("root:$6$very-secret-hash:19000:0:99999:7:::\n")
    (folder / "x.yaml").symlink_to(secret)
    assert main(["--matrix", str(folder), "matrix", "validate"]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "very-secret-hash" not in err


@pytest.mark.parametrize("change, words", [
    (dict(created="9999-01-01T00:00:00Z"), "after this host's clock"),
    (dict(exit_code=1), "claims a pass but the payload exited 1"),
    (dict(gpus=["H200\x1b]52;c;eA==\x07"]), "gpus summary"),
])
def test_a_certificate_in_a_lock_is_judged_as_every_door_judges_it(tmp_path, change, words):
    data = lock_text()
    data["stacks"]["pytorch-cu121"]["certificate"].update(change)
    with pytest.raises(InputError, match=re.escape(words)):
        read_lock(write(tmp_path, data))
