"""bench/gpu/nemo_pack.py's offline parts: the freeze parser and the ZIP_STORED rewrite (the
rest needs PyPI: it ran on 2026-12-03, docs/certification.md)."""
from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("nemo_pack", ROOT / "bench/gpu/nemo_pack.py")
nemo_pack = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nemo_pack)


def test_pins_reads_exact_pins_only():
    text = "Foo_Bar==1.2 ; python_version > '3'\n# comment\nbaz==2.0\n-e git+https://x\nqux>=1\n"
    assert nemo_pack.pins(text) == {"foo-bar": "1.2", "baz": "2.0"}


def test_the_recorded_host_freeze_parses():
    freeze = nemo_pack.pins((ROOT / "bench/gpu/host/h200-freeze-2026-12-03.txt").read_text())
    assert freeze["torch"] == "2.11.0" and freeze["lightning"] == "2.6.6"


def test_stored_keeps_every_member_byte_for_byte(tmp_path):
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    members = {"demo/__init__.py": b"x = 1\n" * 500, "demo-1.0.dist-info/RECORD": b"r" * 300}
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    nemo_pack.stored(wheel)
    with zipfile.ZipFile(wheel) as z:
        assert z.testzip() is None
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
        assert {n: z.read(n) for n in z.namelist()} == members
