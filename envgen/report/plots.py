"""The report's charts as numbers for inline SVG: the template draws the rectangles and
labels computed here (no JavaScript, no library from a CDN, nothing fetched: the page must
open from disk). Two charts: how many stacks each driver branch runs, by how (the any-GPU
grid's cells), and the training throughput the certificates measured (the payload's
`samples_per_s`). Pure: every label is text the template escapes."""
from __future__ import annotations

WIDTH = 760
_STACK_ORDER = ("native", "ptx", "cpu", "minor", "forward")   # drawn bottom to top


def _nice_max(value: float) -> float:
    """The axis' top: 1, 2 or 5 times a power of ten, at least `value`."""
    if not value > 0 or value == float("inf"):   # NaN, 0, negative or infinite: no axis
        return 1.0
    step = 1.0
    while step * 10 <= value:
        step *= 10
    while step > value and step / 10 > 0:
        step /= 10
    for k in (1, 2, 5, 10):
        if k * step >= value:
            return k * step
    return 10 * step


def branches_chart(view: dict) -> dict:
    """Stacked bars: per driver branch of the grid `view` (build_report's any-GPU view), the
    number of stacks that run there, split by how; the fleet's branches marked."""
    cols = view["columns"]
    counts = [{s: 0 for s in _STACK_ORDER} for _ in cols]
    for row in view["rows"]:
        for i, c in enumerate(row["cells"]):
            if c["state"] in counts[i]:
                counts[i][c["state"]] += 1
    total = len(view["rows"]) or 1
    left, top, bottom, height = 40, 12, 58, 190
    plot_h = height - top - bottom
    step = (WIDTH - left - 8) / max(1, len(cols))
    bar_w = max(6.0, step * 0.7)
    bars, labels, ticks = [], [], []
    for i, (col, n) in enumerate(zip(cols, counts, strict=True)):
        x = left + i * step + (step - bar_w) / 2
        y = top + plot_h
        runs = sum(n.values())
        for state in _STACK_ORDER:
            if not n[state]:
                continue
            h = n[state] / total * plot_h
            y -= h
            bars.append({"x": round(x, 1), "y": round(y, 1), "w": round(bar_w, 1),
                         "h": round(h, 1), "state": state,
                         "title": f"{col['name']}: {n[state]} stack(s) {state}"})
        cx = round(x + bar_w / 2, 1)
        labels.append({"x": cx, "y": top + plot_h + 10, "text": col["name"],
                       "fleet": col.get("fleet", False),
                       "transform": f"rotate(-50 {cx} {top + plot_h + 10})"})
        if runs:
            ticks.append({"x": cx, "y": round(top + plot_h - runs / total * plot_h - 3, 1),
                          "text": str(runs)})
    grid = [{"y": round(top + plot_h - f * plot_h, 1), "text": str(round(f * total))}
            for f in (0, 0.5, 1)]
    return {"width": WIDTH, "height": height, "bars": bars, "labels": labels,
            "counts": ticks, "grid": grid, "left": left, "right": WIDTH - 8,
            "total": total, "title": f"Stacks that run on each driver branch (of {total})",
            "states": [s for s in _STACK_ORDER if any(n[s] for n in counts)]}


def throughput_chart(cert_rows: list[dict], limit: int = 24) -> dict | None:
    """Horizontal bars: the training samples/s of each passing certificate that measured
    it (newest per stack and place), fastest first; None when none did."""
    seen, items = set(), []
    for r in sorted(cert_rows, key=lambda r: r["created"], reverse=True):
        v = r.get("samples_per_s")
        if not r["passed"] or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            continue   # 1e999 in a certificate's JSON reads as infinity
        key = (r["stack"], r["gpu"], r["level"])
        if key in seen:
            continue
        seen.add(key)
        items.append({"label": f"{r['stack']} · {r['gpu']}", "value": float(v),
                      "level": r["level"]})
    if not items:
        return None
    items.sort(key=lambda i: -i["value"])
    items = items[:limit]
    top_value = _nice_max(items[0]["value"])
    left, row_h, top = 260, 20, 8
    plot_w = WIDTH - left - 90
    bars = []
    for i, it in enumerate(items):
        w = max(1.0, it["value"] / top_value * plot_w)
        y = top + i * row_h
        bars.append({"x": left, "y": y + 3, "w": round(w, 1), "h": row_h - 6,
                     "label": it["label"], "label_x": left - 6, "text_y": y + row_h - 6,
                     "value": f"{it['value']:,.0f}", "value_x": round(left + w + 4, 1),
                     "level": it["level"],
                     "cls": "b-cuda" if it["level"] == "cuda" else "b-cpu-level",
                     "title": f"{it['label']}: {it['value']:,.0f} samples/s at level "
                              f"{it['level']}"})
    return {"width": WIDTH, "height": top + len(items) * row_h + 22, "bars": bars,
            "axis_y": top + len(items) * row_h + 14, "left": left,
            "max_text": f"{top_value:,.0f} samples/s", "max_x": left + plot_w}
