"""Signals during a real GPU certification: SIGTERM must end envgen with 143 and remove the
container; after a SIGKILL the container is left, and the next envgen command reaps it.
Usage: python3 bench/gpu/signals.py MATRIX IMAGE OUT.json (run by bench/gpu/run.sh)."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time


def containers(pid: int) -> list[str]:
    r = subprocess.run(["docker", "ps", "-aq", "--filter",
                        f"label=io.envgen.owner={socket.gethostname()}:{pid}"],
                       capture_output=True, text=True)
    return r.stdout.split()


def gpu_processes() -> list[str]:
    r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name",
                        "--format=csv,noheader"], capture_output=True, text=True)
    return [ln for ln in r.stdout.splitlines() if ln.strip()]


def one(matrix: str, image: str, sig: int) -> dict:
    argv = [sys.executable, "-m", "envgen", "--matrix", matrix, "certify", image,
            "--gpus", "0", "--timeout", "300", "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not containers(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    started = containers(proc.pid)
    time.sleep(5)                      # the payload is on the GPU by now
    on_gpu = gpu_processes()
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    result = {"signal": signal.Signals(sig).name, "container_started": bool(started),
              "gpu_processes_before_signal": on_gpu, "exit_code": proc.returncode,
              "seconds_to_exit": round(time.monotonic() - t0, 2),
              "stderr_tail": err.strip().splitlines()[-1:] if err.strip() else [],
              "containers_left": containers(proc.pid)}
    if sig == signal.SIGKILL:
        t1 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "envgen", "doctor", "--json"],
                           capture_output=True, text=True)
        result["next_command"] = "envgen doctor"
        result["next_command_exit"] = r.returncode
        result["containers_left_after_next_command"] = containers(proc.pid)
        result["next_command_seconds"] = round(time.monotonic() - t1, 2)
    time.sleep(3)
    result["gpu_processes_after"] = gpu_processes()
    return result


def main() -> int:
    matrix, image, out = sys.argv[1:4]
    runs = [one(matrix, image, signal.SIGTERM), one(matrix, image, signal.SIGKILL)]
    ok = (runs[0]["exit_code"] == 143 and runs[0]["containers_left"] == []
          and runs[1]["containers_left"] != []
          and runs[1]["containers_left_after_next_command"] == []
          and not runs[0]["gpu_processes_after"] and not runs[1]["gpu_processes_after"])
    with open(out, "w") as f:
        json.dump({"ok": ok, "runs": runs}, f, indent=2)
    print(json.dumps({"ok": ok, "runs": runs}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
