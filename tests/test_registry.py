"""registry.py without a daemon: hostile repository and digest input, and what the daemon's
push and pull streams (and its transport failures) become (faked SDK objects)."""
from __future__ import annotations

import docker
import pytest
import requests
import urllib3
from fakes import FakeDocker

from envgen.core.errors import CheckFailed, EnvironmentMissing, InputError
from envgen.runtime import registry as reg

DIGEST = "sha256:" + "ab" * 32
IMAGE_ID = "sha256:" + "1" * 64
REPO = "127.0.0.1:5000/team/envgen"


@pytest.mark.parametrize("text", [
    "localhost:5000/team/envgen", "ghcr.io/org/name", "127.0.0.1:5000/a/b", "team/envgen",
    "envgen", "registry.example.com/a__b/c-d.e/f--g", "Registry.Example.COM:443/x",
])
def test_well_formed_repositories_are_accepted_unchanged(text):
    assert reg.parse_repository(text) == text


@pytest.mark.parametrize("text, says", [
    ("--help", "not a path component"),
    ("-x/y", "not a path component"),
    ("../x", "valid registry host"),
    ("team/../x", "not a path component"),
    ("Team/envgen", "must be lowercase"),
    ("ghcr.io/Org/name", "must be lowercase"),
    ("team envgen", "whitespace"),
    ("ghcr.io/org/name\n", "whitespace"),
    ("ghcr.io/org/\x1bname", "control character"),
    ("ghcr.io/org/name:v1", "carries a tag"),
    ("envgen:latest", "carries a tag"),
    (f"ghcr.io/org/name@{DIGEST}", "carries a digest"),
    ("localhost:99999/x", "valid registry host"),
    ("host_x.io/a", "valid registry host"),
    ("[::1]:5000/x", "valid registry host"),
    ("a//b", "not a path component"),
    ("a/", "not a path component"),
    ("é/x", "not a path component"),
    ("", "empty"),
    ("ghcr.io/" + "a" * 250, "the limit is 255"),
])
def test_hostile_repositories_are_exit_2_with_the_reason(text, says):
    with pytest.raises(InputError) as e:
        reg.parse_repository(text)
    assert e.value.exit_code == 2 and says in str(e.value)
    assert "\n" not in str(e.value)      # newlines in the value are shown escaped


@pytest.mark.parametrize("value", [None, 5000, ["ghcr.io/x"], b"ghcr.io/x"])
def test_a_repository_that_is_not_a_string_is_exit_2(value):
    with pytest.raises(InputError, match="must be a string"):
        reg.parse_repository(value)


def test_pinned_reference_splits_into_repository_and_digest():
    assert reg.parse_pinned(f"{REPO}@{DIGEST}") == (REPO, DIGEST)


@pytest.mark.parametrize("text, says", [
    (REPO, "not pinned by digest"),
    (f"{REPO}:t1", "not pinned by digest"),
    (f"{REPO}@sha256:{'ab' * 31}", "does not end in a digest"),
    (f"{REPO}@sha256:{'AB' * 32}", "does not end in a digest"),
    (f"{REPO}@sha512:{'ab' * 64}", "does not end in a digest"),
    (f"{REPO}@{DIGEST}\n", "does not end in a digest"),
    (f"{REPO}@{DIGEST}@{DIGEST}", "does not end in a digest"),
    (f"{REPO}:t1@{DIGEST}", "carries a tag"),
    (f"--help@{DIGEST}", "not a path component"),
    (None, "must be a string"),
])
def test_hostile_pinned_references_are_exit_2(text, says):
    with pytest.raises(InputError, match=says):
        reg.parse_pinned(text)


@pytest.mark.parametrize("tag", ["", "-rm", ".x", "a b", "t\n", "a" * 129, "v1:2", None])
def test_push_refuses_a_hostile_tag_before_touching_the_daemon(tag):
    with pytest.raises(InputError, match="tag"):
        reg.push(None, IMAGE_ID, REPO, tag)


# --- a fake SDK: just what registry.py calls ---------------------------------------------

def FakeClient(push=(), pull=(), record=True):
    """A daemon whose push and pull answer with these lines, a pull giving IMAGE_ID
    (tests/fakes.py)."""
    return FakeDocker(push=push, pull=pull, record=record, pulled_id=IMAGE_ID)


def ok_push(tag="t1"):
    return [{"status": f"The push refers to repository [{REPO}]"},
            {"status": "Pushed", "progressDetail": {}, "id": "65eefc3a5fb2"},
            {"status": f"{tag}: digest: {DIGEST} size: 524"},
            {"progressDetail": {}, "aux": {"Tag": tag, "Digest": DIGEST, "Size": 524}}]


def error_line(message):
    return {"errorDetail": {"message": message}, "error": message}


REFUSED = ('Get "http://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: connect: '
           'connection refused')


def test_push_returns_the_pinned_digest_and_bounds_the_silence():
    c = FakeClient(push=ok_push())
    c.images.add(IMAGE_ID, "envgen/pytorch-cu121:ci")
    assert reg.push(c, "envgen/pytorch-cu121:ci", REPO, "t1", timeout=7) == f"{REPO}@{DIGEST}"
    assert c.api.timeouts == [7] and c.api.timeout == 600      # restored afterwards
    assert f"{REPO}:t1" in c.images.get(IMAGE_ID).tags         # kept on success


@pytest.mark.parametrize("message, says", [
    (REFUSED, "nothing listens there (connection refused)"),
    ('error parsing HTTP 405 response body: invalid character \'M\' looking for beginning '
     'of value: "Method not allowed\\n"', "refuses uploads"),
    ("unauthorized: authentication required", "access denied (unauthorized"),
    ("denied: requested access to the resource is denied", "access denied"),
    ('Get "https://127.0.0.1:5000/v2/": net/http: TLS handshake timeout', "in time"),
    ("Get \"https://ghcr.example/v2/\": dial tcp: lookup ghcr.example: no such host",
     "does not resolve"),
    ("something new\nover two lines", "something new over two lines"),
])
def test_a_refused_push_is_exit_3_naming_the_registry_and_leaves_no_tag(message, says):
    c = FakeClient(push=[{"status": "The push refers to repository"}, error_line(message)])
    c.images.add(IMAGE_ID, "envgen/pytorch-cu121:ci")
    with pytest.raises(EnvironmentMissing) as e:
        reg.push(c, IMAGE_ID, REPO, "t1")
    assert e.value.exit_code == 3
    assert "127.0.0.1:5000" in str(e.value) and says in str(e.value)
    assert "\n" not in str(e.value)
    assert c.images.get(IMAGE_ID).tags == ["envgen/pytorch-cu121:ci"]
    assert c.api.timeout == 600


@pytest.mark.parametrize("failure, says", [
    (urllib3.exceptions.ReadTimeoutError(None, None, "Read timed out."), "for 5 s"),
    (requests.exceptions.ConnectionError("Connection aborted."), "stopped answering"),
    (docker.errors.APIError("500 Server Error", explanation="dial unix: no such file"),
     "no such file"),
])
def test_a_daemon_that_hangs_or_dies_mid_push_is_exit_3_and_leaves_no_tag(failure, says):
    c = FakeClient(push=[{"status": "The push refers to repository"}, failure])
    c.images.add(IMAGE_ID, "envgen/pytorch-cu121:ci")
    with pytest.raises(EnvironmentMissing, match=says):
        reg.push(c, IMAGE_ID, REPO, "t1", timeout=5)
    assert c.images.get(IMAGE_ID).tags == ["envgen/pytorch-cu121:ci"]


def test_a_failed_push_gives_an_existing_tag_back_to_its_old_image():
    c = FakeClient(push=[error_line(REFUSED)])
    c.images.add(IMAGE_ID, "envgen/pytorch-cu121:ci")
    old = c.images.add("sha256:" + "2" * 64, f"{REPO}:t1")
    with pytest.raises(EnvironmentMissing):
        reg.push(c, IMAGE_ID, REPO, "t1")
    assert c.images.get(f"{REPO}:t1") is old


def test_a_failed_push_keeps_a_tag_that_was_already_on_the_image():
    c = FakeClient(push=[error_line(REFUSED)])
    c.images.add(IMAGE_ID, f"{REPO}:t1")
    with pytest.raises(EnvironmentMissing):
        reg.push(c, IMAGE_ID, REPO, "t1")
    assert c.images.get(IMAGE_ID).tags == [f"{REPO}:t1"] and c.images.removed == []


def test_a_failed_push_of_an_unnamed_image_keeps_the_tag_rather_than_delete_the_image():
    c = FakeClient(push=[error_line(REFUSED)])
    c.images.add(IMAGE_ID)
    with pytest.raises(EnvironmentMissing, match="kept because it is the image's only name"):
        reg.push(c, IMAGE_ID, REPO, "t1")
    assert c.images.removed == []


def test_a_push_whose_digest_the_daemon_did_not_record_is_exit_1_and_leaves_no_tag():
    c = FakeClient(push=ok_push(), record=False)
    c.images.add(IMAGE_ID, "envgen/pytorch-cu121:ci")
    with pytest.raises(CheckFailed, match="no digest both the registry and the daemon"):
        reg.push(c, IMAGE_ID, REPO, "t1")
    assert c.images.get(IMAGE_ID).tags == ["envgen/pytorch-cu121:ci"]


def test_pushing_an_image_the_daemon_lacks_is_exit_3():
    with pytest.raises(EnvironmentMissing, match="has no image 'envgen/missing:1'"):
        reg.push(FakeClient(), "envgen/missing:1", REPO, "t1")


def test_pull_returns_the_image_of_exactly_that_digest():
    c = FakeClient(pull=[{"status": "Pulling from team/envgen"},
                         {"status": f"Digest: {DIGEST}"}])
    image = reg.pull(c, f"{REPO}@{DIGEST}")
    assert image.id == IMAGE_ID and c.api.pulled == f"{REPO}@{DIGEST}"


@pytest.mark.parametrize("failure", [
    docker.errors.NotFound("404 Client Error", explanation=(
        f"manifest for {REPO}@{DIGEST} not found: manifest unknown: manifest unknown")),
    [error_line("manifest unknown: manifest unknown")],
])
def test_pulling_a_digest_the_registry_lacks_is_exit_1(failure):
    with pytest.raises(CheckFailed) as e:
        reg.pull(FakeClient(pull=failure), f"{REPO}@{DIGEST}")
    assert e.value.exit_code == 1
    assert f"the registry 127.0.0.1:5000 has no image with digest {DIGEST}" in str(e.value)


@pytest.mark.parametrize("failure, says", [
    (docker.errors.APIError("500 Server Error", explanation=REFUSED), "connection refused"),
    ([error_line("unauthorized: authentication required")], "access denied"),
    (requests.exceptions.ConnectionError("Connection refused"), "stopped answering"),
    (urllib3.exceptions.ReadTimeoutError(None, None, "Read timed out."), "for 120 s"),
])
def test_pulling_from_a_registry_that_does_not_answer_is_exit_3(failure, says):
    with pytest.raises(EnvironmentMissing, match=says) as e:
        reg.pull(FakeClient(pull=failure), f"{REPO}@{DIGEST}")
    assert "pulling" in str(e.value) and "127.0.0.1:5000" in str(e.value)


@pytest.mark.parametrize("image_ref", [None, "", 7])
def test_push_refuses_an_image_named_by_no_string(image_ref):
    with pytest.raises(InputError, match="non-empty string"):
        reg.push(None, image_ref, REPO, "t1")


@pytest.mark.parametrize("ref", [
    "team/img", "team/img:1", "localhost:5000/team/img", "localhost:5000/team/img:2.4.1",
    "127.0.0.1:5000/a/b:c", "envgen/pytorch-cu121:2.4.1-py3.11-debian-bookworm", "img",
    "ghcr.io/org/name:latest"])
def test_tags_split_as_docker_py_splits_them(ref):
    """The Docker SDK's own reference parser is the judge of where a tag starts (a ':'
    before the last '/' is a registry port, not a tag)."""
    from docker.utils import parse_repository_tag

    from envgen.core.image import split_tag
    repo, tag = parse_repository_tag(ref)
    assert split_tag(ref) == (repo, tag or "latest")


@pytest.mark.parametrize("text", ["x@sha256:", f"envgen/team@{DIGEST}", "x:v1@sha256:ab"])
def test_a_tag_that_names_a_digest_is_refused_for_what_it_is(text):
    from envgen.core.image import parse_tagged
    with pytest.raises(InputError) as e:
        parse_tagged(text)
    assert e.value.exit_code == 2 and "names a digest" in str(e.value)
    assert "repository[:tag]" in str(e.value) and "tag of" not in str(e.value)


def test_a_registry_serving_other_bytes_than_the_digest_is_exit_1():
    """The daemon checks what it pulls against the digest: a registry that serves other
    bytes is the thing checked being false (exit 1, verify records drift), not a registry
    that does not answer (exit 3)."""
    with pytest.raises(CheckFailed, match="served other bytes than digest") as e:
        reg.pull(FakeClient(pull=[error_line(f"manifest verification failed for digest "
                                             f"{DIGEST}")]), f"{REPO}@{DIGEST}")
    assert e.value.exit_code == 1


@pytest.mark.parametrize("date", ["not-a-date", "Sat, 01 Jan 2000 00:00:00 +9999", ""])
def test_a_mirror_whose_release_date_is_garbled_serves_no_known_state(monkeypatch, date):
    """Exit 4 ('internal error') came from a mirror's Release file with a bad Date line."""
    import contextlib
    import io

    from envgen.build import base
    monkeypatch.setattr(base.fetching, "urlopen", lambda url, timeout: contextlib.nullcontext(
        io.BytesIO(f"Origin: Debian\nDate: {date}\n".encode())))
    assert base.archive_state("http://127.0.0.1:9/debian", "bookworm") is None
