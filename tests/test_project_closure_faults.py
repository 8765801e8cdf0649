"""A team's closure is cached only when every file of it is hash-pinned: an index that did
not answer for one file (a read timeout) is exit 3 and leaves nothing in the cache, so the
next run asks again instead of building from an unhashed pin."""
from __future__ import annotations

import pytest

import envgen.resolve.closure as cl
import envgen.resolve.project_closure as pc
from envgen.core.errors import EnvironmentMissing
from envgen.core.model import Pin

INDEX = "https://pypi.org/simple"


@pytest.mark.parametrize("note,words", [
    (f"{INDEX} could not be read for numpy (The read operation timed out)", "timed out"),
    # uv took numpy from the index; the index then lists it for no one (a 404, a page of
    # other files): a contradiction, never cached as an unhashed pin
    (f"numpy is not on {INDEX}", "is not on"),
    (f"{INDEX} has no file of numpy 2.4.6 for Python 3.11 on manylinux_2_36_x86_64",
     "has no file of"),
])
def test_an_index_timeout_while_hashing_caches_nothing(tmp_path, monkeypatch, note, words):
    inputs = {"requirements": ["numpy"], "constraints": [], "python": "3.11",
              "platform": "manylinux_2_36_x86_64", "index_url": INDEX,
              "extra_index_urls": []}
    monkeypatch.setattr(pc, "project_inputs", lambda stack, layer: inputs)
    monkeypatch.setattr(cl, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(cl, "probe_index", lambda index: None)
    monkeypatch.setattr(cl, "compile_pins", lambda inputs: ({"numpy": "2.4.6"}, "uv 0"))
    monkeypatch.setattr(cl, "hash_pin", lambda name, version, *a, **k: Pin(
        name, version, note=note))
    with pytest.raises(EnvironmentMissing) as e:
        pc.project_closure(None, None)
    assert words in e.value.message and "nothing was cached" in e.value.message
    assert list(tmp_path.iterdir()) == []
