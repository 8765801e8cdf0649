"""An index or mirror the user named is read the way it answers: a PEP 503 HTML page keeps
each file's URL, a page of a million `<a ` parses in linear time, and a server that answers
something other than HTTP (an SSH banner), a URL with a port that is no number, or a HEAD
answer without a length is the server's fault in one sentence (exit 3), never a
traceback. An sdist is cached only once its sha256 matched, and only its PKG-INFO; an
archive of a million members is refused as it is listed."""
from __future__ import annotations

import hashlib
import io
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler

import pytest
from services import LoopbackServer, envgen

from envgen.core import environ, fetching
from envgen.core.errors import EnvironmentMissing, InputError
from envgen.core.model import Pin
from envgen.intake import modules as mod
from envgen.refresh import pypi
from envgen.resolve import closure as cl

WHEEL = "PyYAML-6.0-py3-none-any.whl"


def small_wheel() -> bytes:
    """PyYAML's layout in small: the distribution is pyyaml, the module it installs yaml."""
    files = {"yaml/__init__.py": b"__version__ = '6.0'\n",
             "PyYAML-6.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: PyYAML\n"
                                              b"Version: 6.0\n",
             "PyYAML-6.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
                                           b"Root-Is-Purelib: true\nTag: py3-none-any\n",
             "PyYAML-6.0.dist-info/top_level.txt": b"yaml\n"}
    record = "".join(f"{n},sha256={hashlib.sha256(d).hexdigest()},{len(d)}\n"
                     for n, d in files.items()) + "PyYAML-6.0.dist-info/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in [*files.items(), ("PyYAML-6.0.dist-info/RECORD", record.encode())]:
            z.writestr(name, data)
    return buf.getvalue()


def html_index(whl: bytes) -> type[BaseHTTPRequestHandler]:
    """A PEP 503 index of one project, its file named relative to the page, served whole,
    by range, and to HEAD."""
    page = (f'<html><body><a href="../../files/{WHEEL}#sha256='
            f'{hashlib.sha256(whl).hexdigest()}">{WHEEL}</a></body></html>').encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def answer(self, status, body, kind="application/octet-stream", send=True):
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if send:
                self.wfile.write(body)

        def do_HEAD(self):
            self.answer(200, whl, send=False)

        def do_GET(self):
            if self.path == "/simple/pyyaml/":
                return self.answer(200, page, "text/html")
            if self.path != f"/files/{WHEEL}":
                return self.answer(404, b"")
            ask = self.headers.get("Range")
            if not ask:
                return self.answer(200, whl)
            start, end = (int(x) for x in ask.removeprefix("bytes=").split("-"))
            self.answer(206, whl[start:end + 1])
    return Handler


def test_an_html_index_gives_the_real_module_of_a_wheel_not_a_guess(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    whl = small_wheel()
    with LoopbackServer(html_index(whl)) as s:
        pin = Pin("pyyaml", "6.0", file=WHEEL, sha256=hashlib.sha256(whl).hexdigest())
        assert mod.modules([pin], {"pyyaml"}, f"{s.url}/simple") == (["yaml"], [])


def test_an_html_index_lists_its_files_at_their_own_urls(tmp_path, monkeypatch):
    """index_file fetches the file the page names, not the page itself."""
    from envgen.resolve import urlref
    whl = small_wheel()
    asked = []

    def fetch(name, url, sha256):
        asked.append(url)
        with urllib.request.urlopen(url, timeout=10) as r:
            assert hashlib.sha256(r.read()).hexdigest() == sha256
        return tmp_path / WHEEL, sha256, "6.0"
    monkeypatch.setattr(urlref, "fetch", fetch)   # itself https only
    with LoopbackServer(html_index(whl)) as s:
        assert cl.index_file(f"{s.url}/simple", "pyyaml", lambda f: True) == tmp_path / WHEEL
        assert asked == [f"{s.url}/files/{WHEEL}"]


def test_an_html_page_keeps_each_href_made_absolute_and_its_hash():
    page = cl.simple_html('<a data-requires-python="&gt;=3.8" HREF = "../../f/x-1.0.tar.gz'
                          '#sha256=' + "ab" * 32 + '">x</a> <a href=\'https://cdn/y-2.whl\'>',
                          "https://idx/simple/x/")
    assert page == {"files": [
        {"filename": "x-1.0.tar.gz", "url": "https://idx/f/x-1.0.tar.gz",
         "hashes": {"sha256": "ab" * 32}},
        {"filename": "y-2.whl", "url": "https://cdn/y-2.whl", "hashes": {}}]}


@pytest.mark.parametrize("page", ["<a " * ((1 << 20) // 3), "<a href='x" * ((1 << 20) // 10),
                                  "<a" + " href" * ((1 << 20) // 5) + ">"],
                         ids=["open-anchors", "open-quotes", "one-long-tag"])
def test_a_megabyte_of_unclosed_anchors_parses_in_linear_time(page):
    start = time.monotonic()
    cl.simple_html(page, "https://idx/simple/x/")
    assert time.monotonic() - start < 0.5


# ---- a server that does not answer in HTTP --------------------------------------------------

class Banner(BaseHTTPRequestHandler):
    """An SSH server where an index was expected."""

    def handle(self):
        self.rfile.readline()
        self.wfile.write(b"SSH-2.0-OpenSSH_9\r\n")


def test_an_ssh_banner_is_an_index_that_does_not_answer_exit_3_in_one_line(tmp_path):
    with LoopbackServer(Banner) as s:
        r = envgen("render", "torch==2.3.1,python=3.11", "-o", str(tmp_path / "out"),
                   env={"ENVGEN_HOME": str(tmp_path / "home"),
                        "ENVGEN_PYPI_SIMPLE": f"{s.url}/simple"}, timeout=120)
    errors = [line for line in r.stderr.splitlines() if line.startswith("envgen: error:")]
    assert r.returncode == 3, r.stderr
    assert len(errors) == 1 and "Traceback" not in r.stderr
    assert f"{s.url}/simple" in errors[0] and "did not answer in HTTP" in errors[0]


def test_every_reader_gets_an_oserror_naming_the_url_for_a_non_http_answer(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("ENVGEN_REFRESH_BACKOFF", "0")
    with LoopbackServer(Banner) as s:
        with pytest.raises(urllib.error.URLError) as e:
            fetching.urlopen(f"{s.url}/simple/x/", timeout=10)
        assert str(e.value) == f"{s.url}/simple/x/ did not answer in HTTP (BadStatusLine: " \
                               f"SSH-2.0-OpenSSH_9)"
        with pytest.raises(EnvironmentMissing, match="did not answer in HTTP"):
            pypi.Index(s.url, cache=tmp_path).get(f"{s.url}/x/")
    with pytest.raises(urllib.error.URLError, match="is not a URL envgen can ask"):
        fetching.urlopen("http://127.0.0.1:abc/simple/", timeout=10)


def test_a_head_answer_without_a_length_is_an_unreadable_wheel_not_a_bug():
    class NoLength(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_HEAD(self):
            self.send_response(200)
            self.end_headers()
    with LoopbackServer(NoLength) as s:
        with pytest.raises(OSError, match="states no length"):
            mod.modules_of_wheel(f"{s.url}/x-1.0-py3-none-any.whl")


def test_a_mirror_url_whose_port_is_no_number_is_bad_input_in_one_sentence():
    with pytest.raises(InputError) as e:
        environ.check({"ENVGEN_DEBIAN_MIRROR": "http://h:abc/debian"})
    assert e.value.exit_code == 2 and e.value.message == (
        "ENVGEN_DEBIAN_MIRROR='http://h:abc/debian' is not a URL envgen can ask (port could "
        "not be cast to integer value as 'abc')")
    environ.check({"ENVGEN_DEBIAN_MIRROR": "http://h:8080/debian"})


# ---- an sdist: checked before it is cached, members counted as they are read ---------------

def sdist(members: int = 0) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        text = b"Metadata-Version: 2.1\nName: x\nVersion: 1.0\nRequires-Dist: numpy\n\n"
        info = tarfile.TarInfo("x-1.0/PKG-INFO")
        info.size = len(text)
        t.addfile(info, io.BytesIO(text))
        for i in range(members):
            t.addfile(tarfile.TarInfo(f"x-1.0/empty{i}"))
    return buf.getvalue()


def test_an_sdist_that_failed_its_sha256_is_asked_again_and_only_pkg_info_is_kept(tmp_path):
    good = sdist()
    answers = [b"<html>mirror maintenance</html>", good]

    class Mirror(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = answers.pop(0) if len(answers) > 1 else answers[0]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    cache = tmp_path / "cache"
    with LoopbackServer(Mirror) as s:
        f = {"filename": "x-1.0.tar.gz", "url": f"{s.url}/files/x-1.0.tar.gz",
             "hashes": {"sha256": hashlib.sha256(good).hexdigest()}}
        with pytest.raises(pypi.Refused, match="does not match the index's sha256"):
            pypi.Index(s.url, cache=cache).sdist_metadata(f)
        text = pypi.Index(s.url, cache=cache).sdist_metadata(f)
    assert "Requires-Dist: numpy" in text
    assert [p.read_text() for p in cache.rglob("*") if p.is_file()] == [text]


def test_an_archive_of_too_many_members_is_refused_as_it_is_listed(tmp_path, monkeypatch):
    monkeypatch.setattr(mod, "MAX_MEMBERS", 10)
    with pytest.raises(ValueError, match="^the archive has more than 10 members"):
        mod.modules_of_archive(sdist(30), False, "x")
    # through modules(): a held file, refused, is a guess with its reason
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    held = tmp_path / "x-1.0.tar.gz"
    held.write_bytes(sdist(30))
    pin = Pin("x", "1.0", file=held.name, sha256=hashlib.sha256(held.read_bytes()).hexdigest())
    mods, notes = mod.modules([pin], {"x"}, "https://idx/simple", local={"x": held})
    assert mods == ["x"] and "more than 10 members" in notes[0]
    assert mod.modules_of_archive(sdist(5), False, "x") == []
