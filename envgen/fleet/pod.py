"""What a Kubernetes pod of `envgen fleet --kubernetes` runs, as `python -c SOURCE`, in the
stack's image: the smoke payload (the command `envgen certify` runs), then its certificate
printed as one line `envgen-certificate: {...}`. Only the standard library: the image has
no envgen. Everything known before the run comes in $CERTIFY_TEMPLATE (JSON)."""
import hashlib
import json
import os
import subprocess
import sys
import time


def _gpus():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return [], None
    rows = [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
    return ([{"index": int(r[0]), "name": r[1]} for r in rows if len(r) == 3 and
             r[0].isdigit()], rows[0][2] if rows and len(rows[0]) == 3 else None)


def _report(stdout):
    """The last stdout line that is a JSON object with the payload's checks."""
    for line in reversed(stdout.strip().splitlines()):
        if line.strip().startswith("{"):
            try:
                got = json.loads(line, parse_constant=lambda _w: None)
            except (ValueError, RecursionError):
                continue
            if isinstance(got, dict) and "checks" in got:
                return got
    return None


PREFIX = "envgen-certificate:"


def _relay(stream):
    """The payload's stderr into the pod's log as it comes, every line of it marked as the
    payload's ("payload stderr: "), split wherever any reader of the log may split it (a
    \\x1c or a \\u2028 is a line break to str.splitlines): the log's certificate line is
    only ever the one main() prints, whatever the payload writes."""
    for chunk in iter(stream.readline, ""):
        for line in chunk.splitlines():
            sys.stderr.write("payload stderr: " + line + "\n")
        sys.stderr.flush()


def main():
    base = json.loads(os.environ["CERTIFY_TEMPLATE"])
    cmd = base.pop("command")
    started = time.monotonic()
    with open(base["payload"]["path"], "rb") as f:
        base["payload"]["sha256"] = hashlib.sha256(f.read()).hexdigest()
    import threading
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    relay = threading.Thread(target=_relay, args=(proc.stderr,), daemon=True)
    relay.start()
    out = proc.stdout.read()
    proc.wait()
    relay.join(timeout=10)
    proc = subprocess.CompletedProcess(cmd, proc.returncode, out, None)
    report = _report(proc.stdout) or {"passed": False, "checks": [
        {"name": "payload", "passed": False,
         "detail": f"the smoke payload exited {proc.returncode} without a report"}]}
    gpus, driver = _gpus()
    cert = {**base, "level": report.get("level"), "exit_code": proc.returncode,
            "passed": bool(report.get("passed")) and proc.returncode == 0,
            "host": {"driver": driver, "gpus": gpus, "gpu_access": "kubernetes",
                     "node": os.environ.get("CERTIFY_NODE"),
                     "pod": os.environ.get("CERTIFY_POD")},
            "preflight": [], "report": report,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.monotonic() - started, 2)}
    print(f"{PREFIX} " + json.dumps(cert, separators=(",", ":"), sort_keys=True,
                                    allow_nan=False), flush=True)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
