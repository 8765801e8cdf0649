# ruff: noqa: E501  (BuildKit log lines, copied whole)
"""Progress on stderr in the form asked for: BuildKit's lines read as named steps, the
payload's check lines as checks, JSON lines that parse, plain lines, and `auto` choosing."""
from __future__ import annotations

import io
import json
from pathlib import Path

from envgen.build.steps import Steps, step_name
from envgen.certify.run import check_lines
from envgen.cli import main
from envgen.core import progress

# Lines as BuildKit 0.13 printed them for pytorch-cu121 on this project's CI machine.
BUILDKIT = """\
#1 [internal] load build definition from Dockerfile
#1 DONE 0.0s
#4 [stage-0 1/8] FROM docker.io/envgen/base:debian-bookworm-d77c771378c9
#4 DONE 0.0s
#6 [stage-0 2/8] RUN set -eu  && (id -u envgen >/dev/null 2>&1 || (groupadd --gid 10001 envgen  && useradd --uid 10001 --gid 10001 --create-home --shell /bin/sh envgen))  && python3 -m venv --without-pip /opt/venv
#6 DONE 0.9s
#7 [stage-0 3/8] RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked     --mount=type=bind,source=install/1-tools,target=/opt/envgen/req     pip install --require-hashes
#7 CACHED
#8 [stage-0 4/8] RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked     --mount=type=bind,source=install/2-cuda,target=/opt/envgen/req     pip install --require-hashes
#8 12.3 Collecting nvidia-cublas-cu12==12.1.3.1
#8 [stage-0 4/8] RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked     --mount=type=bind,source=install/2-cuda,target=/opt/envgen/req     pip install --require-hashes
#8 DONE 62.8s
#9 [stage-0 5/8] RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked     --mount=type=bind,source=install/3-framework,target=/opt/envgen/req     pip install
#9 ERROR: process "/bin/sh -c pip install" did not complete successfully: exit code: 1
#11 [stage-0 7/8] RUN --mount=type=bind,target=/opt/envgen/src     set -eu  && pip check
#11 DONE 1.2s
#13 exporting to image
#13 DONE 27.9s
"""


def events():
    s = Steps()
    return [e for line in BUILDKIT.splitlines() if (e := s.feed(line))]


def test_buildkit_steps_are_named_by_what_they_install():
    got = [(e.fields["name"], e.fields["state"]) for e in events()]
    assert got == [
        ("base image", "running"), ("base image", "done"),
        ("user and venv", "running"), ("user and venv", "done"),
        ("packaging tools", "running"), ("packaging tools", "cached"),
        ("CUDA libraries", "running"), ("CUDA libraries", "done"),
        ("framework", "running"), ("framework", "failed"),
        ("payload, stack and closure", "running"), ("payload, stack and closure", "done"),
        ("exporting the image", "running"), ("exporting the image", "done")]
    cuda_done = events()[7]
    assert cuda_done.fields["seconds"] == 62.8 and str(cuda_done) == \
        "step 4/8 CUDA libraries: done (62.8 s)"


def test_the_add_on_layer_has_its_name():
    assert step_name("RUN --mount=type=bind,source=install/5-over,target=/x pip") == \
        "frameworks over the base"


def test_payload_check_lines_become_check_events():
    seen = []
    on_line = check_lines(seen.append)
    on_line("[torch_smoke 12:00:01] PASS train: loss 2.303 -> 0.412 (ratio 0.18, must be < 0.7)")
    on_line("[torch_smoke 12:00:02] SKIP gemm: no GPU: CPU level")
    on_line("[jax_smoke 12:00:03] FAIL versions: jax 0.12.0 != 0.11.1")
    on_line("some other log line")
    assert [(e.fields["name"], e.fields["state"]) for e in seen] == [
        ("train", "passed"), ("gemm", "skipped"), ("versions", "failed")]


def test_json_lines_parse_one_object_per_event():
    out = io.StringIO()
    r = progress.reporter("json", out)
    for e in events()[:3]:
        r(e)
    r("a note")
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [d["event"] for d in docs] == ["step", "step", "step", "note"]
    assert docs[1]["state"] == "done" and docs[1]["name"] == "base image"
    assert all("time" in d and "message" in d for d in docs)


def test_plain_and_quiet():
    out = io.StringIO()
    progress.reporter("plain", out)(events()[7])
    assert out.getvalue() == "  step 4/8 CUDA libraries: done (62.8 s)\n"
    out = io.StringIO()
    progress.reporter("quiet", out)(events()[7])
    assert out.getvalue() == ""


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_auto_is_live_on_a_terminal_only():
    assert progress.choose("auto", io.StringIO(), {}) == "plain"
    assert progress.choose("auto", Tty(), {"TERM": "xterm"}) == "tty"
    assert progress.choose("auto", Tty(), {"TERM": "dumb"}) == "plain"
    assert progress.choose("auto", Tty(), {"TERM": "xterm", "CI": "true"}) == "plain"
    assert progress.choose("json", io.StringIO(), {}) == "json"


def test_the_live_view_draws_the_steps(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setenv("NO_COLOR", "1")
    out = Tty()
    r = progress.reporter("tty", out)
    assert isinstance(r, progress.Live)
    for e in events():
        r(e)
    r.close()
    text = out.getvalue()
    assert "CUDA libraries: done (62.8 s)" in text and "framework: FAILED" in text
    assert "\x1b[3" not in text   # NO_COLOR: no colour codes
    assert max(len(line) for line in text.replace("\r", "\n").splitlines()) <= 60 + 20


def test_progress_is_a_global_option_before_or_after_the_command(capsys):
    assert main(["--progress", "json", "matrix", "validate"]) == 0
    assert main(["matrix", "validate", "--progress", "quiet"]) == 0
    assert main(["matrix", "validate", "--progress", "loud"]) == 2
    assert "--progress" in capsys.readouterr().err


def test_the_last_step_header_names_where_a_build_failed():
    s = Steps()
    for line in BUILDKIT.splitlines()[:14]:   # up to the framework step's ERROR line
        s.feed(line)
    assert s.last_header.startswith("#9 [stage-0 5/8] RUN") and "3-framework" in s.last_header


def test_a_projects_steps_have_their_names(tmp_path):
    # the RUN lines of a rendered project Dockerfile, each as BuildKit heads its step
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "check.py").write_text("print(1)\n")
    (tmp_path / "envgen.yaml").write_text(
        "stack: pytorch-cu121\nname: t\napt: [jq]\ncopy: [check.py]\n")
    r = subprocess.run([sys.executable, "-m", "envgen", "render", "-o", "ctx"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "ctx" / "Dockerfile").read_text().replace("\\\n", " ")
    runs = [" ".join(line.split()) for line in text.splitlines() if line.startswith("RUN ")]
    assert [step_name(c) for c in runs] == [
        "user and venv", "installer (uv)", "packaging tools", "CUDA libraries", "framework",
        "companions", "project apt packages", "project files", "payload, stack and closure"]


def test_the_steps_that_install_built_wheels_are_not_the_payload():
    """Both mount their stage's wheels at the payload's mount point; each has its own name."""
    for stage, name in (("project-build", "wheels built from sdists, installed"),
                        ("kernel-build", "CUDA kernels, installed")):
        assert step_name(f"RUN --mount=type=bind,from={stage},source=/opt/wheels,"
                         f"target=/opt/envgen/src set -eu && marker=$(mktemp)") == name
    assert step_name("RUN --mount=type=bind,target=/opt/envgen/src set -eu && pip check"
                     ) == "payload, stack and closure"


def test_the_builder_step_is_named_with_or_without_its_pinned_backends():
    """The project-build stage's one RUN mounts its backends' folder first when the closure
    pins them, the sdists' folder alone when it does not: the same step, the same name."""
    from test_sdist_build import _project_over_cu121

    from envgen.render.views import render_texts
    for tools in ((), None):
        st, c = _project_over_cu121() if tools is None else _project_over_cu121(tools=tools)
        text = render_texts(st, c)["Dockerfile"].replace("\\\n", " ")
        stage = text[text.index("AS project-build"):]
        run = next(" ".join(x.split()) for x in stage.splitlines() if x.startswith("RUN "))
        assert step_name(run) == "sdists built into wheels", run[:200]
