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
    for line in reversed(stdout.strip().splitlines()):
        if line.strip().startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def main():
    base = json.loads(os.environ["CERTIFY_TEMPLATE"])
    cmd = base.pop("command")
    started = time.monotonic()
    with open(base["payload"]["path"], "rb") as f:
        base["payload"]["sha256"] = hashlib.sha256(f.read()).hexdigest()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
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
    print("envgen-certificate: " + json.dumps(cert, separators=(",", ":"), sort_keys=True),
          flush=True)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
