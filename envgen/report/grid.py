"""The report's grid: every stack of the matrix on every driver branch, for any GPU and for
each GPU of a fleet, decided by the verdicts `envgen diff` uses (diff.verdict and
compat.kernels_for); nothing here judges a driver itself. Pure: the caller passes the
matrix, the resolved stacks, the fleet's hosts and the certificates; nothing is read or
written here."""
from __future__ import annotations

import hashlib

from .. import __version__
from ..core.model import Gpu, Stack, V
from ..diff import CAVEATS, FleetHost, branch, fleet_report, verdict
from ..matrix import Matrix
from ..resolve.compat import FORWARD, MINOR, NATIVE, kernels_for

# A cell's state: its symbol, the short word in the cell, and the legend's sentence.
STATES = {
    "native": ("✓", "native", "runs natively: the driver is at least the one its CUDA "
                              "ships with"),
    "ptx": ("✓", "PTX JIT", "runs natively, but the GPU's kernels are JIT-compiled from PTX "
                            "at first start (slow first run)"),
    "cpu": ("✓", "CPU", "a CPU build: needs no driver"),
    "minor": ("≈", "minor", "runs through CUDA minor-version compatibility: no PTX JIT, "
                                   "so the build must carry kernels for the GPU"),
    "forward": ("→", "forward", "runs through forward compatibility: data-center (and "
                                       "some workstation) GPUs only, with cuda-compat in the "
                                       "image"),
    "none": ("✗", "no", "does not run"),
}
_STATE_OF_HOW = {NATIVE: "native", "ptx": "ptx", "cpu": "cpu", MINOR: "minor",
                 FORWARD: "forward"}
_TEXT_LIMIT = 300   # certificate fields are untrusted: no field fills the page


def _text(value, limit: int = _TEXT_LIMIT) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(state: str, why: str, caveat: str | None, only: str = "") -> dict:
    symbol, word, _ = STATES[state]
    return {"state": state, "symbol": symbol, "word": word, "only": only, "why": why,
            "caveat": caveat, "title": f"{why}. {caveat}" if caveat else why}


def cell(m: Matrix, stack: Stack, driver: str, gpu: Gpu | None = None) -> dict:
    """How `driver` runs `stack` (on `gpu`, when given), with diff.verdict's reason. With no
    GPU, a stack that some of the matrix's GPUs run only through forward compatibility says
    so, naming their classes: verdict alone cannot, since it depends on the GPU's class."""
    v = verdict(m, stack, driver, gpu)
    if v["runs"]:
        return _cell(_STATE_OF_HOW[v["how"]], v["why"], v["caveat"])
    if v.get("rebuilt"):   # this image cannot, the stack built for this driver can
        return _cell(_STATE_OF_HOW[v["rebuilt"]], v["why"], CAVEATS[v["rebuilt"]],
                     only=REBUILT)
    if gpu is None:
        found = [(g.gpu_class, w) for g in m.gpus
                 if FORWARD in ((w := verdict(m, stack, driver, g))["how"], w.get("rebuilt"))]
        if found:
            classes = ", ".join(sorted({c for c, _ in found}))
            rebuilt = any(not w["runs"] for _, w in found)
            return _cell("forward", v["why"], CAVEATS[FORWARD],
                         only=f"{classes} GPUs only{', ' + REBUILT if rebuilt else ''}")
    return _cell("none", v["why"], None)


# the default images are on bases without NVIDIA's cuda-compat: forward compatibility needs
# the stack built for that driver and GPU, on a base that carries it (diff.verdict's why)
REBUILT = "built for this driver (a cuda-compat base)"


CURRENT_LTS = 3   # the newest long-term-support branches, and every branch after them


def columns(m: Matrix, fleet_branches: frozenset[str] = frozenset()) -> list[dict]:
    """One column per driver branch of the matrix, judged at its newest known release.
    `current`: one of the branches teams run, shown first: the oldest of the newest
    CURRENT_LTS long-term-support branches and every branch after it (R535 to R620 in the
    bundled matrix), and any branch a fleet host runs; the older ones are folded away on
    the page. A rule on the matrix alone, not on today's date, so a page is the same
    bytes whenever it is made."""
    ordered = sorted(m.drivers, key=lambda b: V(b.branch))
    lts = [b for b in ordered if b.lts][-CURRENT_LTS:]
    first = V(lts[0].branch) if lts else V("0")
    out = []
    for b in ordered:
        driver = b.latest or b.first
        name = branch(driver)
        out.append({"name": name, "driver": driver, "lts": b.lts, "eol": b.eol,
                    "current": V(b.branch) >= first or name in fleet_branches})
    return out


# ---- certificates --------------------------------------------------------------------------

def certificate_file(cert: dict, taken: set[str]) -> str:
    """The name a certificate is copied under: as the store names it (image ID, the run
    profile when it has one, the GPUs and driver when it ran on any: certs.file_name),
    made safe and unique; the store checked the image ID."""
    from ..certs import store as certs
    from ..core.errors import InputError
    try:
        name = certs.file_name(cert).removesuffix(".json")
    except InputError:   # a profile that names no file: its hash instead
        name = (cert["image_id"].removeprefix("sha256:") + "."
                + hashlib.sha256(repr(cert.get("profile")).encode()).hexdigest()[:12])
    file, n = f"{name}.json", 1
    while file in taken:
        n += 1
        file = f"{name}.{n}.json"
    taken.add(file)
    return file


def _gpus_text(gpus: list[str]) -> str:
    names = [_text(n, 80) for n in gpus]
    counts = {n: names.count(n) for n in dict.fromkeys(names)}
    return ", ".join(f"{c}× {n}" if c > 1 else n for n, c in counts.items()) or "no GPU"


def _number(value) -> float | None:
    """A certificate's figure when it is a finite number (the field is untrusted)."""
    import math
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def evidence(c: dict) -> dict:
    """The figures a certificate's run measured: checks passed of run, training samples/s,
    the GEMM's TFLOP/s, the run's seconds; None where it did not say."""
    report = c.get("report") if isinstance(c.get("report"), dict) else {}
    metrics = report.get("metrics") if isinstance(report.get("metrics"), dict) else {}
    checks = report.get("checks") if isinstance(report.get("checks"), list) else []
    ran = [k for k in checks if isinstance(k, dict)]
    samples, tflops = _number(metrics.get("samples_per_s")), _number(metrics.get("gemm_tflops"))
    seconds = _number(c.get("seconds"))
    return {"checks": f"{sum(bool(k.get('passed')) for k in ran)}/{len(ran)}" if ran else "-",
            "samples_per_s": samples,
            "samples_text": f"{samples:,.0f}" if samples is not None else "-",
            "tflops_text": f"{tflops:,.1f}" if tflops is not None else "-",
            "seconds_text": f"{seconds:.1f} s" if seconds is not None else "-"}


def certificate_rows(certs: list[dict]) -> list[dict]:
    """What the page shows of each certificate (certs.load_all()'s well-formed ones), sorted
    by stack, newest first; `file` is where the copy goes under certs/. A project's image is
    named as the store names it (NAME.STACK), not by its plain stack."""
    from ..certs.certificate import gpus_of, where
    from ..certs.view import stack_name
    taken: set[str] = set()
    rows = []
    for c in certs:   # load_all's order (newest first) decides which copy keeps a name
        # the GPUs the run used, as `envgen certs` has them: none for a run told to use none
        # (older envgens listed the host's GPUs for it), and then no driver either
        driver = where(c)["driver"]
        created = c.get("created") if isinstance(c.get("created"), str) else ""
        rows.append(evidence(c) | {"stack": _text(stack_name(c)),
                     "version": _text(c["stack"].get("framework", {}).get("version")
                                      if isinstance(c["stack"].get("framework"), dict)
                                      else None, 80),
                     "passed": c["passed"], "level": _text(c.get("level"), 40),
                     "gpu": _gpus_text(gpus_of(c)), "driver": _text(driver, 80) or "-",
                     "date": created[:10] or "-", "created": _text(created, 80),
                     "image": c["image_id"].removeprefix("sha256:")[:12],
                     "profile": _text(c.get("profile"), 80),
                     "file": "certs/" + certificate_file(c, taken), "cert": c})
    rows.sort(key=lambda r: r["created"], reverse=True)
    rows.sort(key=lambda r: r["stack"])
    return rows


def _row_certificate(name: str, stack: Stack, certs: list[dict]) -> dict | None:
    """The newest passed certificate of a stack by that name, a default run's before one
    with other parameters (as `envgen certs show`); `current` when it certified the release
    this matrix resolves the name to."""
    mine = sorted((c for c in certs if c["stack"] == name and c["passed"]),
                  key=lambda c: c["created"], reverse=True)
    mine.sort(key=lambda c: bool(c["profile"]))
    if not mine:
        return None
    c = mine[0]
    current = c["version"] == stack.version
    note = "" if current else (f"certified {stack.framework_package} {c['version'] or '?'}; "
                               f"this matrix resolves {stack.version}")
    return {k: c[k] for k in ("gpu", "driver", "date", "file", "level", "image")} | {
        "current": current, "note": note,
        "title": (f"{c['level']} certificate of image {c['image']}: {c['gpu']}, driver "
                  f"{c['driver']}, {c['created']}" + (f" ({note})" if note else ""))}


# ---- the whole page ------------------------------------------------------------------------

def _view(m: Matrix, stacks: dict[str, Stack], cols: list[dict], gpu: Gpu | None,
          hosts: list[FleetHost], certs: list[dict], index: int) -> dict:
    on: dict[str, list[str]] = {c["name"]: [] for c in cols}
    for h in hosts:
        if gpu is None or gpu in h.gpus:
            on.get(branch(h.driver), []).append(h.name)
    heads = [c | {"fleet": bool(on[c["name"]]), "hosts": ", ".join(on[c["name"]]),
                  "hosts_count": (f"{len(on[c['name']])} host"
                                  + ("" if len(on[c["name"]]) == 1 else "s")),
                  "title": (f"{c['name']}, judged at {c['driver']}"
                            + (" (LTS)" if c["lts"] else "")
                            + (f", end of life {c['eol']}" if c["eol"] else "")
                            + (f"; fleet hosts: {', '.join(on[c['name']])}"
                               if on[c["name"]] else ""))}
             for c in cols]
    rows, hidden = [], []
    for name, st in stacks.items():
        if gpu is not None:
            k = kernels_for(st.as_variant(), gpu.cc)
            if not k.ok:
                hidden.append({"stack": name, "why": k.why})
                continue
        cells = [cell(m, st, c["driver"], gpu) | {"fleet": h["fleet"], "old": not c["current"]}
                 for c, h in zip(cols, heads, strict=True)]
        rows.append({"stack": name, "cells": cells,
                     "about": (f"{st.framework_package} {st.version}, "
                               + (f"CUDA {st.cuda}" if st.cuda else "CPU")
                               + f", Python {st.python}"),
                     "certificate": _row_certificate(name, st, certs)})
    if gpu is None:
        label = "Any GPU"
        note = ("kernels are not checked; forward compatibility is shown where some of the "
                "matrix's GPUs (named by class) would allow it")
    else:
        label = f"{gpu.name}"
        note = (f"compute capability {gpu.cc}, {gpu.gpu_class} GPU; only stacks with "
                f"kernels for it are shown")
    with_gpu = [h.name for h in hosts if gpu is not None and gpu in h.gpus]
    status = (f"{label}: {len(rows)} stack{'' if len(rows) == 1 else 's'} shown"
              + (f", {len(hidden)} hidden (no kernels for it)" if hidden else "")
              + (f"; fleet hosts: {', '.join(with_gpu)}" if with_gpu else ""))
    option = (f"{gpu.name} ({len(with_gpu)} host{'' if len(with_gpu) == 1 else 's'})"
              if gpu else "any GPU (no kernel check)")
    return {"id": "view-all" if gpu is None else f"view-gpu-{index}",
            "gpu": gpu.name if gpu else "", "label": label, "note": note,
            "hosts": ", ".join(with_gpu), "shown": gpu is None, "columns": heads,
            "rows": rows, "hidden": hidden, "status": status, "option": option}


def placements(cert_rows: list[dict], runs: dict | None = None) -> dict:
    """The store's matrix (cert_view.certified_matrix) as the page shows it: each cell
    with its text, its hover and the copy it links to."""
    from ..certs import store as certs
    from ..certs.view import certified_matrix
    file_of = {certs.key_of(r["cert"]): r["file"] for r in reversed(cert_rows)}
    mx = certified_matrix([r["cert"] for r in cert_rows], runs)
    cols = [{"id": c["id"], "label": _text(c["label"], 120)} for c in mx["columns"]]
    rows = []
    for r in mx["rows"]:
        cells = []
        for col in mx["columns"]:
            c = r["cells"].get(col["id"])
            if c is None:
                cells.append(None)
                continue
            word = "passed" if c["passed"] else "failed"
            cells.append({"passed": c["passed"], "word": word, "date": c["date"],
                          "runs": c["runs"], "file": file_of.get(c["key"], ""),
                          "runs_text": f"{c['runs']} runs" if c["runs"] > 1 else "",
                          "title": _text(
                              f"{word} at level {c['level']}: image "
                              f"{c['image_id'][7:19]}, {r['stack']} {c['version'] or '?'}"
                              f"{', profile ' + c['profile'] if c['profile'] else ''}, "
                              f"{c['created']}; {c['runs']} run"
                              f"{'' if c['runs'] == 1 else 's'} in the store")})
        rows.append({"stack": _text(r["stack"]), "cells": cells})
    return {"columns": cols, "rows": rows}


def build_report(m: Matrix, stacks: dict[str, Stack | str], hosts: list[FleetHost] = (),
                 certs: list[dict] = (), fleet_file: str | None = None,
                 store_runs: dict | None = None) -> dict:
    """Everything the page shows, computed; the template only formats it. `store_runs`
    (certs.runs_by_key) counts the store's runs behind each certificate."""
    cols = columns(m, frozenset(branch(h.driver) for h in hosts))
    resolved = {n: s for n, s in sorted(stacks.items()) if not isinstance(s, str)}
    unresolved = [{"stack": n, "why": s} for n, s in sorted(stacks.items())
                  if isinstance(s, str)]
    cert_rows = certificate_rows(list(certs))
    gpus = sorted({g for h in hosts for g in h.gpus}, key=lambda g: g.name)
    views = [_view(m, resolved, cols, None, list(hosts), cert_rows, 0)]
    views += [_view(m, resolved, cols, g, list(hosts), cert_rows, i)
              for i, g in enumerate(gpus, 1)]
    names = {c["name"] for c in cols}
    fleet = []
    if hosts:
        runs = {h["name"]: h["runs"] for h in fleet_report(m, list(hosts), None,
                                                          stacks=stacks)["hosts"]}
        for h in hosts:
            kinds = [g.name for g in h.gpus]
            fleet.append({"name": h.name, "driver": h.driver, "branch": branch(h.driver),
                          "in_matrix": branch(h.driver) in names,
                          "gpus": ", ".join(f"{kinds.count(k)}× {k}" if kinds.count(k) > 1
                                            else k for k in dict.fromkeys(kinds)),
                          "runs": len(runs[h.name]), "runs_names": ", ".join(runs[h.name])})
    certified = sum(1 for r in views[0]["rows"]
                    if r["certificate"] and r["certificate"]["current"])
    from .plots import branches_chart, throughput_chart
    older = [c["name"] for c in cols if not c["current"]]
    return {"summary": summary(m, stacks, list(hosts), cert_rows, len(resolved)),
            "older": {"count": len(older),
                      "range": f"{older[0]} to {older[-1]}" if older else ""},
            "branches_chart": branches_chart(views[0]),
            "throughput_chart": throughput_chart(cert_rows),
            "matrix_sha256": m.sha256, "envgen_version": __version__,
            "columns": cols, "views": views, "unresolved": unresolved,
            "legend": [{"state": s, "symbol": sym, "word": w, "text": t}
                       for s, (sym, w, t) in STATES.items()],
            "certificates": cert_rows, "placements": placements(cert_rows, store_runs),
            "fleet": fleet, "fleet_file": fleet_file or "",
            "gpu_filter": len(views) > 1, "stacks": len(resolved), "certified": certified}


def upgrade_target(m: Matrix, hosts: list[FleetHost]):
    """The branch a fleet would move to: the newest long-term-support branch one of its
    hosts already runs (the team trusts it somewhere), else the matrix's newest one."""
    lts = sorted((b for b in m.drivers if b.lts), key=lambda b: V(b.branch))
    run = {branch(h.driver) for h in hosts}
    mine = [b for b in lts if f"R{b.branch}" in run]
    return (mine or lts or [None])[-1]


def summary(m: Matrix, stacks: dict, hosts: list[FleetHost], cert_rows: list[dict],
            resolved: int) -> dict:
    """The page's first lines, for a lead: what the fleet runs today and what upgrading
    adds (with a fleet), and what the store has certified."""
    import dataclasses
    passed = {r["stack"] for r in cert_rows if r["passed"]}
    levels = {}
    for r in cert_rows:
        if r["passed"]:
            levels.setdefault(r["level"], set()).add(r["stack"])
    certified = (f"{len(passed)} stack(s) certified in this store ("
                 + ", ".join(f"{len(v)} at level {k}" for k, v in sorted(levels.items()))
                 + ")") if passed else "no certificate in this store yet " \
        "(envgen build SPEC --certify makes one)"
    out = {"headline": f"{resolved} stacks resolve; {certified}.", "fleet": None,
           "certified": certified}
    if not hosts:
        return out
    today = fleet_report(m, hosts, None, stacks=stacks)["hosts"]
    target = upgrade_target(m, hosts)
    if target is None:
        return out
    to = target.latest or target.first
    moved = [dataclasses.replace(h, driver=to) if V(h.driver.split(".")[0]) < V(target.branch)
             else h for h in hosts]
    after = fleet_report(m, moved, None, stacks=stacks)["hosts"]
    # a stack the fleet runs: one every host runs (a job may land on any of them)
    now = set.intersection(*(set(h["runs"]) for h in today))
    then = set.intersection(*(set(h["runs"]) for h in after))
    pairs_now, pairs_then = sum(len(h["runs"]) for h in today), sum(len(h["runs"])
                                                                    for h in after)
    below = sum(1 for h in hosts if V(h.driver.split(".")[0]) < V(target.branch))
    gained = sorted(then - now)
    out["headline"] = (f"Your fleet runs {len(now)} stacks today on all {len(hosts)} hosts; "
                       f"upgrading the {below} below R{target.branch} to {to} adds "
                       f"{len(gained)}.")
    out["fleet"] = {"hosts": len(hosts), "runs": len(now), "target": f"R{target.branch}",
                    "driver": to, "below": below, "adds": len(gained),
                    "added": ", ".join(gained), "pairs_now": pairs_now,
                    "pairs_then": pairs_then,
                    "certified": certified[:1].upper() + certified[1:]}
    return out
