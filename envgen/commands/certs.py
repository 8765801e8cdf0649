"""`envgen certs list|show`."""
from __future__ import annotations

from .. import certs
from ._common import out_json, table


def _show(cert: dict) -> None:
    """A certificate for a person: what was certified, where, and the verdict per check."""
    from ..smoke._harness import tally
    st = cert.get("stack") or {}
    host = cert.get("host") or {}
    print(f"{st.get('stack')}: {cert.get('image_id')}")
    print(f"  tags:      {', '.join(cert.get('image_tags') or []) or '-'}")
    print(f"  run:       {cert.get('profile') or 'default'}, level {cert.get('level')}, "
          f"{cert.get('created') or '-'}, {cert.get('seconds')} s")
    gpus = ", ".join(str(g.get("name")) for g in host.get("gpus") or [] if isinstance(g, dict))
    print(f"  host:      {gpus or 'no GPU'}, driver {host.get('driver') or '-'}")
    checks = (cert.get("report") or {}).get("checks") or []
    print(f"  verdict:   {'PASSED' if cert.get('passed') else 'FAILED'}: {tally(checks)}")
    for c in checks:
        mark = "skip" if c.get("skipped") and c.get("passed") else \
            ("ok" if c.get("passed") else "FAIL")
        print(f"    {mark:4}  {c.get('name')}: {c.get('detail', '')}")
    print("  (the whole certificate: --json)")


def run(args) -> int:
    if args.action == "show":
        cert = certs.find(args.image)
        if args.json:
            out_json(cert)
        else:
            _show(cert)
        return 0
    rows = certs.load_all()
    if args.json:
        keys = ("image_id", "image_tags", "level", "passed", "created")
        out_json({"certificates": [{k: c.get(k) for k in keys}
                                   | {"stack": c["stack"]["stack"],
                                      "profile": c.get("profile") or ""} for c in rows]})
        return 0
    print(table([[c["image_id"][7:19], c["stack"]["stack"], ",".join(c.get("image_tags", [])),
                   c.get("profile") or "default", c.get("level") or "-",
                   "yes" if c["passed"] else "NO", c.get("created") or "-",
                   ",".join(str(g.get("name")) for g in c.get("host", {}).get("gpus") or []
                            if isinstance(g, dict)) or "-"] for c in rows],
                 ["image", "stack", "tags", "run", "level", "passed", "created", "gpus"]))
    return 0
