"""fetch_uv.py, the uv stage's fetcher, run as the build runs it (its own Python process)
against a server on loopback: the wheel's bytes are checked before they are read as a zip,
only bin/uv is written, and every failure is one line and exit status 1, never a traceback.
The real fetch from PyPI runs in every Docker test that builds a stack (tests/docker)."""
from __future__ import annotations

import hashlib
import http.server
import io
import os
import platform
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from services import LoopbackServer

from envgen.render.views import UV_FETCHER

MACHINE = platform.machine()
PAYLOAD = b"\x7fELF not really uv\n"


def wheel_bytes(member: str = "uv-0.13.9.data/scripts/uv") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(member, PAYLOAD)
        z.writestr("uv/__init__.py", "")
    return buf.getvalue()


@pytest.fixture
def server():
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *_args):
            pass

    with LoopbackServer(Handler) as httpd:
        yield httpd.url, files


def run(tmp_path: Path, rows: list[str]) -> subprocess.CompletedProcess:
    wheels = tmp_path / "wheels.txt"
    wheels.write_text("# machine sha256 url\n" + "".join(f"{r}\n" for r in rows))
    return subprocess.run([sys.executable, str(UV_FETCHER), str(wheels), str(tmp_path / "uv")],
                          capture_output=True, text=True, timeout=60)


def one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("envgen: the installer uv: ")
    return r.stderr


def test_the_wheel_for_this_machine_is_checked_and_its_uv_written(tmp_path, server):
    base, files = server
    body = wheel_bytes()
    files["/p/uv-0.13.9-py3-none-any.whl"] = body
    files["/p/other.whl"] = b"never asked"
    r = run(tmp_path, [f"not-{MACHINE} {'0' * 64} {base}/p/other.whl",
                       f"{MACHINE} {hashlib.sha256(body).hexdigest()} "
                       f"{base}/p/uv-0.13.9-py3-none-any.whl"])
    assert r.returncode == 0, r.stderr
    uv = tmp_path / "uv" / "bin" / "uv"
    assert uv.read_bytes() == PAYLOAD and os.stat(uv).st_mode & 0o777 == 0o755
    assert sorted(p.name for p in (tmp_path / "uv").rglob("*")) == ["bin", "uv"]


def test_a_changed_byte_is_refused_before_it_is_unpacked(tmp_path, server):
    base, files = server
    body = wheel_bytes()
    files["/p/uv-0.13.9-py3-none-any.whl"] = body
    pinned = hashlib.sha256(body + b"x").hexdigest()
    r = run(tmp_path, [f"{MACHINE} {pinned} {base}/p/uv-0.13.9-py3-none-any.whl"])
    line = one_line(r)
    assert f"expected {pinned}, got {hashlib.sha256(body).hexdigest()}" in line
    assert not (tmp_path / "uv").exists()


@pytest.mark.parametrize("case", ["no machine", "404", "refused", "no member"])
def test_each_failure_is_one_sentence(tmp_path, server, case):
    base, files = server
    body = wheel_bytes(member="something/else")
    files["/p/uv-0.13.9-py3-none-any.whl"] = body
    sha = hashlib.sha256(body).hexdigest()
    rows = {"no machine": [f"not-{MACHINE} {sha} {base}/p/uv-0.13.9-py3-none-any.whl"],
            "404": [f"{MACHINE} {sha} {base}/p/gone.whl"],
            "refused": [f"{MACHINE} {sha} http://127.0.0.1:9/uv-0.13.9-py3-none-any.whl"],
            "no member": [f"{MACHINE} {sha} {base}/p/uv-0.13.9-py3-none-any.whl"]}[case]
    line = one_line(run(tmp_path, rows))
    expected = {"no machine": f"no wheel for the machine {MACHINE!r}",
                "404": "HTTP Error 404", "refused": "could not fetch http://127.0.0.1:9/",
                "no member": "has no uv-0.13.9.data/scripts/uv"}[case]
    assert expected in line
    assert not (tmp_path / "uv" / "bin" / "uv").exists()


def test_a_server_that_answers_no_http_is_one_sentence(tmp_path):
    """An SSH banner where an HTTP status line belongs: http.client's BadStatusLine is no
    OSError, and it used to escape as a traceback."""
    class Banner(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.wfile.write(b"SSH-2.0-OpenSSH_9\r\n")

        def log_message(self, *_args):
            pass

    with LoopbackServer(Banner) as httpd:
        line = one_line(run(tmp_path, [f"{MACHINE} {'0' * 64} {httpd.url}/uv.whl"]))
    assert "BadStatusLine" in line and "SSH-2.0-OpenSSH_9" in line
    assert not (tmp_path / "uv").exists()
