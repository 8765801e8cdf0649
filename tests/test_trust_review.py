"""The trust chain as a reviewer attacked it (the inputs of /tmp/rev5, made here): a lock
check sidestepped by a sentence of `reasons`; verify taking a lock's pass over this host's
failure, a cpu-level pass for a CUDA stack or a certificate of another stack; a CPU run
recorded on the host's GPUs; passes whose own record contradicts them; `lock --merge` and
`certs merge` deciding a conflict silently; a folder's links and FIFOs skipped unsaid. Each
test failed on the code before its fix."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from certificates import made
from test_doctor import H200_580
from test_lock import FakeClient, entry, image_of
from test_verify import _mini_stack, kinds, lock_of, probe_of

from envgen import doctor as dr
from envgen.certs import certificate
from envgen.certs import store as certs
from envgen.certs import trust as cert_trust
from envgen.certs.view import on_host
from envgen.cli import main
from envgen.lock import verify as vf
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve
from envgen.runtime import host

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture(scope="module")
def m():
    return load_matrix()


@pytest.fixture(scope="module")
def cu121(m):
    return resolve(m, parse_spec("pytorch-cu121", m), Host()).to_json()


def _lock_file(path: Path, stack: dict, image_id: str = A, cert=None) -> Path:
    """A lock as `envgen lock` writes it: one entry of `stack` pinning `image_id`."""
    e = {"stack": copy.deepcopy(stack),
         "image": {"tag": "envgen/pytorch-cu121:2.4.1", "id": image_id, "repo_digests": [],
                   "pinned": None, "layers": []},
         "base": {"reference": "envgen/base", "name": None, "id": None},
         "requirements": [{"name": "six", "version": "1.16.0",
                           "file": "six-1.16.0-py2.py3-none-any.whl",
                           "hashes": ["sha256:" + "b" * 64]}],
         "certificate": cert}
    path.write_text(json.dumps({"lock_version": 1, "created": "2026-12-01T00:00:00Z",
                                "matrix_sha256": "x", "stacks": {stack["stack"]: e}},
                               indent=2))
    return path


# ---- 1. the lock check compares what names a stack, not its prose -------------------------

def test_a_sentence_added_to_reasons_does_not_sidestep_the_lock_check(cu121, home, tmp_path,
                                                                      capsys):
    lock = _lock_file(tmp_path / "envgen.lock", cu121)
    tweaked = copy.deepcopy(cu121)
    tweaked["reasons"] = [*tweaked["reasons"], "tweaked"]
    cert = tmp_path / "c.json"
    cert.write_text(json.dumps(made(image_id=B, stack=tweaked, gpus=[H100])))
    assert main(["certs", "import", "--lock", str(lock), str(cert)]) == 2
    assert "the lock pins pytorch-cu121 as image sha256:aaaaaaaaaaaa" in capsys.readouterr().err
    assert not (home / "certs").exists() or not list((home / "certs").glob("*.json"))
    # another pin is another stack: its certificate is not the locked image's to refuse
    other = copy.deepcopy(cu121)
    other["packages"]["torch"] = "2.4.0"
    lk = json.loads(lock.read_text())
    assert cert_trust.lock_problem(made(image_id=B, stack=other), lk) is None


# ---- 2. verify: this host's failures, the level a stack needs, the certificate's stack ----

def _verify(e, stack):
    e["image"]["tag"] = "envgen/pytorch-cu121:2.3.1-py3.11"
    return vf.verify(FakeClient(image_of(stack)), lock_of(stack, **{"pytorch-cu121": e}),
                     probe=probe_of({"six": "1.16.0"}), cert_for=lambda i, c=None: None)


def _locked_pass(stack, **kw):
    e = entry(stack)
    e["certificate"] = made(image_id=e["image"]["id"], stack=stack.to_json(),
                            created="2026-11-30T08:00:00Z", **kw)
    return e


def test_a_failure_in_this_hosts_store_is_drift_whatever_pass_the_lock_embeds(home):
    stack = _mini_stack()
    e = _locked_pass(stack)
    certs.store(made(image_id=e["image"]["id"], stack=stack.to_json(), passed=False,
                     created="2026-12-01T08:00:00Z"))
    r = _verify(e, stack)
    assert not r["ok"] and kinds(r) == ["certificate"]
    assert "hold a failure" in r["stacks"]["pytorch-cu121"]["drift"][0]["message"]


def test_a_later_pass_of_the_same_gpu_answers_a_failure_but_one_elsewhere_does_not(home):
    stack = _mini_stack()
    e = _locked_pass(stack)
    certs.store(made(image_id=e["image"]["id"], stack=stack.to_json(), passed=False,
                     created="2026-11-29T08:00:00Z"))      # the lock's H200 pass is later
    assert _verify(e, stack)["ok"]
    certs.store(made(image_id=e["image"]["id"], stack=stack.to_json(), passed=False,
                     created="2026-11-29T08:00:00Z", gpus=[H100]))
    r = _verify(e, stack)
    assert kinds(r) == ["certificate"] and H100 in r["stacks"]["pytorch-cu121"]["drift"][0][
        "message"]


def test_a_cuda_stack_locked_with_only_a_cpu_level_pass_is_drift(home):
    stack = _mini_stack()
    r = _verify(_locked_pass(stack, gpus=[]), stack)
    assert kinds(r) == ["certificate"]
    assert "is at level cpu" in r["stacks"]["pytorch-cu121"]["drift"][0]["message"]
    assert any("level (a CUDA stack needs a GPU run)" in s for s in r["not_checked"])


def test_a_locked_certificate_of_another_stack_is_drift(home):
    stack = _mini_stack()
    e = _locked_pass(stack)
    e["certificate"]["stack"]["stack"] = "pytorch-cpu"
    r = _verify(e, stack)
    assert "is of stack pytorch-cpu, not of pytorch-cu121" in \
        r["stacks"]["pytorch-cu121"]["drift"][0]["message"]
    e = _locked_pass(stack)
    e["certificate"]["stack"]["reasons"] = ["reworded"]   # prose is not the stack
    assert _verify(e, stack)["ok"]


# ---- 3. a CPU run is recorded, keyed and counted on no GPU --------------------------------

def test_certify_gpus_none_records_no_gpu_of_the_host(m):
    import fakes
    from test_certify_unit import H200_SMI, FakeClient, FakeImage, _report, _stack, certify
    st = _stack(m, "pytorch-cu121")
    c = FakeClient(FakeImage(st, {"NVIDIA_REQUIRE_CUDA": st.require_cuda}),
                   fakes.FakeContainer(_report()))
    cert = certify(c, "x", host.parse_query(H200_SMI), gpus="none", matrix=m)
    assert cert["host"]["gpus"] == [] and cert["profile"] == "cpu"
    assert certificate.where(cert) == {"gpu": None, "count": 0, "driver": None}


def _older_cpu_run():
    """`--gpus none` on a 2x H200 host as envgens before this fix wrote it."""
    c = made(image_id="sha256:" + "1" * 64, profile="cpu", level="cpu",
             gpus=["NVIDIA H200", "NVIDIA H200"])
    c["report"]["require"] = "cpu"
    return c


def test_an_older_cpu_run_listing_the_hosts_gpus_is_keyed_and_counted_on_no_gpu(home):
    cert = _older_cpu_run()
    assert cert_trust.refusal(cert) is None     # honest: kept, on no GPU
    assert certs.file_name(cert) == "1" * 64 + ".cpu.json"
    assert on_host([cert], {"H200"}, "580.159.04", lambda n: "H200") == []


def test_doctor_takes_the_level_from_the_certificate(m):
    cert = made(image_id="sha256:" + "ab" * 32, stack={"stack": "pytorch-cu128"},
                gpus=["NVIDIA H200", "NVIDIA H200"], level="multi-gpu")
    here = dr.certified_here(m, [cert], host.parse_query(H200_580))
    assert here["pytorch-cu128"]["level"] == "multi-gpu"


# ---- 4. passes their own record contradicts ------------------------------------------------

def _all_skipped(c):
    c["report"]["checks"] = [{"name": n, "passed": True, "skipped": True, "detail": "no GPU"}
                             for n in ("cuda_available", "train")]


@pytest.mark.parametrize("change, words", [
    (_all_skipped, "every check of its payload was skipped"),
    (lambda c: c["report"].update(device=None), "names no GPU device"),
    (lambda c: c["report"].update(require="cpu"), "was run with --require cpu"),
    (lambda c: c.update(level=None) or c["report"].update(level=None), "with no level"),
    (lambda c: c.update(exit_code=0.0), "exited 0.0, not 0"),
    (lambda c: c["report"].update(payload="jax_smoke"), "report is of 'jax_smoke', not "
                                                        "torch_smoke"),
])
def test_a_pass_its_own_record_contradicts_is_refused(change, words):
    c = made()
    assert cert_trust.refusal(c) is None
    change(c)
    assert words in cert_trust.refusal(c)


# ---- 5. lock --merge refuses two different entries of one stack ----------------------------

def test_lock_merge_refuses_two_different_entries_of_one_stack(cu121, home, tmp_path, capsys):
    a = _lock_file(tmp_path / "a.lock", cu121, A)
    b = _lock_file(tmp_path / "b.lock", cu121, B)
    out = tmp_path / "out.lock"
    assert main(["lock", "--merge", str(a), str(b), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{b}:6: lock --merge: stack pytorch-cu121 is pinned both here and in {a}:6" in err
    assert not out.exists()
    assert main(["lock", "--merge", str(a), str(a), "-o", str(out)]) == 0   # identical


# ---- 6. a tie of a pass and a failure keeps the failure, and says so -----------------------

@pytest.mark.parametrize("order", [("pass", "fail"), ("fail", "pass")])
def test_merging_a_pass_and_a_failure_of_the_same_time_keeps_the_failure(home, tmp_path,
                                                                         capsys, order):
    stores = {}
    for name, passed in (("pass", True), ("fail", False)):
        d = tmp_path / name / "certs"
        d.mkdir(parents=True)
        (d / "x.json").write_text(json.dumps(made(image_id="sha256:" + "c3" * 32,
                                                  passed=passed,
                                                  created="2026-12-06T10:00:00Z")))
        stores[name] = str(tmp_path / name)
    assert main(["certs", "merge", *(stores[o] for o in order), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert [x["passed"] for x in certs.load_all()] == [False]
    assert len(r["conflicts"]) == 1 and "the failure stays current" in r["conflicts"][0]["why"]


# ---- 7. a folder's links and FIFOs are named, not silently skipped -------------------------

def test_a_folders_links_and_fifos_are_named_as_skipped(home, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "d.json").write_text(json.dumps(made(image_id="sha256:" + "d" * 64)))
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "real.json").write_text(json.dumps(made(image_id="sha256:" + "e" * 64)))
    (folder / "f.json").symlink_to(outside / "d.json")
    (folder / "sub" / "link").symlink_to(outside)
    os.mkfifo(folder / "pipe.json")
    assert main(["certs", "import", str(folder), "--json"]) == 0
    out = capsys.readouterr()
    r = json.loads(out.out)
    assert r["imported"] == 1 and [x["file"] for x in r["skipped"]] == [
        str(folder / "f.json"), str(folder / "pipe.json"), str(folder / "sub" / "link")]
    assert f"envgen: {folder / 'pipe.json'}: skipped: not a regular file" in out.err


def test_verify_level_cpu_accepts_the_build_jobs_cpu_pass_and_nothing_lower():
    """The GPU job of `ci github` verifies the build job's lock (a CPU pass) with --level
    cpu before it certifies on the GPU; without --level a CUDA stack needs a GPU run."""
    from envgen.lock.verify import _level_problem
    stack = {"stack": "pytorch-cu121", "cuda": "12.1"}
    assert _level_problem(stack, {"level": "cpu"}) is not None
    assert _level_problem(stack, {"level": "cpu"}, "cpu") is None
    assert _level_problem(stack, {"level": "cuda"}, "cpu") is None
    assert "below the --level cuda" in _level_problem(stack, {"level": "cpu"}, "cuda")
    assert _level_problem(stack, {"level": None}, "cpu") is not None
