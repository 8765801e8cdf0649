"""The trust chain: one judgement for every certificate that enters the store, whatever the
door (certify, certs import and merge, fleet --collect); nothing a payload or a job wrote
reaches a terminal raw; every read bounded, every store write whole and finished by a
retry; redirects checked like the URL they came from; every ENVGEN_* variable and flag
checked before any work. Each test here failed on the code before this was built.

The fleet tests run the real CLI against stand-in Slurm clients (small scripts on PATH
that print what sacct and scontrol print); tests/test_fleet_real.py runs the forged
result through the real single-node cluster."""
from __future__ import annotations

import errno
import http.server
import json
import os
import re
import threading
from pathlib import Path

import pytest
from certificates import made
from services import envgen
from test_fleet import GOOD, fleet_of, passing_result

from envgen.certs import store as certs
from envgen.certs import trust as cert_trust
from envgen.cli import main
from envgen.core import files
from envgen.core.errors import CheckFailed, InputError
from envgen.fleet import slurm

ESC = "\x1b"
OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"   # sets the reader's clipboard
CLEAR = "\x1b[2J\x1b[H"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def stored(home: Path) -> list[Path]:
    d = home / "certs"
    return sorted(d.rglob("*.json")) if d.is_dir() else []


def forged(**changes) -> dict:
    """A result that claims a pass while its own check failed and its payload exited 1."""
    c = made(passed=False)
    c["passed"] = True
    return c | changes


# ---- the one judgement ---------------------------------------------------------------------

@pytest.mark.parametrize("created, words", [
    ("9999-12-31T23:59:59Z", "after this host's clock"),
    ("2026-99-99T99:99:99Z", "not a real date"),
    ("2026-02-30T00:00:00Z", "not a real date"),
    ("2026-12-01T12:00:00+01:00", "not a UTC time"),
])
def test_a_certificate_from_the_future_or_of_no_real_date_is_refused(created, words):
    assert words in cert_trust.refusal(made(created=created))


def test_a_certificate_a_few_minutes_ahead_of_this_clock_is_taken():
    now = 1_800_000_000
    import time
    ahead = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 120))
    assert cert_trust.refusal(made(created=ahead), now=now) is None


def test_a_future_dated_import_never_outranks_a_later_real_run(home, tmp_path, capsys):
    future = tmp_path / "future.json"
    future.write_text(json.dumps(made(created="9999-12-31T23:59:59Z")))
    assert main(["certs", "import", str(future)]) == 2
    assert f"{future}:1: refused: created 9999" in capsys.readouterr().err
    assert stored(home) == []
    real = tmp_path / "real.json"
    real.write_text(json.dumps(made(passed=False)))
    assert main(["certs", "import", str(real)]) == 0
    assert [c["passed"] for c in certs.load_all()] == [False]   # today's run is current


@pytest.mark.parametrize("field, value", [
    ("gpu", "NVIDIA H200" + OSC52), ("gpu", "NVIDIA\nH200"), ("driver", "580.1" + CLEAR),
    ("level", "cuda" + ESC + "[31m"), ("tags", ["team/x:1" + ESC + "[8m"]),
    ("check", "train" + CLEAR),
])
def test_fields_that_never_hold_control_characters_are_refused_at_the_door(
        home, tmp_path, capsys, field, value):
    c = made()
    if field == "gpu":
        c["host"]["gpus"][0]["name"] = value
    elif field == "driver":
        c["host"]["driver"] = value
    elif field == "level":
        c["level"] = value
    elif field == "tags":
        c["image_tags"] = value
    else:
        c["report"]["checks"][0]["name"] = value
    p = tmp_path / "c.json"
    p.write_text(json.dumps(c))
    assert main(["certs", "import", str(p)]) == 2
    out = capsys.readouterr()
    assert f"{p}:1: refused:" in out.err and ESC not in out.err + out.out
    assert stored(home) == []


def test_the_store_itself_refuses_a_pass_its_record_contradicts(home):
    with pytest.raises(CheckFailed, match="claims a pass"):
        certs.save(forged())
    assert stored(home) == []
    assert certs.save(made()).is_file()


@pytest.mark.parametrize("level, report_level, gpus, words", [
    ("multi-gpu", "cpu", [], "claims level 'multi-gpu' but its payload's report says 'cpu'"),
    ("cuda", "cpu", ["NVIDIA H200"], "claims level 'cuda' but its payload's report says"),
    ("cuda", "cuda", [], "at level cuda on 0 GPU(s); that level runs on at least 1"),
    ("multi-gpu", "multi-gpu", ["NVIDIA H200"], "multi-gpu on 1 GPU(s)"),
])
def test_a_pass_at_a_level_its_own_record_does_not_show_is_refused(
        home, tmp_path, capsys, level, report_level, gpus, words):
    """The level is the payload's (certify and the fleet's pod copy it from the report),
    and a GPU level needs its GPUs: a pass raised to a higher level is refused at the door
    and by the store, so doctor and locks never count it."""
    c = made(gpus=gpus)
    c["level"], c["report"]["level"] = level, report_level
    p = tmp_path / "c.json"
    p.write_text(json.dumps(c))
    assert main(["certs", "import", str(p)]) == 2
    assert words in capsys.readouterr().err
    with pytest.raises(CheckFailed, match=re.escape(words)):
        certs.save(c)
    assert stored(home) == []
    two = made(gpus=["NVIDIA H200", "NVIDIA H200"], level="multi-gpu")
    assert certs.save(two).is_file()   # as the payload reports a two-GPU run


# ---- nothing raw on a terminal -------------------------------------------------------------

def test_certs_show_and_list_escape_what_a_payload_wrote(home, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")   # no cell cut short: the whole escape is seen
    c = made(checks=[{"name": "train", "passed": True, "detail": "ok" + OSC52 + CLEAR}])
    certs.save(c)
    assert main(["certs", "show", c["image_id"][7:19]]) == 0
    out = capsys.readouterr().out
    assert ESC not in out and "\\x1b]52;c;" in out and "\\x07" in out
    # a store file written by hand (or by an older envgen) is shown escaped too
    raw = made(image_id="sha256:" + "c" * 64)
    raw["host"]["gpus"][0]["name"] = "H200" + CLEAR
    files.write_json(home / "certs" / ("c" * 64 + ".json"), raw)
    assert main(["certs", "list"]) == 0
    out = capsys.readouterr().out
    assert ESC not in out and "\\x1b[2J" in out


def test_a_table_cell_never_carries_c1_or_bidi_controls(home, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    raw = made()
    raw["host"]["gpus"][0]["name"] = "H200\u202e\x9b31m"   # CSI as one C1 byte; RTL override
    files.write_json(home / "certs" / (raw["image_id"][7:] + ".json"), raw)
    assert main(["certs", "list"]) == 0
    out = capsys.readouterr().out
    assert "\u202e" not in out and "\x9b" not in out and "\\x9b31m" in out


# ---- every read bounded, every write whole ---------------------------------------------------

def test_an_import_stopped_by_a_full_disk_says_what_was_stored_and_a_retry_finishes(
        home, tmp_path, capsys, monkeypatch):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(4):
        c = made(image_id="sha256:" + f"{i:x}" * 64, created=f"2026-11-0{i + 1}T00:00:00Z")
        (inputs / f"{i}.json").write_text(json.dumps(c))
    real_write, calls = files.write_json, []

    def full_after_five(path, obj):   # 2 files per certificate: dies on the 3rd's current
        calls.append(path)
        if len(calls) == 6:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_write(path, obj)
    monkeypatch.setattr(certs, "write_json", full_after_five)
    assert main(["certs", "import", str(inputs), "--json"]) == 3
    out, err = capsys.readouterr()
    partial = json.loads(out.split("\n}\n")[0] + "\n}")
    assert partial["imported"] == 2 and partial["complete"] is False
    assert "2 certificate(s) were stored" in out + err and "No space left" in out + err
    assert len(certs.load_all()) == 2
    monkeypatch.setattr(certs, "write_json", real_write)
    assert main(["certs", "import", str(inputs), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["imported"] == 2 and again["duplicates"] == 2   # the stranded one is taken
    assert len(certs.load_all()) == 4


def test_a_store_interrupted_between_its_history_and_current_files_is_finished(home,
                                                                               monkeypatch):
    c = made()
    real_write = files.write_json
    history_dir = f"/{certs.HISTORY}/"

    def current_fails(path, obj):
        if history_dir not in str(path):
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real_write(path, obj)
    monkeypatch.setattr(certs, "write_json", current_fails)
    with pytest.raises(OSError):
        certs.store(c)
    monkeypatch.setattr(certs, "write_json", real_write)
    assert certs.load_all() == []
    assert certs.store(c)[0] == "current" and len(certs.load_all()) == 1
    assert certs.store(c)[0] == "duplicate"


# ---- fleet --collect -----------------------------------------------------------------------

def slurm_clients(tmp_path: Path, state: str = "COMPLETED", scontrol_fails: str = "") -> dict:
    """PATH with stand-in sacct (accounting off) and scontrol (every task in `state`, or
    failing with `scontrol_fails` on stderr)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    (bin_ / "sacct").write_text("#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\n"
                                "exit 1\n")
    body = (f"echo '{scontrol_fails}' >&2; exit 1" if scontrol_fails else
            f"echo \"JobId=1 ArrayJobId=$4 ArrayTaskId=0-3 JobState={state} ExitCode=0:0\"")
    (bin_ / "scontrol").write_text(f"#!/bin/sh\n{body}\n")
    for p in bin_.iterdir():
        p.chmod(0o755)
    return {"PATH": f"{bin_}:{os.environ['PATH']}"}


def submitted_run(tmp_path: Path):
    f = fleet_of(tmp_path, GOOD)
    run = Path(slurm.write(f, tmp_path / "run")["folder"])
    slurm.record(run, [{"script": "slurm/h100.sbatch", "job_id": "101", "indices": [0, 1]},
                       {"script": "slurm/cpu.sbatch", "job_id": "101", "indices": [2, 3]}])
    return f, run


def collect(tmp_path, run, env, *more):
    return envgen("fleet", str(tmp_path / "fleet.yaml"), "--slurm", "--collect", str(run),
                  "--json", *more, env={"ENVGEN_HOME": str(tmp_path / "home"), **env},
                  timeout=120)


def test_collect_judges_a_forged_pass_like_certs_import_and_stores_nothing_of_it(tmp_path):
    _, run = submitted_run(tmp_path)
    for i in range(4):
        cert = passing_result(run, i)
        if i == 1:
            cert = forged(stack=cert["stack"])
        (run / "results" / f"{i}-101.json").write_text(json.dumps(cert))
    r = collect(tmp_path, run, slurm_clients(tmp_path))
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    verdicts = [(t["verdict"], t["why"]) for t in doc["tasks"]]
    assert [v for v, _ in verdicts] == ["passed", "failed", "passed", "passed"]
    assert "claims a pass but its check 'train' failed" in verdicts[1][1]
    assert doc["counts"]["passed"] == 3 and len(doc["stored"]) == 3
    kept = [json.loads(p.read_text()) for p in stored(tmp_path / "home")]
    assert kept and all(c["report"]["passed"] and c["exit_code"] == 0 for c in kept)


def test_a_result_of_another_stack_or_a_bad_profile_fails_its_task_only(tmp_path):
    _, run = submitted_run(tmp_path)
    for i in range(4):
        cert = passing_result(run, i)
        if i == 0:
            cert["profile"] = "Bad Profile!"
        if i == 3:
            cert["stack"]["stack"] = "pytorch-cu121"   # task 3 is jax-cuda12's
        (run / "results" / f"{i}-101.json").write_text(json.dumps(cert))
    r = collect(tmp_path, run, slurm_clients(tmp_path))
    assert r.returncode == 1, r.stderr
    rows = json.loads(r.stdout)["tasks"]
    assert [t["verdict"] for t in rows] == ["failed", "passed", "passed", "failed"]
    assert "profile" in rows[0]["why"] and "not of task 3's jax-cuda12" in rows[3]["why"]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_result_file_that_is_no_regular_file_or_too_big_fails_without_a_hang(tmp_path, kind):
    _, run = submitted_run(tmp_path)
    for i in range(1, 4):
        (run / "results" / f"{i}-101.json").write_text(json.dumps(passing_result(run, i)))
    target = run / "results" / "0-101.json"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero":
        target.symlink_to("/dev/zero")
    else:
        with open(target, "wb") as f:
            f.truncate(slurm.MAX_RESULT + 1)
    r = collect(tmp_path, run, slurm_clients(tmp_path))
    assert r.returncode == 1, r.stderr
    first = json.loads(r.stdout)["tasks"][0]
    assert first["verdict"] == "failed"
    assert {"fifo": "FIFO", "dev-zero": "character device", "huge": "larger than"}[kind] \
        in first["why"]


def test_a_passing_result_without_a_scheduler_state_is_not_a_pass(tmp_path, monkeypatch):
    f, run = submitted_run(tmp_path)
    for i in range(4):
        (run / "results" / f"{i}-101.json").write_text(json.dumps(passing_result(run, i)))
    monkeypatch.setattr(slurm, "scheduler_states", lambda jobs: ({}, "scontrol"))
    rows, _ = slurm.verdicts(run, f)
    assert {r["verdict"] for r in rows} == {"missing"}
    assert "no state for job 101" in rows[0]["why"]


def test_no_slurm_controller_is_exit_3_not_a_failed_certification(tmp_path):
    _, run = submitted_run(tmp_path)
    env = slurm_clients(tmp_path, scontrol_fails="scontrol: fatal: Could not establish a "
                                                 "configuration source")
    r = collect(tmp_path, run, env)
    assert r.returncode == 3 and "scontrol" in r.stdout + r.stderr


@pytest.mark.parametrize("jobs", ['{"submissions": {}}', "[]", '{"submissions": [{"script": '
                                  '"slurm/cpu.sbatch", "job_id": "7"}]}', "{",
                                  '{"submissions": [{"script": "../../x", "job_id": "7", '
                                  '"indices": [0]}]}'])
def test_a_malformed_jobs_file_is_exit_2_naming_it(tmp_path, jobs):
    _, run = submitted_run(tmp_path)
    (run / "jobs.json").write_text(jobs)
    r = collect(tmp_path, run, slurm_clients(tmp_path))
    assert r.returncode == 2, r.stderr
    assert "jobs.json" in r.stdout and "Traceback" not in r.stderr


def test_fleet_output_that_names_a_file_is_exit_2(tmp_path):
    (tmp_path / "fleet.yaml").write_text(GOOD)
    (tmp_path / "afile").write_text("x")
    r = envgen("fleet", str(tmp_path / "fleet.yaml"), "--slurm", "-o", str(tmp_path / "afile"))
    assert r.returncode == 2 and "names a file" in r.stderr
    r = envgen("fleet", str(tmp_path / "fleet.yaml"), "--slurm", "--collect",
               str(tmp_path / "afile"), env=slurm_clients(tmp_path))
    assert r.returncode == 2 and "not a folder" in r.stderr


# ---- redirects -----------------------------------------------------------------------------

class _Server(http.server.BaseHTTPRequestHandler):
    hits: list = []
    location = ""

    def do_GET(self):
        type(self).hits.append(self.path)
        if self.location:
            self.send_response(302)
            self.send_header("Location", self.location)
            self.end_headers()
        else:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def _serve(host: str, handler) -> http.server.HTTPServer:
    s = http.server.HTTPServer((host, 0), handler)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


def test_refresh_refuses_a_redirect_it_would_refuse_as_a_url(tmp_path, monkeypatch):
    """127.0.0.2 is loopback but not a host refresh takes plain http from: a redirect there
    is checked before it is followed, so the second server never sees a request."""
    from envgen.refresh.pypi import Index
    other = type("Other", (_Server,), {"hits": [], "location": ""})
    try:
        target = _serve("127.0.0.2", other)
    except OSError:
        pytest.skip("127.0.0.2 cannot be bound here")
    first = type("First", (_Server,), {"hits": [], "location":
                                       f"http://127.0.0.2:{target.server_port}/simple/x/"})
    origin = _serve("127.0.0.1", first)
    try:
        index = Index(f"http://127.0.0.1:{origin.server_port}/simple", cache=tmp_path / "c")
        with pytest.raises(InputError, match="redirect"):
            index.get(f"http://127.0.0.1:{origin.server_port}/simple/x/")
        assert first.hits and other.hits == []
    finally:
        origin.shutdown()
        target.shutdown()


# ---- inputs before work --------------------------------------------------------------------

@pytest.mark.parametrize("name, value", [
    ("ENVGEN_REFRESH_BACKOFF", "abc"), ("ENVGEN_REFRESH_BACKOFF", "nan"),
    ("ENVGEN_PROJECT", "p" * 5000), ("ENVGEN_BUILD_NETWORK", "evil;id"),
    ("ENVGEN_DOCKER_TIMEOUT", "0"), ("ENVGEN_PYPI_SIMPLE", "file:///etc"),
    ("ENVGEN_REVISION", "main; id"), ("ENVGEN_MATRIX", "-rf"),
])
def test_every_envgen_variable_is_checked_before_any_work(name, value, tmp_path):
    # a build: with a daemon that is not there, the variable must still be what is said
    r = envgen("build", "pytorch-cu121", env={name: value, "ENVGEN_HOME": str(tmp_path),
                                              "DOCKER_HOST": "unix:///nonexistent.sock"},
               timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"envgen: error: {name}=") and "Traceback" not in r.stderr


def test_envgen_home_naming_a_file_is_said_not_an_empty_store(tmp_path):
    f = tmp_path / "home"
    f.write_text("")
    r = envgen("certs", "list", env={"ENVGEN_HOME": str(f)})
    assert r.returncode == 3 and "is a file, not a folder" in r.stderr


def test_every_documented_variable_has_a_check():
    from envgen.commands import help_text as cli_help
    from envgen.core import environ
    assert set(environ.CHECKS) == set(cli_help.ENVIRONMENT)


def test_run_refuses_an_environment_name_that_is_not_ascii():
    r = envgen("run", "--env", "ÄB=1", "pytorch-cu121", "--", "true",
               env={"DOCKER_HOST": "unix:///nonexistent.sock"}, timeout=60)
    assert r.returncode == 2 and "NAME=VALUE" in r.stderr


@pytest.mark.parametrize("where, code", [("/proc/x", 2), ("/proc/self/status/x", 2)])
def test_init_into_a_place_no_file_can_be_is_not_a_bug(tmp_path, where, code):
    r = envgen("init", "pytorch-cu121", "-o", where, env={"ENVGEN_HOME": str(tmp_path)})
    assert r.returncode == code, r.stderr
    assert "internal error" not in r.stderr


def test_a_full_disk_while_writing_an_output_is_exit_3(tmp_path, monkeypatch, capsys):
    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "envgen.yaml"))
    from envgen.commands import init
    monkeypatch.setattr(init, "write_atomic", full)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    assert main(["init", "pytorch-cu121", "-o", str(tmp_path / "envgen.yaml")]) == 3
    assert "No space left" in capsys.readouterr().err


def test_a_project_pin_the_stack_contradicts_names_its_line(tmp_path, monkeypatch, capsys):
    from envgen.commands._common import load_matrix_for
    from envgen.resolve.stack import Host, resolve  # noqa: F401 (the stack's own numpy pin)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    m = load_matrix_for(type("A", (), {"matrix": None})())
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import host_from_flags
    st = resolve(m, parse_spec("pytorch-cu121", m), host_from_flags(m))
    name, version = st.packages[-1]
    (tmp_path / "envgen.yaml").write_text(
        f"stack: pytorch-cu121\nname: app\npip:\n  - rich==13.7.1\n  - {name}==0.0.1\n")
    assert main(["resolve"]) == 2
    err = capsys.readouterr().err
    assert f"envgen.yaml:5: project pins {name.lower()}==0.0.1" in err.replace(
        str(tmp_path) + "/", "")


# ---- one certificate shape -----------------------------------------------------------------

def test_the_pod_completes_its_template_as_certificate_finish_does():
    """fleet/pod.py runs in an image without envgen: the keys it adds to its template must
    be those certificate.finish adds to certificate.head, or a Kubernetes certificate would
    have another shape than a Docker or Apptainer one."""
    import ast
    import time

    from envgen.certs import certificate
    from envgen.fleet import pod
    tree = ast.parse(Path(pod.__file__).read_text())
    built = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "cert")
    pod_keys = {k.value for k in built.keys if k is not None}
    start = {"schema": 1}
    done = certificate.finish(start, report={"passed": True}, code=0, host={},
                              started=time.monotonic())
    assert pod_keys == set(done) - set(start)


def test_every_certificate_builder_goes_through_head_and_finish():
    import ast
    root = Path(__file__).resolve().parents[1] / "envgen"
    literal_certs = []
    for p in root.rglob("*.py"):
        if p.name in ("certificate.py", "pod.py"):
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "schema"
                                               for k in n.keys):
                literal_certs.append(f"{p.relative_to(root)}:{n.lineno}")
    assert literal_certs == []


def test_a_closure_index_that_redirects_from_https_to_http_is_not_followed():
    """fetch_json and the index probe follow a redirect only where it keeps https: the
    handler refuses before a request is made (no server needed: the refusal is the rule)."""
    import urllib.request

    from envgen.core import fetching
    handler = fetching._KeepScheme()
    req = urllib.request.Request("https://mirror.example/simple/torch/")
    with pytest.raises(fetching.RedirectRefused, match="drops https"):
        handler.redirect_request(req, None, 302, "Found", {}, "http://mirror.example/x")
    with pytest.raises(fetching.RedirectRefused):
        handler.redirect_request(req, None, 302, "Found", {}, "file:///etc/passwd")
    kept = handler.redirect_request(req, None, 302, "Found", {}, "https://cdn.example/x")
    assert kept.full_url == "https://cdn.example/x"
