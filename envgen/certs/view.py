"""The store seen by a team: which stack is certified on which GPU and driver. Pure: the
callers (`envgen report`, `envgen diff --fleet`) pass the store's certificates."""
from __future__ import annotations

from ..core.model import V, stack_key
from . import certificate
from . import store as certs


def stack_name(cert: dict) -> str:
    """The name the lock and the store know a certificate's stack by (NAME.STACK for a
    project's image)."""
    st = cert["stack"]
    project = st.get("project") if isinstance(st.get("project"), dict) else None
    name = project.get("name") if project else None
    return stack_key(st["stack"], name if isinstance(name, str) else None)


def _driver_order(driver: str | None):
    try:
        return V(driver or "0")
    except (TypeError, ValueError):
        return V("0")


def _column_id(w: dict) -> str:
    return f"{w['count']}x {w['gpu']} @ {w['driver']}" if w["count"] else "cpu"


def certified_matrix(cert_list: list[dict], runs: dict | None = None) -> dict:
    """{"columns": [{id, gpu, count, driver, label}], "rows": [{stack, cells: {column id:
    cell}}]}: per stack and place (GPU kind, count, driver; or no GPU) the newest default
    run's certificate, else the newest of another profile; `runs` (certs.runs_by_key) adds
    how many runs the store holds behind each cell."""
    runs = runs or {}
    columns: dict[str, dict] = {}
    cells: dict[str, dict[str, dict]] = {}
    order = sorted(cert_list, key=lambda c: (c.get("created") or ""), reverse=True)
    order.sort(key=lambda c: bool(c.get("profile")))   # stable: default runs first
    for c in order:
        w = certificate.where(c)
        col = _column_id(w)
        columns.setdefault(col, {"id": col, **w, "label": certificate.where_text(w)})
        name = stack_name(c)
        row = cells.setdefault(name, {})
        count = runs.get(certs.key_of(c), 1)
        if col in row:
            row[col]["runs"] += count
            continue
        created = c.get("created") if isinstance(c.get("created"), str) else ""
        fw = c["stack"].get("framework") if isinstance(c["stack"].get("framework"), dict) \
            else {}
        row[col] = {"passed": c["passed"], "created": created, "date": created[:10] or "-",
                    "image_id": c["image_id"], "profile": c.get("profile") or "",
                    "version": fw.get("version"), "level": c.get("level"), "runs": count,
                    "key": certs.key_of(c)}
    cols = sorted(columns.values(), key=lambda w: (w["count"] > 0, str(w["gpu"]), w["count"],
                                                  _driver_order(w["driver"])))
    return {"columns": cols,
            "rows": [{"stack": n, "cells": cells[n]} for n in sorted(cells)]}


def on_host(cert_list: list[dict], gpus, driver: str, gpu_of, runs=None) -> list[dict]:
    """The certificates that speak for a host: run on a GPU of its kinds (`gpu_of(name)`
    turns nvidia-smi's name into the matrix's GPU) under its driver's branch, and (`runs`,
    given the certificate) of a stack the host's own driver runs; each with `exact_driver`
    when the driver is its very release. Newest first, one per stack."""
    kinds = set(gpus)
    out: dict[str, dict] = {}
    for c in sorted(cert_list, key=lambda c: (c.get("created") or ""), reverse=True):
        w = certificate.where(c)
        if not w["count"] or not w["driver"]:
            continue
        mine = {gpu_of(n) for n in w["gpu"].split(" + ")}
        if not mine or None in mine or not mine <= kinds:
            continue
        if w["driver"].split(".")[0] != driver.split(".")[0]:   # not its driver branch
            continue
        if runs is not None and not runs(c):   # the branch, but a release too old for it
            continue
        out.setdefault(stack_name(c), {
            "stack": stack_name(c), "passed": c["passed"], "created": c.get("created"),
            "image_id": c["image_id"], "gpu": w["gpu"], "gpu_count": w["count"],
            "driver": w["driver"], "exact_driver": w["driver"] == driver,
            "profile": c.get("profile") or "", "level": c.get("level")})
    return [out[n] for n in sorted(out)]
