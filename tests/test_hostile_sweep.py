"""What a hostile-input sweep of the lock, the YAML files and the flags found, each now one
sentence with its file:line and exit 2: a lock's key given twice (JSON keeps the last, a
reviewer reads the first), an unknown top-level key, an entry named for another stack, a
package pinned twice or to another package's file, lock_version 1.0, a lock of more stacks
than a verify can check in minutes, a verify of no stack at all; a YAML scalar its tag
cannot hold; a --sources mirror with a login, a bad port, a host that is none, or plain
http. Offline."""
from __future__ import annotations

import json

import pytest
from test_hostile_lock import lock_text, write

from envgen.core.errors import EnvgenError, InputError
from envgen.lock.read import MAX_STACKS, parse_lock
from envgen.lock.write import read_lock


def _twice(text: str, key: str, value: str) -> str:
    at = text.index(f'"{key}"')
    return text[:at] + f'"{key}": {value},\n' + text[at:]


def test_a_key_given_twice_is_refused_at_its_second_line(tmp_path):
    text = json.dumps(lock_text(), indent=2)
    for key, value in (("tag", '"--evil"'), ("lock_version", "1")):
        bad = _twice(text, key, value)
        with pytest.raises(InputError) as e:
            parse_lock(bad, "envgen.lock")
        assert f'the key "{key}" is given twice' in e.value.message
        second = bad.index(f'"{key}"', bad.index(f'"{key}"') + 1)
        assert e.value.line == bad.count("\n", 0, second) + 1


@pytest.mark.parametrize("change,words", [
    (lambda d: d.update(foo=1), "the lock file: unknown key 'foo'"),
    (lambda d: d.update(lock_version=1.0), "lock_version 1.0 is not supported"),
    (lambda d: d["stacks"].update(other=d["stacks"].pop("pytorch-cu121")),
     "the entry holds the stack 'pytorch-cu121', not 'other'"),
    (lambda d: d["stacks"]["pytorch-cu121"]["requirements"].append(
        dict(d["stacks"]["pytorch-cu121"]["requirements"][0], version="1.15.0")),
     "six is pinned twice"),
    (lambda d: d["stacks"]["pytorch-cu121"]["requirements"][0].update(
        file="evil-9.9-py3-none-any.whl"), "is not a file of six"),
    (lambda d: d["stacks"]["pytorch-cu121"]["requirements"][0].update(url="x"),
     "requirements[0]: unknown key 'url'"),
    (lambda d: d["stacks"]["pytorch-cu121"]["image"].update(tag="--foo"),
     "image.tag is not an image tag"),
])
def test_a_lock_that_says_one_thing_and_means_another_is_refused(tmp_path, change, words):
    data = lock_text()
    change(data)
    with pytest.raises(InputError) as e:
        read_lock(write(tmp_path, data))
    assert words in e.value.message, e.value.message
    assert "more problem" not in e.value.message   # one value, one sentence


def test_a_lock_of_more_stacks_than_a_verify_can_check_is_refused_fast(tmp_path):
    import time
    data = lock_text()
    entry = data["stacks"].pop("pytorch-cu121")
    data["stacks"] = {f"s{i}": entry for i in range(MAX_STACKS + 1)}
    path = write(tmp_path, data)
    start = time.monotonic()
    with pytest.raises(InputError, match=f"at most {MAX_STACKS}"):
        read_lock(path)
    assert time.monotonic() - start < 10


def test_a_verify_of_a_lock_with_no_stack_is_not_a_pass(tmp_path, capsys):
    from envgen.cli import main
    data = lock_text()
    data["stacks"] = {}
    path = write(tmp_path, data)
    assert main(["verify", str(path), "--no-pull"]) == 2
    assert "nothing to verify" in capsys.readouterr().err


@pytest.mark.parametrize("value,words", [
    ("!!int abc", "'abc' is not a valid int"), ("!!float x", "'x' is not a valid float"),
    ("2001-13-45", "'2001-13-45' is not a valid timestamp"),
    ("!!timestamp x", "'x' is not a valid timestamp"), ("!!bool maybe", "not a valid bool"),
])
def test_a_yaml_scalar_its_tag_cannot_hold_is_one_sentence(value, words):
    from envgen.matrix.yamlfile import load_text
    with pytest.raises(EnvgenError) as e:
        load_text(f"a: 1\nb: {value}\n", "fleet.yaml")
    assert e.value.exit_code == 2 and words in e.value.message
    assert (e.value.file, e.value.line) == ("fleet.yaml", 2)


@pytest.mark.parametrize("url,words", [
    ("https://user:pw@mirror.example.test/simple", "carries a login"),
    ("https://mirror.example.test:99999/simple", "names a port that is none"),
    ("https://-x/simple", "names no host name"),
    ("http://mirror.example.test/simple", "plain http"),
    ("https://" + "a" * 5000, "must be auto, pypi, index"),
])
def test_a_mirror_that_cannot_be_one_is_refused_at_the_flag(url, words):
    from envgen.matrix import load_matrix
    from envgen.resolve.stack import host_from_flags
    with pytest.raises(InputError) as e:
        host_from_flags(load_matrix(), sources=url)
    assert words in e.value.message and "pw" not in e.value.message


@pytest.mark.parametrize("url", ["https://mirror.example.test/simple",
                                 "http://127.0.0.1:3141/root/pypi/+simple",
                                 "https://[::1]:8443/simple"])
def test_a_mirror_that_is_one_is_taken(url):
    from envgen.matrix import load_matrix
    from envgen.resolve.stack import host_from_flags
    assert host_from_flags(load_matrix(), sources=url).sources == url


def test_a_certificate_store_edited_by_hand_says_what_it_passed_over(tmp_path, monkeypatch,
                                                                     capsys):
    """A file cut short or put there by something else is never read as a certificate,
    and no longer passed over in silence: list names it, show says why it found none."""
    from envgen.cli import main
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / f"{'a' * 64}.json").write_text("{")
    (tmp_path / "certs" / "b.json").write_text("[]")
    assert main(["certs", "list"]) == 0
    err = capsys.readouterr().err
    assert f"{'a' * 64}.json: cannot be read" in err and "b.json: not a certificate" in err
    assert main(["certs", "show", "aaaa"]) == 2
    assert "2 file(s) of the store could not be read" in capsys.readouterr().err


def test_a_fleet_state_file_that_is_not_envgens_is_one_sentence_with_its_line(tmp_path):
    from envgen.fleet.state import TASKS_SCHEMA, read_json
    p = tmp_path / "tasks.json"
    p.write_text('{\n  "tasks": [,]\n}\n')
    with pytest.raises(InputError) as e:
        read_json(p, None, TASKS_SCHEMA)
    assert e.value.line == 2 and "not JSON (" in e.value.message
    p.write_text("[" * 100_000)
    with pytest.raises(InputError, match="nested too deeply"):
        read_json(p, None, TASKS_SCHEMA)
    p.unlink()
    (tmp_path / "elsewhere.json").write_text("{}")
    p.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(InputError, match="a symbolic link"):
        read_json(p, None, TASKS_SCHEMA)


def test_a_lock_problem_is_told_at_its_own_key_not_a_same_named_one_deeper_in(tmp_path):
    """The stacks first and `created` last: its line, not the certificate's "created"."""
    data = lock_text()
    data = {"stacks": data["stacks"], "lock_version": 1, "matrix_sha256": "x",
            "created": "--bad"}
    text = json.dumps(data, indent=2)
    with pytest.raises(InputError) as e:
        parse_lock(text, "envgen.lock")
    assert e.value.line == text.count("\n", 0, text.index('"created": "--bad"')) + 1
    data["created"] = "2026-12-01T00:00:00Z"
    data["stacks"] = {"pytörch": data["stacks"]["pytorch-cu121"]}
    text = json.dumps(data, indent=2, ensure_ascii=False)
    with pytest.raises(InputError) as e:
        parse_lock(text, "envgen.lock")
    assert e.value.line == 2 + 1   # the stack's own line, under "stacks" on line 2


def test_a_private_indexs_login_reaches_the_resolver_through_envgen_netrc(monkeypatch):
    """Logins are refused in URLs; the one place they go is ENVGEN_NETRC, which uv reads
    as NETRC when it resolves (a NETRC of the user's own is left as it is)."""
    from envgen.resolve.closure import _uv_env
    monkeypatch.delenv("NETRC", raising=False)
    monkeypatch.setenv("ENVGEN_NETRC", "/run/secrets/netrc")
    assert _uv_env()["NETRC"] == "/run/secrets/netrc"
    monkeypatch.setenv("NETRC", "/home/me/.netrc")
    assert _uv_env()["NETRC"] == "/home/me/.netrc"


def test_two_projects_pinning_one_version_from_two_files_are_two_closures():
    """The closure a project's render finds is keyed by where its pins' files come from: a
    second project (or a rebuilt wheel) pinning mypkg==1.0 from other bytes rendered the
    first one's sha256 beside the second one's file."""
    from envgen.core.model import ProjectLayer
    from envgen.matrix import load_matrix
    from envgen.resolve.closure import inputs_for, stored_key
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import Host, resolve
    m = load_matrix()
    plain = resolve(m, parse_spec("pytorch-cu121", m), Host())

    def key(**layer):
        st = plain.replace(packages=plain.packages + (("mypkg", "1.0"),),
                           project=ProjectLayer(name="p", pip=(("mypkg", "1.0"),), **layer))
        inputs = inputs_for(st, resolve=False)
        assert "project_sources" not in json.dumps(inputs)   # the closure.json stays as it was
        return stored_key(st, inputs)
    a = key(requirements=(f"mypkg @ file:///a/mypkg-1.0-py3-none-any.whl#sha256={'a' * 64}",))
    b = key(requirements=(f"mypkg @ file:///a/mypkg-1.0-py3-none-any.whl#sha256={'b' * 64}",))
    g = key(requirements=(f"mypkg @ git+https://h.example/r.git@{'c' * 40}",))
    i = key(requirements=("mypkg==1.0",), indexes=("https://pkgs.example.test/simple",))
    plain_pin = key(requirements=("mypkg==1.0",))
    assert len({a, b, g, i, plain_pin}) == 5
    assert plain_pin == key()   # a pin from the stack's own index keeps the key it had


def test_a_file_the_teams_line_names_that_uv_cannot_read_is_bad_input_at_that_line():
    """A wheel whose METADATA names another package, an sdist that is no gzip: exit 2 at
    the team's line, not exit 3 as if the index were away."""
    from envgen.commands.init import _file_sentence
    from envgen.core.errors import EnvironmentMissing
    from envgen.intake.model import Intake, Wanted
    w = Wanted(text="mypkg @ file:///x/mypkg-1.0-py3-none-any.whl#sha256=" + "a" * 64,
               name="mypkg", file="requirements.txt", line=3, kind="path")
    intake = Intake(path="requirements.txt", kind="requirements file", requirements=(w,))
    e = _file_sentence(EnvironmentMissing(
        "uv could not resolve from https://pypi.org/simple: error: Package metadata name "
        "`requests` does not match given name `mypkg`"), intake)
    assert isinstance(e, InputError) and (e.file, e.line) == ("requirements.txt", 3)
    assert "mypkg: the file this line names cannot be used" in e.message
    index = Wanted(text="mypkg==1.0", name="mypkg", file="requirements.txt", line=3)
    assert _file_sentence(EnvironmentMissing("uv could not resolve from x: error: mypkg"),
                          Intake(path="r", kind="k", requirements=(index,))) is None


def test_an_sdist_uv_builds_to_read_writes_nothing_beside_the_team(tmp_path, monkeypatch):
    """uv runs in its throw-away folder (cwd and PWD): what a setup.py it builds writes
    beside itself is removed with that folder, never left in the project."""
    import subprocess

    import envgen.resolve.closure as cl
    seen = {}

    def run(argv, **kw):
        if "compile" in argv:
            seen.update(cwd=kw.get("cwd"), pwd=kw["env"].get("PWD"))
        return subprocess.CompletedProcess(argv, 0, "", "")
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.chdir(tmp_path)
    cl.compile_pins({"requirements": ["x"], "constraints": [], "python": "3.11",
                     "platform": "manylinux_2_36_x86_64", "index_url": None}, uv="uv")
    assert seen["cwd"] == seen["pwd"] and "envgen-closure-" in seen["cwd"]
    assert list(tmp_path.iterdir()) == []


def test_a_git_reference_to_a_commit_the_repo_lacks_says_so(tmp_path, monkeypatch):
    """Before, its files read as missing and the sentence blamed a computed version; a repo
    that is none gave the tail of git's advice ('and the repository exists.')."""

    from envgen.resolve.gitref import archive
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    repo, commit = _git_repo(tmp_path)
    with pytest.raises(InputError) as e:
        archive("g", repo.as_uri(), "f" * 40)
    assert f"has no commit {'f' * 40}" in e.value.message
    with pytest.raises(InputError) as e:
        archive("g", (tmp_path / "nope").as_uri(), "e" * 40)
    assert "git clone failed: fatal:" in e.value.message


@pytest.mark.parametrize("field,value", [
    ("resolver", "uv\n--extra-index-url https://evil.example/simple"),
    ("resolver", "uv\u2028--trusted-host evil.example"),
    ("platform", "manylinux_2_36_x86_64\n-r /etc/passwd"),
    ("hash_note", "none\u2028--index-url https://evil.example/simple\u2028evilpkg==6.6.6"),
    ("hash_note", "none\x85evilpkg==6.6.6"),
])
def test_a_closure_value_that_would_start_a_line_in_requirements_txt_is_refused(field, value):
    """pip reads a requirements file with str.splitlines(): U+2028 and NEL end a line there,
    so a comment carrying one became a live option or package. A closure (a lock's, the
    cache's) is refused; the templates refuse such text too, whatever reaches them."""
    from envgen.resolve.closure import parse_closure
    data = {"closure_version": 1, "key": "f" * 64, "created": "2026-12-01T00:00:00Z",
            "inputs": {"requirements": ["six"], "platform": "manylinux_2_36_x86_64",
                       "python": "3.11"}, "resolver": "uv 0.13.9",
            "packages": [{"name": "six", "version": "1.16.0", "file": None, "hashes": [],
                          "hash_note": "the index serves no sha256"}]}
    if field == "platform":
        data["inputs"]["platform"] = value
    elif field == "hash_note":
        data["packages"][0]["hash_note"] = value
    else:
        data[field] = value
    with pytest.raises(InputError, match="not a valid closure"):
        parse_closure(data, "closure.json")


def test_the_templates_refuse_a_line_break_of_any_kind_inside_one_line():
    from envgen.render.env import dockerquote, line, sh
    for bad in ("a\u2028b", "a\x85b", "a\nb", "a\x0bb", "a\x00b"):
        for f in (line, sh, dockerquote):
            with pytest.raises(ValueError):
                f(bad)
    assert line("uv 0.13.9, uv pip compile") == "uv 0.13.9, uv pip compile"


def test_a_lock_hash_note_or_a_matrix_why_with_u2028_is_refused(tmp_path):
    data = lock_text()
    req = data["stacks"]["pytorch-cu121"]["requirements"][0]
    req.update(hashes=[], hash_note="x\u2028evilpkg==6.6.6")
    with pytest.raises(InputError, match="hash_note must be one short line"):
        read_lock(write(tmp_path, data))
    import re

    from envgen.matrix.schema import WHY
    assert re.search(WHY["pattern"], "a reason") and not re.search(WHY["pattern"], "a\u2028b")


CERT = json.loads((__import__("pathlib").Path(__file__).parents[1] / "docs" / "certificates"
                   / "h200-1gpu-2026-12-03.json").read_text())


@pytest.mark.parametrize("text,words", [
    (json.dumps({**CERT, "created": "２０２６-12-01T00:00:00Z"}), "is not a UTC time"),
    (json.dumps({**CERT, "seconds": float("nan")}), "NaN is not a JSON number"),
    (json.dumps(CERT)[:-1] + ', "passed": false}', 'the key "passed" is given twice'),
])
def test_a_certificate_that_json_or_a_digit_pattern_would_misread_is_refused(
        tmp_path, monkeypatch, capsys, text, words):
    """Full-width digits matched \\d and sorted after every real date, so the forged run
    became the current one; NaN went back out under --json, which no reader takes; of a key
    given twice the store kept the last."""
    from envgen.cli import main
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    path = tmp_path / "c.json"
    path.write_text(text)
    assert main(["certs", "import", str(path)]) == 2
    assert words in capsys.readouterr().err


def test_profile_of_a_stack_says_the_bad_flag_not_no_image(tmp_path, monkeypatch, capsys):
    from envgen.cli import main
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    assert main(["profile", "jax-cpu", "--driver", "-1"]) == 2
    assert "--driver '-1' is not a driver version" in capsys.readouterr().err


def test_envgen_sources_takes_auto_as_sources_does():
    from envgen.core.environ import check
    check({"ENVGEN_SOURCES": "auto"})
    with pytest.raises(EnvgenError):
        check({"ENVGEN_SOURCES": "ftp://x"})


@pytest.mark.parametrize("name", ["ENVGEN_PYPI_SIMPLE", "ENVGEN_DEBIAN_MIRROR",
                                  "ENVGEN_SOURCES"])
def test_a_login_in_an_index_or_mirror_variable_is_refused_masked(name):
    """It would be written into closures, locks and the image, and a message would show
    it: refused with the login masked, as --sources and envgen.yaml refuse it."""
    from envgen.core.environ import check
    with pytest.raises(EnvgenError) as e:
        check({name: "http://ci-user:S3cretT0ken@127.0.0.1:8765/simple"})
    assert "carries a login" in str(e.value) and "S3cret" not in str(e.value)
    assert name in str(e.value)
    check({name: "http://127.0.0.1:8765/simple"})


def test_steps_below_the_payloads_least_are_refused_at_the_flag(capsys):
    from envgen.cli import main
    assert main(["smoke", "--steps", "5"]) == 2
    assert "from 6 to 1000000" in capsys.readouterr().err


GOOD_WHEEL = {"filename": "mypkg-1.0-py3-none-any.whl", "hashes": {"sha256": "a" * 64},
              "url": "../../files/mypkg-1.0-py3-none-any.whl"}


@pytest.mark.parametrize("page", [
    [GOOD_WHEEL], {"files": {"a": GOOD_WHEEL}}, {"files": "mypkg-1.0-py3-none-any.whl"},
    {"files": [1, 2, None]}, {"files": [dict(GOOD_WHEEL, hashes=["x"])]},
    {"files": [dict(GOOD_WHEEL, hashes={"sha256": 12345})]},
    {"files": [dict(GOOD_WHEEL, filename=123)]},
    {"files": [dict(GOOD_WHEEL, filename="mypkg-1.0-1$(touch${IFS}x)`id`;x-py3-none-any.whl")]},
    {"files": [dict(GOOD_WHEEL, filename="mypkg-1.0-1\u2028x-py3-none-any.whl")]},
])
def test_an_index_page_of_the_wrong_shape_gives_a_pin_with_its_reason_never_a_crash(page):
    """What a hostile index serves where PEP 691 says what goes: no internal error, and a
    file name that is no plain wheel name is never pinned (it broke the cache for good)."""
    from envgen.resolve.closure import hash_pin
    pin = hash_pin("mypkg", "1.0", "3.11", "manylinux_2_36_x86_64",
                   "http://127.0.0.1:1/simple", fetch=lambda url: page)
    assert pin.note and (pin.file is None or pin.file == GOOD_WHEEL["filename"])
    assert not pin.sha256 or pin.file == GOOD_WHEEL["filename"]


def test_a_yanked_file_is_passed_over_for_a_live_one_and_said_when_alone():
    from envgen.resolve.closure import hash_pin
    yanked = {"filename": "mypkg-1.0-cp311-cp311-manylinux_2_17_x86_64.whl",
              "hashes": {"sha256": "b" * 64}, "yanked": "security hole"}
    both = hash_pin("mypkg", "1.0", "3.11", "manylinux_2_36_x86_64", "i",
                    fetch=lambda url: {"files": [yanked, GOOD_WHEEL]})
    assert both.sha256 == "a" * 64 and not both.note
    alone = hash_pin("mypkg", "1.0", "3.11", "manylinux_2_36_x86_64", "i",
                     fetch=lambda url: {"files": [yanked]})
    assert alone.sha256 == "b" * 64 and alone.note == "yanked on the index: security hole"


def test_an_index_page_that_drips_is_given_up_within_its_deadline(monkeypatch):
    import envgen.resolve.closure as cl
    clock = iter(range(0, 10_000, 10))
    monkeypatch.setattr("time.monotonic", lambda: next(clock))

    class Drip:
        def read1(self, n):
            return b"x"
    with pytest.raises(OSError, match="more than 120 s"):
        cl._read_by(Drip(), 1 << 20, cl.PAGE_S)


def test_a_files_url_from_the_index_is_joined_to_its_page_and_never_file():
    from envgen.intake.modules import _file_url
    page = "https://pkgs.example.test/simple/mypkg/"
    assert _file_url(page, "../../files/x.whl") == "https://pkgs.example.test/files/x.whl"
    for bad in ("file:///etc/passwd", "javascript:alert(1)", "http://other.example/x.whl",
                None):
        with pytest.raises(OSError):
            _file_url(page, bad)
    assert _file_url("http://127.0.0.1:8/simple/m/", "/f/x.whl") == "http://127.0.0.1:8/f/x.whl"


def test_an_archive_kept_for_a_commit_does_not_stand_for_a_repository_that_lacks_it(
        tmp_path, monkeypatch):
    """Kept by commit alone, the archive made from one repository answered for any other
    URL naming that commit, one that does not exist included; the second repository is
    asked now, and a real one joins the archive's list."""
    import shutil

    from envgen.resolve.gitref import archive
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    repo, commit = _git_repo(tmp_path)
    first = archive("g", repo.as_uri(), commit)
    with pytest.raises(InputError, match="git clone failed"):
        archive("g", (tmp_path / "nope").as_uri(), commit)
    shutil.copytree(repo, tmp_path / "mirror")
    assert archive("g", (tmp_path / "mirror").as_uri(), commit) == first
    shutil.rmtree(tmp_path / "mirror")
    assert archive("g", (tmp_path / "mirror").as_uri(), commit) == first   # now remembered


def _git_repo(tmp_path):
    """A repository with one commit of a package g 1.0: (its folder, the commit)."""
    import subprocess
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[project]\nname = "g"\nversion = "1.0"\n')
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(["git", *argv], cwd=repo, check=True, env=env)
    return repo, subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                                text=True, check=True).stdout.strip()


@pytest.mark.parametrize("args", [
    ["matrix", "refresh", "--check", "--index-url", "https://u:S3cretT0ken@127.0.0.1:9/simple",
     "pytorch"],
    ["ci", "github", "pytorch-cu121", "--envgen-source",
     "git+https://user:S3cretT0ken@github.com/x/envgen@" + "a" * 40],
    ["ci", "devcontainer", "pytorch-cu121", "--registry", "user:S3cretT0ken@registry.test/team"],
    ["lock", "pytorch-cu121", "-o", "x.lock", "--push", "user:S3cretT0ken@registry.test/team"],
])
def test_a_login_in_a_flag_is_refused_masked_before_anything_else(args, tmp_path,
                                                                  monkeypatch, capsys):
    """--index-url, --envgen-source, --registry and --push would print the password in their
    messages (and refused the value for another reason): one sentence that masks it."""
    from envgen.cli import main
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    code = main([*args, "--json"] if args[0] != "ci" else args)
    out = capsys.readouterr()
    assert code == 2, out
    assert "carries a login" in out.out + out.err and "S3cret" not in out.out + out.err, out


@pytest.mark.parametrize("name", ["team,shared", 'team"x'])
def test_a_netrc_path_a_build_cannot_mount_is_refused_at_the_start(tmp_path, name):
    """BuildKit reads --secret id=netrc,src=PATH as CSV: a comma in the path failed the
    build halfway (exit 1) with BuildKit's own words about fields."""
    from envgen.core.environ import check
    d = tmp_path / name
    d.mkdir()
    (d / "netrc").write_text("machine x login a password b\n")
    with pytest.raises(EnvgenError, match="holds a comma or a quote") as e:
        check({"ENVGEN_NETRC": str(d / "netrc")})
    assert e.value.exit_code == 2
