"""The fast installer keeps every guarantee of the slow one: each hash-pinned binary layer is
installed by uv, itself pinned by sha256 and unpacked in a throw-away stage that no layer
holds; --no-deps and --require-hashes stay; its own cache lives and dies inside the step;
the bytecode step still follows; a changed byte on the index is still one sentence naming
the package. Stacks uv cannot serve (a framework base, PyTorch's own index) keep pip."""
from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest

from envgen.build.buildkit import explain_failure
from envgen.build.steps import step_name
from envgen.render import render_texts
from envgen.render.views import STAMP, UV_FETCHER, UV_HASHES, UV_MOUNT, UV_VERSION
from envgen.resolve import request
from envgen.resolve.closure import closure_for


def rendered(spec: str) -> dict[str, str]:
    m = request.load()
    st = request.resolve(m, spec, request.host(m))
    return render_texts(st, closure_for(st, resolve=False)[0])


def runs(dockerfile: str) -> list[str]:
    text = dockerfile.replace("\\\n", " ")
    return [ln[4:] for ln in text.splitlines() if ln.startswith("RUN ")]


def test_every_hashed_layer_installs_with_the_pinned_uv_and_keeps_its_guarantees():
    texts = rendered("pytorch-cu121")
    df = texts["Dockerfile"]
    froms = [ln for ln in df.splitlines() if ln.startswith("FROM ")]
    assert len(froms) == 3 and froms[0].endswith(" AS env")
    assert froms[1:] == ["FROM env AS uv", "FROM env"]
    uv_req = texts["install/0-uv/requirements.txt"]
    assert f"uv=={UV_VERSION}" in uv_req
    assert re.findall(r"--hash=sha256:([0-9a-f]{64})", uv_req) == list(UV_HASHES)
    # from PyPI the stage fetches the one wheel itself, by the hash pinned beside its address
    installer = next(r for r in runs(df) if "source=install/0-uv," in r)
    assert installer.endswith("python3 /opt/envgen/req/fetch_uv.py /opt/envgen/req/wheels.txt "
                              "/opt/uv") and "pip" not in installer.replace("/.cache/pip/", "")
    assert texts["install/0-uv/fetch_uv.py"] == UV_FETCHER.read_text()
    rows = [ln.split() for ln in texts["install/0-uv/wheels.txt"].splitlines()
            if not ln.startswith("#")]
    assert [r[0] for r in rows] == ["x86_64", "aarch64"]
    for _machine, sha, url in rows:
        assert sha in UV_HASHES and url.startswith("https://files.pythonhosted.org/packages/")
        assert url.rsplit("/", 1)[1].startswith(f"uv-{UV_VERSION}-py3-none-")
    layers = [r for r in runs(df) if re.search(r"source=install/[1-9]", r)]
    assert len(layers) == 4
    for r in layers:
        assert f"from=uv,source=/opt/uv,target={UV_MOUNT}" in r
        cmd = r[r.index(f"{UV_MOUNT}/bin/uv pip install"):].split(" && ")[0]
        opts = shlex.split(cmd)
        assert {"--no-deps", "--require-hashes", "--only-binary=:all:", "--no-config"} <= set(opts)
        big = re.search(r"source=install/(2-cuda|3-framework),", r)
        if big:   # gigabytes: hardlinked from a cache of the step's own, on the layer's FS
            assert opts[opts.index("--link-mode") + 1] == "hardlink"
            assert opts[opts.index("--cache-dir") + 1] == "$marker.uv"
        else:     # a few MB the stacks of a line share: one cache on the cache mount
            assert opts[opts.index("--link-mode") + 1] == "copy"
            assert opts[opts.index("--cache-dir") + 1] == "/root/.cache/pip/uv"
            assert "--mount=type=cache,target=/root/.cache/pip,sharing=locked" in r
        assert 'rm -rf "$marker.uv"' in r and 'rm -f "$marker"' in r
        assert r.index("uv pip install") < r.index("compileall") < r.index("-newermt")
    assert f"-path {UV_MOUNT}" in STAMP, "the read-only mount is never stamped"
    assert "COPY" not in {ln.split()[0] for ln in df.splitlines() if ln.strip()}


def test_a_teams_mirror_fetches_uv_through_pip_with_its_hashes():
    """A mirror's file addresses are its own: the stage asks it through pip, by hash."""
    m = request.load()
    st = request.resolve(m, "pytorch-cu121", request.host(m))
    closure = closure_for(st, resolve=False)[0]   # the wheels' hashes, whichever index serves them
    texts = render_texts(st.replace(index_url="https://mirror.example.org/simple"), closure)
    installer = next(r for r in runs(texts["Dockerfile"]) if "source=install/0-uv," in r)
    assert "--require-hashes" in installer and "--no-deps" in installer
    assert "fetch_uv.py" not in installer
    assert "install/0-uv/wheels.txt" not in texts and "install/0-uv/fetch_uv.py" not in texts
    assert "--index-url https://mirror.example.org/simple" in texts[
        "install/0-uv/requirements.txt"]


def test_the_installers_failure_is_its_own_sentence():
    log = ["#7 [uv 1/1] RUN --mount=type=secret,id=ca,target=/root/.cache/pip/ca.pem",
           "#7 0.171 envgen: the installer uv: https://files.pythonhosted.org/p/uv.whl does "
           "not match the sha256 envgen pins (expected 0000, got d7f4)",
           "#7 ERROR: executor failed running [/bin/sh -c set -eu]: exit code: 1"]
    assert explain_failure(log) == ("the installer uv: https://files.pythonhosted.org/p/uv.whl "
                                    "does not match the sha256 envgen pins (expected 0000, "
                                    "got d7f4)")


def test_stacks_from_pytorchs_index_keep_pip():
    """PyTorch's per-variant index serves what torch needs, not uv: such a stack installs
    with pip as before (its golden render, whose closure came from that index)."""
    golden = Path(__file__).parent / "golden" / "pytorch-cu121--sources-index" / "Dockerfile"
    df = golden.read_text()
    assert "--index-url https://download.pytorch.org/" in df or "download.pytorch.org" in (
        golden.parent / "requirements.txt").read_text()
    assert "uv pip install" not in df and "FROM env AS uv" not in df
    assert " install --progress-bar off " in df


BUILD_LOG_UV_HASH = """\
#12 [stage-2 4/7] RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked ...
#12 3.518 error: Failed to download `torch==2.4.1`
#12 3.518   cause: Hash mismatch for `torch==2.4.1`
#12 3.518
#12 3.518          Expected:
#12 3.518            sha256:0000000000000000000000000000000000000000000000000000000000000000
#12 3.518
#12 3.518          Computed:
#12 3.518            sha256:5fa9e8b7bbb3ee48de1f4f2e1e5e1d0c19ad5b2e7b4d1f8e3c8c6f6c6b6a6d6e
#12 ERROR: process "/bin/sh -c set -eu ..." did not complete successfully: exit code: 1
"""


def test_a_changed_byte_under_uv_is_one_sentence_naming_the_package():
    said = explain_failure(BUILD_LOG_UV_HASH.splitlines())
    assert said.startswith("torch==2.4.1 on the index does not match the sha256")
    assert "sha256:0000000000000000…" in said and "sha256:5fa9e8b7bbb3ee48…" in said


def test_uvs_dns_failure_is_the_network_sentence():
    said = explain_failure(["#9 2.1 error: Request failed after 3 retries",
                            "#9 2.1   Caused by: dns error: failed to lookup address information"])
    assert said and said.startswith("pip inside the build could not reach the package index")


def test_the_installer_stage_has_a_name_in_progress():
    assert step_name("RUN --mount=type=secret,id=ca,target=/root/.cache/pip/ca.pem "
                     "--mount=type=bind,source=install/0-uv,target=/opt/envgen/req set -eu"
                     ) == "installer (uv)"


@pytest.mark.parametrize("lines, words, exit_code", [
    (["#9 0.4 cp: error writing '/dev/full': No space left on device",
      "ERROR: executor failed running [/bin/sh -c cp /etc/passwd /dev/full]: exit code: 1"],
     "the disk the Docker daemon builds on is full", 3),
    (["ERROR: Cannot connect to the Docker daemon at unix:///tmp/x.sock. Is the docker "
      "daemon running?"], "the Docker daemon stopped answering during the build", 3),
    (["#9 2.1 error: Request failed after 3 retries",
      "#9 2.1   Caused by: dns error: failed to lookup address information"],
     "could not reach the package index", 3),
    (["#9 [stage-2 3/6] RUN false", "ERROR: process \"/bin/sh -c false\" did not complete "
      "successfully: exit code: 1"], "build failed at", 1)])
def test_what_a_failed_build_lacked_on_this_host_is_exit_3(tmp_path, lines, words,
                                                         exit_code):
    """contract.md: exit 3 when the environment lacks something (no daemon, a full disk, no
    index); a step of the stack that fails is exit 1."""
    from envgen.build.buildkit import BuildKitOutput
    from envgen.core.errors import BuildFailed
    out = BuildKitOutput(io.StringIO(), tmp_path / "build.log", lambda e: None)
    for line in lines:
        out.line(line + "\n")
    why = out.failed()
    err = why if isinstance(why, Exception) else BuildFailed(why)
    assert err.exit_code == exit_code and words in err.message, err.message
    assert err.message.count("Cannot connect") <= 1   # said once, not step and cause both
