"""A wheel's licence as an SPDX expression, read from its METADATA: `License-Expression`
(PEP 639) when present; else the `License` field when it is an SPDX expression or a short
form mapped below; else its one `License ::` classifier, mapped below. Nothing else is
guessed: a wheel whose METADATA maps to no expression gets none, and the reader warns.

    license_of(metadata)            -> (expression, the field it came from) or (None, why)
    wheel_licenses(run, pins, what) -> the AND of the licences of name==version wheels"""
from __future__ import annotations

import concurrent.futures as cf
import email.parser

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..core.model import join_licenses
from ..matrix.schema import canonical_license
from .pypi import Refused, Run, is_linux_x86_64

try:   # packaging >= 24.2 knows SPDX's identifiers; without it a `License` is not trusted
    import packaging.licenses  # noqa: F401
    CHECKED = True
except ImportError:
    CHECKED = False

# `License` values that are not SPDX but name one licence, as the wheels envgen reads
# write them.
SHORT = {
    "BSD-3": "BSD-3-Clause",                        # torch before 2.5
    "Apache 2.0 License": "Apache-2.0",             # transformers
    "Apache 2.0": "Apache-2.0",                     # nvidia-nvtx (its classifier: Other/
                                                    # Proprietary; the License field wins)
    "Apache": "Apache-2.0",                         # accelerate
    "Apache Software License 2.0": "Apache-2.0",    # deepspeed (its LICENSE: Apache 2.0)
    "Apache License 2.0": "Apache-2.0",             # keras 3.10 to 3.12
    "NVIDIA Proprietary Software": "LicenseRef-NVIDIA-Proprietary",   # older nvidia-* wheels
}
# Trove classifiers that name one licence. "BSD License" is not here: it does not say
# which BSD licence (2- or 3-clause).
CLASSIFIERS = {
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: MIT License": "MIT",
}


def license_of(metadata: str) -> tuple[str | None, str]:
    """(the SPDX expression, the METADATA field it was read from), or (None, why none)."""
    msg = email.parser.Parser().parsestr(metadata, headersonly=True)
    expression = (msg.get("License-Expression") or "").strip()
    if expression:
        found = canonical_license(expression)
        return (found, "License-Expression") if found else (
            None, f"its License-Expression {expression[:60]!r} is not an SPDX expression")
    text = " ".join((msg.get("License") or "").split())
    if text:
        found = SHORT.get(text) or (canonical_license(text) if CHECKED else None)
        if found:
            return found, "License"
    classifiers = [c for c in msg.get_all("Classifier") or [] if c.startswith("License ::")]
    if len(classifiers) == 1 and classifiers[0] in CLASSIFIERS:
        return CLASSIFIERS[classifiers[0]], "Classifier"
    said = [f"License {text[:60]!r}"] if text else []
    said += [repr(c) for c in classifiers]
    return None, (f"its METADATA says {' and '.join(said)}, which names no SPDX licence "
                  f"envgen maps" if said else "its METADATA states no licence")


def _wheel(run: Run, name: str, version: str) -> dict | None:
    """A wheel of name==version on the index (a Linux x86_64 one where there is one)."""
    try:
        want = Version(version)
        files = [f for f in run.index.project(name)["files"]
                 if f["filename"].endswith(".whl") and not f.get("yanked")
                 and parse_wheel_filename(f["filename"])[1] == want]
    except (Refused, InvalidVersion, InvalidWheelFilename):
        return None
    return next((f for f in files
                 if any(is_linux_x86_64(t) for t in parse_wheel_filename(f["filename"])[3])),
                files[0] if files else None)


def wheel_licenses(run: Run, pins: dict[str, dict[str, str]]) -> dict[str, str | None]:
    """For each key of `pins` (what: {name: version}), the AND of its wheels' licences, or
    None with a warning when a wheel is not on the index or its licence maps to nothing.
    Each wheel's METADATA is read once."""
    wanted = sorted({(n, v) for p in pins.values() for n, v in p.items()})

    def one(pin):
        wheel = _wheel(run, *pin)
        if wheel is None:
            return pin, (None, "no wheel of it on the index")
        return pin, license_of(run.index.metadata(wheel)[0])

    with cf.ThreadPoolExecutor(run.jobs) as ex:
        found = dict(ex.map(one, wanted))
    out: dict[str, str | None] = {}
    for what, p in pins.items():
        unknown = [f"{n} {v}: {found[(n, v)][1]}" for n, v in sorted(p.items())
                   if found[(n, v)][0] is None]
        if unknown:
            run.warn(f"{what}: no license written ({'; '.join(unknown)})")
        out[what] = None if unknown or not p else join_licenses(
            found[(n, v)][0] for n, v in p.items())
    return out


def with_license(variant: dict, license: str | None) -> dict:
    """`variant` with `license` written after its packages (unchanged for None)."""
    if not license:
        return variant
    keys = list(variant)
    at = keys.index("packages") + 1
    return {**{k: variant[k] for k in keys[:at]}, "license": license,
            **{k: variant[k] for k in keys[at:]}}
