"""The figures `make bench` records, flat, and which of them got worse since the last run.

Each figure is one number with the direction that is better, the date and the machine it
was measured on. A figure is worse when it moved the wrong way by more than its noise
margin: 25 % for anything timed (this is a shared 2-CPU machine: medians of interleaved runs
still wander that much between runs), 2 % for sizes and layer sharing (the daemon's own
byte counts, which do not wander). A figure measured in only one of the two runs is
reported as new or not measured, never as worse."""
from __future__ import annotations

TIME_MARGIN = 0.25
SIZE_MARGIN = 0.02


def figure(value, unit: str, measured: str, machine: str, margin: float = TIME_MARGIN,
           better: str = "lower") -> dict:
    return {"value": value, "unit": unit, "better": better, "margin": margin,
            "measured": measured, "machine": machine}


def legacy_build_figures(build: dict) -> dict:
    """The figures of bench.py's build part (the build section of results.json, or the
    whole file as it was written before it had sections)."""
    if "rebuild_s" not in build:
        return {}
    when = build.get("date", "?")
    machine = build.get("machine") or f"{build.get('host', '?')}, {build.get('cpus', '?')} CPUs"
    return {
        "rebuild_unchanged_s": figure(build["rebuild_s"], "s", when, machine),
        "rebuild_vs_first_build": figure(build["rebuild_vs_first_build"], "ratio", when,
                                         machine),
        "image_size_over_payload": figure(build["size_ratio"], "ratio", when, machine,
                                          SIZE_MARGIN),
        "certify_cpu_s": figure(build["certify_cpu_s"], "s", when, machine),
    }


def reproducible_figures(rep: dict) -> dict:
    if "cold_ratio_envgen_over_naive" not in rep:
        return {}
    when, machine = rep.get("date", "?"), rep.get("machine") or f"{rep.get('cpus', '?')} CPUs"
    return {
        "cold_build_vs_naive": figure(rep["cold_ratio_envgen_over_naive"], "ratio", when,
                                      machine),
        "hash_pinned_fraction": figure(rep["hash_pinned_fraction"], "fraction", when, machine,
                                       0.0, better="higher"),
    }


def sharing_figures(sharing: dict) -> dict:
    if "ratio" not in sharing:
        return {}
    when = str(sharing.get("measured", "?"))[:10]
    machine = sharing.get("machine", "development machine, 2 CPUs")
    return {"layer_sharing_ratio": figure(sharing["ratio"], "ratio", when, machine,
                                          SIZE_MARGIN)}


def worse(old: dict, new: dict) -> list[dict]:
    """The figures of `new` that got worse than in `old` by more than their margin."""
    out = []
    for name, n in sorted(new.items()):
        o = old.get(name)
        if o is None or not isinstance(o.get("value"), (int, float)) or not o["value"]:
            continue
        change = (n["value"] - o["value"]) / abs(o["value"])
        if n.get("better", "lower") == "higher":
            change = -change
        if change > n.get("margin", TIME_MARGIN):
            out.append({"figure": name, "old": o["value"], "new": n["value"],
                        "change": round(change, 3), "margin": n.get("margin", TIME_MARGIN),
                        "old_measured": o.get("measured"), "new_measured": n.get("measured")})
    return out


def report(old: dict, new: dict) -> list[str]:
    """Lines saying what got worse, what is new and what was not measured this time."""
    lines = []
    for w in worse(old, new):
        lines.append(f"worse: {w['figure']} {w['old']} -> {w['new']} "
                     f"({w['change']:+.0%}, more than the {w['margin']:.0%} noise margin)")
    for name in sorted(set(new) - set(old)):
        lines.append(f"new: {name} = {new[name]['value']} {new[name]['unit']}")
    for name in sorted(set(old) - set(new)):
        lines.append(f"not measured this time: {name} (last {old[name]['value']} on "
                     f"{old[name].get('measured')})")
    return lines
