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
    data = lock_text()
    data["stacks"]["pytorch-cu121"].update(closure={
        "key": "c" * 64, "resolver": "uv 0.9", "created": "2026-12-01T00:00:00Z",
        "pure_sdists": ["six"]})
    data["stacks"]["pytorch-cu121"]["certificate"].update(gpus=[], driver="580.159.04")
    assert read_lock(write(tmp_path, data))["stacks"]


@pytest.mark.parametrize("key, value", [("created", "x"), ("updated", "yesterday"),
                                        ("created", "2026-99-99T99:99:99Z")])
def test_a_lock_time_that_is_no_time_is_refused_at_its_line(tmp_path, key, value):
    data = lock_text()
    data[key] = value
    path = write(tmp_path, data)
    with pytest.raises(InputError) as e:
        read_lock(path)
    lines = path.read_text().splitlines()
    assert lines[e.value.line - 1].lstrip().startswith(f'"{key}"')
    assert "is not a UTC time" in e.value.message


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
    # the summary a reviewer reads first is the certificate's own record
    "a gpus summary its host record lacks": lambda e: e["certificate"].update(
        gpus=["NVIDIA H200", "NVIDIA H200"]),
    "a driver summary that is a shell": lambda e: e["certificate"].update(driver="$(id)"),
    # a project's closure records, read as a rebuild reads them
    "a kernel_build of no packages": lambda e: e.update(closure={
        "key": "c" * 64, "resolver": "uv 0.9", "created": "2026-12-01T00:00:00Z",
        "kernel_build": {"x": 1}}),
    "pure_sdists naming no pin": lambda e: e.update(closure={
        "key": "c" * 64, "resolver": "uv 0.9", "created": "2026-12-01T00:00:00Z",
        "pure_sdists": ["zz"]}),
    "a resolver with a bidi control": lambda e: e.update(closure={
        "key": "c" * 64, "resolver": "uv \u202e0.9", "created": "2026-12-01T00:00:00Z"}),
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


@pytest.mark.parametrize("spelled, line", [('"matrix_sh\\u0061256"', 5), ('"cr\\u0065ated"', 4)])
def test_a_key_given_twice_under_an_escape_is_told_at_the_escaped_copy(tmp_path, spelled,
                                                                       line):
    d = lock_text()
    text = json.dumps(d, indent=2).splitlines()
    key = json.loads(spelled)
    text.insert(line - 1, f'  {spelled}: "2026-01-01T00:00:00Z",')
    p = tmp_path / "envgen.lock"
    p.write_text("\n".join(text) + "\n")
    with pytest.raises(InputError) as e:
        read_lock(p)
    assert e.value.line == line and f'the key "{key}" is given twice' in e.value.message


def test_the_lines_of_a_locks_stacks_are_found_in_one_walk(tmp_path, monkeypatch):
    """Reading a lock of many stacks walks its text once for their lines (a walk per stack
    made a 7.5 MB lock take minutes, and a lock comes from pull requests)."""
    import envgen.lock.read as rd
    walks = []
    real = rd._keys
    monkeypatch.setattr(rd, "_keys", lambda text: walks.append(1) or real(text))
    d = lock_text()
    entry = d["stacks"].pop("pytorch-cu121")
    for i in range(200):
        d["stacks"][f"s{i:03d}"] = [] if i % 2 else copy.deepcopy(entry)
    p = tmp_path / "envgen.lock"
    p.write_text(json.dumps(d, indent=2))
    with pytest.raises(Exception) as e:
        read_lock(p)
    assert "(and 199 more problem(s))" in str(e.value) and len(walks) == 1
    lines = p.read_text().splitlines()
    said = {x.line for x in e.value.problems}
    assert all(lines[n - 1].lstrip().startswith('"s') for n in said) and len(said) == 200


def test_a_merge_past_the_stacks_a_lock_may_hold_writes_nothing(tmp_path, monkeypatch):
    """`lock --merge` of two big locks: refused before writing (a lock envgen then refused
    to read was written)."""
    import envgen.lock.read as rd
    from envgen.lock.write import write_lock
    monkeypatch.setattr(rd, "MAX_STACKS", 1)
    monkeypatch.setattr("envgen.lock.write.MAX_STACKS", 1)
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    entry = lock_text()["stacks"]["pytorch-cu121"]
    out = tmp_path / "envgen.lock"
    write_lock(out, {"pytorch-cu121": entry}, "y")
    before = out.read_bytes()
    with pytest.raises(InputError, match="would hold 2 stacks, more than the 1"):
        write_lock(out, {"another": entry}, "y")
    assert out.read_bytes() == before
