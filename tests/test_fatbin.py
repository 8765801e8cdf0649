"""The GPU code a CUDA library carries, read from its .nv_fatbin section (envgen/refresh/
fatbin.py), and the record of PyPI's framework wheels made from it (envgen/refresh/
wheel_archs.py): synthetic ELF files built here, bad files, a loopback index, and the
record itself checked against the TORCH_CUDA_ARCH_LIST rows read from PyTorch's build
scripts."""
from __future__ import annotations

import hashlib
import http.server
import struct
import zipfile
from pathlib import Path

import pytest
import yaml
from services import LoopbackServer

from envgen.refresh import fatbin, pytorch, wheel_archs
from envgen.refresh.pypi import Index, Refused


def fatbin_blob(entries: list[tuple[int, int, int]]) -> bytes:
    """One fatbin: (kind, sm, payload bytes) entries, 64-byte entry headers."""
    body = b""
    for kind, sm, size in entries:
        head = struct.pack("<HHIQ", kind, 0x101, 64, size) + b"\0" * 12 + \
            struct.pack("<I", sm) + b"\0" * 32
        body += head + b"\xab" * size
    return struct.pack("<IHHQ", fatbin.MAGIC, 1, 16, len(body)) + body


def elf(sections: dict[str, bytes]) -> bytes:
    """A little-endian ELF64 file holding `sections` (and its names table)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    data, offsets, at = b"", [], 64
    for blob in [*sections.values(), names]:
        offsets.append(at + len(data))
        data += blob + b"\0" * (-len(blob) % 8)
    shoff = 64 + len(data)
    head = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9 + struct.pack("<HHI", 3, 62, 1)
    head += struct.pack("<QQQIHHHHHH", 0, 0, shoff, 0, 64, 0, 0, 64,
                        len(sections) + 2, len(sections) + 1)
    shdrs = b"\0" * 64    # section 0 is empty
    name_at = 1
    for (name, blob), off in zip([*sections.items(), (".shstrtab", names)], offsets,
                                 strict=True):
        shdrs += struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, off, len(blob), 0, 0, 8, 0)
        name_at += len(name) + 1
    return head + data + shdrs


def lib(tmp_path: Path, sections: dict[str, bytes], name="libx.so") -> Path:
    p = tmp_path / name
    p.write_bytes(elf(sections))
    return p


def test_the_set_most_fatbins_share_is_the_build_list(tmp_path):
    unit = [(2, 75, 40), (2, 80, 24), (2, 90, 8), (1, 90, 16)]
    fatbins = [fatbin_blob(unit), fatbin_blob(unit[::-1]),          # the build's list
               fatbin_blob([*unit, (2, 103, 8)]),                   # one unit adds sm_103
               fatbin_blob([(2, 80, 8)]),                           # an sm_80-only kernel
               fatbin_blob([(2, 35, 8), (2, 50, 8)])]               # a static library's list
    section = b"\0" * 8 + (b"\0" * 8).join(fatbins)               # padding between them
    got = fatbin.library_archs(lib(tmp_path, {".text": b"\x90" * 30, ".nv_fatbin": section}))
    assert got == {"fatbins": 5, "build": 2, "sass": ["7.5", "8.0", "9.0"], "ptx": ["9.0"],
                   "partial": ["3.5", "5.0", "10.3"]}


def test_on_a_tie_the_larger_set_is_the_build_list():
    a = frozenset({(2, 80)})
    b = frozenset({(2, 80), (2, 90)})
    assert fatbin.summarize([a, b])["sass"] == ["8.0", "9.0"]
    assert fatbin.summarize([b, a])["sass"] == ["8.0", "9.0"]


def test_a_library_without_gpu_code_has_none(tmp_path):
    assert fatbin.library_archs(lib(tmp_path, {".text": b"\x90" * 8})) == \
        {"fatbins": 0, "build": 0, "sass": [], "ptx": [], "partial": []}


@pytest.mark.parametrize("make, says", [
    (lambda: b"", "not an ELF file"),
    (lambda: b"#!/bin/sh\n" * 10, "not an ELF file"),
    (lambda: elf({".nv_fatbin": fatbin_blob([(2, 75, 8)])})[:-40],
     "section headers (at byte"),
    (lambda: elf({".nv_fatbin": fatbin_blob([(2, 75, 8)])[:-4]}), "runs past"),
    (lambda: elf({".nv_fatbin": struct.pack("<IHHQ", fatbin.MAGIC, 1, 16, 1 << 40)}),
     "the fatbin at byte"),
])
def test_a_broken_file_is_named_not_a_traceback(tmp_path, make, says):
    p = tmp_path / "bad.so"
    p.write_bytes(make())
    with pytest.raises(fatbin.FatbinError) as e:
        fatbin.library_archs(p)
    assert str(e.value).startswith(f"{p}: ") and says in str(e.value)


def test_a_fatbin_whose_size_is_no_multiple_of_8_hides_none_after_it():
    """nvcc pads each fatbin to 8 bytes from the section's start: the next one is there."""
    first = fatbin_blob([(2, 80, 3)])   # 83 bytes
    second = fatbin_blob([(2, 90, 8), (1, 90, 8)])
    section = first + b"\0" * 5 + second
    assert len(first) == 83
    assert fatbin.scan(section) == [frozenset({(2, 80)}), frozenset({(2, 90), (1, 90)})]
    assert fatbin.scan(b"\0" * 8 + section, 8) == fatbin.scan(section)


@pytest.mark.parametrize("field, value, why", [
    ("method", 99, "NotImplementedError"),   # a compression method zipfile lacks
    ("flags", 1, "RuntimeError"),            # an encrypted member
    ("data", 7, "zlib.error")])              # a deflate block of the reserved type
def test_a_wheel_whose_library_cannot_be_inflated_is_refused(tmp_path, field, value, why):
    w = wheel(tmp_path, {"torch/lib/libtorch_cuda.so": b"\0" * (wheel_archs.MIN_LIBRARY + 1)})
    data = bytearray(w.read_bytes())
    central = data.rfind(b"PK\x01\x02")
    if field == "method":
        struct.pack_into("<H", data, central + 10, value)
    elif field == "flags":
        struct.pack_into("<H", data, central + 8, value)
    else:   # the first byte of the member's deflate stream, after its local header
        name_len, extra_len = struct.unpack_from("<HH", data, 26)
        data[30 + name_len + extra_len] = value
    w.write_bytes(bytes(data))
    with pytest.raises(Refused, match=f"^{w.name}: not a readable wheel"):
        wheel_archs.read_wheel(w, w.name, tmp_path)


def test_cc_reads_two_and_three_digit_sm_numbers():
    assert [fatbin.cc(x) for x in (37, 75, 90, 100, 121)] == \
        ["3.7", "7.5", "9.0", "10.0", "12.1"]


# ---- wheels --------------------------------------------------------------------------------

def wheel(tmp_path: Path, members: dict[str, bytes]) -> Path:
    p = tmp_path / "torch-9.9.9-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return p


def test_a_wheel_is_read_from_its_library_with_the_most_fatbins(tmp_path):
    most = elf({".nv_fatbin": b"".join(fatbin_blob([(2, 80, 8), (2, 90, 8)])
                                       for _ in range(3))})
    fewer = elf({".nv_fatbin": fatbin_blob([(2, 70, 8)])})
    pad = b"\0" * (wheel_archs.MIN_LIBRARY + 1)   # under MIN_LIBRARY a file is passed over
    w = wheel(tmp_path, {"torch/__init__.py": b"",
                         "torch/lib/libc10_cuda.so": elf({".text": pad}),
                         "torch/lib/libtorch_cuda_linalg.so": fewer + pad,
                         "torch/lib/libtorch_cuda.so": most + pad,
                         "torch/lib/libsmall.so": elf({".nv_fatbin": b"".join(
                             fatbin_blob([(2, 50, 8)]) for _ in range(5))})})
    row = wheel_archs.read_wheel(w, w.name, tmp_path)
    assert row == {"library": "torch/lib/libtorch_cuda.so", "fatbins": 3, "build": 3,
                   "sass": ["8.0", "9.0"], "ptx": [], "partial": []}
    assert sorted(p.name for p in tmp_path.iterdir()) == [w.name]   # scratch copy removed


def test_a_versioned_library_name_counts(tmp_path):
    pad = b"\0" * (wheel_archs.MIN_LIBRARY + 1)
    w = wheel(tmp_path, {"tensorflow/libtensorflow_cc.so.2":
                         elf({".nv_fatbin": fatbin_blob([(2, 60, 8), (1, 80, 8)])}) + pad})
    row = wheel_archs.read_wheel(w, w.name, tmp_path)
    assert (row["library"], row["sass"], row["ptx"]) == \
        ("tensorflow/libtensorflow_cc.so.2", ["6.0"], ["8.0"])


def test_a_wheel_without_gpu_code_is_refused(tmp_path):
    pad = b"\0" * (wheel_archs.MIN_LIBRARY + 1)
    w = wheel(tmp_path, {"torch/__init__.py": b"", "torch/lib/libtorch_cpu.so":
                         elf({".text": b"\x90"}) + pad})
    with pytest.raises(Refused, match="no shared library in it has GPU code"):
        wheel_archs.read_wheel(w, w.name, tmp_path)


def test_a_library_that_is_no_elf_is_named(tmp_path):
    w = wheel(tmp_path, {"torch/lib/libtorch_cuda.so": b"not elf" * (1 << 18)})
    with pytest.raises(Refused) as e:
        wheel_archs.read_wheel(w, w.name, tmp_path)
    assert e.value.message == f"{w.name}: torch/lib/libtorch_cuda.so: not an ELF file"


def test_a_file_that_is_no_zip_is_refused(tmp_path):
    p = tmp_path / "torch.whl"
    p.write_bytes(b"PK\x03\x04 and then nothing")
    with pytest.raises(Refused, match="not a readable wheel"):
        wheel_archs.read_wheel(p, p.name, tmp_path)


class _Files(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):   # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *a):
        pass


@pytest.fixture
def served(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    with LoopbackServer(_Files) as server:
        yield server.url


def test_a_download_is_checked_against_the_index_sha256(tmp_path, served):
    _Files.body = b"wheel bytes" * 1000
    url = served
    index = Index(url)
    good = {"filename": "t.whl", "url": f"{url}/t.whl",
            "hashes": {"sha256": hashlib.sha256(_Files.body).hexdigest()}}
    wheel_archs.download(index, good, tmp_path / "t.whl")
    assert (tmp_path / "t.whl").read_bytes() == _Files.body
    bad = {**good, "hashes": {"sha256": "0" * 64}}
    with pytest.raises(Refused, match="does not match the index's sha256"):
        wheel_archs.download(index, bad, tmp_path / "u.whl")
    with pytest.raises(Refused, match="gives no sha256"):
        wheel_archs.download(index, {**good, "hashes": {}}, tmp_path / "v.whl")


def test_a_file_url_off_the_index_host_is_not_fetched(tmp_path, served):
    index = Index(served)
    f = {"filename": "t.whl", "url": "https://elsewhere.invalid/t.whl",
         "hashes": {"sha256": "0" * 64}}
    with pytest.raises(Exception, match="not on the index's own host"):
        wheel_archs.download(index, f, tmp_path / "t.whl")


# ---- the record, against what PyTorch's build scripts say ------------------------------------

def test_the_record_agrees_with_the_arch_lists_read_from_pytorch_builder():
    """Where a TORCH_CUDA_ARCH_LIST row was read from PyTorch's build script (confirmed),
    the wheel's own GPU code says the same: the reader of the one checks the other."""
    record = wheel_archs.load("torch")
    table = pytorch.load_index_variants()
    checked = 0
    for v, row in record.items():
        for arch in table["arch_lists"]:
            if arch["variant"] == row["variant"] and arch.get("confirmed") and \
                    pytorch.Version(v) in pytorch.SpecifierSet(arch["torch"]):
                assert row["sass"] == arch["sass"], v
                checked += 1
                break
    assert checked >= 10


@pytest.mark.parametrize("project", sorted(wheel_archs.PROJECTS))
def test_the_record_names_each_wheel_the_matrix_names(project):
    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "matrices" /
                          wheel_archs.PROJECTS[project]).read_text())
    want = {v: (variant, f) for v, variant, f in wheel_archs.targets(doc, project)}
    got = wheel_archs.load(project)
    assert set(got) <= set(want)     # a release the weekly refresh adds waits to be read
    assert len(got) >= len(want) * 0.9
    for v, row in got.items():
        variant, filename = want[v]
        assert row["variant"] == variant
        assert row["wheel"] == filename if filename else \
            row["wheel"].startswith(f"{project.replace('-', '_')}-{v}-")
        assert row["build"] > row["fatbins"] / 2 and row["sass"], v


@pytest.mark.parametrize("text, says", [
    ("wheels:\n  - {project: torch, version: '2.4.1'}\n",
     "torch 2.4.1: variant is missing or not a str"),
    ("wheels:\n  - 7\n", "a row without a version: 7"),
    ("wheels:\n  - {project: torch, version: '2.4.1', variant: cu121, wheel: w, sha256: s, "
     "library: l, fatbins: 1, build: 1, sass: '8.0', ptx: [], partial: []}\n",
     "torch 2.4.1: sass is missing or not a list"),
])
def test_a_broken_record_is_refused_naming_the_row(tmp_path, text, says):
    p = tmp_path / "wheel_archs.yaml"
    p.write_text(text)
    with pytest.raises(Refused) as e:
        wheel_archs.load("torch", p)
    assert e.value.message == f"wheel_archs.yaml: {says}"


def test_a_wheel_read_lower_ptx_is_a_correction_the_refresh_may_write():
    from envgen.refresh.pypi import Run
    run = Run(index=None)
    row = {"project": "tensorflow", "version": "2.15.0", "variant": "cu122", "wheel": "w.whl",
           "sha256": "0" * 64, "library": "tensorflow/libtensorflow_cc.so.2", "fatbins": 2,
           "build": 2, "sass": ["5.0", "8.0"], "ptx": ["8.0"], "partial": []}
    stated = {"compute_capabilities": ["6.0", "8.9"], "ptx": "9.0"}
    got, why = wheel_archs.arch_of(run, "tensorflow", "2.15.0", "w.whl", "cu122", stated,
                                   "from .bazelrc", {"2.15.0": row})
    assert got == {"compute_capabilities": ["5.0", "8.0"], "ptx": "8.0"} and why is None
    assert run.corrections == {("tensorflow 2.15.0 cu122", "ptx", "9.0")}
    assert run.warnings[0].endswith("carries SASS 5.0, 8.0 and PTX 8.0: the wheel wins")
    # another wheel file, or the same list: nothing changes, nothing is corrected
    run = Run(index=None)
    assert wheel_archs.arch_of(run, "tensorflow", "2.15.0", "other.whl", "cu122", stated,
                               "from .bazelrc", {"2.15.0": row}) == (stated, "from .bazelrc")
    assert run.warnings == [
        "tensorflow 2.15.0 cu122: other.whl's GPU code is not in wheel_archs.yaml (it "
        "records w.whl); the list kept as data stands until `python -m "
        "envgen.refresh.wheel_archs 2.15.0` reads it"]
    assert wheel_archs.arch_of(run, "tensorflow", "2.16.0", "x.whl", "cu123", stated,
                               None, {"2.15.0": row}) == (stated, None)
    assert run.warnings[-1].startswith("tensorflow 2.16.0 cu123: x.whl's GPU code is not "
                                       "in wheel_archs.yaml; the list kept")
    run = Run(index=None)
    same = {"compute_capabilities": ["5.0", "8.0"], "ptx": "8.0"}
    assert wheel_archs.arch_of(run, "tensorflow", "2.15.0", "w.whl", "cu122", same, None,
                               {"2.15.0": row}) == (same, None)
    assert run.corrections == set() and run.warnings == []


def _cc(v: str) -> tuple[int, int]:
    return tuple(int(x) for x in v.split("."))


def test_cudnn_min_cc_agrees_with_the_gpu_code_of_its_wheels():
    """matrices/libraries.yaml's min_cc of a cuDNN release is the oldest architecture its
    wheel's libcudnn_ops is built for (a row without one: nothing above CUDA 12's own
    floor, 5.0); a min_cc whose source is the wheel names the very wheel read."""
    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "matrices" /
                          "libraries.yaml").read_text())
    checked = 0
    for project in ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13"):
        record = wheel_archs.load(project)
        for row in doc["libraries"]:
            read = record.get(str(row["version"])) if row["name"] == "cudnn" else None
            if read is None or f"/{project}/" not in row["source"]:
                continue
            oldest = min(read["sass"], key=_cc)
            if row.get("min_cc"):
                assert row["min_cc"] == oldest, row["version"]
            else:
                assert _cc(oldest) <= (5, 0), row["version"]
            if str(row.get("min_cc_source", "")).startswith("pypi:"):
                assert row["min_cc_source"] == f"pypi:{project}/{read['wheel']}"
                assert "confidence" not in row
            checked += 1
    assert checked >= 40


def test_cudnn_rows_are_read_from_their_pypi_wheel():
    doc = {"libraries": [
        {"name": "cudnn", "version": "9.11.0.98",
         "source": "https://pypi.org/project/nvidia-cudnn-cu12/9.11.0.98/"},
        {"name": "cudnn", "version": "9.0.0.312",
         "source": "https://docs.nvidia.com/deeplearning/cudnn/backend/v9.0.0/"},
        {"name": "nccl", "version": "2.20.5",
         "source": "https://pypi.org/project/nvidia-nccl-cu12/2.20.5/"}]}
    assert wheel_archs.targets(doc, "nvidia-cudnn-cu12") == [("9.11.0.98", "cu12", None)]
    assert wheel_archs.targets(doc, "nvidia-cudnn-cu13") == []
    files = {n: {"filename": n} for n in (
        "nvidia_cudnn_cu12-9.11.0.98-py3-none-manylinux_2_27_x86_64.whl",
        "nvidia_cudnn_cu12-9.11.0.98-py3-none-manylinux_2_27_aarch64.whl",
        "nvidia_cudnn_cu12-9.11.0.98-py3-none-win_amd64.whl",
        "nvidia_cudnn_cu12-9.11.0.980-py3-none-manylinux_2_27_x86_64.whl")}
    assert wheel_archs.linux_wheel(files, "nvidia-cudnn-cu12", "9.11.0.98") == \
        "nvidia_cudnn_cu12-9.11.0.98-py3-none-manylinux_2_27_x86_64.whl"
    with pytest.raises(Refused, match="expected one manylinux x86_64 wheel on the index, "
                                      "found 0"):
        wheel_archs.linux_wheel(files, "nvidia-cudnn-cu12", "9.12.0.46")


def test_a_named_library_the_wheel_lacks_is_refused(tmp_path):
    w = wheel(tmp_path, {"nvidia/cudnn/lib/libcudnn_graph.so.9": elf({})})
    with pytest.raises(Refused, match="it has none of nvidia/cudnn/lib/libcudnn_ops.so.9"):
        wheel_archs.read_wheel(w, w.name, tmp_path, wheel_archs.LIBRARIES["nvidia-cudnn-cu13"])


def test_a_named_library_is_read_even_when_another_has_more_fatbins(tmp_path):
    engines = elf({".nv_fatbin": b"".join(fatbin_blob([(2, sm, 8)]) for sm in (75, 80, 90))})
    ops = elf({".nv_fatbin": fatbin_blob([(2, 75, 8), (2, 90, 8)])})
    w = wheel(tmp_path, {"nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9": engines,
                         "nvidia/cudnn/lib/libcudnn_ops.so.9": ops})
    row = wheel_archs.read_wheel(w, w.name, tmp_path,
                                 wheel_archs.LIBRARIES["nvidia-cudnn-cu12"])
    assert (row["library"], row["sass"]) == ("nvidia/cudnn/lib/libcudnn_ops.so.9",
                                             ["7.5", "9.0"])


@pytest.mark.parametrize("text, says", [
    # a syntax error's wording is the parser's own (tests/test_yaml_loaders.py): its line
    ("wheels: [\n  - {", "wheel_archs.yaml:2: invalid YAML: "),
    ("- 1\n", "wheel_archs.yaml: not a YAML mapping"),
    (b"\xff\xfe", "wheel_archs.yaml:1: not UTF-8 (byte 0xff)"),
])
def test_a_record_that_is_no_yaml_mapping_is_refused_naming_the_line(tmp_path, text, says):
    p = tmp_path / "wheel_archs.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(Refused) as e:
        wheel_archs.load("torch", p)
    assert str(e.value).startswith(f"{tmp_path}/{says}")


def test_the_tool_names_a_missing_matrix_file_and_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(wheel_archs, "Index", lambda url: type(
        "I", (), {"project": lambda self, p: {"files": []}})())
    assert wheel_archs.main(["--matrix", str(tmp_path), "--project", "torch"]) == 2
    err = capsys.readouterr().err
    assert err == f"envgen: error: {tmp_path}/pytorch.yaml: cannot read: No such file or " \
        f"directory\n"
    assert "Traceback" not in err


# ---- JAX: the plugins' prebuilt kernels against the lists XLA's ptxas can target ----------

@pytest.mark.parametrize("gpu, sass, ptx, runs", [
    ("8.6", ["8.0"], [], True),                      # same major, lower minor
    ("12.1", ["12.0"], [], True),
    ("7.5", ["8.0"], [], False),                     # SASS of a higher minor: no
    ("10.0", ["9.0"], ["9.0"], True),                # PTX at or below the GPU: JIT
    ("11.0", ["7.5", "10.0", "12.0"], ["12.0"], False),   # Thor under jax 0.7.2's cuda13
    ("9.0", [], [], False),
])
def test_runs_on_follows_cudas_compatibility_rule(gpu, sass, ptx, runs):
    assert fatbin.runs_on(gpu, sass, ptx) is runs


def _jax_row(project, version, sass, ptx):
    return {"project": project, "version": version, "variant": "cuda13", "wheel": "w.whl",
            "sha256": "0" * 64, "library": "lib.so", "fatbins": 9, "build": 9,
            "sass": sass, "ptx": ptx, "partial": []}


def test_the_jax_reader_leaves_out_a_gpu_the_prebuilt_kernels_miss():
    from envgen.refresh import jax
    from envgen.refresh.pypi import Run
    code = (["7.5", "8.0", "9.0", "10.0", "12.0"], ["12.0"])
    records = {p: {"0.8.0": _jax_row(p, "0.8.0", *code)}
               for p in ("jax-cuda13-pjrt", "jax-cuda13-plugin")}
    packages = {"jax-cuda13-pjrt": "0.8.0", "jax-cuda13-plugin": "0.8.0"}
    ccs = ["7.5", "8.0", "8.6", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"]
    run = Run(index=None)
    kept, said = jax._prebuilt(run, "13", packages, ccs, records)
    assert kept == ["7.5", "8.0", "8.6", "9.0", "10.0", "10.3", "12.0", "12.1"]
    assert said == ("prebuilt kernels jax-cuda13-pjrt and -plugin 0.8.0 (read from the "
                    "wheels): SASS 7.5, 8.0, 9.0, 10.0, 12.0; PTX 12.0: none for 11.0")
    assert run.warnings == []
    # the two wheels disagreeing: each list is named, and a GPU must run both
    records["jax-cuda13-plugin"]["0.8.0"]["sass"] = ["8.0", "9.0", "10.0", "12.0"]
    records["jax-cuda13-plugin"]["0.8.0"]["ptx"] = []
    kept, said = jax._prebuilt(Run(index=None), "13", packages, ccs, records)
    assert kept == ["8.0", "8.6", "9.0", "10.0", "10.3", "12.0", "12.1"]
    assert "pjrt SASS 7.5, 8.0, 9.0, 10.0, 12.0; PTX 12.0 / plugin SASS 8.0, 9.0, 10.0, " \
           "12.0; PTX none: none for 7.5, 11.0" in said
    # a pinned wheel the record lacks: the list stands, and the run says so
    run = Run(index=None)
    assert jax._prebuilt(run, "13", {"jax-cuda13-pjrt": "0.9.0"}, ccs, records) == \
        (ccs, None)
    assert run.warnings == [
        "jax-cuda13-pjrt 0.9.0: its GPU code is not in wheel_archs.yaml; the list stands "
        "unchecked until `python -m envgen.refresh.wheel_archs --project jax-cuda13-pjrt "
        "0.9.0` reads it"]


def test_every_jax_cuda_list_runs_the_kernels_its_wheels_ship():
    """matrices/jax.yaml claims no GPU that the pinned PJRT and plugin wheels have no code
    for (jax 0.7.2 to 0.10.1's cuda13 wheels carry none for Thor, 11.0), and each variant's
    why names what it read."""
    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "matrices" /
                          "jax.yaml").read_text())
    checked, thor = 0, {}
    for rel in doc["framework_releases"]:
        for v in rel["variants"]:
            if not v.get("cuda"):
                continue
            line = v["name"].removeprefix("cuda")
            rows = [wheel_archs.load(f"jax-cuda{line}-{part}").get(
                v["packages"][f"jax-cuda{line}-{part}"]) for part in ("pjrt", "plugin")]
            assert all(rows), (rel["version"], v["name"])
            for c in v["compute_capabilities"]:
                assert all(fatbin.runs_on(c, r["sass"], r["ptx"]) for r in rows), \
                    (rel["version"], v["name"], c)
            assert "read from the wheels" in v["why"], (rel["version"], v["name"])
            if line == "13":
                thor[rel["version"]] = "11.0" in v["compute_capabilities"]
            checked += 1
    assert checked >= 45
    assert not thor["0.7.2"] and not thor["0.10.1"] and thor["0.10.2"] and thor["0.12.0"]


def test_jax_plugin_versions_are_read_once_from_the_newest_cpython_wheel():
    doc = {"framework_releases": [
        {"version": "0.8.0", "variants": [
            {"name": "cuda12", "cuda": "12.9.2", "packages": {"jax-cuda12-plugin": "0.8.0"}},
            {"name": "cuda13", "cuda": "13.0.2", "packages": {"jax-cuda13-plugin": "0.8.0"}},
            {"name": "cpu", "cuda": None, "packages": {"jaxlib": "0.8.0"}}]},
        {"version": "0.8.0.1", "variants": [
            {"name": "cuda12", "cuda": "12.9.2", "packages": {"jax-cuda12-plugin": "0.8.0"}}]}]}
    assert wheel_archs.targets(doc, "jax-cuda12-plugin") == [("0.8.0", "cuda12", None)]
    assert wheel_archs.targets(doc, "jax-cuda13-pjrt") == []
    files = {n: {"filename": n} for n in (
        "jax_cuda12_plugin-0.8.0-cp311-cp311-manylinux_2_27_x86_64.whl",
        "jax_cuda12_plugin-0.8.0-cp313-cp313-manylinux_2_27_x86_64.whl",
        "jax_cuda12_plugin-0.8.0-cp313-cp313t-manylinux_2_27_x86_64.whl",
        "jax_cuda12_plugin-0.8.0-cp312-cp312-manylinux_2_27_x86_64.whl",
        "jax_cuda12_plugin-0.8.0-cp313-cp313-manylinux_2_27_aarch64.whl")}
    # the free-threaded build is passed over; two wheels of one CPython are not the
    # reader's to choose between
    assert wheel_archs.linux_wheel(files, "jax-cuda12-plugin", "0.8.0") == \
        "jax_cuda12_plugin-0.8.0-cp313-cp313-manylinux_2_27_x86_64.whl"
    files["jax_cuda12_plugin-0.8.0-cp313-cp313-manylinux2014_x86_64.whl"] = {}
    with pytest.raises(Refused, match="found 5"):
        wheel_archs.linux_wheel(files, "jax-cuda12-plugin", "0.8.0")


def test_a_capability_that_is_no_major_minor_is_named_not_a_traceback():
    from envgen.refresh import jax
    from envgen.refresh.pypi import Run
    with pytest.raises(ValueError, match="'9' is not a compute capability"):
        fatbin.runs_on("9", ["9.0"], [])
    row = _jax_row("jax-cuda13-pjrt", "0.8.0", ["9.0"], [])
    with pytest.raises(Refused, match=r"cuda.yaml: CUDA 13's compute capabilities: "
                                      r"'9a' is not a compute capability"):
        jax._prebuilt(Run(index=None), "13", {"jax-cuda13-pjrt": "0.8.0"}, ["9.0", "9a"],
                      {"jax-cuda13-pjrt": {"0.8.0": row}})
