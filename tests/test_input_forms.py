"""Inputs checked by JSON Schema through the matrix's machinery (matrix/forms.py): the
certificate's form is a schema whose nodes word their own sentence, and a YAML input's
problems carry their file:line."""
from certificates import made

from envgen.certs.certificate import CERTIFICATE, form_problem
from envgen.matrix import forms
from envgen.matrix.yamlfile import load_text


def test_the_certificate_form_is_a_schema_and_every_door_words_it_the_same():
    assert form_problem(made()) is None
    assert forms.problems(made(), CERTIFICATE) == []
    bad = {**made(), "host": {"gpus": [{"name": "H200\x1b[2J"}]}}
    assert form_problem(bad).startswith("host.gpus names a GPU")
    assert [m for _, m in forms.problems(bad, CERTIFICATE)] == [form_problem(bad)]
    trailing = {**made(), "image_id": "sha256:" + "a" * 64 + "\n"}   # `$` would pass it
    assert "is not sha256" in form_problem(trailing)


def test_a_yaml_input_problem_names_its_line():
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"hosts": {"type": "array", "items": {
                  "type": "object", "properties": {"driver": {
                      "type": "string", "message": "driver {value} is not a version"}}}}}}
    doc = load_text("hosts:\n  - driver: '535'\n  - driver: 535.1\nother: 1\n", "h.yaml")
    assert forms.problems(doc, schema) == [(3, "driver 535.1 is not a version (quote it: YAML "
                                               "reads 535.1 as a number)"),
                                           (4, "unknown key 'other' (known: hosts)")]


def test_the_two_fleet_files_have_two_names_and_each_door_names_the_other(capsys):
    from envgen.cli import main
    assert main(["diff", "--hosts", "examples/certify-fleet.yaml"]) == 2
    assert "this is a fleet spec" in capsys.readouterr().err
    assert main(["fleet", "examples/fleet.yaml", "--slurm", "-o", "/nonexistent/x"]) == 2
    assert "this is a hosts file" in capsys.readouterr().err
    assert main(["diff", "--fleet", "examples/fleet.yaml", "--json"]) == 0   # older name
    assert main(["diff", "--hosts", "examples/fleet.yaml", "--json"]) == 0


def test_a_hosts_file_is_checked_by_its_schema_with_every_problem_at_its_line(tmp_path,
                                                                               capsys):
    from envgen.cli import main
    f = tmp_path / "hosts.yaml"
    f.write_text("hosts:\n  - name: a\n    driver: 535.104\n    gpus: [H100, Foo]\n"
                 "    rack: 2\n")
    assert main(["diff", "--hosts", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:3: driver 535.104 is not a version like 535.104.05 (quote it" in err
    assert f"{f}:4: host 'a': 'Foo' is not a GPU" in err and f"{f}:5: unknown key 'rack'" in err
