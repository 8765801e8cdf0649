"""`envgen doctor`: print the report; exit 3 (environment missing) without a GPU or Docker."""
from __future__ import annotations

from ..core.errors import EnvironmentMissing
from ..doctor import doctor
from ._common import load_matrix_for, out_json, table


def _print(r: dict) -> None:
    d = r["driver"]
    if d:
        lts = "LTS" if d["lts"] else "not LTS"
        eol = f", EOL {d['eol']}" + (" (past)" if d["past_eol"] else "") if d["eol"] else ""
        print(f"driver:  {d['version']} ({d['branch'] or 'branch not in the matrix'}, {lts}"
              f"{eol}); supports CUDA {d['cuda'] or '?'}")
    else:
        print("driver:  none")
    for g in r["gpus"]:
        print(f"gpu {g['index']}:   {g['name']} (cc {g['cc']}, {g['memory_mib']} MiB"
              f"{', busy' if g['busy'] else ''}"
              f"{'' if g['matrix_name'] else ', not in the matrix'})")
    k = r["docker"]
    if k["reachable"]:
        print(f"docker:  {k['version']}, runtimes {', '.join(k['runtimes']) or '-'}"
              f" (nvidia runtime: {'yes' if k['nvidia_runtime'] else 'no'}), CDI specs: "
              f"{', '.join(k['cdi_specs']) or 'none'}")
    else:
        print(f"docker:  not reachable: {k['error']}")
    print()
    print(table([[n, "yes" if s["runs"] else "no", s["how"] or "", s["why"]]
                  for n, s in r["stacks"].items()], ["stack", "runs", "how", "why"]))
    for w in r["warnings"]:
        print(f"warning: {w}")
    for p in r["problems"]:
        print(f"problem: {p}")


def image_advice(image: str) -> dict:
    """What the image's stored certificate says to change (diagnose.advice)."""
    from ..certs import store as certs
    from ..certs.diagnose import advice
    cert = certs.find(image)
    return {"image": image, "image_id": cert["image_id"], "certified": cert.get("created"),
            "passed": cert["passed"], "run_profile": cert.get("run_profile"),
            "advice": advice(cert)}


def run(args) -> int:
    img = image_advice(args.image) if getattr(args, "image", None) else None
    r = doctor(load_matrix_for(args))
    if img is not None:
        r["image"] = img
    if args.json:
        out_json(r)
    else:
        _print(r)
        if img is not None:
            print(f"image:   {img['image']} ({img['image_id'][7:19]}), certificate of "
                  f"{img['certified']}: {'passed' if img['passed'] else 'FAILED'}")
            for line in img["advice"] or ["nothing to change"]:
                print(f"  change: {line}" if img["advice"] else f"  {line}")
    return 0 if r["ok"] else EnvironmentMissing.exit_code
