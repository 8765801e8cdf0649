"""`make bench`: envgen's figures, measured on this host, and which got worse since the last
recorded run (bench/compare.py says how, with its noise margins).

- `--only cli` (no Docker): the latency of the commands people run in loops and prompts,
  each the median of interleaved cold processes and as a ratio to `python -c pass` (the
  interpreter's own start) measured in the same run; and `envgen render --all` (every stack
  of the matrix in one process);
- `--only build`: rebuild of an unchanged stack (target: under 5 s), also as a ratio to the
  cold build; image size over what it installs (base + the venv's site-packages; target:
  at most 1.10); certification of a built image on the CPU, the build excluded (target:
  under 60 s).
Results go to bench/results.json (a part not run keeps its last figures and their date) and
to its sections of docs/benchmarks.md; the cold build against the naive Dockerfile and
the layer sharing come from bench/reproducible.json and bench/layer-sharing.json, which
`make bench` writes first. Exit 1 when a build target is missed, or with
--fail-on-regression when a figure got worse."""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
ENVGEN = [sys.executable, "-m", "envgen"]

import compare  # noqa: E402  (bench/ is not a package)
from sections import replace_section  # noqa: E402

CLI_TARGETS = {"resolve": 0.1, "render": 0.1, "validate": 0.15, "render_all": 1.0}


def timed(argv: list[str]) -> tuple[float, dict]:
    t = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    took = time.monotonic() - t
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return took, json.loads(r.stdout)


def docker_json(*args: str):
    r = subprocess.run(["docker", *args], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def installed_bytes(image: str) -> int:
    r = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "du",
                        image, "-sb", "/opt/venv"], capture_output=True, text=True, check=True)
    return int(r.stdout.split()[0])


def machine() -> str:
    """The machine, in words: what a figure is only comparable on."""
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = " ".join(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return (f"{platform.node()}, {os.cpu_count()} CPUs ({model}), Python "
            f"{platform.python_version()}")


def run_once(argv: list[str], env: dict, ok=(0,)) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout) of one cold process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, env=env, cwd=env["ENVGEN_BENCH_CWD"])
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in ok:
        sys.exit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.stdout.decode()


def cli_part(runs: int) -> dict:
    """Every command `runs` times, interleaved (a burst of load hits them all alike), each
    a fresh process; medians, and ratios to the interpreter's own start."""
    work = Path(tempfile.mkdtemp(prefix="envgen-bench-"))
    env = {**os.environ, "ENVGEN_HOME": str(work / "home"), "ENVGEN_PROJECT": "",
           "PYTHONPATH": str(ROOT), "ENVGEN_BENCH_CWD": str(work)}
    for k in ("ENVGEN_NO_CACHE", "PYTHONDONTWRITEBYTECODE", "ENVGEN_MATRIX"):
        env.pop(k, None)
    commands = {
        "floor": [sys.executable, "-c", "pass"],
        "version": [*ENVGEN, "--version"],
        "resolve": [*ENVGEN, "resolve", "pytorch-cu121", "--json"],
        "render": [*ENVGEN, "render", "pytorch-cu121", "-o", str(work / "one")],
        "validate": [*ENVGEN, "matrix", "validate"],
    }
    every = [*ENVGEN, "render", "--all", "--no-resolve", "-o", str(work / "all"), "--json"]
    try:
        for argv in commands.values():   # the matrix cache and the .pyc files, as in use
            run_once(argv, env)
        walls: dict[str, list[float]] = {k: [] for k in commands}
        cpus: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                wall, cpu, _out = run_once(argv, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
        cold = [run_once(commands["validate"], {**env, "ENVGEN_NO_CACHE": "1"})[0]
                for _ in range(max(3, runs // 4))]
        alls, doc = [], {}
        for _ in range(max(3, runs // 4)):
            wall, _cpu, out = run_once(every, env, ok=(0, 2))
            alls.append(wall)
            doc = json.loads(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    floor = statistics.median(walls["floor"])
    res = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "runs": runs,
           "load_average": [round(x, 2) for x in os.getloadavg()], "commands": {}}
    for name, ws in walls.items():
        med = statistics.median(ws)
        res["commands"][name] = {"median_s": round(med, 4), "min_s": round(min(ws), 4),
                                 "ratio_to_floor": round(med / floor, 2),
                                 "cpu_median_s": round(statistics.median(cpus[name]), 4)}
    res["validate_uncached"] = {"median_s": round(statistics.median(cold), 4)}
    res["render_all"] = {"median_s": round(statistics.median(alls), 4),
                         "min_s": round(min(alls), 4), "runs": len(alls),
                         "stacks": len(doc["rendered"]) + len(doc["failed"]),
                         "rendered": len(doc["rendered"]),
                         "no_stored_closure": [f["stack"] for f in doc["failed"]],
                         "ratio_to_render_one": round(statistics.median(alls) /
                                                      res["commands"]["render"]["median_s"],
                                                      2)}
    return res


def cli_figures(cli: dict) -> dict:
    when, where = cli["date"], cli["machine"]
    out = {f"cli_{name}_vs_python_start": compare.figure(c["ratio_to_floor"], "ratio", when,
                                                         where)
           for name, c in cli["commands"].items() if name != "floor"}
    out["render_all_s"] = compare.figure(cli["render_all"]["median_s"], "s", when, where)
    out["render_all_vs_render_one"] = compare.figure(cli["render_all"]["ratio_to_render_one"],
                                                     "ratio", when, where)
    return out


def cli_markdown(cli: dict) -> list[str]:
    c, a = cli["commands"], cli["render_all"]
    floor = c["floor"]["median_s"]

    def row(name, label):
        t = CLI_TARGETS.get(name)
        met = "" if t is None else ("yes" if c[name]["median_s"] < t else "NO")
        return (f"| {label} | {c[name]['median_s']:.3f} s (min {c[name]['min_s']:.3f}) | "
                f"{c[name]['cpu_median_s']:.3f} s | {c[name]['ratio_to_floor']} | "
                f"{f'< {t} s' if t else ''} | {met} |")
    missing = ", ".join(a["no_stored_closure"]) or "none"
    return [
        f"Measured by `bench/bench.py --only cli` on {cli['date']}: {cli['machine']}; "
        f"load average {'/'.join(map(str, cli['load_average']))} at the end (a shared "
        f"machine). Each command ran {cli['runs']} times as a fresh process, interleaved "
        f"with the others; the median, and its ratio to `python -c pass` "
        f"({floor * 1000:.0f} ms) in the same run. The matrix cache is warm, as after any "
        f"first command. CPU time is the process's own (user + system): what contention for "
        f"the two CPUs adds to the wall time, it does not.", "",
        "| command | median wall | median CPU | wall × python start | target (wall) | met |",
        "|---|---|---|---|---|---|",
        row("version", "`envgen --version`"),
        row("resolve", "`envgen resolve pytorch-cu121 --json`"),
        row("render", "`envgen render pytorch-cu121 -o DIR` (again into the same DIR)"),
        row("validate", "`envgen matrix validate`"),
        f"| `envgen matrix validate`, the cache off (`ENVGEN_NO_CACHE=1`) | "
        f"{cli['validate_uncached']['median_s']:.3f} s | | | | |",
        f"| `envgen render --all --no-resolve -o DIR`: {a['rendered']} of {a['stacks']} "
        f"stacks, one process | {a['median_s']:.3f} s (min {a['min_s']:.3f}) | | "
        f"{a['ratio_to_render_one']} × one render | < 1 s | "
        f"{'yes' if a['median_s'] < 1.0 else 'NO'} |", "",
        "`render` after its first run is answered by the render cache "
        "(`envgen/render/cache.py`: the texts kept by the sha256 of the views, templates "
        "and rendering code), so it imports no Jinja; the first render of a stack, or "
        "any with `ENVGEN_NO_CACHE=1`, renders through Jinja as before.", "",
        f"Stacks without a stored closure (their wheels come from an index this machine "
        f"cannot reach, so none is bundled; `render --all` without `--no-resolve` resolves "
        f"them with uv, as `render STACK` does): {missing}.",
    ]


def build_part(args) -> tuple[dict, bool]:
    first, built = timed([*ENVGEN, "build", args.spec, "--json"])
    rebuilds = [timed([*ENVGEN, "build", args.spec, "--json"])[0] for _ in range(args.repeat)]
    image = built["image_id"]
    img = docker_json("image", "inspect", image)[0]
    base = docker_json("image", "inspect", built["base"])[0]
    venv = installed_bytes(image)
    certs = [timed([*ENVGEN, "certify", image, "--gpus", "none", "--json"])[0]
             for _ in range(args.repeat)]
    rebuild = min(rebuilds)
    certify = min(certs)
    expected = base["Size"] + venv
    results = {
        "date": time.strftime("%Y-%m-%d"), "host": platform.node(), "machine": machine(),
        "cpus": os.cpu_count(), "spec": args.spec, "image_id": image, "repeat": args.repeat,
        "build_first_s": round(first, 2),
        "rebuild_s": round(rebuild, 2), "rebuild_target_s": 5.0,
        "rebuild_vs_target": round(rebuild / 5.0, 3),
        "rebuild_vs_first_build": round(rebuild / first, 4),
        "image_bytes": img["Size"], "base_bytes": base["Size"], "venv_bytes": venv,
        "size_ratio": round(img["Size"] / expected, 4), "size_ratio_target": 1.10,
        "certify_cpu_s": round(certify, 2), "certify_target_s": 60.0,
        "certify_vs_target": round(certify / 60.0, 3),
    }
    results["pass"] = {"rebuild": rebuild < 5.0, "size": results["size_ratio"] <= 1.10,
                       "certify": certify < 60.0}
    print("\n".join(build_markdown(results)))
    return results, all(results["pass"].values())


def build_markdown(results: dict) -> list[str]:
    r = results
    return [
        f"Measured by `bench/bench.py --only build` on {r['date']} "
        f"({r.get('machine') or str(r.get('host', '?')) + ', ' + str(r['cpus']) + ' CPUs'}, "
        f"shared machine; figures are the "
        f"best of {r.get('repeat', 3)}).", "",
        "| figure | measured | target | ratio to target | met |", "|---|---|---|---|---|",
        f"| rebuild of an unchanged `{r['spec']}` | {r['rebuild_s']:.2f} s (first build "
        f"{r['build_first_s']:.0f} s) | < 5 s | {r['rebuild_vs_target']} | "
        f"{'yes' if r['pass']['rebuild'] else 'NO'} |",
        f"| image size / (base + /opt/venv) | {r['image_bytes'] / 1e9:.3f} GB / "
        f"({r['base_bytes'] / 1e9:.3f} + {r['venv_bytes'] / 1e9:.3f}) GB | <= 1.10 | "
        f"{r['size_ratio']} | {'yes' if r['pass']['size'] else 'NO'} |",
        f"| certification on the CPU (build excluded) | {r['certify_cpu_s']:.2f} s | < 60 s | "
        f"{r['certify_vs_target']} | {'yes' if r['pass']['certify'] else 'NO'} |",
    ]


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def figures_of(results: dict) -> dict:
    """Every figure of a results.json: recorded ones, or (a file from before figures were
    recorded) derived from its build part."""
    if "figures" in results:
        return results["figures"]
    return compare.legacy_build_figures(results.get("build", results))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["cli", "build", "all"], default="all",
                    help="cli: latency and render --all (no Docker); build: builds, size "
                         "and certification; all (default)")
    ap.add_argument("--spec", default="pytorch-cu121")
    ap.add_argument("--out", default="bench/results.json")
    ap.add_argument("--markdown", default="docs/benchmarks.md")
    ap.add_argument("--repeat", type=int, default=3, help="builds and certifications")
    ap.add_argument("--runs", type=int, default=20, help="runs of each CLI command")
    ap.add_argument("--fail-on-regression", action="store_true",
                    help="exit 1 when a figure got worse than the last recorded one by "
                         "more than its noise margin")
    args = ap.parse_args()
    out = ROOT / args.out
    previous = read_json(out)
    old = figures_of(previous)
    results = {"cli": previous.get("cli"),
               "build": previous.get("build", previous if "rebuild_s" in previous else None)}
    met = True
    if args.only in ("cli", "all"):   # its targets are reported, not an exit code: wall
        results["cli"] = cli_part(args.runs)   # time on a shared machine is the load's too
    if args.only in ("build", "all"):
        results["build"], ok = build_part(args)
        met &= ok
    new = {**compare.legacy_build_figures(results["build"] or {}),
           **compare.reproducible_figures(read_json(ROOT / "bench" / "reproducible.json")),
           **compare.sharing_figures(read_json(ROOT / "bench" / "layer-sharing.json")),
           **(cli_figures(results["cli"]) if results["cli"] else {})}
    lines = compare.report(old, new)
    results["figures"] = new
    results["compared"] = {"worse": compare.worse(old, new), "lines": lines}
    out.write_text(json.dumps(results, indent=2) + "\n")
    md_path = ROOT / args.markdown
    text = md_path.read_text() if md_path.exists() else "# Benchmarks\n"
    if results["cli"]:
        text = replace_section(text, "## CLI latency and render --all (`bench/bench.py --only "
                               "cli`)", cli_markdown(results["cli"]))
    if results["build"]:
        text = replace_section(text, "## Build, size and certification (`bench/bench.py "
                               "--only build`)", build_markdown(results["build"]))
    text = replace_section(text, "## Against the last recorded run", [
        f"Every figure of `bench/results.json` against the run recorded before it (noise "
        f"margins: {compare.TIME_MARGIN:.0%} for anything timed, {compare.SIZE_MARGIN:.0%} "
        f"for sizes and sharing; bench/compare.py). `make bench` prints this; "
        f"`--fail-on-regression` makes a worse figure fail it.", "",
        *([f"- {line}" for line in lines] or ["- nothing got worse"])])
    md_path.write_text(text)
    print("\n".join(lines) or "nothing got worse than the last recorded run")
    worse = results["compared"]["worse"]
    return 1 if not met or (args.fail_on_regression and worse) else 0


if __name__ == "__main__":
    sys.exit(main())
