"""`envgen doctor`: print the report; exit 3 (environment missing) without a GPU or Docker."""
from __future__ import annotations

from ..core.errors import EnvironmentMissing
from ..doctor import doctor
from ._common import load_matrix_for, out_json, table


def _verdict(img: dict) -> None:
    print(f"image:   {img['image']} ({img['image_id'][7:19]}), certificate of "
          f"{img['certified']}: {'passed' if img['passed'] else 'FAILED'}")
    for line in img["advice"] or ["nothing to change"]:
        print(f"  change: {line}" if img["advice"] else f"  {line}")


def _print(r: dict, img: dict | None = None) -> None:
    """What can be done first: the image's verdict (--image), the one-line summary, the
    host; then the stacks certified or runnable here, and those that cannot run grouped by
    why (names wrapped to the terminal, not one row each)."""
    import shutil
    import textwrap
    if img is not None:
        _verdict(img)
    print(f"here:    {r['summary']}")
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
    if r.get("platform"):
        pf = r["platform"]
        more = "".join(f"; {e} under emulation (QEMU binfmt_misc)" for e in pf["emulated"])
        print(f"machine: {pf['machine']} (runs {pf['native'] or 'neither'} images natively"
              f"{more})")
    k = r["docker"]
    if k["reachable"]:
        print(f"docker:  {k['version']}, runtimes {', '.join(k['runtimes']) or '-'}"
              f" (nvidia runtime: {'yes' if k['nvidia_runtime'] else 'no'}), CDI specs: "
              f"{', '.join(k['cdi_specs']) or 'none'}")
    else:
        print(f"docker:  not reachable: {k['error']}")
    for w in r["warnings"]:
        print(f"warning: {w}")
    for p in r["problems"]:
        print(f"problem: {p}")
    stacks = r["stacks"]
    can = sorted((n for n, s in stacks.items() if s["runs"] or s.get("certified")),
                 key=lambda n: (not stacks[n].get("certified"), n))
    if can:
        print()

        def cert(c):
            return f"level {c['level']}, {str(c['created'] or '')[:10]}" if c else "-"
        print(table([[n, cert(stacks[n].get("certified")),
                      "yes" if stacks[n]["runs"] else "no", stacks[n]["how"] or "",
                      stacks[n]["why"]] for n in can],
                    ["stack", "certified here", "runs", "how", "why"]))
    cannot: dict[str, list[str]] = {}
    for n, s in stacks.items():
        if n not in can:
            cannot.setdefault(s["why"], []).append(n)
    if cannot:
        width = max(40, shutil.get_terminal_size((100, 24)).columns)
        print(f"\ncannot run here ({sum(map(len, cannot.values()))}):")
        for why, names in sorted(cannot.items(), key=lambda kv: -len(kv[1])):
            print(textwrap.fill(f"{why} ({len(names)}): {', '.join(sorted(names))}", width,
                                initial_indent="  ", subsequent_indent="    ",
                                break_on_hyphens=False))


def image_advice(image: str) -> dict:
    """What the image's stored certificate says to change (diagnose.advice)."""
    from ..certs import store as certs
    from ..certs.diagnose import advice
    cert = certs.find(image)
    return {"image": image, "image_id": cert["image_id"], "certified": cert.get("created"),
            "passed": cert["passed"], "run_profile": cert.get("run_profile"),
            "advice": advice(cert)}


def run(args) -> int:
    img = image_advice(args.image) if getattr(args, "image", None) is not None else None
    r = doctor(load_matrix_for(args))
    if img is not None:
        r["image"] = img
    if args.json:
        out_json(r)
    else:
        _print(r, img)
    return 0 if r["ok"] else EnvironmentMissing.exit_code
