"""Fetch the installer uv inside a build: python3 fetch_uv.py WHEELS TARGET

Rendered beside install/0-uv/requirements.txt and run by the image's own Python in the
throw-away stage "uv" when the stack installs from PyPI. WHEELS lists one wheel a machine,
"machine sha256 url" a line (envgen/render/views.py UV_WHEELS, from PyPI's simple index).
The wheel for this machine is fetched, checked against its sha256 before a byte of it is
read as a zip, and its one executable, bin/uv, is written under TARGET: what pip run from
Debian's wheel did in 2 s (its own start costs most of it), in half a second. Standard
library only; any failure is one line on stderr and exit status 1.
"""
import hashlib
import http.client
import os
import platform
import ssl
import sys
import tempfile
import urllib.request
import zipfile


def fail(message):
    sys.stderr.write(f"envgen: the installer uv: {message}\n")
    sys.exit(1)


def wheel_for(wheels_file, machine):
    with open(wheels_file, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if len(fields) == 3 and not line.startswith("#") and fields[0] == machine:
                return fields[1], fields[2]
    return fail(f"no wheel for the machine {machine!r} in {wheels_file}")


def fetch(url, sha256, into):
    cafile = os.environ.get("SSL_CERT_FILE") or None
    digest = hashlib.sha256()
    try:
        context = ssl.create_default_context(cafile=cafile)
        with urllib.request.urlopen(url, context=context, timeout=60) as answer:
            while True:
                chunk = answer.read(1 << 20)
                if not chunk:
                    break
                digest.update(chunk)
                into.write(chunk)
    # URLError, HTTPError, ssl errors, timeouts; a server that answers no HTTP
    except (OSError, ValueError, http.client.HTTPException) as exc:
        said = " ".join(str(exc).split())[:200]   # one line, whatever the server sent
        fail(f"could not fetch {url}: {type(exc).__name__}: {said}")
    if digest.hexdigest() != sha256:
        fail(f"{url} does not match the sha256 envgen pins (expected {sha256}, "
             f"got {digest.hexdigest()})")


def main(argv):
    if len(argv) != 3:
        fail("usage: python3 fetch_uv.py WHEELS TARGET")
    wheels_file, target = argv[1], argv[2]
    sha256, url = wheel_for(wheels_file, platform.machine())
    name = url.rsplit("/", 1)[-1]
    version = name.split("-")[1] if name.count("-") >= 2 else ""
    member = f"uv-{version}.data/scripts/uv"
    with tempfile.TemporaryFile() as wheel:
        fetch(url, sha256, wheel)
        wheel.seek(0)
        try:
            with zipfile.ZipFile(wheel) as z:
                data = z.read(member)
        except (zipfile.BadZipFile, KeyError) as exc:
            fail(f"{name} has no {member}: {exc}")
    os.makedirs(os.path.join(target, "bin"), exist_ok=True)
    path = os.path.join(target, "bin", "uv")
    with open(path, "wb") as out:
        out.write(data)
    os.chmod(path, 0o755)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
