"""The certificate store with history, and `envgen certs import|merge`: keys by image,
profile, GPU and driver; earlier runs kept; duplicates found by content; every input that
claims a pass it did not earn refused with its file:line, the good ones still taken.
The certificates are the real H200 runs of docs/certificates/; the real CLI runs between
two ENVGEN_HOME stores; the forged-image test builds a tiny labelled image on the daemon."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envgen.certs import certificate
from envgen.certs import importing as cert_import
from envgen.certs import store as certs
from envgen.certs import trust as cert_trust
from envgen.cli import main

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "docs" / "certificates"
ONE = json.loads((REAL / "h200-1gpu.json").read_text())        # image da24.., 1x H200
TWO = json.loads((REAL / "h200-2gpu.json").read_text())        # the same image on 2x H200
NEWER = json.loads((REAL / "h200-1gpu-2026-12-01.json").read_text())   # another image
ACC = json.loads((REAL / "h200-accelerate-2026-12-01.json").read_text())  # another stack


def cert(base=ONE, **changes) -> dict:
    c = copy.deepcopy(certs.canonical(base))
    for k, v in changes.items():
        c[k] = v
    return c


def on(base, driver=None, gpus=None, created=None) -> dict:
    c = cert(base)
    if driver:
        c["host"]["driver"] = driver
    if gpus is not None:
        c["host"]["gpus"] = [{"index": i, "name": n} for i, n in enumerate(gpus)]
    if created:
        c["created"] = created
    return c


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run_cli(*args, home: Path, stdin: str | None = None, cwd=None):
    env = {**os.environ, "ENVGEN_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "envgen", *args], input=stdin,
                          capture_output=True, text=True, timeout=120, env=env,
                          cwd=cwd or ROOT)


# ---- keys and history ----------------------------------------------------------------------

def test_the_key_is_image_profile_gpu_count_and_driver():
    assert certs.key_of(ONE) == (ONE["image_id"], "", "NVIDIA H200", 1, "580.159.04")
    assert certs.key_of(TWO)[2:] == ("NVIDIA H200", 2, "580.159.04")
    cpu = on(ONE, gpus=[])
    assert certificate.where(cpu) == {"gpu": None, "count": 0, "driver": None}
    assert certs.file_name(cpu) == ONE["image_id"][7:] + ".json"   # the name it always had
    names = {certs.file_name(c) for c in (ONE, TWO, on(ONE, driver="570.195.03"),
                                          on(ONE, gpus=["NVIDIA H100 80GB HBM3"]))}
    assert len(names) == 4 and all(n.startswith(ONE["image_id"][7:] + ".") for n in names)


def test_the_same_image_on_another_gpu_or_driver_is_another_certificate(home):
    for c in (ONE, TWO, on(ONE, driver="570.195.03")):
        assert certs.store(c)[0] == "current"
    assert len(certs.load_all()) == 3
    assert len(list((home / "certs").glob("*.json"))) == 3


def test_a_later_run_is_current_and_the_earlier_is_kept(home):
    later = on(ONE, created="2026-12-02T00:00:00Z")
    later["seconds"] = 1.0
    assert certs.store(ONE)[0] == "current"
    result, path = certs.store(later)
    assert result == "current" and json.loads(path.read_text())["created"] == later["created"]
    assert [c["created"] for c in certs.load_all()] == [later["created"]]
    assert [c["created"] for c in certs.load_history()] == [later["created"], ONE["created"]]
    # an older run arriving late goes into history; the current one stays
    older = on(ONE, created="2026-01-01T00:00:00Z")
    assert certs.store(older)[0] == "history"
    assert certs.load_all()[0]["created"] == later["created"]
    assert certs.runs_by_key()[certs.key_of(ONE)] == 3
    assert len(certs.load_history(ONE["image_id"])) == 3


def test_a_store_of_the_old_layout_keeps_working_and_moves_into_history(home):
    d = home / "certs"
    d.mkdir(parents=True)
    old = d / (ONE["image_id"][7:] + ".json")   # how envgen named a GPU run before
    old.write_text(json.dumps(ONE))
    assert certs.latest_for(ONE["image_id"])["created"] == ONE["created"]
    assert certs.find(ONE["image_id"][7:13])["created"] == ONE["created"]
    later = on(ONE, created="2026-12-02T00:00:00Z")
    assert certs.store(later)[0] == "current"
    assert not old.exists()     # the old file went into history, not away
    assert {c["created"] for c in certs.load_history()} == {ONE["created"], later["created"]}
    assert [c["created"] for c in certs.load_all()] == [later["created"]]


def test_find_and_latest_for_prefer_the_default_run_then_the_newest(home):
    certs.store(on(ONE, created="2026-11-01T00:00:00Z"))
    certs.store(on(ONE, gpus=["NVIDIA H100 80GB HBM3"], driver="535.274.02",
                   created="2026-11-05T00:00:00Z"))
    certs.store(cert(ONE, profile="steps3", created="2026-12-01T00:00:00Z"))
    assert certs.latest_for(ONE["image_id"])["created"] == "2026-11-05T00:00:00Z"
    assert certs.find(ONE["image_tags"][0])["created"] == "2026-11-05T00:00:00Z"


# ---- duplicates ----------------------------------------------------------------------------

def test_the_same_certificate_twice_is_one(home, tmp_path):
    assert certs.store(ONE)[0] == "current"
    assert certs.store(ONE)[0] == "duplicate"
    assert certs.store(ONE | {"_path": "/x", "schema_version": 1})[0] == "duplicate"
    log = tmp_path / "slurm-7.out"
    log.write_text(f"start\nenvgen-certificate: {json.dumps(ONE)}\n"
                   f"envgen-certificate: {json.dumps(ONE)}\n")
    r = cert_import.run_import([str(REAL / "h200-1gpu.json"), str(log)])
    assert (r["imported"], r["duplicates"], r["refused"]) == (0, 3, 0)
    assert len(certs.load_history()) == 1


# ---- refusals ------------------------------------------------------------------------------

def test_each_refused_input_names_its_file_and_line_and_the_good_ones_are_taken(home, tmp_path):
    forged_pass = cert(NEWER)
    forged_pass["report"]["checks"][3]["passed"] = False
    text = json.dumps(TWO)
    log = tmp_path / "slurm-42.out"
    log.write_text("\n".join([
        "srun: job 42 queued",
        f"envgen-certificate: {json.dumps(ONE)}",                         # 2: good
        f"envgen-certificate: {text[: len(text) // 2]}",                  # 3: truncated
        "envgen-certificate: {not json}",                                 # 4: malformed
        f"envgen-certificate: {json.dumps(cert(NEWER, schema=2))}",       # 5: schema
        f"envgen-certificate: {json.dumps(forged_pass)}",                 # 6: failed check
        f"envgen-certificate: {json.dumps(cert(NEWER, exit_code=1))}",    # 7: exit code
        f"2026-12-01T12:00:00.123456789Z envgen-certificate: {json.dumps(NEWER)}",  # 8: kubectl
        "a line that merely mentions envgen-certificate: {",               # ignored
    ]) + "\n")
    truncated = tmp_path / "cut.json"
    truncated.write_text(json.dumps(TWO, indent=2)[:500])
    r = cert_import.run_import([str(log), str(truncated), str(tmp_path / "missing.json")])
    why = {(x["file"].rsplit("/", 1)[-1], x["line"]): x["why"] for x in r["refusals"]}
    assert (r["imported"], r["duplicates"], r["refused"]) == (2, 0, 7)
    assert why[("slurm-42.out", 3)].startswith("a certificate line that is not one: truncated")
    assert "malformed JSON" in why[("slurm-42.out", 4)]
    assert "schema 2 is not one this envgen reads" in why[("slurm-42.out", 5)]
    assert why[("slurm-42.out", 6)] == "it claims a pass but its check 'cuda_arch' failed"
    assert why[("slurm-42.out", 7)] == "it claims a pass but the payload exited 1, not 0"
    assert why[("cut.json", 1)].startswith("not a certificate file: truncated JSON")
    assert why[("missing.json", 1)] == "no such file or folder"
    assert {c["line"] for c in r["certificates"]} == {2, 8}
    assert {c["created"] for c in certs.load_all()} == {ONE["created"], NEWER["created"]}


@pytest.mark.parametrize("change,words", [
    (lambda c: c.pop("schema"), "has no `schema`"),
    (lambda c: c.update(image_id="sha256:" + "z" * 64), "is not sha256:<64 hex digits>"),
    (lambda c: c.update(passed="yes"), "`passed` is not true or false"),
    (lambda c: c.update(created="yesterday"), "is not a UTC time"),
    (lambda c: c["stack"].pop("framework"), "its stack is not one envgen wrote"),
    (lambda c: c["report"].update(checks="all good"), "report.checks is not a list"),
    (lambda c: c["report"].update(checks=[]), "a pass with no checks run"),
    (lambda c: c["report"].update(passed=False), "its payload's report did not pass"),
    (lambda c: c.update(exit_code=None), "the payload exited None"),
    (lambda c: c.update(exit_code=True), "the payload exited True"),
    (lambda c: c["host"].update(gpus="H200"), "host is not"),
])
def test_a_certificate_that_is_not_what_it_claims_is_refused(change, words):
    c = cert(ONE)
    change(c)
    assert words in cert_trust.refusal(c)


def test_a_failure_on_record_is_honest_and_taken():
    c = cert(ONE, passed=False, exit_code=1)
    c["report"]["checks"][0]["passed"] = False
    assert cert_trust.refusal(c) is None


def test_an_image_here_must_carry_the_stack_the_certificate_claims():
    label = json.dumps(ONE["stack"])
    assert cert_trust.refusal(ONE, lambda _id: {"io.envgen.stack": label}) is None
    other = json.dumps(NEWER["stack"] | {"framework": {**NEWER["stack"]["framework"],
                                                        "version": "2.0.0"}})
    why = cert_trust.refusal(ONE, lambda _id: {"io.envgen.stack": other})
    assert "forged or mismatched image ID" in why and "2.0.0" in why
    assert "no stack label" in cert_trust.refusal(ONE, lambda _id: {})


def test_a_certificate_of_the_locked_stack_must_be_of_the_locked_image():
    def lock(image_id, stack=ONE["stack"]):
        return {"stacks": {ONE["stack"]["stack"]: {"stack": stack, "image": {"id": image_id}}}}
    assert cert_trust.refusal(ONE, lock=lock(ONE["image_id"])) is None
    why = cert_trust.refusal(ONE, lock=lock("sha256:" + "1" * 64))
    assert why.startswith("the lock pins pytorch-cu130 as image sha256:11111111111")
    assert cert_trust.refusal(ONE, lock=lock("sha256:" + "1" * 64, NEWER["stack"] | {
        "framework": {**NEWER["stack"]["framework"], "version": "0.1"}})) is None


def test_hostile_inputs_are_refused_without_a_traceback(home, tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    (tmp_path / "bin.log").write_bytes(b"\xff\xfe\x00envgen")
    (tmp_path / "deep.json").write_text("[" * 100000)
    (tmp_path / "list.json").write_text("[1, 2]\n")
    (tmp_path / "empty").mkdir()
    r = cert_import.run_import([str(fifo), str(tmp_path / "bin.log"),
                                str(tmp_path / "deep.json"), str(tmp_path / "empty")])
    assert r["refused"] == 4 and r["imported"] == 0
    whys = [x["why"] for x in r["refusals"]]
    assert "FIFO" in whys[0] and "not UTF-8" in whys[1] and "no certificate" in whys[2]
    assert "no certificate (*.json)" in whys[3]


# ---- the real CLI between two stores -------------------------------------------------------

def test_import_and_merge_between_two_stores_keep_every_run_once(tmp_path):
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    log = tmp_path / "slurm-9.out"
    text = json.dumps(TWO, separators=(",", ":"))
    log.write_text(f"node gpu-7\nenvgen-certificate: {text}\n"
                   f"envgen-certificate: {text[:300]}\n")
    # host A: the real H200 runs and a Slurm log (one good line, one cut short)
    r = run_cli("certs", "import", str(REAL / "h200-1gpu.json"),
                str(REAL / "h200-1gpu-2026-12-01.json"), str(log), "--json", home=a)
    assert r.returncode == 2, r.stderr
    out = json.loads(r.stdout)
    assert (out["imported"], out["duplicates"], out["refused"]) == (3, 0, 1)
    assert out["refusals"][0]["line"] == 3 and out["refusals"][0]["exit_code"] == 2
    assert f"{log}:3: refused: a certificate line that is not one: truncated JSON" in r.stderr
    assert "Traceback" not in r.stderr
    # host B: a later run of A's 1x H200 key, piped in as `kubectl logs` output
    later = on(ONE, created="2026-12-02T09:00:00Z")
    r = run_cli("certs", "import", "-", home=b,
                stdin=f"envgen-certificate: {json.dumps(later)}\n")
    assert r.returncode == 0 and "1 imported, 0 already here, 0 refused" in r.stdout, r.stderr
    # B merges A: A's runs join; B's later run stays current; A's older run is history
    r = run_cli("certs", "merge", str(a), "--json", home=b)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["imported"], out["duplicates"], out["refused"]) == (3, 0, 0)
    lst = json.loads(run_cli("certs", "list", "--json", home=b).stdout)["certificates"]
    assert len(lst) == 3
    one = next(c for c in lst if c["image_id"] == ONE["image_id"] and c["gpu_count"] == 1)
    assert one["created"] == later["created"] and one["runs"] == 2
    assert one["gpu"] == "NVIDIA H200" and one["driver"] == "580.159.04"
    hist = json.loads(run_cli("certs", "list", "--history", "--json", home=b).stdout)
    assert len(hist["certificates"]) == 4
    # merging again, or A merging B back, loses nothing and adds no copy
    r = run_cli("certs", "merge", str(a / "certs"), "--json", home=b)
    assert json.loads(r.stdout)["imported"] == 0 and r.returncode == 0
    r = run_cli("certs", "merge", str(b), "--json", home=a)
    assert json.loads(r.stdout)["imported"] == 1
    assert len(json.loads(run_cli("certs", "list", "--history", "--json",
                                  home=a).stdout)["certificates"]) == 4
    r = run_cli("certs", "merge", str(a), home=a)
    assert r.returncode == 2 and "this envgen's own store" in r.stderr


def test_diff_fleet_shows_what_the_store_certified_on_each_host(home, tmp_path, capsys):
    certs.store(ONE)
    certs.store(cert(NEWER, passed=False, exit_code=1))
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text('hosts:\n  - name: h200-a\n    driver: "580.95.05"\n'
                     '    gpus: ["H200", "H200"]\n  - name: a100\n    driver: "580.95.05"\n'
                     '    gpus: ["A100"]\n')
    assert main(["diff", "--fleet", str(fleet), "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["fleet"]
    h200, a100 = f["hosts"]
    assert [(c["stack"], c["passed"], c["exact_driver"]) for c in h200["certified"]] == [
        ("pytorch-cu130", False, False)]   # the newest run of the stack failed
    assert a100["certified"] == []
    mx = f["certified"]
    assert [c["label"] for c in mx["columns"]] == ["NVIDIA H200, driver 580.159.04"]
    assert main(["diff", "--fleet", str(fleet)]) == 0
    text = capsys.readouterr().out
    assert "certified here: nothing in this envgen's store" in text
    assert "pytorch-cu130" in text.split("certified (this envgen's")[1]


# ---- a real image on the daemon ------------------------------------------------------------

@pytest.mark.docker
def test_a_certificate_naming_an_image_here_with_another_stack_is_refused(tmp_path):
    from envgen.runtime import docker as engine
    try:
        c = engine.client()
    except Exception:
        pytest.skip("no Docker daemon answers")
    tag = f"envgen-test/cert-store-label:{tmp_path.name[-20:].lower()}"
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    built = subprocess.run(["docker", "build", "-q", "--label",
                            f"io.envgen.stack={json.dumps(ONE['stack'])}",
                            "--label", f"io.envgen.test={tmp_path}", "-t", tag, str(ctx)],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "DOCKER_BUILDKIT": "1"})
    assert built.returncode == 0, built.stderr
    image_id = c.images.get(tag).id
    try:
        good = cert(ONE, image_id=image_id)
        forged = cert(ACC, image_id=image_id)   # another stack's pass, moved onto it
        files = []
        for name, x in (("good.json", good), ("forged.json", forged)):
            (tmp_path / name).write_text(json.dumps(x))
            files.append(str(tmp_path / name))
        r = run_cli("certs", "import", *files, "--json", home=tmp_path / "home")
        out = json.loads(r.stdout)
        assert r.returncode == 2 and out["images_compared"] is True, r.stderr
        assert out["imported"] == 1 and out["certificates"][0]["file"].endswith("good.json")
        assert "forged or mismatched image ID" in out["refusals"][0]["why"]
        assert f"forged.json:1: refused: image {image_id[:19]} on this daemon is " \
               f"pytorch-cu130 2.11.0, not the accelerate-cu130" in r.stderr
    finally:
        subprocess.run(["docker", "rmi", tag], capture_output=True, timeout=60)


def test_a_projects_certificate_is_listed_shown_and_imported_under_its_project_name(
        home, tmp_path, capsys, monkeypatch):
    """contract.md: a project's certificate is listed under NAME.STACK; certs list, show and
    import said the plain stack's name, while doctor and diff said trainer.pytorch-cu121."""
    sys.path.insert(0, str(ROOT / "tests"))
    from certificates import made
    c = made(image_id="sha256:" + "5e" * 32,
             stack={"stack": "pytorch-cu121", "project": {"name": "trainer"}})
    f = tmp_path / "c.json"
    f.write_text(json.dumps(c))
    assert main(["certs", "import", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["certificates"][0]["stack"] == \
        "trainer.pytorch-cu121"
    assert main(["certs", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["certificates"]
    assert [x["stack"] for x in listed] == ["trainer.pytorch-cu121"]
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["certs", "list"]) == 0
    assert "trainer.pytorch-cu121" in capsys.readouterr().out
    assert main(["certs", "show", "sha256:" + "5e" * 6]) == 0
    assert capsys.readouterr().out.startswith("trainer.pytorch-cu121: ")


@pytest.mark.parametrize("change", [
    lambda c: c.update(profile=5),
    lambda c: c["report"].update(checks=["x"]),
    lambda c: c["report"].update(checks=5),
    lambda c: c["report"].update(checks={}),
    lambda c: c["host"].update(gpus=["H100"]),
    lambda c: c.update(level=3)])
def test_a_store_file_edited_into_other_types_is_passed_over_not_a_crash(home, capsys,
                                                                        change):
    """The store's files can be edited by hand: one whose profile or checks are of another
    type ended report, certs show and doctor --image with an internal error (exit 4)."""
    certs.store(ONE)
    path = next(Path(home).rglob("*.json"))
    c = json.loads(path.read_text())
    change(c)
    path.write_text(json.dumps(c))
    assert main(["certs", "list", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["certificates"] == [] and "passed over" in out.err
    assert main(["certs", "show", ONE["image_id"]]) == 2


def test_a_certificates_number_where_text_goes_gets_no_yaml_hint():
    """A certificate is JSON: 'quote it: YAML reads 5 as a number' told the wrong story."""
    c = cert()
    c["profile"] = 5
    assert certificate.form_problem(c) == "profile 5 is not a run profile"
