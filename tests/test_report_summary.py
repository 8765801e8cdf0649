"""The report a lead reads in one minute: a summary sentence (what the fleet runs today on
every host and what upgrading to the branch it trusts adds), the branches teams run first
(the older ones folded), project certificates under their project names, an evidence table
of what each certificate measured, and two charts drawn as inline SVG from numbers
computed here (nothing fetched: the page opens from disk)."""
from __future__ import annotations

import re

import pytest
import test_report
from test_report import FLEET, certificate, fleet

from envgen import diff
from envgen.report import build_report, render_page
from envgen.report.grid import columns, upgrade_target

m, stacks = test_report.m, test_report.stacks   # the bundled matrix and its stacks, once


def _cert(stacks, **kw):
    c = certificate(stacks["pytorch-cu121"], **kw)
    c["report"]["metrics"] = {"samples_per_s": kw.pop("_sps", 20000.0), "gemm_tflops": 650.25}
    return c


def test_the_branches_teams_run_come_first_and_the_older_ones_fold(m):
    cols = columns(m)
    current = [c["name"] for c in cols if c["current"]]
    assert current[0] == "R535" and {"R550", "R570", "R580", "R620"} <= set(current)
    assert not any(c["current"] for c in cols if c["name"] in ("R418", "R470", "R525"))
    # a branch a fleet host runs is shown whatever its age
    assert next(c for c in columns(m, frozenset({"R470"})) if c["name"] == "R470")["current"]


def test_the_summary_says_what_the_fleet_runs_today_and_what_upgrading_adds(m, stacks):
    hosts = fleet(m, FLEET + '  - name: h200\n    driver: "580.95.05"\n    gpus: ["H200"]\n')
    assert upgrade_target(m, hosts).branch == "580"   # the newest LTS a host already runs
    s = build_report(m, stacks, hosts, [])["summary"]
    f = s["fleet"]
    assert s["headline"] == (f"Your fleet runs {f['runs']} stacks today on all 4 hosts; "
                             f"upgrading the 3 below R580 to {f['driver']} adds {f['adds']}.")
    assert f["adds"] > 0 and "pytorch-cu130" in f["added"] and f["pairs_then"] > f["pairs_now"]
    every = set.intersection(*(set(h["runs"]) for h in diff.fleet_report(
        m, hosts, None, stacks=stacks)["hosts"]))
    assert f["runs"] == len(every) and "pytorch-cu130" not in every


def test_without_a_fleet_the_summary_counts_what_the_store_certified(m, stacks):
    s = build_report(m, stacks, [], [_cert(stacks)])["summary"]
    assert s["fleet"] is None and "1 stack(s) certified in this store (1 at level cuda)" \
        in s["headline"]


def test_a_projects_certificate_is_listed_under_its_project_name(m, stacks):
    c = _cert(stacks)
    c["stack"] = c["stack"] | {"project": {"name": "trainer"}}
    r = build_report(m, stacks, [], [c])
    assert [row["stack"] for row in r["certificates"]] == ["trainer.pytorch-cu121"]
    assert [row["stack"] for row in r["placements"]["rows"]] == ["trainer.pytorch-cu121"]
    row = next(x for x in r["views"][0]["rows"] if x["stack"] == "pytorch-cu121")
    assert row["certificate"] is None   # the project's image is not the plain stack's


def test_the_evidence_table_shows_what_each_certificate_measured(m, stacks):
    c = _cert(stacks)
    c["report"]["checks"].append({"name": "gemm", "passed": True})
    html = render_page(build_report(m, stacks, [], [c]))
    row = re.search(r'<table class="list certificates evidence">.*?</table>', html, re.S)[0]
    assert "<td>2/2</td><td>20,000</td><td>650.2</td><td>9.5 s</td>" in row


def test_a_hostile_figure_is_not_shown_as_a_number(m, stacks):
    c = _cert(stacks)
    c["report"]["metrics"] = {"samples_per_s": "<b>9e99</b>", "gemm_tflops": float("nan")}
    r = build_report(m, stacks, [], [c])
    assert r["certificates"][0]["samples_text"] == "-" and r["throughput_chart"] is None
    assert r["certificates"][0]["tflops_text"] == "-"


def test_the_charts_are_inline_svg_from_the_grid_and_the_certificates(m, stacks):
    fast = _cert(stacks)
    slow = _cert(stacks, gpu="NVIDIA L4", image="sha256:" + "cd" * 32, _sps=5000.0)
    slow["report"]["metrics"]["samples_per_s"] = 5000.0
    r = build_report(m, stacks, fleet(m, FLEET), [fast, slow])
    bc = r["branches_chart"]
    r535 = [b for b in bc["bars"] if b["title"].startswith("R535:")]
    runs = sum(1 for row in r["views"][0]["rows"]
               if row["cells"][[c["name"] for c in r["columns"]].index("R535")]["state"]
               != "none")
    assert sum(int(b["title"].split(": ")[1].split()[0]) for b in r535) == runs
    assert {lb["text"] for lb in bc["labels"] if lb["fleet"]} == {"R525", "R535"}
    tc = r["throughput_chart"]
    assert [b["value"] for b in tc["bars"]] == ["20,000", "5,000"]
    assert tc["bars"][0]["w"] == pytest.approx(4 * tc["bars"][1]["w"], rel=0.01)
    html = render_page(r)
    assert html.count('<figure class="chart"') == 2 and "<svg" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)   # nothing from the network


@pytest.mark.parametrize("value", [5e-324, 1e-310, 1e308])
def test_a_throughput_at_the_ends_of_the_floats_draws_a_chart(value):
    """A certificate `certs import` accepts may say 5e-324 samples/s: the axis' top went to
    0 and the report ended with ZeroDivisionError (exit 4)."""
    from envgen.report.plots import throughput_chart
    rows = [{"stack": "pytorch-cu121", "gpu": "H100", "level": "cuda", "passed": True,
             "created": "2026-12-01T00:00:00Z", "samples_per_s": value}]
    bars = throughput_chart(rows)["bars"]
    assert len(bars) == 1 and bars[0]["w"] >= 1.0


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_an_infinite_throughput_is_no_bar_and_no_endless_axis(value):
    """1e999 in a certificate's JSON reads as infinity: the axis' top grew by tens forever
    and `envgen report` never ended."""
    from envgen.report.plots import _nice_max, throughput_chart
    rows = [{"stack": "pytorch-cu121", "gpu": "H100", "level": "cuda", "passed": True,
             "created": "2026-12-01T00:00:00Z", "samples_per_s": value}]
    assert throughput_chart(rows) is None and _nice_max(value) == 1.0
