"""What a person should change, read from a certificate: one line per finding, each naming
the fix (shared memory too small, start-up that compiles its bytecode every time, a GPU that
is throttled or idle, an input pipeline slower than training)."""
from __future__ import annotations


def advice(cert: dict) -> list[str]:
    """`check: fix` for each failed check that names its fix and each warning; then the
    telemetry's warnings. No line twice."""
    report = cert.get("report") or {}
    lines = []
    for c in report.get("checks") or []:
        fix = c.get("fix") if isinstance(c, dict) else None
        if isinstance(fix, str) and fix and (not c.get("passed") or c.get("warning")):
            lines.append(f"{c.get('name')}: {fix}")
    for source in (report.get("telemetry") or {}, (report.get("habits") or {}).get("telemetry")
                   or {}):
        for w in source.get("warnings") or [] if isinstance(source, dict) else []:
            if isinstance(w, str):
                lines.append(f"telemetry: {w}")
    refused = (cert.get("run_profile") or {}).get("ulimits_refused")
    if isinstance(refused, list) and refused:
        from ..runtime.profile import Profile, refusal_fix
        lines.append(f"run profile: {refusal_fix(Profile(refused=tuple(map(str, refused))))}")
    seen, out = set(), []
    for line in lines:
        if line not in seen:
            seen.add(line)
            out.append(" ".join(line.split())[:400])
    return out
