"""Certification, whatever the engine: run the smoke-training payload inside an image and
turn its report into a certificate. The engine (runtime/engine.py) inspects the image and
starts the containers: on Docker with no network, as a non-root user with no
capabilities, under a time limit, removed on every exit path (Ctrl-C included); on
Apptainer contained, with a clean environment and the payload bound read-only. What the
certificate records of the engine is its Sandbox's; the rest is built here, once, with
certs.certificate.head and finish."""
from __future__ import annotations

import json
import re
import time

from ..certs import certificate
from ..core.errors import CheckFailed, EnvironmentMissing
from ..core.image import PAYLOAD_DIR
from ..core.model import Stack
from ..resolve import require_cuda
from ..resolve.compat import driver_cuda, kernels_for
from ..runtime import gpu_access
from ..runtime.docker import Target
from ..runtime.engine import Engine, Sandbox
from ..runtime.host import HostGpus
from ..smoke import SMOKE_DIR, payload_files


def preflight(target: Target, host: HostGpus, indices, matrix) -> list[str]:
    """Refuse before starting when this host cannot run the image; return notes."""
    notes = []
    if not indices:
        return notes
    st = target.stack
    cuda = driver_cuda(matrix, host.driver) if matrix else None
    gpu = host.gpus[indices[0]]
    mgpu = matrix.gpu(gpu.name) if matrix else None
    rhost = require_cuda.Host(driver=host.driver, cuda=cuda or "0.0",
                              brand=mgpu.brand if mgpu else None, arch=gpu.cc)
    if mgpu is not None and host.driver:
        from ..resolve.compat import gpu_knows
        known = gpu_knows(matrix, mgpu, host.driver)
        if not known.ok:
            raise CheckFailed(f"this host cannot run {target.stack.stack}: {known.why}")
    d = require_cuda.evaluate(target.env, rhost)
    if not d.ok:
        raise CheckFailed(f"this host cannot run {target.stack.stack}: {d.why}")
    notes.append(f"NVIDIA_REQUIRE_*: {d.why}")
    if st.cuda and gpu.cc:
        k = kernels_for(st.as_variant(), gpu.cc)
        if not k.ok:
            raise CheckFailed(f"the {gpu.name} cannot run {st.stack}: {k.why}")
        notes.append(k.why)
    return notes


def _strict(text: str):
    """JSON as the store reads it back: NaN and Infinity (a diverged loss, 1e999) are no
    JSON, so they are kept as null (a report holding them passed here and was then
    unreadable in the store)."""
    import math

    def number(t: str):
        f = float(t)
        return f if math.isfinite(f) else None
    return json.loads(text, parse_constant=lambda _word: None, parse_float=number)


def _report(stdout: str) -> dict | None:
    """The payload's report: the last stdout line that is a JSON object with its checks (a
    line an atexit hook prints after it is not taken for it); None when there is none."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                got = _strict(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(got, dict) and "checks" in got:
                return got
    try:
        got = _strict(stdout)
    except (ValueError, RecursionError):
        return None
    return got if isinstance(got, dict) and "checks" in got else None


def gpu_indices(gpus: str, host: HostGpus) -> list[int] | None:
    """The GPUs `--gpus` names on `host` (None for none); EnvironmentMissing when it asks
    for a GPU this host does not have."""
    indices = gpu_access.parse_gpus(gpus, host)   # its listing: the GPUs' UUIDs too
    if gpus not in ("none", "auto") and not indices:
        raise EnvironmentMissing(f"--gpus {gpus} asks for a GPU, but this host has none "
                                 f"({host.error or 'nvidia-smi lists no GPU'})")
    return indices


# The harness logs each check as `[torch_smoke 12:00:01] PASS train: loss 2.3 -> 0.4 ...`.
_CHECK_LINE = re.compile(r"^\[[\w]+_smoke [0-9:]+\] (PASS|SKIP|FAIL) ([\w.-]+): (.*)$")


def project_smoke(box: Sandbox, argv: tuple[str, ...], timeout: int) -> dict:
    """The project's own smoke command, in a container started as the payload's was: a
    check that passes when it exits 0, with the last lines of its output."""
    import shlex
    started = time.monotonic()
    try:
        code, stdout, stderr = box.run(list(argv), timeout)
    except TimeoutError:
        code, stdout, stderr = None, "", f"killed after {timeout} s"
    tail = " | ".join((stdout + stderr).strip().splitlines()[-3:])[-300:]
    return {"name": "project smoke", "passed": code == 0,
            "detail": f"{shlex.join(argv)[:120]} exited {code}"
                      f"{': ' + tail if tail else ''}",
            "seconds": round(time.monotonic() - started, 2), "exit_code": code}


def check_lines(progress):
    """A stderr-line handler that reports the payload's checks to `progress` as Events."""
    from ..core.progress import Event

    def on_line(line: str) -> None:
        m = _CHECK_LINE.match(line.strip())
        if m:
            word, name, detail = m.groups()
            passed = word != "FAIL"
            state = {"PASS": "passed", "SKIP": "skipped", "FAIL": "failed"}[word]
            progress(Event("check", f"check {name}: {state} ({detail[:100]})",
                           {"name": name, "passed": passed, "state": state}))
    return on_line


def payload_argv(st: Stack, payload: str, require: str, timeout: int,
                 steps: int | None = None, multi_gpu: bool = False,
                 measure: str = "basic") -> list[str]:
    """The payload's command line: the versions the stack promises, the level asked for,
    and its own time limit (30 s inside the run's). Docker, Apptainer and a Kubernetes pod
    run the same one."""
    expect = {"framework": st.version, "cuda": st.cuda, "cudnn": st.cudnn, "nccl": st.nccl}
    if dict(st.base.provides).get(st.framework_package):
        expect["framework"] = dict(st.base.provides)[st.framework_package].split("+")[0]
    if st.builds_on:   # the base framework and everything over it, as installed
        pins = {**dict(st.packages), **dict(st.base.provides)}
        exact = {n: pins[n].split("+")[0] for n in (st.builds_on_package, *st.addons)
                 if n in pins and pins[n][:1].isdigit()}
        expect["packages"] = exact
    cmd = ["python", payload, "--expect", json.dumps(expect),
           "--require", require, "--timeout", str(max(30, timeout - 30))]
    if steps:
        cmd += ["--steps", str(steps)]
    if multi_gpu:
        cmd.append("--multi-gpu")
    if measure == "full":
        cmd += ["--measure", "full"]
    return cmd


def payload_command(st, cuda: bool, timeout: int, steps: int | None = None,
                    multi_gpu: bool = False, measure: str = "basic") -> tuple[str, list[str]]:
    """The payload's path in an envgen image and the command that runs it."""
    payload = f"{PAYLOAD_DIR}/{st.smoke}_smoke.py"
    return payload, payload_argv(st, payload, "cuda" if cuda else "cpu", timeout, steps,
                                 multi_gpu, measure)


def certify(engine: Engine, ref: str, host: HostGpus, gpus: str = "auto",
            access: str = "auto", timeout: int = 900, steps: int | None = None,
            multi_gpu: bool = False, matrix=None, tags: tuple[str, ...] = (), progress=None,
            measure: str = "basic") -> dict:
    """Certify the image `ref` on `engine` (runtime/engine.py: Docker or Apptainer);
    returns the certificate (passed or not). Raises for bad input, a missing environment,
    or a host that cannot run the image at all. `tags`: names the image will get once it
    passes (it may have none yet: tags come after certification). `progress` hears of each
    check as the payload reports it. `measure` "full" adds the habits of a training run
    (the payload's --measure full)."""
    target = engine.inspect(ref)
    indices = gpu_indices(gpus, host)
    does = engine.certifies
    notes = preflight(target, host, indices, matrix) if "preflight" in does else []
    st = target.stack
    own = tuple(SMOKE_DIR / name for name in payload_files(st.smoke))
    with engine.sandbox(ref, target, indices, access, own) as box:
        engine_host = engine.host()
        payload = box.payload_path(st.smoke)
        cmd = payload_argv(st, payload, "cuda" if indices else "cpu", timeout, steps,
                           multi_gpu, measure)
        started = time.monotonic()
        try:
            code, stdout, stderr = box.run(
                cmd, timeout, on_stderr_line=check_lines(progress) if progress else None,
                payload=payload)
        except TimeoutError:
            raise CheckFailed(f"the smoke payload did not finish within {timeout} s "
                              f"({box.ended}); raise --timeout or lower --steps") from None
        report = _report(stdout)
        if report is None:
            raise CheckFailed(box.no_report(code, stderr))
        for fix in box.notes():
            notes.append(fix)
            if progress:
                progress(fix)
        if "project smoke" in does and st.project is not None and st.project.smoke:
            check = project_smoke(box, st.project.smoke, timeout)
            report = {**report, "checks": [*report.get("checks", []), check],
                      "passed": bool(report.get("passed")) and check["passed"]}
            if progress:
                progress(f"{'PASS' if check['passed'] else 'FAIL'} {check['name']}: "
                         f"{check['detail']}"[:200])
    start = certificate.head(
        image_id=target.image_id, image_content=box.content, digests=target.repo_digests,
        tags=sorted(set(target.tags) | set(tags)),
        profile="-".join(filter(None, (
            box.profile,
            certificate.profile_of("cuda" if indices else "cpu", bool(host.gpus), steps,
                                   multi_gpu),
            "full" if measure == "full" else ""))),
        params={"gpus": gpus, "steps": steps, "multi_gpu": multi_gpu, "timeout": timeout,
                **({"measure": measure} if "measure" in does else {})},
        stack=st, payload=box.payload_record(payload))
    return certificate.finish(
        start, report=report, code=code, started=started, preflight=notes,
        host={"driver": host.driver,
              # the GPUs handed to the run: none for --gpus none (the host's others are
              # not where it ran: docs/certificate-store.md keys it without them)
              "gpus": [g.__dict__ for g in host.gpus if indices and g.index in indices],
              "gpu_access": box.gpu_access, **engine_host},
        **box.record())
