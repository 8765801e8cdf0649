"""Licences: read from a wheel's METADATA (License-Expression, a License field that is SPDX
or a mapped short form, a mapped classifier; nothing else), kept in the matrix as SPDX,
joined per stack and written as the image's org.opencontainers.image.licenses label."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envgen.cli import main
from envgen.core.model import Stack, join_licenses
from envgen.matrix import load_matrix
from envgen.matrix.schema import canonical_license
from envgen.matrix.wire import stack_problems
from envgen.refresh.licenses import license_of
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

MINI = Path(__file__).parent / "fixtures" / "mini.yaml"
M = load_matrix()
NVIDIA = "LicenseRef-NVIDIA-Proprietary"


def metadata(*lines: str) -> str:
    return "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n" + "".join(f"{x}\n" for x in lines)


def res(spec: str) -> Stack:
    return resolve(M, parse_spec(spec, M), Host())


# ---- reading METADATA ----------------------------------------------------------------------

@pytest.mark.parametrize("lines, expected", [
    (["License-Expression: LicenseRef-NVIDIA-Proprietary"], (NVIDIA, "License-Expression")),
    (["License-Expression: mit", "License: Apache"], ("MIT", "License-Expression")),
    (["License: BSD-3", "Classifier: License :: OSI Approved :: BSD License"],
     ("BSD-3-Clause", "License")),
    (["License: BSD-3-Clause"], ("BSD-3-Clause", "License")),
    (["License: Apache 2.0 License"], ("Apache-2.0", "License")),
    (["License: Apache-2.0"], ("Apache-2.0", "License")),
    (["License: Apache"], ("Apache-2.0", "License")),
    (["License: NVIDIA Proprietary Software",
      "Classifier: License :: Other/Proprietary License"], (NVIDIA, "License")),
    (["Classifier: License :: OSI Approved :: Apache Software License"],
     ("Apache-2.0", "Classifier")),
    (["License: UNKNOWN", "Classifier: License :: OSI Approved :: MIT License"],
     ("MIT", "Classifier")),
])
def test_a_wheels_licence_is_read_from_the_first_field_that_names_one(lines, expected):
    assert license_of(metadata(*lines)) == expected


@pytest.mark.parametrize("lines, said", [
    (["License: BSD"], "License 'BSD'"),                               # torchvision
    (["Classifier: License :: OSI Approved :: BSD License"], "BSD License"),   # torchaudio
    (["License-Expression: Banana-1.0"], "is not an SPDX expression"),
    (["Classifier: License :: OSI Approved :: MIT License",
      "Classifier: License :: OSI Approved :: Apache Software License"], "MIT License"),
    ([], "states no licence"),
])
def test_a_licence_that_maps_to_no_spdx_expression_is_not_guessed(lines, said):
    found, why = license_of(metadata(*lines))
    assert found is None and said in why


def test_licences_join_deduplicated_sorted_and_as_packaging_writes_them():
    joined = join_licenses(["BSD-3-Clause", f"{NVIDIA} AND BSD-3-Clause", "",
                            "(MIT OR Apache-2.0) AND Apache-2.0 WITH LLVM-exception"])
    assert joined == (f"(MIT OR Apache-2.0) AND Apache-2.0 WITH LLVM-exception AND "
                      f"BSD-3-Clause AND {NVIDIA}")
    assert canonical_license(joined) == joined
    assert join_licenses(["((A OR B))", "(A OR B)"]) == "(A OR B)"
    assert join_licenses([]) == "" and join_licenses(["", ""]) == ""


# ---- the matrix ----------------------------------------------------------------------------

def mini_with(tmp_path: Path, line: str, after: str = "    source: https://example.test/r"
              ) -> tuple[Path, int]:
    """The mini matrix with `line` inserted after the first `after`; the file and that line."""
    lines = MINI.read_text().splitlines()
    at = lines.index(after) + 1
    lines.insert(at, line)
    path = tmp_path / "matrix.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path, at + 1


@pytest.mark.parametrize("value", ['"BSD 3"', '"MIT; id"', '"MIT AND"', "mit", "Banana-1.0",
                                   '"$(id)"', '"MIT\\nRUN id"', "7"])
def test_a_licence_that_is_not_an_spdx_expression_is_refused_with_its_line(tmp_path, capsys,
                                                                           value):
    path, line = mini_with(tmp_path, f"    license: {value}")
    assert main(["--matrix", str(path), "matrix", "validate"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}:" in err and "license" in err and "Traceback" not in err


def test_a_variant_licence_is_validated_too(tmp_path, capsys):
    text = MINI.read_text()
    cpu = "      - {name: cpu, cuda: null, sources: [pytorch-cpu]}"
    line = text.splitlines().index(cpu) + 1
    path = tmp_path / "matrix.yaml"
    path.write_text(text.replace(cpu, cpu[:-1] + ", license: GPL}", 1))
    assert main(["--matrix", str(path), "matrix", "validate"]) == 2
    assert f"{path}:{line}:" in capsys.readouterr().err


def test_a_valid_licence_loads_and_a_companion_licence_must_name_a_companion(tmp_path,
                                                                              capsys):
    path, _ = mini_with(tmp_path, f"    license: BSD-3-Clause AND {NVIDIA}")
    assert main(["--matrix", str(path), "matrix", "validate"]) == 0
    rel = load_matrix(path).releases[0]
    assert rel.license == f"BSD-3-Clause AND {NVIDIA}"
    path, line = mini_with(tmp_path, "    companion_licenses: {torchaudio: BSD-2-Clause}")
    assert main(["--matrix", str(path), "matrix", "validate"]) == 2
    err = capsys.readouterr().err
    assert "torchaudio, not among its companions" in err


def test_every_licence_in_the_bundled_matrix_is_canonical_spdx():
    found = [r.license for r in M.releases] + [v.license for r in M.releases
                                               for v in r.variants]
    assert all(canonical_license(x) == x for x in found if x)
    assert {r.framework for r in M.releases if r.license} == \
        {"pytorch", "lightning", "pytorch-lightning", "transformers", "accelerate", "jax",
         "tensorflow", "deepspeed", "nemo", "keras", "tf-keras", "flax", "optax"}


# ---- stacks and the label ------------------------------------------------------------------

def rendered_labels(tmp_path, monkeypatch, spec: str) -> dict[str, str]:
    from closures import use_fake_resolver
    use_fake_resolver(monkeypatch, tmp_path)
    out = tmp_path / spec
    assert main(["render", spec, "-o", str(out)]) == 0
    text = (out / "Dockerfile").read_text()
    return {k: json.loads(v) for k, v in re.findall(r'^LABEL ([a-z.]+)=(".*")$', text, re.M)}


def test_a_cuda_image_names_its_frameworks_and_nvidias_licence(tmp_path, monkeypatch):
    st = res("pytorch-cu121")
    rel = next(r for r in M.releases_of("pytorch") if r.version == st.version)
    labels = rendered_labels(tmp_path, monkeypatch, "pytorch-cu121")
    terms = labels["org.opencontainers.image.licenses"].split(" AND ")
    assert rel.license and set(rel.license.split(" AND ")) <= set(terms)
    assert NVIDIA in terms
    assert json.loads(labels["io.envgen.stack"])["licenses"] == st.licenses


def test_a_cpu_image_does_not_name_nvidias_licence(tmp_path, monkeypatch):
    labels = rendered_labels(tmp_path, monkeypatch, "pytorch-cpu")
    assert labels["org.opencontainers.image.licenses"]
    assert NVIDIA not in labels["org.opencontainers.image.licenses"]


def test_a_stack_over_pytorch_names_both_frameworks_licences():
    over, base = res("lightning-cu128"), res("torch==2.10.0,variant=cu128")
    lightning = next(r for r in M.releases_of("lightning") if r.version == over.version)
    assert set(base.licenses.split(" AND ")) <= set(over.licenses.split(" AND "))
    assert lightning.license in over.licenses.split(" AND ")


def test_an_unknown_cuda_licence_gives_no_label_rather_than_a_partial_one(tmp_path,
                                                                           monkeypatch):
    st = res("pytorch-cu116")        # its wheel bundles the CUDA libraries: no METADATA
    assert st.cuda and st.licenses == ""
    labels = rendered_labels(tmp_path, monkeypatch, "pytorch-cu116")
    assert "org.opencontainers.image.licenses" not in labels


# ---- locks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["MIT; id", "MIT\nRUN id", "$(id)", 7, ["MIT"], "mit",
                                   "Banana-1.0", "MIT AND"])
def test_a_hostile_licences_value_in_a_lock_is_refused(value):
    data = res("pytorch-cu121").to_json()
    data["licenses"] = value
    assert "stack.licenses is not an SPDX licence expression" in stack_problems(data)


def test_a_lock_written_before_licences_still_reads():
    data = res("pytorch-cu121").to_json()
    assert data["licenses"]
    del data["licenses"]
    assert stack_problems(data) == []
    assert Stack.from_json(data).licenses == ""
    full = res("pytorch-cu121")
    assert Stack.from_json(full.to_json()).licenses == full.licenses


def test_a_hostile_licences_value_in_a_lock_file_names_the_file_and_entry(tmp_path):
    from test_hostile_lock import lock_text, write

    from envgen.core.errors import InputError
    from envgen.lock.write import read_lock
    data = lock_text()
    data["stacks"]["pytorch-cu121"]["stack"]["licenses"] = 'MIT" && id #'
    path = write(tmp_path, data)
    with pytest.raises(InputError) as e:
        read_lock(path)
    line = path.read_text().splitlines().index('    "pytorch-cu121": {') + 1
    assert e.value.file == str(path) and e.value.line == line
    assert "stack.licenses is not an SPDX licence expression" in e.value.message
