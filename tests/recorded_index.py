"""A package index on loopback that replays tests/data/refresh/recorded.json the way PyPI
serves it here: PEP 691 JSON pages, no PEP 658 metadata files (404), and wheels that answer
HTTP range requests. Each wheel is a small zip holding its recorded METADATA, so the
range-read path runs for real."""
from __future__ import annotations

import copy
import io
import json
import re
import zipfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from packaging.utils import parse_wheel_filename
from services import LoopbackServer

RECORDED = Path(__file__).parent / "data" / "refresh" / "recorded.json"


def recorded() -> dict:
    return json.loads(RECORDED.read_text())


def tiny_wheel(filename: str, metadata: str) -> bytes:
    name, ver, _, _ = parse_wheel_filename(filename)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{name.replace('-', '_')}-{ver}.dist-info/METADATA", metadata)
        z.writestr(f"{name.replace('-', '_')}-{ver}.dist-info/RECORD", "")
    return buf.getvalue()


class RecordedIndex:
    """`with RecordedIndex(data) as idx:` serves `data` (recorded() by default) at idx.url."""

    def __init__(self, data: dict | None = None, pep658: bool = False,
                 honour_range: bool = True):
        self.data = copy.deepcopy(data or recorded())
        self.pep658, self.honour_range = pep658, honour_range
        self.whole_downloads: list[str] = []
        self.requests = 0
        self._wheels: dict[str, bytes] = {}

    def wheel(self, filename: str) -> bytes | None:
        if filename not in self._wheels:
            text = self.data["metadata"].get(filename)
            if text is None:
                return None
            self._wheels[filename] = tiny_wheel(filename, text)
        return self._wheels[filename]

    def page(self, project: str) -> bytes | None:
        files = self.data["projects"].get(project)
        if files is None:
            return None
        out = []
        for f in files:
            body = self.wheel(f["filename"])
            out.append({**f, "url": f"../../files/{f['filename']}",
                        "size": len(body) if body is not None else f["size"]})
        return json.dumps({"meta": {"api-version": "1.1"}, "name": project,
                           "files": out}).encode()

    def __enter__(self):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def send(self, status, body=b"", ctype="application/octet-stream", extra=()):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                owner.requests += 1
                m = re.fullmatch(r"/simple/([a-z0-9._-]+)/", self.path)
                if m:
                    body = owner.page(m.group(1))
                    return self.send(200, body, "application/vnd.pypi.simple.v1+json") \
                        if body is not None else self.send(404)
                m = re.fullmatch(r"/files/([^/]+\.whl)(\.metadata)?", self.path)
                if not m:
                    return self.send(404)
                fn, is_meta = m.group(1), bool(m.group(2))
                if is_meta:
                    text = owner.data["metadata"].get(fn)
                    return self.send(200, text.encode()) if owner.pep658 and text \
                        else self.send(404)
                body = owner.wheel(fn)
                if body is None:
                    return self.send(404)
                rng = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
                if not rng or not owner.honour_range:
                    owner.whole_downloads.append(fn)
                    return self.send(200, body)
                a, b = int(rng.group(1)), min(int(rng.group(2)), len(body) - 1)
                return self.send(206, body[a:b + 1],
                                 extra=[("Content-Range", f"bytes {a}-{b}/{len(body)}")])

        self.server = LoopbackServer(Handler)
        self.url = f"{self.server.url}/simple"
        return self

    def __exit__(self, *exc):
        self.server.close()
