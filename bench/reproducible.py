"""`make bench`, the reproducibility and speed figures, all in one run on this host, on a
throw-away dockerd of its own (bench/own_daemon.py: emptying its build cache, cache mounts
included, touches no one else's; the shared daemon's cache is never pruned here):

- the fraction of distributions inside the built image that the lock pins with a hash
  (goal 100 %);
- the base made from its snapshot, cold (goal < 30 s);
- the wire: the closure's bytes fetched from the index in parallel, here, in this run;
- two fully cold builds (build cache and cache mounts emptied): layer digests identical
  (goal: all), each against the naive single-stage Dockerfiles of bench/ on the same base,
  `uv pip install` (goal: ratio <= 1.0) and `pip install` (goal: <= 0.6) of the same
  top-level pins, and against the wire plus the time to write the layers: the closure's
  wheels unpacked here with one process a core (what any installer must write) and the
  time BuildKit took to export them (goal: <= 1.5); the second build runs the three in
  the reverse order, so neither side always follows the other's clean-up;
- where the time goes: each step's seconds, and the CPU each build kept busy (core-seconds
  from /proc/stat), against the naive files' (a 2-core machine is bound by its CPU, and
  compiling bytecode is CPU the naive files do not spend);
- a rebuild of an unchanged stack (goal < 1 s);
- the same cold comparison for a framework stack over it (--over, accelerate-cu121), and
  for a project image (--project, bench/intake/requirements-60.txt: torch 2.4.1 and 58
  other requirements as a team writes them) against bench/naive-uv-project.Dockerfile,
  which installs the same file with `uv pip install -r`.

Results go to bench/reproducible.json and a section of docs/benchmarks.md. It removes what
it built once measured, and its daemon with it."""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from own_daemon import docker, empty_cache, own_daemon  # noqa: E402  (bench/ is no package)
from sections import replace_section  # noqa: E402

ENVGEN = [sys.executable, "-m", "envgen"]
CA = "/etc/ssl/certs/ca-certificates.crt"
NAIVE = {"uv": ROOT / "bench" / "naive-uv.Dockerfile",
         "pip": ROOT / "bench" / "naive-pip.Dockerfile",
         "uv-project": ROOT / "bench" / "naive-uv-project.Dockerfile"}


def run(argv, **kw) -> subprocess.CompletedProcess:
    cwd = kw.pop("cwd", None) or ROOT
    r = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, **kw)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, argv))} failed ({r.returncode}): "
                 f"{(r.stderr or r.stdout).strip()[-800:]}")
    return r


def cold(host: str) -> None:
    """Every image of this run off the throw-away daemon and its build cache emptied."""
    for img in docker(host, "images", "-q", "--filter", "reference=envgen-bench/*").stdout.split():
        docker(host, "rmi", "-f", img, check=False)
    empty_cache(host)
    os.sync()   # the removed layers' writes land now, not in the next build's time


def busy() -> float:
    """Core-seconds this machine's CPUs have been busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


# envgen with the bytecode step rendered out (views.COMPILE_AT_BUILD): what compiling costs
NO_BYTECODE = ("import sys, envgen.render.views as v; v.COMPILE_AT_BUILD = False; "
               "from envgen.cli import main; sys.argv[0] = 'envgen'; sys.exit(main())")


def envgen_build(spec: str, tag: str, env: dict, bytecode: bool = True, cwd=None
                 ) -> tuple[float, dict, float]:
    """(wall seconds, build JSON with "steps_s": each step's seconds as envgen's progress
    gives them, seconds BuildKit spent exporting the image). An empty `spec` builds the
    project of `cwd` (its envgen.yaml)."""
    t = time.monotonic()
    cmd = ENVGEN if bytecode else [sys.executable, "-c", NO_BYTECODE]
    r = run([*cmd, "build", *([spec] if spec else []), "--tag", tag, "--json", "--progress",
             "json"], env=env, cwd=cwd)
    took = time.monotonic() - t
    steps = {}
    for line in r.stderr.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        f = ev.get("fields") or ev
        if f.get("state") == "done" and f.get("name"):
            steps[f["name"]] = float(f.get("seconds") or 0)
    out = json.loads(r.stdout)
    out["steps_s"] = steps
    return took, out, steps.get("exporting the image", 0.0)


def naive_build(kind: str, base: str, pins: list[str], tag: str, env: dict,
                requirements: Path | None = None, uv_flags: str = "") -> float:
    """The naive Dockerfile of bench/ (`kind`: uv, pip or uv-project with `requirements`),
    built cold on the same base; `uv_flags` go to the uv file's install
    (`--compile-bytecode`)."""
    from envgen.runtime import docker as engine
    cli = engine.buildkit_cli()
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copy(CA, Path(ctx, "ca.crt"))   # as a naive user gives it; removed after
        shutil.copy(NAIVE[kind], Path(ctx, "Dockerfile"))
        if requirements is not None:
            shutil.copy(requirements, Path(ctx, "requirements.txt"))
        t = time.monotonic()
        flags = ["--build-arg", f"UV_FLAGS={uv_flags}"] if uv_flags else []
        run([*cli.argv, "--network=host", "--build-arg", f"BASE={base}", "--build-arg",
             f"PINS={' '.join(pins)}", *flags, "-t", tag, ctx], env={**env, **dict(cli.env)})
        return time.monotonic() - t


def wire(closure, keep: Path) -> tuple[int, float]:
    """(bytes, seconds): every file of the closure fetched from PyPI in parallel, here,
    written into `keep`."""
    from envgen.resolve.closure import CA_BUNDLE
    ctx = None
    if os.path.exists(CA_BUNDLE):
        import ssl
        ctx = ssl.create_default_context(cafile=CA_BUNDLE)
    files = {p.file for p in closure.pins if p.file}
    names = {p.name for p in closure.pins}
    urls = []
    for name in sorted(names):
        req = urllib.request.Request(f"https://pypi.org/simple/{name}/", headers={
            "Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req, timeout=60, context=ctx) as r:
            urls += [f["url"] for f in json.load(r)["files"] if f["filename"] in files]

    def fetch(url: str) -> int:
        n = 0
        with urllib.request.urlopen(url, timeout=300, context=ctx) as r, \
                open(keep / url.rsplit("/", 1)[-1].split("#")[0], "wb") as out:
            while chunk := r.read(1 << 20):
                n += len(chunk)
                out.write(chunk)
        return n

    t = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        total = sum(pool.map(fetch, urls))
    return total, time.monotonic() - t


def _unpack_one(args: tuple[str, str]) -> int:
    wheel, dest = args
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest)
        return sum(i.file_size for i in z.infolist())


def unpack(wheels: Path) -> tuple[int, float]:
    """(bytes, seconds): the fetched wheels unpacked beside them, one process a core, the
    largest first, and synced to disk: the least writing any installer does."""
    files = sorted(wheels.glob("*.whl"), key=lambda p: -p.stat().st_size)
    dest = wheels / "unpacked"
    t = time.monotonic()
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        total = sum(pool.map(_unpack_one, [(str(w), str(dest / w.name)) for w in files]))
    os.sync()
    took = time.monotonic() - t
    shutil.rmtree(dest, ignore_errors=True)
    return total, took


def hashed_fraction(image: str) -> tuple[int, int, list[str]]:
    from packaging.utils import canonicalize_name

    from envgen.lock.write import installed_packages
    from envgen.resolve.closure import parse_closure
    from envgen.runtime import docker as engine
    p = installed_packages(engine.client(), image)
    cl = parse_closure(p.closure, image)
    hashed = {canonicalize_name(x.name) for x in cl.pins if x.sha256}
    have = [canonicalize_name(n) for n in p.packages]
    missing = sorted(n for n in have if n not in hashed)
    return len(have) - len(missing), len(have), missing


def top_pins(st) -> list[str]:
    return [f"{n}=={v}" for n, v in st.pip_packages.items() if v[:1] not in "<>=!~"]


def compare(spec: str, st, base: str, host: str, env: dict, tag: str,
            reverse: bool = False, same_work: bool = False) -> dict:
    """One stack cold: envgen, then the naive uv and pip Dockerfiles (or the reverse
    order), each from an empty build cache on the same base, with the CPU each kept busy;
    with `same_work`, the naive uv file with `--compile-bytecode` too (the bytecode envgen
    compiles: context beside the goal, which compares with the file as users write it)."""
    out = {}
    kinds = ("envgen", "uv", *(("uv-bytecode",) if same_work else ()), "pip")
    for kind in reversed(kinds) if reverse else kinds:
        cold(host)
        c = busy()
        if kind == "envgen":
            out["envgen_s"], out["build"], out["export_s"] = envgen_build(spec, tag, env)
        elif kind == "uv-bytecode":
            out["naive_uv_bytecode_s"] = naive_build(
                "uv", base, top_pins(st), "envgen-bench/naive-uv-bc:1", env,
                uv_flags="--compile-bytecode")
        else:
            out[f"naive_{kind}_s"] = naive_build(kind, base, top_pins(st),
                                                 f"envgen-bench/naive-{kind}:1", env)
        out[f"{kind}_cpu_s"] = busy() - c
    out["layers"] = out["build"]["layers"]
    return out


def compare_project(requirements: Path, base: str, host: str, env: dict) -> dict:
    """A project image cold: `envgen init --from` the file (resolved before the clock
    starts), `envgen build` in its folder, then the naive uv file with the same file."""
    folder = Path(tempfile.mkdtemp(prefix="envgen-bench-project-"))
    shutil.copy(requirements, folder / "requirements.txt")
    r = run([*ENVGEN, "init", "--from", "requirements.txt", "--name", "bench-project",
             "--json"], env=env, cwd=folder)
    spec = json.loads(r.stdout)["stack"]
    out = {"stack": spec, "requirements": len([ln for ln in requirements.read_text()
                                                .splitlines() if ln.strip()
                                                and not ln.startswith("#")])}
    cold(host)
    c = busy()
    out["envgen_s"], build, out["export_s"] = envgen_build(
        "", "envgen-bench/project:1", env, cwd=folder)
    out["envgen_cpu_s"] = busy() - c
    out["steps_s"] = build["steps_s"]
    cold(host)
    c = busy()
    out["naive_uv_s"] = naive_build("uv-project", base, [], "envgen-bench/naive-project:1",
                                    env, requirements=folder / "requirements.txt")
    out["uv_cpu_s"] = busy() - c
    shutil.rmtree(folder, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="pytorch-cu121")
    ap.add_argument("--over", default="accelerate-cu121",
                    help="a framework stack over --spec, compared the same way ('' skips it)")
    ap.add_argument("--project", default="bench/intake/requirements-60.txt",
                    help="a team's requirements file, built as a project image and compared "
                         "with the naive uv file ('' skips it)")
    ap.add_argument("--only-project", action="store_true",
                    help="measure the project image alone (its own section of the results)")
    ap.add_argument("--out", default="bench/reproducible.json")
    ap.add_argument("--markdown", default="docs/benchmarks.md")
    args = ap.parse_args()
    from envgen.resolve import request
    from envgen.resolve.closure import closure_for
    m = request.load()
    st = request.resolve(m, args.spec, request.host(m))
    base = st.base.local_tag
    closure, _ = closure_for(st)
    home = tempfile.mkdtemp(prefix="envgen-bench-home-")
    with own_daemon() as host:
        os.environ["DOCKER_HOST"] = host   # hashed_fraction's client
        env = {**os.environ, "DOCKER_HOST": host, "ENVGEN_HOME": home,
               "ENVGEN_BUILD_NETWORK": "host"}
        # the base, cold from its snapshot
        from envgen.build.base import make_local_base
        t = time.monotonic()
        make_local_base(st.base, lambda _m: None)
        t_base = time.monotonic() - t
        if args.only_project:
            project = compare_project(ROOT / args.project, base, host, env)
            cold(host)
            shutil.rmtree(home, ignore_errors=True)
            return project_results(args, project, t_base)
        fetched = Path(tempfile.mkdtemp(prefix="envgen-bench-wheels-", dir="/tmp"))
        wire_bytes, wire_s = wire(closure, fetched)
        unpacked_bytes, unpack_s = unpack(fetched)
        shutil.rmtree(fetched, ignore_errors=True)
        # two cold builds, each with the naive ones beside it, the second in reverse order
        a = compare(args.spec, st, base, host, env, "envgen-bench/a:1", same_work=True)
        b = compare(args.spec, st, base, host, env, "envgen-bench/b:1", reverse=True,
                    same_work=True)
        same = a["layers"] == b["layers"]
        rebuild = min(envgen_build(args.spec, "envgen-bench/b:1", env)[0] for _ in range(3))
        ok_hashed, total, unhashed = hashed_fraction("envgen-bench/b:1")
        cold(host)   # the same build without its bytecode step: what compiling costs
        c = busy()
        t_plain, plain, _ = envgen_build(args.spec, "envgen-bench/plain:1", env, bytecode=False)
        plain_cpu = busy() - c
        over = None
        if args.over:
            so = request.resolve(m, args.over, request.host(m))
            over = compare(args.over, so, base, host, env, "envgen-bench/over:1")
        project = compare_project(ROOT / args.project, base, host, env) \
            if args.project else None
        cold(host)
    shutil.rmtree(home, ignore_errors=True)

    def best(key):
        return min(a[key], b[key])

    t_envgen = best("envgen_s")
    export = min(a["export_s"], b["export_s"])
    res = {
        "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "spec": args.spec,
        "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
        "load_average_at_end": os.getloadavg()[0],
        "closure_key": closure.key, "distributions": total, "hash_pinned": ok_hashed,
        "hash_pinned_fraction": round(ok_hashed / total, 4), "unhashed": unhashed,
        "base_cold_s": round(t_base, 1),
        "wire_bytes": wire_bytes, "wire_fetch_s": round(wire_s, 1),
        "wire_rate_mb_s": round(wire_bytes / wire_s / 1e6, 1),
        "cold_build_1_s": round(a["envgen_s"], 1), "cold_build_2_s": round(b["envgen_s"], 1),
        "export_s": round(export, 1),
        "layers_identical": same, "layers": a["layers"], "layers_second": b["layers"],
        "cold_envgen_s": round(t_envgen, 1),
        "cold_naive_uv_s": round(best("naive_uv_s"), 1),
        "cold_naive_s": round(best("naive_pip_s"), 1),
        "cold_ratio_envgen_over_naive_uv": round(t_envgen / best("naive_uv_s"), 3),
        "cold_ratio_envgen_over_naive": round(t_envgen / best("naive_pip_s"), 3),
        "cold_naive_uv_bytecode_s": round(best("naive_uv_bytecode_s"), 1),
        "cold_ratio_envgen_over_naive_uv_bytecode": round(
            t_envgen / best("naive_uv_bytecode_s"), 3),
        "unpacked_bytes": unpacked_bytes, "unpack_s": round(unpack_s, 1),
        # the goal's floor: fetching, writing the files once, exporting them
        "cold_ratio_envgen_over_wire": round(t_envgen / (wire_s + unpack_s + export), 3),
        "cold_ratio_naive_uv_over_wire": round(best("naive_uv_s") /
                                               (wire_s + unpack_s + export), 3),
        "cold_ratio_envgen_over_fetch_and_export": round(t_envgen / (wire_s + export), 3),
        "cpu_core_s": {"envgen": [round(a["envgen_cpu_s"], 1), round(b["envgen_cpu_s"], 1)],
                       "naive_uv": [round(a["uv_cpu_s"], 1), round(b["uv_cpu_s"], 1)],
                       "naive_pip": [round(a["pip_cpu_s"], 1), round(b["pip_cpu_s"], 1)],
                       "envgen_no_bytecode": round(plain_cpu, 1),
                       "naive_uv_bytecode": [round(a["uv-bytecode_cpu_s"], 1),
                                             round(b["uv-bytecode_cpu_s"], 1)]},
        "rebuild_unchanged_s": round(rebuild, 2),
        "steps_s": {"cold_1": a["build"]["steps_s"], "cold_2": b["build"]["steps_s"],
                    "no_bytecode": plain["steps_s"]},
        "cold_no_bytecode_s": round(t_plain, 1),
    }
    if over is not None:
        res["over"] = {"spec": args.over, "cold_envgen_s": round(over["envgen_s"], 1),
                       "cold_naive_uv_s": round(over["naive_uv_s"], 1),
                       "cold_naive_s": round(over["naive_pip_s"], 1),
                       "ratio_uv": round(over["envgen_s"] / over["naive_uv_s"], 3),
                       "ratio_pip": round(over["envgen_s"] / over["naive_pip_s"], 3)}
    if project is not None:
        res["project"] = project_figures(args.project, project)
    res["pass"] = {"hashed": ok_hashed == total, "identical": same,
                   "cold_ratio_uv": res["cold_ratio_envgen_over_naive_uv"] <= 1.0,
                   "cold_ratio": res["cold_ratio_envgen_over_naive"] <= 0.6,
                   "wire": res["cold_ratio_envgen_over_wire"] <= 1.5,
                   "base": t_base < 30, "rebuild": rebuild < 1.0}
    Path(ROOT / args.out).write_text(json.dumps(res, indent=2) + "\n")
    yes = {True: "yes", False: "NO"}
    p = res["pass"]
    md = [
        f"Measured on {res['date']} ({res['cpus']} CPUs, shared machine, load average "
        f"{res['load_average_at_end']:.1f} at the end), `{args.spec}`, all in one run on a "
        f"throw-away dockerd of its own (build cache and cache mounts emptied before each "
        f"cold build). Raw numbers: `bench/reproducible.json`.", "",
        "| figure | measured | goal | met |", "|---|---|---|---|",
        f"| distributions in the image the lock pins with a sha256 | {ok_hashed}/{total} "
        f"({100 * ok_hashed / total:.0f} %) | 100 % | {yes[p['hashed']]} |",
        f"| base made from its snapshot, cold | {t_base:.1f} s | < 30 s | {yes[p['base']]} |",
        f"| layer digests of two cold builds | "
        f"{'identical, all ' + str(len(a['layers'])) if same else 'DIFFERENT'} "
        f"({a['envgen_s']:.0f} s, {b['envgen_s']:.0f} s) | identical | {yes[same]} |",
        f"| cold build, envgen / naive `uv pip install` (bench/naive-uv.Dockerfile) | "
        f"{t_envgen:.0f} s / {res['cold_naive_uv_s']:.0f} s = "
        f"{res['cold_ratio_envgen_over_naive_uv']} | <= 1.0 | {yes[p['cold_ratio_uv']]} |",
        f"| context, not a goal: envgen / the naive uv file with `--compile-bytecode` (the "
        f"bytecode envgen compiles) | {t_envgen:.0f} s / "
        f"{res['cold_naive_uv_bytecode_s']:.0f} s = "
        f"{res['cold_ratio_envgen_over_naive_uv_bytecode']} | | |",
        f"| cold build, envgen / naive `pip install` (bench/naive-pip.Dockerfile) | "
        f"{t_envgen:.0f} s / {res['cold_naive_s']:.0f} s = "
        f"{res['cold_ratio_envgen_over_naive']} | <= 0.6 | {yes[p['cold_ratio']]} |",
        f"| cold build / (wire + writing the layers): {wire_bytes / 1e9:.2f} GB fetched in "
        f"{wire_s:.1f} s ({res['wire_rate_mb_s']} MB/s), unpacked to "
        f"{unpacked_bytes / 1e9:.2f} GB in {unpack_s:.1f} s, export {export:.1f} s (the naive "
        f"uv file: {res['cold_ratio_naive_uv_over_wire']}; against fetch and export alone, "
        f"envgen {res['cold_ratio_envgen_over_fetch_and_export']}) | "
        f"{res['cold_ratio_envgen_over_wire']} | <= 1.5 | {yes[p['wire']]} |",
        f"| rebuild of an unchanged stack | {rebuild:.2f} s | < 1 s | {yes[p['rebuild']]} |",
    ]
    if over is not None:
        o = res["over"]
        md.append(f"| `{args.over}` cold: envgen / naive uv / naive pip | "
                  f"{o['cold_envgen_s']:.0f} s / {o['cold_naive_uv_s']:.0f} s / "
                  f"{o['cold_naive_s']:.0f} s = {o['ratio_uv']} / {o['ratio_pip']} | "
                  f"<= 1.0 / <= 0.6 | {yes[o['ratio_uv'] <= 1.0 and o['ratio_pip'] <= 0.6]} |")
    if project is not None:
        md.append(project_row(res["project"]))

    def steps(d):
        return ", ".join(f"{k} {v:g}" for k, v in d.items() if v >= 0.1)
    md += ["", "Where a cold build's time goes (envgen's own step figures, seconds; the naive "
           "files compile no bytecode but in the `--compile-bytecode` row):", "",
           f"- cold build 1 ({a['envgen_s']:.1f} s): {steps(a['build']['steps_s'])}",
           f"- cold build 2 ({b['envgen_s']:.1f} s): {steps(b['build']['steps_s'])}",
           f"- the same, bytecode step rendered out ({t_plain:.1f} s): "
           f"{steps(plain['steps_s'])}",
           "- CPU kept busy (core-seconds, /proc/stat, build 1 and build 2): envgen "
           f"{a['envgen_cpu_s']:.0f} and {b['envgen_cpu_s']:.0f}, without its bytecode step "
           f"{plain_cpu:.0f}; naive uv {a['uv_cpu_s']:.0f} and {b['uv_cpu_s']:.0f}; naive pip "
           f"{a['pip_cpu_s']:.0f} and {b['pip_cpu_s']:.0f}; naive uv with "
           f"`--compile-bytecode` {a['uv-bytecode_cpu_s']:.0f} and "
           f"{b['uv-bytecode_cpu_s']:.0f}"]
    if project is not None:
        p = res["project"]
        md.append(f"- the project image ({p['cold_envgen_s']:.1f} s): {steps(p['steps_s'])}; "
                  f"CPU envgen {p['cpu_core_s']['envgen']:.0f}, naive uv "
                  f"{p['cpu_core_s']['naive_uv']:.0f} core-seconds")
    md.append("")
    md_path = ROOT / args.markdown
    text = md_path.read_text() if md_path.exists() else "# Benchmarks\n"
    md_path.write_text(replace_section(   # the other scripts' sections stay as they are
        text, "## Reproducible and portable (`bench/reproducible.py`)", md))
    print("\n".join(md))
    return 0 if all(res["pass"].values()) else 1


def project_figures(path: str, project: dict) -> dict:
    return {"requirements_file": path, "stack": project["stack"],
            "requirements": project["requirements"],
            "cold_envgen_s": round(project["envgen_s"], 1),
            "cold_naive_uv_s": round(project["naive_uv_s"], 1),
            "ratio_uv": round(project["envgen_s"] / project["naive_uv_s"], 3),
            "export_s": round(project["export_s"], 1), "steps_s": project["steps_s"],
            "cpu_core_s": {"envgen": round(project["envgen_cpu_s"], 1),
                           "naive_uv": round(project["uv_cpu_s"], 1)}}


def project_row(p: dict) -> str:
    return (f"| project image of `{p['requirements_file']}` ({p['requirements']} "
            f"requirements over {p['stack']}) cold: envgen / naive `uv pip install -r` "
            f"(bench/naive-uv-project.Dockerfile) | {p['cold_envgen_s']:.0f} s / "
            f"{p['cold_naive_uv_s']:.0f} s = {p['ratio_uv']} | <= 1.0 | "
            f"{'yes' if p['ratio_uv'] <= 1.0 else 'NO'} |")


def project_results(args, project: dict, t_base: float) -> int:
    """--only-project: the project image's figures, in bench/project-image.json and a
    section of docs/benchmarks.md of their own."""
    p = project_figures(args.project, project)
    p.update(date=time.strftime("%Y-%m-%d"), cpus=os.cpu_count(),
             load_average_at_end=os.getloadavg()[0], base_cold_s=round(t_base, 1))
    Path(ROOT / "bench" / "project-image.json").write_text(json.dumps(p, indent=2) + "\n")
    steps = ", ".join(f"{k} {v:g}" for k, v in p["steps_s"].items() if v >= 0.1)
    md = [f"Measured on {p['date']} ({p['cpus']} CPUs, load average "
          f"{p['load_average_at_end']:.1f} at the end) on a throw-away dockerd, build cache "
          f"and cache mounts emptied before each build, the same base. Raw numbers: "
          f"`bench/project-image.json`.", "", "| figure | measured | goal | met |",
          "|---|---|---|---|", project_row(p), "",
          f"envgen's steps (seconds): {steps}.", "",
          f"CPU kept busy (core-seconds, /proc/stat): envgen {p['cpu_core_s']['envgen']:g}, "
          f"the naive uv file {p['cpu_core_s']['naive_uv']:g}.", ""]
    md_path = ROOT / args.markdown
    md_path.write_text(replace_section(
        md_path.read_text(), "## A project image, cold (`bench/reproducible.py --only-project`)",
        md))
    print("\n".join(md))
    return 0 if p["ratio_uv"] <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
