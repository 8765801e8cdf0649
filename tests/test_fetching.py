"""Every body envgen reads from a server it was pointed at goes through core/fetching.chunks:
bounded in size and in wall-clock time. The reader itself on fake streams, then each caller
against a loopback server that drips its answer or sends more than it may."""
from __future__ import annotations

import io
import time
from http.server import BaseHTTPRequestHandler

import pytest
from services import LoopbackServer

from envgen.core import fetching
from envgen.core.errors import EnvironmentMissing, InputError


class Drip:
    """A stream whose every read gives one byte, on a clock that moves 10 s a read."""

    def __init__(self, monkeypatch):
        clock = iter(range(0, 1_000_000, 10))
        monkeypatch.setattr(fetching.time, "monotonic", lambda: next(clock))

    def read1(self, n):
        return b"x"


def test_a_body_within_its_bounds_is_read_whole():
    data = bytes(range(256)) * 1000
    assert b"".join(fetching.chunks(io.BytesIO(data), len(data), 60, size=4096)) == data


def test_one_byte_over_the_limit_is_refused_naming_the_limit():
    with pytest.raises(fetching.StreamLimit) as e:
        list(fetching.chunks(io.BytesIO(b"x" * (2 << 20) + b"y"), 2 << 20, 60))
    assert (e.value.kind, str(e.value)) == ("size", "is larger than 2 MiB")
    assert isinstance(e.value, OSError)   # callers that treat a silent index so treat it


def test_a_dripping_stream_is_cut_at_its_deadline(monkeypatch):
    with pytest.raises(fetching.StreamLimit) as e:
        list(fetching.chunks(Drip(monkeypatch), 1 << 20, 120))
    assert (e.value.kind, str(e.value)) == ("time", "took more than 120 s")


def test_a_steady_slow_stream_is_given_time_for_what_it_sends(monkeypatch):
    """min_rate: each chunk that arrives buys time, so a large file on a slow link is read;
    a server that has stopped sending is still cut."""
    Drip(monkeypatch)   # 10 s a read
    body = io.BytesIO(b"x" * (100 << 10))
    got = b"".join(fetching.chunks(body, 1 << 20, 30, size=1 << 10, min_rate=100))
    assert len(got) == 100 << 10
    with pytest.raises(fetching.StreamLimit, match="took more than 30 s"):
        list(fetching.chunks(Drip(monkeypatch), 1 << 20, 30, min_rate=1 << 20))


def test_a_response_cut_short_of_its_content_length_is_refused():
    class Short(io.BytesIO):
        length = 990   # what http.client leaves when the server closed 990 bytes early
    with pytest.raises(fetching.StreamLimit) as e:
        list(fetching.chunks(Short(b"x" * 10), 1 << 20, 60))
    assert e.value.kind == "short" and "990 short of its Content-Length" in str(e.value)


def test_head_is_the_first_bytes_of_a_longer_body_and_has_a_deadline_too(monkeypatch):
    assert fetching.head(io.BytesIO(b"Date: x\n" * 1000), 4096, 20) == (b"Date: x\n" * 512)
    assert fetching.head(io.BytesIO(b"short"), 4096, 20) == b"short"
    with pytest.raises(fetching.StreamLimit, match="took more than 20 s"):
        fetching.head(Drip(monkeypatch), 4096, 20)


# ---- the callers, against a loopback server ---------------------------------------------

def _Server(body: bytes = b"", delay: float = 0.0, handler=None) -> LoopbackServer:
    """A loopback server answering every GET with `body`, 64 KiB every `delay` seconds
    (or with `handler`)."""
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(0, len(body), 1 << 16):
                    self.wfile.write(body[i:i + (1 << 16)])
                    self.wfile.flush()
                    time.sleep(delay)
            except OSError:
                pass
    return LoopbackServer(handler or Handler)


def test_a_file_requirement_whose_server_drips_is_given_up(tmp_path, monkeypatch):
    """A URL requirement read with only the socket's per-read timeout would take as long as
    the server liked: now WHOLE_S bounds it, with one sentence."""
    from envgen.resolve import urlref
    monkeypatch.setattr(urlref, "WHOLE_S", 1.0)
    monkeypatch.setattr(urlref, "MIN_RATE", 1 << 30)   # 64 KiB in 0.2 s is too slow here
    with _Server(b"x" * (40 << 16), delay=0.2) as s:   # (fetch itself takes https only)
        start = time.monotonic()
        with pytest.raises(EnvironmentMissing) as e:
            urlref._copy(f"{s.url}/pkg-1.0-py3-none-any.whl", tmp_path / "pkg.whl")
        assert time.monotonic() - start < 10
    assert e.value.message.endswith("could not be read: it took more than 1 s")


def test_a_file_requirement_over_its_size_is_bad_input(tmp_path, monkeypatch):
    from envgen.resolve import urlref
    monkeypatch.setattr(urlref, "MAX_BYTES", 1000)
    big = tmp_path / "big.whl"
    big.write_bytes(b"x" * 1001)
    with pytest.raises(InputError, match=r"^'file:///.*' is larger than 1000 bytes$"):
        urlref._copy(big.as_uri(), tmp_path / "copy.whl")
    assert urlref.MAX_BYTES == 1000 and fetching._bytes(4 << 30) == "4 GiB"


class _Short(BaseHTTPRequestHandler):
    """Announces 100000 bytes, sends 10 and closes."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(b"x" * 10)
        self.close_connection = True


def test_a_file_cut_short_is_not_kept_as_if_whole(tmp_path):
    """A connection that drops before the announced length used to give the sha256 of the
    part that came, kept as the file."""
    from envgen.resolve import urlref
    with _Server(handler=_Short) as s:
        with pytest.raises(EnvironmentMissing, match="ended after 10 bytes, 99990 short"):
            urlref._copy(f"{s.url}/pkg-1.0-py3-none-any.whl", tmp_path / "pkg.whl")


def test_an_index_page_over_its_size_is_said_not_cut(monkeypatch):
    """An index page used to be cut at the limit, and the cut JSON then read as a broken
    index; now it is said to be too large."""
    from envgen.resolve import closure
    with _Server(b"{" + b" " * 5000 + b"}") as s:
        import urllib.request
        with fetching.urlopen(urllib.request.Request(s.url), timeout=10) as r:
            with pytest.raises(OSError, match="the page is larger than 4 KiB"):
                closure._read_by(r, 4096, 60)


def test_a_wheel_download_that_drips_is_the_servers_fault_in_one_sentence(tmp_path,
                                                                          monkeypatch):
    """A server too slow to answer is exit 3, as urlref says it; not a refused file (1)."""
    from envgen.refresh import wheel_archs
    from envgen.refresh.pypi import Index
    monkeypatch.setattr(wheel_archs, "WHEEL_S", 1)
    with _Server(b"x" * (40 << 16), delay=0.2) as s:
        index = Index(s.url + "/simple", cache=tmp_path / "c")
        f = {"filename": "t-1.0-py3-none-any.whl", "url": f"{s.url}/t.whl",
             "hashes": {"sha256": "0" * 64}}
        with pytest.raises(EnvironmentMissing, match=r"^t-1.0-py3-none-any.whl: the download "
                                                     r"took more than 1 s$") as e:
            wheel_archs.download(index, f, tmp_path / "t.whl")
    assert e.value.exit_code == 3


def test_the_index_reader_asks_again_when_an_answer_is_cut_short(tmp_path, monkeypatch):
    from envgen.refresh.pypi import Index
    monkeypatch.setenv("ENVGEN_REFRESH_BACKOFF", "0")
    served = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            served.append(self.path)
            body = b'{"files": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + (100 if len(served) == 1 else 0)))
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True
    with _Server(handler=Handler) as s:
        assert Index(s.url, cache=tmp_path).get(f"{s.url}/x/") == b'{"files": []}'
    assert len(served) == 2


def test_min_rate_buys_time_up_to_a_cap(monkeypatch):
    Drip(monkeypatch)   # 10 s a read, one byte each: 1 byte/s earns 1 s more a byte
    with pytest.raises(fetching.StreamLimit, match="took more than 50 s"):
        list(fetching.chunks(Drip(monkeypatch), 1 << 20, 30, min_rate=0.05, most=50))


@pytest.mark.parametrize("error, kind", [
    (__import__("http.client").client.IncompleteRead(b"x"), "short"),
    (__import__("http.client").client.LineTooLong("chunk size"), "bad")])
def test_broken_http_framing_is_a_stream_error_of_its_kind(error, kind):
    class Broken:
        def read1(self, n):
            raise error
    with pytest.raises(fetching.StreamLimit) as e:
        list(fetching.chunks(Broken(), 1 << 20, 60))
    assert e.value.kind == kind and isinstance(e.value, OSError)
