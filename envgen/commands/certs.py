"""`envgen certs list|show`."""
from __future__ import annotations

from .. import certs
from ._common import out_json, table


def run(args) -> int:
    if args.action == "show":
        cert = certs.find(args.image)
        out_json(cert)   # a certificate is shown as its JSON, with or without --json
        return 0
    rows = certs.load_all()
    if args.json:
        out_json([{k: c.get(k) for k in ("image_id", "image_tags", "level", "passed",
                                          "created")} | {"stack": c["stack"]["stack"],
                                                         "profile": c.get("profile") or ""}
                  for c in rows])
        return 0
    print(table([[c["image_id"][7:19], c["stack"]["stack"], ",".join(c.get("image_tags", [])),
                   c.get("profile") or "default", c.get("level") or "-",
                   "yes" if c["passed"] else "NO", c.get("created") or "-",
                   ",".join(str(g.get("name")) for g in c.get("host", {}).get("gpus") or []
                            if isinstance(g, dict)) or "-"] for c in rows],
                 ["image", "stack", "tags", "run", "level", "passed", "created", "gpus"]))
    return 0
