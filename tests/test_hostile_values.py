"""Every command, every argument, every hostile value: about a thousand runs of the real
CLI entry point with no daemon listening. None may end in a traceback, an internal error
(exit 4), an exit code outside design.md's, a message that echoes kilobytes, or take longer
than the daemon ping timeout allows. The curated cases with their exact messages are in
tests/bad_inputs/; this sweep is the net under them."""
from __future__ import annotations

import os
import time

import pytest

from envgen.cli import main

VALUES = ["", " ", "\n", "a\nb", "-", "--", "x" * 5000, "9" * 5000, "../../etc/passwd",
          "/dev/zero", "{fifo}", "$(id)", "\x00", "é", "0", "-1", "1e400", "nan", "all",
          "none", "sha256:", "sha256:" + "0" * 64, "Team/Img:tag", "a" * 300 + ":b",
          "localhost:99999/x"]
SOURCE = "envgen-gpu==0.2.0 --hash=sha256:" + "a" * 64
FORMS = [
    ["resolve", "{v}"], ["resolve", "torch", "--driver", "{v}"],
    ["resolve", "torch", "--gpu", "{v}"], ["resolve", "torch", "--cc", "{v}"],
    ["resolve", "torch", "--python", "{v}"], ["resolve", "torch", "--sources", "{v}"],
    ["render", "{v}", "-o", "{tmp}/out"], ["render", "pytorch-cu121", "-o", "{v}"],
    ["closure", "{v}"],
    ["--matrix", "{v}", "matrix", "validate"], ["matrix", "list", "--driver", "{v}"],
    ["matrix", "list", "--gpu", "{v}"],
    ["matrix", "refresh", "{v}", "--check"],
    ["--matrix", "{v}", "matrix", "refresh", "pytorch", "--check"],
    ["matrix", "refresh", "pytorch", "--check", "--index-url", "{v}"],
    ["matrix", "refresh", "pytorch", "--check", "--jobs", "{v}"],
    ["ci", "github", "--refresh", "--envgen-source", "{v}"],
    ["certify", "{v}", "--gpus", "none"], ["certify", "pytorch-cu121", "--gpus", "{v}"],
    ["certify", "x", "--gpu-access", "{v}"], ["certify", "x", "--timeout", "{v}"],
    ["build", "{v}"], ["build", "pytorch-cu121", "--tag", "{v}"],
    ["build", "pytorch-cu121", "--certify", "--gpus", "{v}"],
    ["certs", "show", "{v}"],
    ["lock", "{v}", "-o", "{tmp}/o.lock"], ["lock", "--merge", "{v}", "-o", "{tmp}/o.lock"],
    ["lock", "pytorch-cu121", "-o", "{v}"],
    ["lock", "pytorch-cu121", "--push", "{v}", "-o", "{tmp}/o.lock"],
    ["verify", "{v}"],
    ["diff", "{v}", "{v}"], ["diff", "--driver", "{v}"], ["diff", "--driver", "535.1..{v}"],
    ["diff", "--fleet", "{v}", "--driver", "535.1..580.1"],
    ["diff", "--gpu", "{v}", "--driver", "535.1..580.1"],
    ["ci", "github", "{v}"], ["ci", "github", "pytorch-cu121", "--envgen-source", "{v}"],
    ["ci", "github", "pytorch-cu121", "--registry", "{v}", "--envgen-source", SOURCE],
    ["ci", "bake", "{v}"],
    ["require-cuda", "check", "{v}", "--driver", "535.104.05"],
    ["require-cuda", "check", "cuda>=12", "--driver", "{v}"],
    ["require-cuda", "check", "cuda>=12", "--driver", "535.104.05", "--cuda", "{v}"],
    ["require-cuda", "check", "cuda>=12", "--driver", "535.104.05", "--env", "{v}"],
    ["require-cuda", "check", "cuda>=12", "--driver", "535.104.05", "--arch", "{v}"],
    ["smoke", "--steps", "{v}"],
    ["init", "{v}", "--force"], ["init", "pytorch-cpu", "--name", "{v}", "--force"],
    ["init", "pytorch-cpu", "-o", "{v}"],
    ["fleet", "{v}", "--slurm", "-o", "{tmp}/run"], ["fleet", "{v}", "--kubernetes", "-o",
                                                     "{tmp}/k8s"],
    ["fleet", "{tmp}/fleet.yaml", "--slurm", "--collect", "{v}"],
    ["fleet", "{tmp}/fleet.yaml", "--slurm", "--resubmit-failed", "{v}"],
]
FLEET = "stacks: [pytorch-cu121]\ntargets: [{name: a, partition: p}]\n"


@pytest.mark.parametrize("form", FORMS, ids=lambda f: " ".join(f))
def test_no_hostile_value_breaks_a_command(form, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing-listens.sock")
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENVGEN_DOCKER_PING_TIMEOUT", "2")
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "fleet.yaml").write_text(FLEET)
    broken = []
    for value in VALUES:
        value = value.replace("{fifo}", str(tmp_path / "fifo"))
        argv = [a.replace("{v}", value).replace("{tmp}", str(tmp_path)) for a in form]
        started = time.monotonic()
        rc = main(argv)
        took = time.monotonic() - started
        out, err = capsys.readouterr()
        first = err.splitlines()[0] if err.strip() else ""
        if (rc not in (0, 1, 2, 3) or "Traceback" in out + err or took > 15
                or len(first) > 1100):
            broken.append(f"{value[:20]!r}: exit {rc}, {took:.0f} s: {first[:200]}")
    assert not broken, "\n".join(broken)
