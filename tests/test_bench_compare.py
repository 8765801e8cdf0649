"""bench/compare.py: which recorded figures got worse, beyond their noise margins; and the
docs/benchmarks.md sections each bench script owns."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import compare  # noqa: E402
from sections import replace_section  # noqa: E402


def fig(value, margin=compare.TIME_MARGIN, better="lower"):
    return compare.figure(value, "s", "2026-12-01", "vm", margin, better)


def test_only_a_move_the_wrong_way_past_its_margin_is_worse():
    old = {"resolve": fig(1.0), "render": fig(1.0), "size": fig(1.0, compare.SIZE_MARGIN),
           "hashed": fig(1.0, 0.0, "higher"), "faster": fig(1.0), "gone": fig(3.0)}
    new = {"resolve": fig(1.24),                       # +24 %: inside the 25 % margin
           "render": fig(1.30),                        # +30 %: worse
           "size": fig(1.03, compare.SIZE_MARGIN),     # +3 % of a byte count: worse
           "hashed": fig(0.96, 0.0, "higher"),         # fewer pinned: worse
           "faster": fig(0.5),                         # better is never reported
           "added": fig(7.0)}
    worse = {w["figure"]: w for w in compare.worse(old, new)}
    assert set(worse) == {"render", "size", "hashed"}
    assert worse["render"]["change"] == 0.3 and worse["render"]["old"] == 1.0
    lines = compare.report(old, new)
    assert any(line.startswith("worse: render 1.0 -> 1.3 (+30%") for line in lines)
    assert "new: added = 7.0 s" in lines
    assert any(line.startswith("not measured this time: gone") for line in lines)
    assert not any("resolve" in line or "faster" in line for line in lines)


def test_the_recorded_results_give_every_figure_the_issue_names():
    results = json.loads((ROOT / "bench" / "results.json").read_text())
    build = results.get("build", results)
    figures = {**compare.legacy_build_figures(build),
               **compare.reproducible_figures(
                   json.loads((ROOT / "bench" / "reproducible.json").read_text())),
               **compare.sharing_figures(
                   json.loads((ROOT / "bench" / "layer-sharing.json").read_text()))}
    assert {"rebuild_unchanged_s", "image_size_over_payload", "certify_cpu_s",
            "cold_build_vs_naive", "layer_sharing_ratio"} <= set(figures)
    assert all(f["measured"] and f["machine"] for f in figures.values())
    if "figures" in results:   # written by bench.py: the CLI's figures are there too
        assert {"cli_resolve_vs_python_start", "render_all_s"} <= set(results["figures"])


def test_a_script_replaces_its_own_section_and_keeps_the_others():
    text = "# Benchmarks\n\nintro\n\n## A\n\nold a\n\n## B\n\nold b\n"
    text = replace_section(text, "## A", ["new a", ""])
    assert text == "# Benchmarks\n\nintro\n\n## A\n\nnew a\n\n## B\n\nold b\n"
    text = replace_section(text, "## B", ["new b"])
    assert text.endswith("## A\n\nnew a\n\n## B\n\nnew b\n")
    text = replace_section(text, "## C", ["c"])
    assert text.endswith("## B\n\nnew b\n\n## C\n\nc\n") and text.count("## ") == 3


def test_bench_all_rewrites_its_table_alone_and_orders_stacks_by_cuda_line(tmp_path,
                                                                         monkeypatch):
    import build_all
    doc = tmp_path / "matrix-builds.md"
    doc.write_text(f"# t\n\nintro\n\n{build_all.START}\nold table\n{build_all.END}\n\n"
                   "## NeMo\n\nkept\n")
    monkeypatch.setattr(build_all, "DOC", doc)
    row = {"python": "3.11", "base": "debian-bookworm", "cuda": "12.1", "cudnn": "9",
           "nccl": "2", "seconds": 1.0, "passed": True, "framework": "torch", "version": "1",
           "inside": {"torch": "1", "driver": None},
           "checks": {"passed": 6, "skipped": 7, "failed": []}}
    build_all.write_doc({"lightning-cu121": {**row, "passed": False, "checks": {
        "passed": 5, "skipped": 7, "failed": ["train"]}}, "pytorch-cu121": row,
        "pytorch-cu117": row})
    text = doc.read_text()
    assert "old table" not in text and text.endswith("## NeMo\n\nkept\n")
    names = [line.split(" | ")[0][2:] for line in text.splitlines()
             if line.startswith("| ") and "-cu" in line]
    assert names == ["pytorch-cu117", "pytorch-cu121", "lightning-cu121"]
    assert "**no**: 5 / 7 / 1 (train)" in text and "driver" not in text
