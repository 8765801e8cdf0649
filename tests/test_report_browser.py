"""`envgen report` in a real browser: Debian's Chromium, headless, loads the page from
file:// with no network, and the DOM it builds, the GPU filter its script applies and the
pixels it draws are checked. tools/bootstrap.sh installs chromium; without it these skip.

ENVGEN_UPDATE_SCREENSHOT=1 also writes docs/report.png (the bundled matrix, examples/
fleet.yaml, and the H200 certificate of docs/certificates/)."""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from envgen import diff
from envgen.certs import store as certs
from envgen.cli import main
from envgen.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(tools/bootstrap.sh installs it: apt-get install chromium)")

# the cell colours of templates/report.html.j2
COLOURS = {"native": (0xa8, 0xe0, 0xb4), "minor": (0xfb, 0xd9, 0x8a),
           "forward": (0xa9, 0xcb, 0xf0), "none": (0xf4, 0xb6, 0xb6),
           "fleet": (0x5b, 0x3f, 0x8c)}
EVIL = "<script>document.body.setAttribute('data-pwned','yes')</script>"
FLEET = f"""\
hosts:
  - name: old-a100
    driver: "470.256.02"
    gpus: ["A100"]
  - name: dgx-h100
    driver: "535.274.02"
    gpus: ["H100", "H100"]
  - name: {json.dumps(EVIL)}
    driver: "550.163.01"
    gpus: ["RTX 4090"]
"""


# the store behind the page: the H100 run of image cd.. twice (the earlier one is history),
# and a failed run of another image on an H200 under another driver
H100 = {"driver": "535.274.02", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]}
PLACED = [{"schema": 1, "image_id": "sha256:" + "cd" * 32, "image_tags": [], "level": "cuda",
           "passed": True, "created": created, "seconds": 9.5, "host": H100, "exit_code": 0,
           "report": {"passed": True, "level": "cuda",
                      "checks": [{"name": "train", "passed": True}]}}
          for created in ("2026-11-29T08:00:00Z",
                                                     "2026-11-30T08:45:02Z")]
for c in PLACED:   # what the payload measured: the throughput chart draws it
    c["report"] = c["report"] | {"metrics": {"samples_per_s": 21000.0, "gemm_tflops": 640.0}}
PLACED.append(PLACED[0] | {"image_id": "sha256:" + "ef" * 32, "passed": False, "exit_code": 1,
                           "created": "2026-12-01T10:00:00Z",
                           "host": {"driver": "580.159.04", "gpus": [{"name": "NVIDIA H200"}]}})


# a project's image over pytorch-cu121, certified at level cpu on no GPU
PROJECT = {"schema": 1, "image_id": "sha256:" + "aa" * 32, "image_tags": [], "level": "cpu",
           "passed": True, "created": "2026-12-02T09:00:00Z", "seconds": 12.0, "exit_code": 0,
           "host": {"driver": None, "gpus": []},
           "report": {"passed": True, "level": "cpu",
                      "checks": [{"name": "train", "passed": True}],
                      "metrics": {"samples_per_s": 1500.0}}}


def chromium(url: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", "--window-size=1400,900",
         *extra, url],
        capture_output=True, timeout=120, check=True, cwd=tmp)


def dom(url: str, tmp: Path) -> str:
    return chromium(url, tmp, "--dump-dom").stdout.decode()


def screenshot(url: str, tmp: Path, out: Path, size: str = "1400,900") -> Path:
    out.unlink(missing_ok=True)
    chromium(url, tmp, f"--screenshot={out}", f"--window-size={size}")
    assert out.is_file(), f"chromium wrote no screenshot to {out}"
    return out


# ---- reading what the browser made, with the standard library ------------------------------

VOID = {"meta", "input", "br", "img", "link", "hr", "col", "wbr"}


class Grid(HTMLParser):
    """Per section: whether it is hidden, and its grid as {stack: {branch: (class, text)}}."""

    def __init__(self):
        super().__init__()
        self.sections: dict[str, dict] = {}
        self.texts: dict[str, str] = {}   # text of elements by id
        self.text = ""                    # the whole document's
        self._section = self._row = None
        self._cell: list | None = None
        self._open: list[tuple[str, str | None]] = []   # (tag, id) of open elements
        self.body_attrs: dict = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body_attrs = a
        if tag not in VOID:
            self._open.append((tag, a.get("id")))
            if a.get("id"):
                self.texts[a["id"]] = ""
        if tag == "section" and "view" in a.get("class", ""):
            self._section = self.sections.setdefault(
                a["id"], {"hidden": "hidden" in a, "gpu": a.get("data-gpu"), "rows": {},
                          "columns": []})
        elif self._section is not None and tag == "th" and "branch" in a.get("class", ""):
            self._section["columns"].append({"fleet": "fleet" in a["class"].split(),
                                             "title": a.get("title", "")})
            self._cell = ["col", ""]
        elif self._section is not None and tag == "tr" and "data-stack" in a:
            self._row = self._section["rows"].setdefault(a["data-stack"], [])
        elif self._row is not None and tag == "td" and a.get("class", "").startswith("s-"):
            self._cell = [a["class"].split()[0][2:], "", a.get("title", "")]

    def handle_endtag(self, tag):
        while self._open and self._open.pop()[0] != tag:
            pass
        if tag == "section":
            self._section = None
        elif tag == "tr":
            self._row = None
        elif tag in ("td", "th") and self._cell is not None:
            if self._cell[0] == "col":
                self._section["columns"][-1]["name"] = self._cell[1].strip()[:4]
            else:
                self._row.append((self._cell[0], " ".join(self._cell[1].split()),
                                  self._cell[2]))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data
        self.text += data
        for _, i in self._open:
            if i:
                self.texts[i] += data

    def cell(self, section: str, stack: str, branch: str) -> tuple[str, str, str]:
        s = self.sections[section]
        names = [c["name"] for c in s["columns"]]
        return s["rows"][stack][names.index(branch)]


def parse(html: str) -> Grid:
    g = Grid()
    g.feed(html)
    return g


def png_pixels(path: Path) -> tuple[int, int, Counter]:
    """Width, height and a count of every RGB colour of an 8-bit RGB(A) PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = head
    assert depth == 8 and colour in (2, 6) and interlace == 0, head
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    counts: Counter = Counter()
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        counts.update(zip(line[0::bpp], line[1::bpp], line[2::bpp], strict=True))
        prev = line
    return width, height, counts


# ---- the report under test -----------------------------------------------------------------

@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """A report for a store with one certificate (pytorch-cu121 on an H100) and a fleet
    whose third host is named like a script."""
    tmp = tmp_path_factory.mktemp("report")
    m = load_matrix()
    stack = diff.resolve_all(m)["pytorch-cu121"]
    old = os.environ.get("ENVGEN_HOME")
    os.environ["ENVGEN_HOME"] = str(tmp / "home")
    try:
        for cert in PLACED:
            certs.save(cert | {"stack": stack.to_json()})
        certs.save(PROJECT | {"stack": stack.to_json() | {"project": {"name": "trainer"}}})
        (tmp / "fleet.yaml").write_text(FLEET)
        assert main(["report", "-o", str(tmp / "out"), "--fleet", str(tmp / "fleet.yaml")]) == 0
    finally:
        if old is None:
            os.environ.pop("ENVGEN_HOME")
        else:
            os.environ["ENVGEN_HOME"] = old
    return tmp, (tmp / "out" / "index.html").as_uri()


@pytest.fixture(scope="module")
def loaded(page):
    """The DOM Chromium built from the page, with no URL hash."""
    tmp, url = page
    return parse(dom(url, tmp))


def test_browser_draws_the_grid_with_the_expected_cells(page, loaded):
    tmp, url = page
    g = loaded
    everything = g.sections["view-all"]
    assert not everything["hidden"]
    names = [c["name"] for c in everything["columns"]]
    assert names[0] == "R418" and {"R470", "R525", "R535", "R580"} <= set(names)
    assert len(everything["rows"]) == len(diff.resolve_all(load_matrix()))
    state, text, title = g.cell("view-all", "pytorch-cu121", "R535")
    assert state == "native" and text.startswith("✓ native") and "530.30.02" in title
    assert text.endswith(title)   # the reason is in the cell as text, not only on hover
    assert g.cell("view-all", "pytorch-cu121", "R525")[:1] == ("minor",)
    assert g.cell("view-all", "pytorch-cu121", "R520")[1].startswith("✗ no")
    fwd = g.cell("view-all", "pytorch-cu121", "R470")
    assert fwd[0] == "forward" and "datacenter" in fwd[1] and "GPUs only" in fwd[1]
    assert {c["name"] for c in everything["columns"] if c["fleet"]} == {"R470", "R535", "R550"}
    # the certificate's GPU, driver and date, linked to its copy
    assert "NVIDIA H100 80GB HBM3 · 535.274.02 · 2026-11-30" in g.texts["view-all"]
    assert (Path(tmp / "out" / "certs" / certs.file_name(PLACED[1]))).is_file()


class Placements(HTMLParser):
    """The page's stack x GPU/driver table as the browser built it: {stack: [cell text]}
    and the column heads."""

    def __init__(self):
        super().__init__()
        self.heads, self.rows, self._in, self._row, self._cell = [], {}, False, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "placements" in a.get("class", ""):
            self._in = True
        elif self._in and tag == "tr" and "data-stack" in a:
            self._row = self.rows.setdefault(a["data-stack"], [])
        elif self._in and tag in ("td", "th"):
            self._cell = [a.get("class", ""), ""]

    def handle_endtag(self, tag):
        if tag == "table":
            self._in = False
        elif self._in and tag in ("td", "th") and self._cell is not None:
            text = " ".join(self._cell[1].split())
            if self._row is None:
                self.heads.append(text)
            elif tag == "td":
                self._row.append((self._cell[0], text))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data


def test_browser_shows_which_stack_is_certified_on_which_gpu_and_driver(page):
    tmp, url = page
    p = Placements()
    p.feed(dom(url, tmp))
    assert p.heads == ["stack", "no GPU", "NVIDIA H100 80GB HBM3, driver 535.274.02",
                       "NVIDIA H200, driver 580.159.04"]
    assert p.rows == {"pytorch-cu121": [("note", "-"), ("passed", "passed 2026-11-30 2 runs"),
                                        ("failed", "failed 2026-12-01")],
                      "trainer.pytorch-cu121": [("passed", "passed 2026-12-02"),
                                                ("note", "-"), ("note", "-")]}


def test_a_script_in_a_host_name_is_text_in_the_browser(loaded):
    g = loaded
    assert "data-pwned" not in g.body_attrs   # it never ran
    assert EVIL in g.text   # shown as the host's name


def test_gpu_filter_from_the_url_hash_shows_that_gpus_grid(page):
    tmp, url = page
    g = parse(dom(url + "#gpu=H100", tmp))
    shown = [k for k, s in g.sections.items() if not s["hidden"]]
    assert shown == [next(k for k, s in g.sections.items() if s["gpu"] == "H100")]
    h100 = g.sections[shown[0]]
    assert "pytorch-cu117" not in h100["rows"] and "pytorch-cu121" in h100["rows"]
    assert "pytorch-cu117" in g.sections["view-all"]["rows"]
    assert g.texts["filter-status"].startswith("H100: ")
    assert "hidden (no kernels for it)" in g.texts["filter-status"]
    assert {c["name"] for c in h100["columns"] if c["fleet"]} == {"R535"}
    # R470 does not know the H100, where the any-GPU grid offered forward compatibility
    assert g.cell(shown[0], "pytorch-cu121", "R470")[0] == "none"
    g = parse(dom(url + "#gpu=RTX%204090", tmp))
    assert [s["gpu"] for s in g.sections.values() if not s["hidden"]] == ["RTX 4090"]
    g = parse(dom(url + "#gpu=no-such-gpu", tmp))
    assert [k for k, s in g.sections.items() if not s["hidden"]] == ["view-all"]


def test_screenshot_shows_the_cell_colours(page):
    tmp, url = page
    # the summary and the chart come first: a taller window reaches the grid's rows
    w, h, px = png_pixels(screenshot(url, tmp, tmp / "all.png", size="1400,1800"))
    assert (w, h) == (1400, 1800) and sum(px.values()) == w * h
    cell = 40 * 20   # a cell is larger than this
    for name, rgb in COLOURS.items():
        assert px[rgb] > 3 * cell, f"{name} {rgb}: {px[rgb]} pixels"
    # The RTX 4090's grid has no forward compatibility (a GeForce card): only the legend's
    # swatch keeps that colour, so the filter really changed what was drawn.
    _, _, geforce = png_pixels(screenshot(url + "#gpu=RTX%204090", tmp, tmp / "4090.png",
                                                 size="1400,1800"))
    assert geforce[COLOURS["forward"]] < px[COLOURS["forward"]] / 3, \
        (geforce[COLOURS["forward"]], px[COLOURS["forward"]])
    assert geforce[COLOURS["none"]] > 3 * cell


def measure(url: str, tmp: Path, queries: dict[str, str], size=(1400, 900)) -> dict:
    """Where the browser laid out each CSS selector's first element in a first screen of
    `size`, and whether it is displayed: the page loaded in an iframe of that size by a
    page of the test's own, read back through --dump-dom."""
    page = tmp / f"measure-{len(list(tmp.glob('measure-*')))}.html"
    page.write_text(f"""<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="{url}" width="{size[0]}" height="{size[1]}" style="border:0"></iframe>
<pre id="out">pending</pre>
<script>
document.getElementById("f").addEventListener("load", function () {{
  var d = this.contentDocument, q = {json.dumps(queries)}, res = {{}};
  for (var k in q) {{
    var all = d.querySelectorAll(q[k]), e = all[0];
    if (!e) {{ res[k] = null; continue; }}
    var r = e.getBoundingClientRect();
    res[k] = {{x: r.left, y: r.top, w: r.width, h: r.height, count: all.length,
              shown: d.defaultView.getComputedStyle(e).display !== "none",
              text: (e.textContent || "").slice(0, 5000)}};
  }}
  document.getElementById("out").textContent = JSON.stringify(res);
}});
</script></body></html>""")
    out = chromium(page.as_uri(), tmp, "--allow-file-access-from-files",
                   "--virtual-time-budget=10000", "--dump-dom").stdout.decode()
    text = re.search(r'<pre id="out">(.*?)</pre>', out, re.S)[1]
    import html as h
    return json.loads(h.unescape(text))


def test_the_first_screen_shows_the_summary_the_chart_and_the_branches_teams_run(page):
    tmp, url = page
    got = measure(url, tmp, {
        "summary": "#summary .headline", "chart": "#chart-branches > svg",
        "bar": "#chart-branches rect.bar",
        "r418": "#view-all thead th.old", "throughput": "#chart-throughput > svg",
        "tbar": "#chart-throughput rect.bar", "evidence": "table.evidence"})
    s = got["summary"]
    assert s["shown"] and s["h"] > 0 and s["y"] + s["h"] < 900
    assert s["text"].startswith("Your fleet runs ") and "adds" in s["text"]
    c = got["chart"]
    assert c["w"] > 400 and c["h"] > 100 and c["y"] < 900   # drawn, on the first screen
    assert got["bar"]["count"] > 20 and got["bar"]["w"] > 2 and got["bar"]["h"] > 0
    # the first branch column shown is R470 (a fleet host's), then R535 onwards; R418 folded
    assert got["r418"]["text"].startswith("R418") and not got["r418"]["shown"]
    heads = measure(url, tmp, {f"R{b}": f'#view-all thead th.branch[title^="R{b},"]'
                               for b in (470, 525, 535, 580)})
    assert not heads["R525"]["shown"]
    for b in ("R470", "R535", "R580"):
        assert heads[b]["shown"] and heads[b]["x"] + heads[b]["w"] <= 1400, (b, heads[b])
    t = got["throughput"]
    assert t["w"] > 400 and t["h"] > 20 and got["tbar"]["count"] == 2
    assert got["tbar"]["w"] > 100   # the H100's 21,000 samples/s: the longest bar
    assert "trainer.pytorch-cu121" in got["evidence"]["text"]


@pytest.mark.skipif(not os.environ.get("ENVGEN_UPDATE_SCREENSHOT"),
                    reason="ENVGEN_UPDATE_SCREENSHOT=1 writes docs/report.png")
def test_write_docs_screenshot(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(ROOT)   # the page names the fleet file as it was given
    cert = json.loads((ROOT / "docs" / "certificates" / "h200-1gpu.json").read_text())
    cert.pop("_path", None)
    certs.save(cert)
    out = tmp_path / "out"
    assert main(["report", "-o", str(out), "--fleet", "examples/fleet.yaml"]) == 0
    shot = screenshot((out / "index.html").as_uri(), tmp_path, tmp_path / "report.png",
                      size="2400,1900")
    assert re.search(rb"IHDR", shot.read_bytes()[:40])
    shutil.copyfile(shot, ROOT / "docs" / "report.png")
