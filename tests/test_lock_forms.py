"""The Stack's wire form (matrix/wire.py STACK) and a lock's (lock/read.py LOCK, ENTRY) are
JSON Schemas checked with matrix/forms.py: every field of a lock entry is validated, those
no hand check looked at included, each refusal one sentence at the entry's file:line."""
from __future__ import annotations

import copy

import pytest
from test_hostile_lock import STACK, lock_text, write

from envgen.core.errors import InputError
from envgen.lock.read import ENTRY, LOCK, entry_problems
from envgen.lock.write import read_lock
from envgen.matrix.wire import STACK as STACK_FORM
from envgen.matrix.wire import stack_problems


def _messages(node):
    if isinstance(node, dict):
        if isinstance(node.get("message"), str):
            yield node["message"]
        for v in node.values():
            yield from _messages(v)
    elif isinstance(node, list):
        for v in node:
            yield from _messages(v)


@pytest.mark.parametrize("form", [STACK_FORM, ENTRY, LOCK], ids=["stack", "entry", "lock"])
def test_every_sentence_of_the_forms_is_one_line_that_formats(form):
    for message in _messages(form):
        said = message.format(value="'x'")   # a brace the sentence means is written twice
        assert said and "\n" not in said


HOSTILE = {   # fields no hand-written check read before the schemas
    "a base reference that is an option": (
        lambda e: e["base"].update(reference="--privileged"), "base.reference"),
    "a base id that is not a digest": (lambda e: e["base"].update(id="sha256:1"), "base.id"),
    "a python tag with a shell": (
        lambda e: e.update(python={"version": "3.11.9", "tag": "$(id)"}), "python must be"),
    "a closure resolver that is an option": (
        lambda e: e.update(closure={"key": "a" * 64, "resolver": "--index-url=x",
                                    "created": "2026-12-01T00:00:00Z"}), "closure must be"),
    "an unlocked name that is an option": (lambda e: e.update(unlocked=["--pre"]), "unlocked"),
    "a key no envgen writes": (lambda e: e.update(run="id"), "unknown key 'run'"),
    "an image key no envgen writes": (
        lambda e: e["image"].update(entrypoint="id"), "image: unknown key 'entrypoint'"),
    "a requirement key no envgen writes": (
        lambda e: e["requirements"][0].update(index="https://x"), "requirements[0]"),
    "a requirement file that is an option": (
        lambda e: e["requirements"][0].update(file="--x.whl"), "requirements[0].file"),
    "a stack key no envgen writes": (
        lambda e: e["stack"].update(entrypoint="id"), "stack: unknown key 'entrypoint'"),
    "a stack forward_compat that is a word": (
        lambda e: e["stack"].update(forward_compat="yes"), "stack.forward_compat"),
    "a stack matrix_sha256 that is an option": (
        lambda e: e["stack"].update(matrix_sha256="--x"), "stack.matrix_sha256"),
    "a base cuda_compat that is a word": (
        lambda e: e["stack"]["base"].update(cuda_compat="yes"), "stack.base.cuda_compat"),
    "a build variable value that is an option": (
        lambda e: e["stack"].update(from_source={"packages": ["deepspeed"],
                                                 "env": {"DS_BUILD_OPS": "-x"}}),
        "stack.from_source"),
    "a require_cuda that is an option": (
        lambda e: e["stack"].update(require_cuda="-cuda>=12.1"), "stack.require_cuda"),
    "a repo digest that is an option": (
        lambda e: e["image"].update(repo_digests=["--x@sha256:" + "a" * 64]),
        "image.repo_digests"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_field_no_hand_check_read_is_refused_at_the_entry_line(tmp_path, case):
    change, words = HOSTILE[case]
    data = lock_text()
    change(data["stacks"]["pytorch-cu121"])
    path = write(tmp_path, data)
    with pytest.raises(InputError) as e:
        read_lock(path)
    line = path.read_text().splitlines().index('    "pytorch-cu121": {') + 1
    assert (e.value.file, e.value.line) == (str(path), line)
    assert words in e.value.message and e.value.message.count("\n") == 0, e.value.message


@pytest.mark.parametrize("key, value, words, line", [
    ("created", "--now", "created '--now' is not a time", 3),
    ("matrix_sha256", ["x"], "matrix_sha256 ['x'] is not a sha256", 4),
])
def test_the_lock_heads_are_checked_at_their_line(tmp_path, key, value, words, line):
    data = lock_text()
    data[key] = value
    path = write(tmp_path, data)
    with pytest.raises(InputError) as e:
        read_lock(path)
    assert e.value.line == line and words in e.value.message


def test_when_the_lock_was_updated_is_checked_too(tmp_path):
    data = lock_text()
    data["updated"] = "-1 day"
    path = write(tmp_path, data)
    with pytest.raises(InputError) as e:
        read_lock(path)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if '"updated"' in t)
    assert e.value.line == line and "updated '-1 day' is not a time" in e.value.message


def test_the_entry_and_stack_a_lock_writes_are_the_forms_own():
    entry = lock_text()["stacks"]["pytorch-cu121"]
    entry |= {"python": {"version": "3.11.9", "tag": "cp311-cp311-manylinux_2_36_x86_64"},
              "closure": {"key": "a" * 64, "resolver": "uv 0.9.2, uv pip compile",
                          "created": "2026-12-01T00:00:00Z"}, "unlocked": ["pip"]}
    assert entry_problems("pytorch-cu121", entry) == []
    data = copy.deepcopy(STACK)
    assert stack_problems(data) == []
    data["base"]["arch"] = "arm64"
    assert stack_problems(data) == ["stack.base.arch and stack.platform disagree"]


def test_a_number_in_a_json_form_is_not_called_yaml():
    data = copy.deepcopy(STACK)
    data["python"] = 3.11
    assert stack_problems(data) == ["stack.python is not a Python version"]


def test_a_requirement_missing_a_key_is_said_as_before():
    entry = lock_text()["stacks"]["pytorch-cu121"]
    del entry["requirements"][0]["hashes"]
    assert entry_problems("pytorch-cu121", entry) == [
        "requirements[0] needs 'name', 'version' and 'hashes'"]
    entry["requirements"][0] = {"name": "six", "version": "1.16.0", "hashes": []}
    assert entry_problems("pytorch-cu121", entry) == [
        "requirements[0]: six has no sha256 and no hash_note saying why"]
