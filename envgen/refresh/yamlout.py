"""The YAML form of generated matrix files: one fact per line where a reviewer reads a diff,
versions always quoted (so 3.10 never becomes 3.1), no anchors."""
from __future__ import annotations

import json

import yaml


class Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def _needs_quote(s: str) -> bool:
    return s[:1].isdigit() or s[:1] in "=<>!~*" or s in ("null", "true", "false", "")


def _str(d, s):
    return d.represent_scalar("tag:yaml.org,2002:str", s, style='"' if _needs_quote(s) else None)


def _list(d, data):
    flow = all(isinstance(x, (str, int, float)) or x is None for x in data)
    return d.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _dict(d, data):
    flow = bool(data) and all(isinstance(x, (str, int, float)) or x is None
                              for x in data.values()) \
        and not {"name", "framework", "version", "branch"} & set(data)
    return d.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow or not data)


Dumper.add_representer(str, _str)
Dumper.add_representer(list, _list)
Dumper.add_representer(dict, _dict)


def dump(header: str, doc: dict) -> str:
    """`doc`'s sections in order under `header`; refused if the text does not load back to
    the same data."""
    parts = [header]
    for section, items in doc.items():
        parts.append("\n")
        parts.append(yaml.dump({section: items}, Dumper=Dumper, sort_keys=False, width=200,
                               allow_unicode=True))
    text = "".join(parts)
    if yaml.safe_load(text) != json.loads(json.dumps(doc)):
        raise ValueError("the YAML round trip changed the data")
    return text
