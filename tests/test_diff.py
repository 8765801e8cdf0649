"""envgen diff: drivers, fleets and matrix revisions (pure logic; no Docker)."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envgen import diff as d
from envgen.cli import main
from envgen.core.errors import InputError, MatrixError
from envgen.matrix import load_matrix
from envgen.matrix.yamlfile import load_text
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "tests" / "fixtures" / "mini.yaml"
FLEET = REPO / "examples" / "fleet.yaml"

R525, R535, R550, R570, R580 = ("525.147.05", "535.274.02", "550.163.01", "570.195.03",
                                "580.95.05")


@pytest.fixture(scope="module")
def m():
    return load_matrix()


@pytest.fixture(scope="module")
def stacks(m):
    return d.resolve_all(m)


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def torch_only(names):
    """The PyTorch stacks alone (pytorch-lightning-cu130 is Lightning's)."""
    return [n for n in names if re.fullmatch(r"pytorch-(cpu|cu[0-9]+)", n)]


# ---- one driver, one GPU -------------------------------------------------------------------

def test_driver_upgrade_535_to_580_on_rtx4090_starts_cu130(m, stacks):
    r = d.driver_diff(m, R535, R580, m.gpu("RTX 4090"), stacks)
    assert torch_only(r["start_working"]) == ["pytorch-cu130", "pytorch-cu132"]
    # the stacks built over PyTorch move with the PyTorch stack under them
    assert {"lightning-cu130", "transformers-cu132", "accelerate-cu130"} <= \
        set(r["start_working"])
    assert r["stop_working"] == []
    assert r["summary"].startswith("R535 → R580 on RTX 4090: ")
    assert "pytorch-cu130, pytorch-cu132" in r["summary"]
    assert "start working; none stop" in r["summary"]
    assert r["stacks"]["pytorch-cu130"]["old"]["runs"] is False
    assert r["stacks"]["pytorch-cu130"]["new"]["runs"] is True


def test_driver_downgrade_580_to_535_on_rtx4090_stops_cu130(m, stacks):
    r = d.driver_diff(m, R580, R535, m.gpu("RTX 4090"), stacks)
    assert torch_only(r["stop_working"]) == ["pytorch-cu130", "pytorch-cu132"]
    assert r["start_working"] == []


def test_r525_runs_cu121_only_through_minor_version_compat_with_ptx_caveat(m, stacks):
    v = d.verdict(m, stacks["pytorch-cu121"], R525, m.gpu("RTX 4090"))
    assert v["runs"] and v["how"] == "minor-version compatibility"
    assert "PTX JIT fails" in v["caveat"]


def on_compat_base(m, name, driver, gpu):
    """The stack as resolve builds it for that host: on a base carrying cuda-compat."""
    st = resolve(m, parse_spec(name, m), Host(driver=driver, gpu=m.gpu(gpu)))
    assert st.base.cuda_compat
    return st


def test_r535_runs_cu130_on_h100_through_forward_compat_but_not_on_rtx4090(m, stacks):
    st = on_compat_base(m, "pytorch-cu130", R535, "H100")
    h100 = d.verdict(m, st, R535, m.gpu("H100"))
    assert h100["runs"] and h100["how"] == "forward compatibility"
    assert "data-center" in h100["caveat"]
    rtx = d.verdict(m, st, R535, m.gpu("RTX 4090"))
    assert not rtx["runs"] and "geforce" in rtx["why"]


def test_forward_compat_on_h200_follows_nvidias_table(m, stacks):
    # NVIDIA's "Use the Right CUDA Forward Compatibility Package" table (CUDA 13.4 edition):
    # cuda-compat-13-0 is C on 535 and 570; it has no 550 column (R550 is end of life).
    h200 = m.gpu("H200")
    st = on_compat_base(m, "pytorch-cu130", R570, "H200")
    v = d.verdict(m, st, R550, h200)
    assert not v["runs"] and "not a forward-compatible branch for CUDA 13.0" in v["why"]
    assert d.verdict(m, st, R570, h200)["how"] == "forward compatibility"


def test_rtx5090_cannot_run_cu126_for_lack_of_sm120_kernels(m, stacks):
    v = d.verdict(m, stacks["pytorch-cu126"], R570, m.gpu("RTX 5090"))
    assert not v["runs"] and "no kernels for compute capability 12.0" in v["why"]
    assert d.verdict(m, stacks["pytorch-cu128"], R570, m.gpu("RTX 5090"))["runs"]


def test_a100_on_r570_runs_cu128_natively(m, stacks):
    v = d.verdict(m, stacks["pytorch-cu128"], R570, m.gpu("A100"))
    assert v["runs"] and v["how"] == "native" and v["caveat"] is None


def test_cpu_stack_runs_on_any_driver(m, stacks):
    assert d.verdict(m, stacks["pytorch-cpu"], R525)["how"] == "cpu"


def test_driver_range_must_be_old_dot_dot_new():
    assert d.parse_driver_range(f"{R535}..{R580}") == (R535, R580)
    for bad in ("535.274.02", "535..abc", "..580.95.05", "535.274.02...580"):
        with pytest.raises(InputError):
            d.parse_driver_range(bad)


def test_cli_driver_diff_json_lists_start_and_stop_working(capsys):
    code, out = run_json(capsys, "diff", "--driver", f"{R535}..{R580}", "--gpu", "RTX 4090")
    assert code == 0
    r = out["driver"]
    assert torch_only(r["start_working"]) == ["pytorch-cu130", "pytorch-cu132"]
    assert r["stop_working"] == []
    assert set(r["stacks"]["pytorch-cu121"]) == {"old", "new"}


def test_cli_driver_diff_human_table_has_summary(capsys):
    assert main(["diff", "--driver", f"{R535}..{R580}", "--gpu", "RTX 4090"]) == 0
    out = " ".join(capsys.readouterr().out.split())   # the summary is wrapped
    assert "R535 → R580 on RTX 4090: accelerate-cu130" in out
    assert "pytorch-cu130, pytorch-cu132" in out and "start working; none stop" in out


@pytest.mark.parametrize("argv", [["diff"], ["diff", "--driver", "535"],
                                  ["diff", "--driver", f"{R535}..{R580}", "--gpu", "GTX 9999"],
                                  ["diff", "only-old"]])
def test_cli_diff_bad_usage_is_exit_2_without_traceback(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("envgen: error:") and "Traceback" not in err


# ---- fleets --------------------------------------------------------------------------------

def test_example_fleet_covers_the_driver_branches_and_gpus(m):
    hosts = d.parse_fleet(load_text(FLEET.read_text(), str(FLEET)), str(FLEET), m)
    assert {d.branch(h.driver) for h in hosts} == {"R525", "R535", "R550", "R570", "R580"}
    gpus = {g.name for h in hosts for g in h.gpus}
    assert {"RTX 4090", "RTX 5090", "A100", "H100", "L4", "H200"} <= gpus


def test_fleet_upgrade_plan_moves_only_hosts_on_the_old_branch(m, stacks):
    hosts = d.parse_fleet(load_text(FLEET.read_text(), str(FLEET)), str(FLEET), m)
    r = d.fleet_report(m, hosts, (R535, R580), stacks)
    by = {h["name"]: h for h in r["hosts"]}
    assert by["ws-rtx4090-01"]["moves_to"] == R580
    assert torch_only(by["ws-rtx4090-01"]["start_working"]) == ["pytorch-cu130", "pytorch-cu132"]
    # the default cu130 image (debian-bookworm) carries no cuda-compat: on R535 it did not run
    assert torch_only(by["dgx-h100-01"]["start_working"]) == ["pytorch-cu130", "pytorch-cu132"]
    assert by["hgx-h200-01"]["moves_to"] is None
    assert "pytorch-cu132" in by["hgx-h200-01"]["runs"]
    assert "pytorch-cu126" not in by["ws-rtx5090-02"]["runs"]


def test_fleet_without_driver_says_what_runs_on_each_host(m, stacks):
    hosts = d.parse_fleet(load_text(FLEET.read_text(), str(FLEET)), str(FLEET), m)
    r = d.fleet_report(m, hosts, None, stacks)
    legacy = next(h for h in r["hosts"] if h["name"] == "legacy-a100-01")
    assert "pytorch-cu121" in legacy["runs"] and "pytorch-cu130" not in legacy["runs"]


def test_mixed_gpu_host_runs_a_stack_only_if_every_gpu_can(m, stacks):
    doc = load_text('hosts:\n  - {name: mixed, driver: "570.195.03", '
                    'gpus: ["A100", "RTX 5090"]}\n', "f.yaml")
    r = d.fleet_report(m, d.parse_fleet(doc, "f.yaml", m), None, stacks)
    row = r["hosts"][0]["stacks"]["pytorch-cu126"]["now"]
    assert not row["runs"] and row["why"].startswith("RTX 5090:")


def test_cli_fleet_json_reports_per_host(capsys):
    code, out = run_json(capsys, "diff", "--driver", f"{R535}..{R580}", "--fleet", str(FLEET))
    assert code == 0 and "driver" not in out     # the fleet's own GPUs decide
    names = [h["name"] for h in out["fleet"]["hosts"]]
    assert "ws-rtx4090-01" in names


@pytest.mark.parametrize("text,line,words", [
    ('hosts:\n  - name: a\n    driver: 535.104\n    gpus: [H100]\n', 3, "quote it"),
    ('hosts:\n  - name: a\n    driver: "535.104.05"\n    gpus: [H100, Foo]\n', 4,
     "'Foo' is not a GPU"),
    ('hosts:\n  - name: a\n    driver: "535.104.05"\n    gpus: [H100]\n    rack: 3\n', 5,
     "unknown key 'rack'"),
    ('hosts:\n  - &h {name: a, driver: "535.104.05", gpus: [H100]}\n  - *h\n', 2,
     "anchors are not allowed"),
    (('hosts:\n  - {name: a, driver: "535.104.05", gpus: [H100]}\n'
     '  - {name: a, driver: "535.104.05", gpus: [H100]}\n'), 3, "listed twice"),
    ('hosts: {a: 1}\n', 1, "list `hosts:`"),
    ('hosts:\n  - name: a\n    driver: "535.104.05"\n    gpus: []\n', 4, "1 to 1,024 GPU names"),
])
def test_bad_fleet_file_is_exit_2_with_file_and_line(tmp_path, capsys, text, line, words):
    f = tmp_path / "fleet.yaml"
    f.write_text(text)
    assert main(["diff", "--fleet", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:{line}:" in err and words in err and "Traceback" not in err


def test_bad_fleet_collects_every_problem(m):
    doc = load_text('hosts:\n  - name: a\n    driver: 535.104\n    gpus: [Foo]\n', "f.yaml")
    with pytest.raises(MatrixError) as e:
        d.parse_fleet(doc, "f.yaml", m)
    assert [p.line for p in e.value.problems] == [3, 4]


# ---- two matrices --------------------------------------------------------------------------

def _two_minis(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    text = MINI.read_text()
    (old / "mini.yaml").write_text(text)
    changed = text.replace('companions: {torchvision: "0.22.1"}',
                           'companions: {torchvision: "0.22.2"}')
    changed = "\n".join(line for line in changed.splitlines() if "name: cu118" not in line)
    assert changed != text
    (new / "mini.yaml").write_text(changed + "\n")
    return old, new


def test_matrix_diff_names_removed_and_changed_stacks_package_by_package(tmp_path):
    old, new = _two_minis(tmp_path)
    r = d.matrix_diff(load_matrix(old), load_matrix(new))
    assert r["removed"] == ["pytorch-cu118"] and r["added"] == []
    ch = {c["stack"]: c for c in r["changed"]}
    assert ch["pytorch-cu126"]["packages"]["changed"] == {"torchvision": ["0.22.1", "0.22.2"]}
    assert "pytorch-cu121" in r["unchanged"]


def test_matrix_diff_the_other_way_reports_added(tmp_path):
    old, new = _two_minis(tmp_path)
    r = d.matrix_diff(load_matrix(new), load_matrix(old))
    assert r["added"] == ["pytorch-cu118"] and r["removed"] == []


def test_matrix_diff_compares_stack_fields(tmp_path):
    old, new = tmp_path / "a.yaml", tmp_path / "b.yaml"
    text = MINI.read_text()
    old.write_text(text)
    new.write_text(text.replace('nccl: "2.26.2", compute_capabilities: ["7.5", "8.0", "8.6", '
                                '"9.0", "10.0", "12.0"], ptx: "12.0", sources: [pytorch-cu128]'
                                ', packages: {}',
                                'nccl: "2.27.7", compute_capabilities: ["7.5", "8.0", "8.6", '
                                '"9.0", "10.0", "12.0"], ptx: "12.0", sources: [pytorch-cu128]'
                                ', packages: {}'))
    r = d.matrix_diff(load_matrix(old), load_matrix(new))
    fields = {f["field"]: (f["old"], f["new"]) for c in r["changed"] for f in c["fields"]}
    assert fields["nccl"] == ("2.26.2", "2.27.7")


def _git(cwd, *argv):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.test", *argv],
                   cwd=cwd, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_diff_between_two_git_revisions_of_matrices(tmp_path, monkeypatch, capsys):
    old, new = _two_minis(tmp_path)
    repo = tmp_path / "repo"
    (repo / "matrices").mkdir(parents=True)
    _git(repo, "init", "-q")
    shutil.copy(old / "mini.yaml", repo / "matrices" / "mini.yaml")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "old")
    shutil.copy(new / "mini.yaml", repo / "matrices" / "mini.yaml")
    _git(repo, "commit", "-q", "-am", "new")
    monkeypatch.chdir(repo)
    code, out = run_json(capsys, "diff", "HEAD~1", "HEAD")
    assert code == 0 and out["matrix"]["removed"] == ["pytorch-cu118"]
    code, out = run_json(capsys, "diff", "HEAD~1:matrices/mini.yaml", "matrices")
    assert code == 0 and out["matrix"]["removed"] == ["pytorch-cu118"]
    assert main(["diff", "no-such-rev", "HEAD"]) == 2
    assert "neither a matrix file or folder nor a git revision" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../../etc/passwd"])
def test_diff_over_a_revision_holding_a_symlink_refuses_it(tmp_path, monkeypatch, capsys,
                                                           target):
    old, _ = _two_minis(tmp_path)
    repo = tmp_path / "repo"
    (repo / "matrices").mkdir(parents=True)
    _git(repo, "init", "-q")
    shutil.copy(old / "mini.yaml", repo / "matrices" / "mini.yaml")
    (repo / "matrices" / "x.yaml").symlink_to(target)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "link")
    monkeypatch.chdir(repo)
    assert main(["diff", "HEAD", "HEAD"]) == 2
    err = capsys.readouterr().err
    assert "HEAD:matrices/x.yaml is a symbolic link" in err and "root:" not in err


def test_matrix_diff_with_driver_uses_the_new_matrix(tmp_path, capsys):
    old, new = _two_minis(tmp_path)
    code, out = run_json(capsys, "diff", str(old), str(new), "--driver", f"{R535}..{R580}",
                         "--gpu", "RTX 4090")
    assert code == 0
    assert "pytorch-cu118" not in out["driver"]["stacks"]
    assert out["driver"]["start_working"] == ["pytorch-cu130"]


def test_matrix_diff_reports_a_change_of_what_runs_a_stack_though_no_field_moved(tmp_path,
                                                                                   capsys):
    """Removing R535 from CUDA 13.0's forward compatibility changes no stack's own fields,
    yet an H100 on R535 stops running pytorch-cu130: the diff names the table change and the
    stacks it bears on."""
    bundled = Path(__file__).resolve().parents[1] / "matrices"
    old, new = tmp_path / "old", tmp_path / "new"
    for folder in (old, new):
        shutil.copytree(bundled, folder, ignore=shutil.ignore_patterns("closures"))
    text = (new / "cuda.yaml").read_text()
    at = text.index('  - cuda: "13.0"\n')
    row = text[at:text.index("\n  - cuda:", at + 1)]
    assert '"535", ' in row
    (new / "cuda.yaml").write_text(text.replace(row, row.replace('"535", ', "", 1)))
    r = d.matrix_diff(load_matrix(old), load_matrix(new))
    assert {"table": "forward_compat", "key": "13.0", "field": "branches"}.items() <= \
        r["compatibility"][0].items(), r["compatibility"]
    ch = {c["stack"]: c for c in r["changed"]}
    assert ch["pytorch-cu130"]["compatibility"] == ["forward_compat 13.0: branches"]
    assert "pytorch-cu121" in r["unchanged"]
    assert main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "forward_compat 13.0: branches" in out and "pytorch-cu130" in out


def test_a_bare_branch_is_refused_as_an_upgrade_and_read_as_its_first_release_elsewhere(m):
    """`--driver 525..535` judged 525 as 525.0.0, older than every real R525 release: 26
    stacks 'started working' against 7 for 525.147.05..535.274.02. A range takes releases;
    a single driver given as a branch is read as the branch's first release."""
    with pytest.raises(InputError, match="525 is a branch, and what runs depends on the "
                                         "release"):
        d.parse_driver_range("525..535.274.02")
    from envgen.resolve.compat import as_release, driver_runs
    assert as_release(m, "525") == "525.60.11" and as_release(m, "525.147.05") == "525.147.05"
    cuda = m.cuda_release("12.1.1")
    assert driver_runs(m, cuda, "535", m.gpu("A100")).why == \
        driver_runs(m, cuda, m.driver_branch_of("535").first, m.gpu("A100")).why


def test_a_host_of_more_gpus_than_a_host_holds_is_refused_at_its_line(tmp_path):
    """A 1.8 MB hosts file listing 300,000 H100s on one host took 33 s of CPU."""
    f = tmp_path / "hosts.yaml"
    f.write_text("hosts:\n  - name: big\n    driver: 580.95.05\n    gpus: ["
                 + ", ".join(["H100"] * 5_000) + "]\n")
    r = subprocess.run([sys.executable, "-m", "envgen", "diff", "--hosts", str(f)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "1 to 1,024 GPU names" in r.stderr, r.stderr
    assert f"{f}:4" in r.stderr


# ---- from a review: forward compatibility on the stack's own base, architectures and
# bases in the tables, duplicate forward_compat rows, --gpu without --driver, a mixed host

def _copy(tmp_path, name):
    folder = tmp_path / name
    shutil.copytree(REPO / "matrices", folder, ignore=shutil.ignore_patterns("closures"))
    return folder


def _edit(path, old, new):
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_an_image_without_cuda_compat_stops_on_r535_and_a_rebuild_on_a_compat_base_runs(
        m, stacks):
    """pytorch-cu130 is built on debian-bookworm, which carries no cuda-compat: on R535 the
    certified image stops, though the same stack rebuilt on a cuda-compat base would run."""
    h100 = m.gpu("H100")
    assert not stacks["pytorch-cu130"].base.cuda_compat
    v = d.verdict(m, stacks["pytorch-cu130"], R535, h100)
    assert not v["runs"] and v["how"] is None
    assert "debian-bookworm, this image's base, has none" in v["why"]
    assert f"`envgen build pytorch-cu130 --driver {R535} --gpu H100`" in v["why"]
    assert v["rebuilt"] == "forward compatibility"   # what the report's cell shows
    rebuilt = resolve(m, parse_spec("pytorch-cu130", m), Host(driver=R535, gpu=h100))
    assert rebuilt.base.cuda_compat
    assert d.verdict(m, rebuilt, R535, h100)["how"] == "forward compatibility"
    # no rebuild helps a GeForce card, which forward compatibility does not serve
    geforce = d.verdict(m, stacks["pytorch-cu130"], R535, m.gpu("RTX 4090"))
    assert "rebuilt" not in geforce["why"] and "rebuilt" not in geforce


def test_cli_driver_downgrade_to_r535_on_h100_stops_the_images_without_cuda_compat(capsys):
    assert main(["diff", "--driver", f"{R580}..{R535}", "--gpu", "H100", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["driver"]
    assert "pytorch-cu130" in r["stop_working"]
    assert r["stacks"]["pytorch-cu130"]["new"]["runs"] is False


def test_matrix_diff_lists_a_change_of_an_architecture_and_of_a_bases_cuda_compat(tmp_path,
                                                                                  capsys):
    old, new = _copy(tmp_path, "old"), _copy(tmp_path, "new")
    _edit(new / "gpus.yaml", '  - arch: turing\n    min_driver: "410.48"\n',
          '  - arch: turing\n    min_driver: "410.48"\n    last_branch: "580"\n'
          '    last_branch_source: https://example.test/notice\n')
    _edit(new / "bases.yaml", '    cuda: "13.0"\n    cuda_compat: true\n',
          '    cuda: "13.0"\n    cuda_compat: false\n')
    r = d.matrix_diff(load_matrix(old), load_matrix(new))
    got = {(c["table"], c["key"], c["field"]): (c["old"], c["new"]) for c in r["compatibility"]}
    assert got[("architectures", "turing", "last_branch")] == ("", "580")
    assert got[("bases", "cuda-13.0-runtime", "cuda_compat")] == (True, False)
    assert not [k for k in got if k[0] == "bases" and k[2] not in ("cuda", "cuda_compat")]
    assert main(["diff", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "architectures turing: last_branch" in out
    assert "bases cuda-13.0-runtime: cuda_compat: True → False" in out


def test_a_stack_resolving_in_one_matrix_only_has_the_same_keys_as_any_changed_stack(
        m, stacks, monkeypatch):
    old = {"pytorch-cu130": "no base offers Python 3.99"}
    new = {"pytorch-cu130": stacks["pytorch-cu130"]}
    monkeypatch.setattr(d, "resolve_all", lambda x: old if x is m else new)
    r = d.matrix_diff(m, load_matrix())
    assert set(r["changed"][0]) == {"stack", "fields", "packages", "compatibility"}
    assert r["changed"][0]["compatibility"] == []


def test_a_duplicate_forward_compat_row_is_refused_at_its_line(tmp_path, capsys):
    folder = _copy(tmp_path, "dup")
    cuda = folder / "cuda.yaml"
    text = cuda.read_text()
    at = text.index('  - cuda: "13.0"\n')
    row = text[at:text.index("\n  - cuda:", at + 1) + 1]
    cuda.write_text(text.replace(row, row + row, 1))
    line = text[:at].count("\n") + 1 + row.count("\n")
    assert main(["--matrix", str(folder), "matrix", "validate"]) == 2
    err = capsys.readouterr().err
    assert f"cuda.yaml:{line}: duplicate forward_compat '13.0'" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv", [["diff", "a", "b", "--gpu", "H100", "--json"],
                                  ["diff", "--hosts", str(FLEET), "--gpu", "B200"]])
def test_gpu_without_driver_is_refused_not_ignored(capsys, argv):
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert "--gpu judges a driver change" in cap.out + cap.err


def test_a_host_of_h100_and_b200_keeps_the_b200s_ptx_caveat(m, stacks):
    st = stacks["tensorflow-cu125"]
    b200 = d.verdict(m, st, R580, m.gpu("B200"))
    assert b200["how"] == "ptx" and "JIT" in b200["caveat"]
    assert d.verdict(m, st, R580, m.gpu("H100"))["how"] == "native"
    for gpus in (("H100", "B200"), ("B200", "H100")):
        v = d._host_verdict(m, st, R580, tuple(m.gpu(g) for g in gpus))
        assert v["runs"] and v["how"] == "ptx" and v["caveat"] == b200["caveat"]
        assert v["why"].startswith("B200: ")


def test_diff_hosts_help_describes_the_mapping_it_reads(capsys):
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "YAML list of hosts" not in out
    assert "a mapping `hosts:`" in out
