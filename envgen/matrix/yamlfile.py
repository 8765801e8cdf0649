"""Line-aware, hostile-input-safe YAML loading: the only place raw matrix text is parsed."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..core.errors import MatrixError

MAX_BYTES = 4 * 1024 * 1024


class LDict(dict):
    """A mapping that remembers the line of itself and of each key (1-based)."""

    line = 0
    lines: dict


class LList(list):
    line = 0
    lines: list


class _Located(Exception):
    def __init__(self, message, mark):
        super().__init__(message)
        self.message = message
        self.mark = mark


@lru_cache(maxsize=None)
def _loader():
    """The loader class, made on first use: a command that reads no YAML (a cached matrix)
    does not import PyYAML. libyaml's C parser reads the text where PyYAML has it (the
    scanner and parser were four fifths of validating the matrix without its cache); the
    nodes are composed and constructed in Python, so every check below sees each event
    and node with its line, whichever parser made them."""
    import yaml
    from yaml.composer import Composer
    from yaml.constructor import SafeConstructor
    from yaml.resolver import Resolver

    if yaml.__with_libyaml__:
        from yaml.cyaml import CParser as parser
    else:   # PyYAML built without libyaml
        from yaml.parser import Parser
        from yaml.reader import Reader
        from yaml.scanner import Scanner

        class parser(Reader, Scanner, Parser):   # noqa: N801 - as CParser is used below
            def __init__(self, stream):
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)

    class _Loader(Composer, parser, SafeConstructor, Resolver):
        """A safe loader (Composer before the parser: its compose_node, not the C one)
        that refuses aliases/anchors and duplicate keys, and records lines."""

        def __init__(self, stream):
            parser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise _Located("YAML aliases are not allowed (write the value "
                               "out)", event.start_mark)
            event = self.peek_event()
            if getattr(event, "anchor", None):
                raise _Located("YAML anchors are not allowed (write the value "
                               "out)", event.start_mark)
            return super().compose_node(parent, index)

        def construct_object(self, node, deep=False):
            try:
                return super().construct_object(node, deep)
            except (ValueError, OverflowError, TypeError, AttributeError, KeyError) as e:
                # a scalar its tag cannot hold: `!!int abc`, a date like 2001-13-45 (and
                # `!!timestamp x`, which PyYAML's constructor fails on with AttributeError)
                tag = str(node.tag).rsplit(":", 1)[-1]
                value = node.value if isinstance(node.value, str) else "..."
                why = f" ({e})" if isinstance(e, ValueError) else ""
                raise _Located(f"{value[:40]!r} is not a valid {tag}{why}",
                               node.start_mark) from None

        def construct_mapping(self, node, deep=False):
            if not isinstance(node, yaml.MappingNode):
                raise _Located("expected a mapping", node.start_mark)
            out = LDict()
            out.line = node.start_mark.line + 1
            out.lines = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise _Located("YAML merge keys (<<) are not allowed",
                                   key_node.start_mark)
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise _Located(f"keys must be strings, not {key!r}", key_node.start_mark)
                if key in out:
                    raise _Located(f"duplicate key '{key}' (first on line {out.lines[key]})",
                                   key_node.start_mark)
                out[key] = self.construct_object(value_node, deep=True)
                out.lines[key] = key_node.start_mark.line + 1
            return out

        def construct_sequence(self, node, deep=False):
            out = LList(self.construct_object(child, deep=True) for child in node.value)
            out.line = node.start_mark.line + 1
            out.lines = [child.start_mark.line + 1 for child in node.value]
            return out

        def construct_yaml_int(self, node):
            # Python refuses to convert more than 4,300 digits, with a ValueError and no line.
            if len(str(node.value)) > 64:
                raise _Located("a number longer than 64 characters", node.start_mark)
            return super().construct_yaml_int(node)

    _Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
    _Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_mapping)
    _Loader.add_constructor("tag:yaml.org,2002:seq", _Loader.construct_sequence)
    return _Loader


def load_text(text: str, name: str):
    """Parse YAML text into LDict/LList/scalars; any problem is a MatrixError at file:line."""
    import yaml
    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - _Loader is a SafeLoader
    except _Located as e:
        raise MatrixError(message=e.message, file=name, line=e.mark.line + 1) from None
    except yaml.reader.ReaderError as e:
        # libyaml counts bytes of the UTF-8 text and gives the character as its code
        data = text.encode() if yaml.__with_libyaml__ else text
        nl = b"\n" if yaml.__with_libyaml__ else "\n"
        line = data[: e.position].count(nl) + 1 if isinstance(e.position, int) else None
        char = chr(e.character) if isinstance(e.character, int) else e.character
        raise MatrixError(message=f"invalid character {char!r} (control characters "
                                  f"are not allowed)", file=name, line=line) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        what = e.problem or e.context or "invalid YAML"
        if "maximum nesting depth" in what:   # libyaml's own limit, before Python's
            what = "nested too deeply"
        raise MatrixError(message=f"invalid YAML: {what}", file=name,
                          line=(mark.line + 1) if mark else None) from None
    except yaml.YAMLError as e:
        raise MatrixError(message=f"invalid YAML: {e}", file=name) from None
    except RecursionError:
        raise MatrixError(message="invalid YAML: nested too deeply", file=name) from None


def read_text(path: Path, name: str | None = None) -> str:
    """Read a file as strict UTF-8, naming the line of the first bad byte."""
    name = name or str(path)
    from ..core.errors import InputError
    from ..core.files import read_regular
    try:
        data = read_regular(path, MAX_BYTES)
    except OSError as e:
        raise MatrixError(message=f"cannot read: {e.strerror}", file=name) from None
    except InputError as e:
        raise MatrixError(message=e.message, file=name) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise MatrixError(message=f"not UTF-8 (byte 0x{data[e.start]:02x})",
                          file=name, line=line) from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise MatrixError(message="contains a NUL character", file=name, line=line)
    return text


def load_file(path: Path, name: str | None = None):
    name = name or str(path)
    return load_text(read_text(path, name), name)
