"""Certificates for tests, made from a real one (the H200 run on record in
docs/certificates/): every test that stores a certificate gives the store one that passes
the judgement each door applies (cert_trust), changed only where the test says."""
from __future__ import annotations

import copy
import json
from pathlib import Path

REAL = json.loads((Path(__file__).resolve().parents[1] / "docs/certificates/h200-1gpu.json")
                  .read_text())
REAL.pop("_path", None)


def made(*, image_id: str | None = None, stack: dict | None = None, passed: bool = True,
         created: str | None = None, profile: str = "", tags=(), gpus=None,
         driver: str | None = "580.159.04", level: str | None = None,
         checks: list | None = None, **extra) -> dict:
    """A certificate: `gpus` names the GPUs (None: the real H200; [] a run on no GPU);
    a failed one has a failed check and a payload that exited 1, as certify writes it."""
    c = copy.deepcopy(REAL)
    if image_id is not None:
        c["image_id"] = image_id
    if stack is not None:
        c["stack"] = stack if "framework" in stack else {**c["stack"], **stack}
    if created is not None:
        c["created"] = created
    c["profile"] = profile
    c["image_tags"] = list(tags)
    if gpus is not None:
        c["host"]["gpus"] = [{"index": i, "name": n} for i, n in enumerate(gpus)]
        if not gpus:
            c["level"] = "cpu"
    c["host"]["driver"] = driver
    if level is not None:
        c["level"] = level
    c["report"]["level"] = c["level"]   # the level is the payload's own, as certify copies it
    if c["level"] == "multi-gpu" and checks is None:
        # a pass at level multi-gpu must show a multi_gpu check that ran (pass_problem):
        # the two-GPU run's own, as docs/certificates/h200-2gpu.json records them
        c["report"]["checks"] += [
            {"name": "multi_gpu_allreduce", "passed": True, "detail": "2 GPUs, all-reduce correct"},
            {"name": "multi_gpu_ddp", "passed": True, "detail": "DDP, loss fell"}]
    if checks is not None:
        c["report"]["checks"] = checks
    if not passed:
        c["report"]["checks"] = [*c["report"]["checks"][:1],
                                 {"name": "train", "passed": False, "detail": "loss is nan"}]
        c["report"]["passed"] = False
        c["exit_code"] = 1
    c["passed"] = passed
    return c | extra
