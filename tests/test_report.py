"""`envgen report`: the grid computed from the bundled matrix with diff's verdicts, the page
escaped, the files deterministic, and the command's errors one sentence with an exit code."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envgen import diff
from envgen.certs import store as certs
from envgen.cli import main
from envgen.matrix import load_matrix
from envgen.matrix.yamlfile import load_text
from envgen.report import build_report, render_page
from envgen.report.page import TEMPLATE, _html

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def m():
    return load_matrix()


@pytest.fixture(scope="module")
def stacks(m):
    return diff.resolve_all(m)


def fleet(m, text: str):
    return diff.parse_fleet(load_text(text, "fleet.yaml"), "fleet.yaml", m)


FLEET = """\
hosts:
  - name: old-a100
    driver: "525.147.05"
    gpus: ["A100"]
  - name: dgx-h100
    driver: "535.274.02"
    gpus: ["H100", "H100"]
  - name: ws-4090
    driver: "535.274.02"
    gpus: ["RTX 4090"]
"""


def certificate(stack, *, gpu="NVIDIA H100 80GB HBM3", driver="535.274.02",
                created="2026-11-30T08:45:02Z", image=IMAGE, passed=True, **extra) -> dict:
    return {"schema": 1, "image_id": image, "image_tags": [], "stack": stack.to_json(),
            "level": "cuda", "passed": passed, "created": created, "exit_code": 0 if passed else 1,
            "host": {"driver": driver, "gpus": [{"index": 0, "name": gpu, "cc": "9.0"}]},
            "report": {"passed": passed, "level": "cuda",
                       "checks": [{"name": "train", "passed": passed}]},
            "seconds": 9.5, **extra}


@pytest.fixture(scope="module")
def report(m, stacks):
    return build_report(m, stacks, fleet(m, FLEET),
                        [certificate(stacks["pytorch-cu121"])], fleet_file="fleet.yaml")


def view(report, gpu=""):
    return next(v for v in report["views"] if v["gpu"] == gpu)


def grid_cell(v, stack, branch):
    row = next(r for r in v["rows"] if r["stack"] == stack)
    i = [c["name"] for c in v["columns"]].index(branch)
    return row["cells"][i]


# ---- the grid ------------------------------------------------------------------------------

def test_columns_are_the_matrix_driver_branches_at_their_newest_release(m, report):
    cols = report["columns"]
    assert [c["name"] for c in cols] == sorted((f"R{b.branch}" for b in m.drivers),
                                               key=lambda n: int(n[1:]))
    r535 = next(b for b in m.drivers if b.branch == "535")
    assert next(c for c in cols if c["name"] == "R535")["driver"] == r535.latest
    assert {"R470", "R525", "R535", "R580"} <= {c["name"] for c in cols}


def test_rows_are_every_stack_that_resolves(m, stacks, report):
    assert report["stacks"] == len(stacks) == len(view(report)["rows"])
    assert [r["stack"] for r in view(report)["rows"]] == sorted(m.stack_names())


def test_cuda_12_1_is_native_on_r535_minor_on_r525_and_not_on_r520(report):
    v = view(report)
    assert grid_cell(v, "pytorch-cu121", "R535")["state"] == "native"
    assert grid_cell(v, "pytorch-cu121", "R525")["state"] == "minor"
    none = grid_cell(v, "pytorch-cu121", "R520")
    assert none["state"] == "none" and none["symbol"] == "✗" and none["word"] == "no"
    assert "525.60.13" in none["why"]   # the CUDA 12.x minimum, from the matrix


def test_cuda_12_1_on_r470_is_forward_compat_for_datacenter_gpus_only(report):
    any_gpu = grid_cell(view(report), "pytorch-cu121", "R470")
    assert any_gpu["state"] == "forward"
    assert "datacenter" in any_gpu["only"] and "geforce" not in any_gpu["only"]
    assert "forward compatibility" in any_gpu["title"]
    # on a GeForce card, or a GPU R470 does not know, it does not run at all
    assert grid_cell(view(report, "RTX 4090"), "pytorch-cu121", "R470")["state"] == "none"
    h100 = grid_cell(view(report, "H100"), "pytorch-cu121", "R470")
    assert h100["state"] == "none" and "H100" in h100["why"]
    a100 = grid_cell(view(report, "A100"), "pytorch-cu121", "R470")
    # the default image (debian-bookworm) has no cuda-compat: built for R470 it runs
    assert a100["state"] == "forward"
    assert a100["only"] == "built for this driver (a cuda-compat base)"
    assert "envgen build pytorch-cu121 --driver" in a100["why"]
    assert "cuda-compat base" in any_gpu["only"]


def test_cpu_stack_runs_on_every_branch(report):
    row = next(r for r in view(report)["rows"] if r["stack"] == "pytorch-cpu")
    assert {c["state"] for c in row["cells"]} == {"cpu"}


def test_every_cell_carries_diff_verdicts_reason(m, stacks, report):
    v = view(report, "H100")
    h100 = m.gpu("H100")
    for row in v["rows"]:
        for col, c in zip(v["columns"], row["cells"], strict=True):
            d = diff.verdict(m, stacks[row["stack"]], col["driver"], h100)
            assert c["why"] == d["why"]
            assert (c["state"] != "none") == (d["runs"] or "rebuilt" in d)
            assert c["title"].startswith(d["why"])


def test_gpu_view_hides_stacks_without_kernels_for_it_with_the_reason(report):
    v = view(report, "H100")
    hidden = {h["stack"]: h["why"] for h in v["hidden"]}
    assert "pytorch-cu117" in hidden and "9.0" in hidden["pytorch-cu117"]
    shown = {r["stack"] for r in v["rows"]}
    assert "pytorch-cu117" not in shown and "pytorch-cu121" in shown
    assert not view(report)["hidden"]   # the any-GPU view checks no kernels


def test_fleet_hosts_mark_their_branch_columns(report):
    marked = {c["name"]: c["hosts"] for c in view(report)["columns"] if c["fleet"]}
    assert marked == {"R525": "old-a100", "R535": "dgx-h100, ws-4090"}
    h100 = {c["name"]: c["hosts"] for c in view(report, "H100")["columns"] if c["fleet"]}
    assert h100 == {"R535": "dgx-h100"}
    cells = grid_cell(view(report, "H100"), "pytorch-cu121", "R535")
    assert cells["fleet"] is True
    assert [v["gpu"] for v in report["views"]] == ["", "A100", "H100", "RTX 4090"]


def test_fleet_table_says_how_many_stacks_each_host_runs(m, stacks, report):
    rows = {h["name"]: h for h in report["fleet"]}
    assert rows["dgx-h100"]["gpus"] == "2× H100" and rows["dgx-h100"]["branch"] == "R535"
    expect = diff.fleet_report(m, fleet(m, FLEET), None, stacks=stacks)["hosts"][1]["runs"]
    assert rows["dgx-h100"]["runs"] == len(expect)


def test_unresolvable_stack_is_listed_with_its_reason(m, stacks):
    few = {n: stacks[n] for n in ("pytorch-cpu", "pytorch-cu121")}
    r = build_report(m, {**few, "pytorch-cu999": "no variant cu999 in the matrix"})
    assert r["unresolved"] == [{"stack": "pytorch-cu999", "why": "no variant cu999 in the matrix"}]
    assert r["stacks"] == 2
    assert "pytorch-cu999" not in {row["stack"] for row in r["views"][0]["rows"]}
    assert "no variant cu999 in the matrix" in render_page(r)


def test_no_fleet_means_one_view_and_no_filter(m, stacks):
    r = build_report(m, {"pytorch-cu121": stacks["pytorch-cu121"]})
    assert len(r["views"]) == 1 and r["gpu_filter"] is False
    html = render_page(r)
    assert 'id="gpu-filter"' not in html and "<script" not in html


# ---- certificates --------------------------------------------------------------------------

def test_certified_stack_shows_gpu_driver_date_and_its_copy(report):
    row = next(r for r in view(report)["rows"] if r["stack"] == "pytorch-cu121")
    c = row["certificate"]
    assert (c["gpu"], c["driver"], c["date"]) == ("NVIDIA H100 80GB HBM3", "535.274.02",
                                                 "2026-11-30")
    # the copy is named as the store names it: image, and where it ran (GPU, driver)
    assert re.fullmatch(rf"certs/{IMAGE[7:]}\.1x-nvidia-h100-80gb-hbm3-535-274-02-[0-9a-f]{{8}}"
                        rf"\.json", c["file"]) and c["current"] is True
    assert report["certified"] == 1
    assert next(r for r in view(report)["rows"] if r["stack"] == "pytorch-cu118")[
        "certificate"] is None


def test_certificate_of_another_release_is_shown_but_not_counted(m, stacks):
    old = stacks["pytorch-cu121"].replace(version="0.0.1")
    r = build_report(m, {"pytorch-cu121": stacks["pytorch-cu121"]}, certs=[certificate(old)])
    c = next(x for x in r["views"][0]["rows"] if x["stack"] == "pytorch-cu121")["certificate"]
    assert c["current"] is False and "0.0.1" in c["note"]
    assert r["certified"] == 0


def test_failed_certificate_does_not_certify_the_row(m, stacks):
    r = build_report(m, {"pytorch-cu121": stacks["pytorch-cu121"]},
                     certs=[certificate(stacks["pytorch-cu121"], passed=False)])
    assert r["certified"] == 0 and r["certificates"][0]["passed"] is False


def test_certificate_copies_get_safe_unique_names(m, stacks):
    st = stacks["pytorch-cu121"]
    r = build_report(m, {"pytorch-cu121": st},
                     certs=[certificate(st), certificate(st, profile="steps3"),
                            certificate(st, profile="../../etc/passwd")])
    files = [c["file"] for c in r["certificates"]]
    assert len(set(files)) == 3
    assert any(f.startswith(f"certs/{IMAGE[7:]}.steps3.1x-nvidia-h100") for f in files)
    assert all(re.fullmatch(r"certs/[0-9a-f]{64}(\.[a-z0-9-]+){0,2}\.json", f) for f in files)


def test_a_run_on_no_gpu_is_shown_on_no_gpu_whatever_its_host_listed(m, stacks):
    """envgens before 2026-12-07 listed the host's GPUs for a `--gpus none` run: the grid
    cell, the evidence table and the chart say 'no GPU' for it, as `envgen certs` does."""
    from envgen.certs.certificate import where, where_text
    st = stacks["pytorch-cu121"]
    c = certificate(st, gpu="NVIDIA H200", driver="580.159.04", profile="cpu", level="cpu")
    c["host"]["gpus"] *= 2
    c["report"].update(level="cpu", require="cpu", metrics={"samples_per_s": 1234.0})
    assert where_text(where(c)) == "no GPU"
    r = build_report(m, {"pytorch-cu121": st}, certs=[c])
    (row,) = r["certificates"]
    assert (row["gpu"], row["driver"]) == ("no GPU", "-")
    cell = next(x for x in r["views"][0]["rows"] if x["stack"] == "pytorch-cu121")
    assert (cell["certificate"]["gpu"], cell["certificate"]["driver"]) == ("no GPU", "-")
    assert [col["label"] for col in r["placements"]["columns"]] == ["no GPU"]
    assert [b["label"] for b in r["throughput_chart"]["bars"]] == ["pytorch-cu121 · no GPU"]
    assert "H200" not in render_page(r)
    # a run on the GPU still names it, with its driver
    gpu_run = certificate(st, gpu="NVIDIA H200", driver="580.159.04")
    gpu_run["host"]["gpus"] *= 2
    (row,) = build_report(m, {"pytorch-cu121": st}, certs=[gpu_run])["certificates"]
    assert (row["gpu"], row["driver"]) == ("2× NVIDIA H200", "580.159.04")


# ---- the page ------------------------------------------------------------------------------

def test_page_environment_autoescapes_and_the_template_never_turns_it_off():
    assert _html().autoescape is True
    source = (ROOT / "templates" / TEMPLATE).read_text()
    assert "|safe" not in source.replace(" ", "") and "autoescape" not in source


def test_script_in_a_certificate_field_and_a_host_name_is_escaped(m, stacks):
    evil = "<script>alert(1)</script>"
    hosts = fleet(m, FLEET.replace("ws-4090", json.dumps(evil)))
    cert = certificate(stacks["pytorch-cu121"], gpu=evil, driver=evil,
                       created='2026-11-30"><script>alert(2)</script>')
    few = {n: stacks[n] for n in ("pytorch-cpu", "pytorch-cu121")}
    html = render_page(build_report(m, few, hosts, [cert], fleet_file=evil))
    assert evil not in html and "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script") == 1   # the page's own filter script


def test_the_page_is_escaped_after_the_plain_environment_compiled_it(m, stacks, tmp_path,
                                                                   monkeypatch):
    """The template bytecode cache under ENVGEN_HOME keys code by template name: code the
    plain (unescaped) environment compiled and cached must not render the page."""
    from envgen.render import env as render_env
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ENVGEN_NO_CACHE", raising=False)
    render_env.environment.cache_clear()
    _html.cache_clear()
    try:
        render_env.environment().get_template(TEMPLATE)   # compiled unescaped, and cached
        assert list((tmp_path / "home" / "cache" / "templates").iterdir())
        evil = "<script>alert(3)</script>"
        html = render_page(build_report(m, {"pytorch-cu121": stacks["pytorch-cu121"]},
                                        fleet(m, FLEET.replace("ws-4090", json.dumps(evil)))))
        assert evil not in html and "&lt;script&gt;alert(3)" in html
    finally:
        render_env.environment.cache_clear()
        _html.cache_clear()


def test_report_command_writes_the_same_files_twice(tmp_path, monkeypatch, capsys, stacks):
    home = tmp_path / "home"
    monkeypatch.setenv("ENVGEN_HOME", str(home))
    certs.save(certificate(stacks["pytorch-cu121"]))
    (tmp_path / "fleet.yaml").write_text(FLEET)
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        rc = main(["report", "-o", str(out), "--fleet", str(tmp_path / "fleet.yaml"),
                   "--json"])
        assert rc == 0
        outs.append((out, json.loads(capsys.readouterr().out)))
    (a, ja), (b, jb) = outs
    assert ja == jb | {"index": ja["index"]}
    assert ja["schema_version"] == 1 and ja["index"] == str(a / "index.html")
    assert ja["stacks"] == len(stacks) and ja["certified"] == 1
    assert ja["branches"][:2] == ["R418", "R440"] and "R580" in ja["branches"]
    assert (a / "index.html").read_bytes() == (b / "index.html").read_bytes()
    copied = sorted(p.name for p in (a / "certs").iterdir())
    assert copied == [certs.file_name(certificate(stacks["pytorch-cu121"]))]
    stored = (home / "certs" / copied[0]).read_bytes()
    assert (a / "certs" / copied[0]).read_bytes() == stored
    assert f'href="certs/{copied[0]}"' in (a / "index.html").read_text()


def test_report_human_output_names_the_index(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    rc = main(["report", "-o", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 0 and out.startswith(f"wrote {tmp_path / 'out' / 'index.html'}: ")


@pytest.mark.parametrize("make,code,words", [
    (lambda t: (t / "file").write_text("x") and t / "file", 2, "must name a folder"),
    (lambda t: (t / "file").write_text("x") and t / "file" / "sub", 2, "cannot write"),
])
def test_unusable_output_is_one_sentence_and_an_exit_code(tmp_path, monkeypatch, capsys,
                                                          make, code, words):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    out = make(tmp_path)
    rc = main(["report", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == code and words in err and str(out) in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_fleet_file_names_its_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    bad = tmp_path / "fleet.yaml"
    bad.write_text('hosts:\n  - name: a\n    driver: "535.104.05"\n    gpus: ["Voodoo 2"]\n')
    rc = main(["report", "-o", str(tmp_path / "out"), "--fleet", str(bad), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 2 and d["file"] == str(bad) and d["line"] == 4 and "Voodoo 2" in d["message"]
    rc = main(["report", "-o", str(tmp_path / "out"), "--fleet", str(tmp_path / "none.yaml")])
    err = capsys.readouterr().err
    assert rc == 2 and f"{tmp_path / 'none.yaml'}: cannot read" in err
    assert "Traceback" not in err
