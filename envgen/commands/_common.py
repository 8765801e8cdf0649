"""Helpers the command handlers share: printing progress, JSON output, resolving."""
from __future__ import annotations

import json
import sys


def progress(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def out_json(obj) -> None:
    print(json.dumps(obj, indent=2))


def cert_line(cert: dict) -> str:
    gpus = ", ".join(g["name"] for g in cert["host"]["gpus"]) or "no GPU"
    checks = cert["report"].get("checks", [])
    ran = [c for c in checks if not c.get("skipped")]
    ok = sum(1 for c in ran if c.get("passed"))
    skipped = len(checks) - len(ran)
    return (f"{'PASSED' if cert['passed'] else 'FAILED'} at level {cert['level']}: "
            f"{ok}/{len(ran)} checks passed"
            + (f" ({skipped} GPU-only checks not applicable)" if skipped else "")
            + f", {gpus}, driver {cert['host']['driver'] or '-'}, {cert['seconds']} s")


def failed_checks(cert: dict) -> list[str]:
    return [f"{c['name']}: {c.get('detail', '')}" for c in cert["report"].get("checks", [])
            if not c.get("passed")]
