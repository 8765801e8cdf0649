"""envgen.record makes classes that behave as dataclasses do for what envgen uses: the same
checks run on both, with classes defined the same way."""
from __future__ import annotations

import dataclasses
import pickle

import pytest

from envgen.core import record


def make(dc, fld):
    """The same classes, made by `dc` (dataclasses.dataclass or record.dataclass)."""
    @dc(frozen=True)
    class Located:
        source: str
        file: str = fld(default="", compare=False, repr=False)
        line: int = fld(default=0, compare=False)

    @dc(frozen=True)
    class Release(Located):
        version: str = ""
        tags: tuple = ()
        inputs: dict = fld(default_factory=dict, hash=False, compare=False)

        @property
        def major(self):
            return int(self.version.split(".")[0])

    @dc
    class Table:
        sha: str
        rows: list = fld(default_factory=list)

    return Located, Release, Table


BOTH = [(dataclasses.dataclass, dataclasses.field, dataclasses.replace,
         dataclasses.FrozenInstanceError),
        (record.dataclass, record.field, record.replace, record.FrozenInstanceError)]


@pytest.mark.parametrize("dc,fld,replace,frozen_error", BOTH, ids=["dataclasses", "record"])
def test_records_behave_as_dataclasses(dc, fld, replace, frozen_error):
    Located, Release, Table = make(dc, fld)
    r = Release("pypi", "a.yaml", 3, version="2.4.1", tags=("x",))
    assert (r.source, r.file, r.line, r.version, r.tags, r.inputs) == \
        ("pypi", "a.yaml", 3, "2.4.1", ("x",), {})
    assert list(r.__dict__) == ["source", "file", "line", "version", "tags", "inputs"]
    assert repr(r) == ("make.<locals>.Release(source='pypi', line=3, version='2.4.1', "
                       "tags=('x',), inputs={})")
    # file, line and inputs are not compared (nor hashed)
    same = Release("pypi", "b.yaml", 9, version="2.4.1", tags=("x",), inputs={"k": 1})
    assert r == same and hash(r) == hash(same) and r != Release("pypi", version="2.5.0")
    assert r != Located("pypi") and Located("pypi") == Located("pypi", "other")
    assert r.major == 2 and Release.version == "" and not hasattr(Release, "inputs")
    with pytest.raises(frozen_error):
        r.version = "9"
    with pytest.raises(AttributeError):
        del r.source
    with pytest.raises(TypeError):
        Release()                        # source is required
    with pytest.raises(TypeError):
        Release("a", source="b")         # twice
    with pytest.raises(TypeError):
        Release("a", colour="red")       # unknown
    with pytest.raises(TypeError):
        Release("a", "f", 1, "v", (), {}, "one too many")
    assert Release("a").inputs is not Release("a").inputs   # a fresh default each time
    moved = replace(r, version="2.5.0")
    assert (moved.version, moved.file, moved.tags, r.version) == \
        ("2.5.0", "a.yaml", ("x",), "2.4.1")
    t = Table("abc")
    t.rows.append(1)
    t.sha = "def"                        # not frozen: assignable, and unhashable
    assert t == Table("def", [1]) and Table("x").rows == []
    with pytest.raises(TypeError):
        hash(t)


def test_the_matrix_objects_round_trip_through_pickle_as_the_cache_stores_them():
    from envgen.matrix import load_matrix
    m = load_matrix()
    back = pickle.loads(pickle.dumps(m))
    assert back == m and back.releases[0].file == m.releases[0].file != ""
    assert [hash(r) for r in back.releases] == [hash(r) for r in m.releases]
    with pytest.raises(AttributeError):
        back.releases[0].version = "0"


def test_what_record_does_not_do_is_refused():
    with pytest.raises(TypeError, match="order"):
        @record.dataclass(order=True)
        class A:
            x: int
    with pytest.raises(TypeError, match="ClassVar"):
        @record.dataclass
        class B:
            x: ClassVar[int] = 1  # noqa: F821
    with pytest.raises(TypeError, match="non-default"):
        @record.dataclass
        class C:
            x: int = 1
            y: int


@pytest.mark.parametrize("name", ["Foo_Bar", "foo.bar", "FOO--bar__baz", "a", "Django",
                                  "zope.interface", "nvidia-cublas-cu12", "ruamel.yaml.clib"])
def test_canonical_name_is_what_packaging_says(name):
    from packaging.utils import canonicalize_name

    from envgen.core.model import canonical_name
    assert canonical_name(name) == canonicalize_name(name)
