"""A package index is untrusted: a server that drips its answer is cut at a wall-clock
deadline, a wheel whose zip directory claims to be huge is refused before it is fetched,
and a platform_wheels row that would vanish is refused like a framework release."""
from __future__ import annotations

import struct
import time
from http.server import BaseHTTPRequestHandler

import pytest
from services import LoopbackServer

from envgen.core.errors import EnvironmentMissing
from envgen.refresh import pypi
from envgen.refresh.change import compare_platform_wheels
from envgen.refresh.pypi import Index, Refused


def test_a_server_that_drips_its_answer_is_cut_at_the_deadline_exit_3(tmp_path, monkeypatch):
    """Too slow is the server's fault (exit 3), as urlref says it; not a refused answer."""
    class Drip(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass
    s = LoopbackServer(Drip)
    monkeypatch.setattr(pypi, "REQUEST_S", 1)
    try:
        start = time.monotonic()
        with pytest.raises(EnvironmentMissing, match="the answer took more than 1 s$") as e:
            Index(s.url, cache=tmp_path).get(f"{s.url}/x/")
        assert time.monotonic() - start < 10 and e.value.exit_code == 3
    finally:
        s.close()


@pytest.mark.parametrize("claimed", [300 << 20, 1 << 40])
def test_a_wheel_whose_zip_directory_claims_too_much_is_refused_unread(tmp_path, claimed):
    size = claimed + 98 if claimed > 1 << 32 else claimed
    if claimed > 1 << 32:   # zip64: a central directory of 2**40 bytes
        tail = (struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 1, 1, claimed, 0)
                + struct.pack("<4sLQL", b"PK\x06\x07", 0, claimed, 1)
                + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                              0xFFFFFFFF, 0))
    else:                   # a directory said to cover the whole file
        tail = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, size - 22, 0, 0)
    served = []

    class Zip(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            rng = self.headers.get("Range", "")
            if not rng:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            a, b = (int(x) for x in rng.removeprefix("bytes=").split("-"))
            served.append(b - a + 1)
            start = size - len(tail)
            body = bytes(tail[i - start] if i >= start else 0 for i in range(a, b + 1)) \
                if b - a < (1 << 20) else b"\0" * (b - a + 1)
            self.send_response(206)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Range", f"bytes {a}-{b}/{size}")
            self.end_headers()
            self.wfile.write(body)
    s = LoopbackServer(Zip)
    try:
        f = {"url": f"{s.url}/torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl",
             "filename": "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl", "size": size}
        with pytest.raises(Refused):
            Index(s.url, cache=tmp_path).metadata(f)
        assert sum(served) <= pypi.RANGE_BUDGET
    finally:
        s.close()


def test_a_platform_wheels_row_that_would_vanish_or_move_is_refused():
    row = {"package": "torch", "version": "2.4.1", "platform": "linux/arm64",
           "variant": "cpu", "pythons": ["3.11"], "source": "pypi:torch/x.whl"}
    ch = compare_platform_wheels([row], [])
    assert ch.refusals and "torch 2.4.1 linux/arm64 cpu would disappear" in ch.refusals[0]
    assert compare_platform_wheels([row], [dict(row)]).refusals == []
    more = dict(row, version="2.5.1")
    assert compare_platform_wheels([row], [row, more]).added


def test_a_page_naming_a_file_on_another_host_is_not_fetched_there(tmp_path):
    """Only the index's own host (and PyPI's file host for PyPI) is asked: a file URL or
    a redirect to another host is refused before any request goes there."""
    asked = []

    class Other(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
    other = LoopbackServer(Other)

    class Redirect(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(302)
            self.send_header("Location", f"{other.url.replace('127.0.0.1', 'localhost')}/x")
            self.send_header("Content-Length", "0")
            self.end_headers()
    index = LoopbackServer(Redirect)
    try:
        ix = Index(index.url, cache=tmp_path)
        with pytest.raises(pypi.InputError, match="not on the index's own host"):
            ix.get(f"{other.url.replace('127.0.0.1', 'localhost')}/file.whl")
        with pytest.raises(pypi.InputError, match="not on the index's own host"):
            ix.get(f"{index.url}/page/")
        assert asked == []
        assert pypi._allowed("https://pypi.org/simple",
                             "https://files.pythonhosted.org/packages/x.whl", "a file")
    finally:
        other.close()
        index.close()


def test_names_spelled_with_underscores_and_local_versions_are_read_as_pip_reads_them():
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    assert canonicalize_name("nvidia_nccl_cu12") == "nvidia-nccl-cu12"

    class Ix:
        def project(self, name):
            return {"files": [
                {"filename": "nvidia_cusparselt_cu12-0.7.0+mirror.1-py3-none-"
                             "manylinux2014_x86_64.whl"},
                {"filename": "nvidia_cusparselt_cu12-0.6.2-py3-none-manylinux2014_x86_64.whl"},
                {"filename": "nvidia_cusparselt_cu12-0.6.3-py3-none-manylinux2014_x86_64-x-y.whl"}]}
    assert pypi.newest_matching(Ix(), "nvidia-cusparselt-cu12", SpecifierSet(">=0.6")) == "0.6.2"


def test_a_marker_that_cannot_be_evaluated_and_odd_tags_are_one_sentence():
    with pytest.raises(Refused, match="cannot be evaluated"):
        pypi.requirements('Metadata-Version: 2.1\nRequires-Dist: filelock ; '
                          'python_version ~= "3"\n', "3.11", "torch 2.6.0")

    class Tag:
        def __init__(self, interp):
            self.interpreter, self.abi, self.platform = interp, interp, "manylinux1_x86_64"
    assert [pypi.cpython_of(Tag(t)) for t in ("cp", "cp3", "cp311")] == [None, None, "3.11"]


def test_an_sdist_of_too_many_members_is_refused_as_it_is_read(monkeypatch):
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for i in range(30):
            t.addfile(tarfile.TarInfo(f"ds-1.0/empty{i}"))
    monkeypatch.setattr(pypi, "MAX_MEMBERS", 10)
    with pytest.raises(Refused, match="more than 10 members"):
        pypi.pkg_info(buf.getvalue(), "ds-1.0.tar.gz")
