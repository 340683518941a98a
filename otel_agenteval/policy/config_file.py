"""A configuration file read for a person: every problem one ``path: message (line N)`` line.

The policy and the cases file share this: YAML read with its node tree (so an error can name the
line of its path), pydantic's errors turned into short lines, and :class:`ConfigError` to carry them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

_TOO_DEEP = "(top level): nested too deeply to read (a configuration file is a few levels deep)"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it: ~20x faster


class ConfigError(ValueError):
    """A configuration file that cannot be loaded; ``errors`` holds one ``path: message`` line each."""

    what = "invalid configuration"
    max_bytes = 256 << 10  # a policy is a few kilobytes; past this it is the wrong file (and slow to read)

    def __init__(self, source: str, errors: list[str]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: {self.what}\n" + "\n".join(f"  {e}" for e in errors))


def read_text(path: str | Path, error: type[ConfigError]) -> tuple[str, str]:
    """The file's text and its name for error lines; a file that cannot be read raises ``error``."""
    p = Path(path)
    try:
        with p.open("rb") as f:  # at most one byte past the bound (a huge file, or /dev/zero, is not read)
            raw = f.read(error.max_bytes + 1)
        _bounded(len(raw), str(p), error)
        return raw.decode("utf-8"), str(p)
    except OSError as exc:
        raise error(str(p), [f"cannot read: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:  # a binary file, or another encoding
        raise error(str(p), [f"not a text file (byte {exc.start} is not UTF-8): is this the right file?"]) from None


def load_yaml(text: str, source: str, error: type[ConfigError]) -> tuple[Any, Any]:
    """YAML data and its node tree (to name lines in errors); bad YAML names line and column."""
    _bounded(len(text), source, error)
    loader = LOADER(text)  # composed once; the data built from that node tree
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    except RecursionError:
        raise error(source, [_TOO_DEEP]) from None
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "")):  # libyaml's own bound on nesting
            raise error(source, [_TOO_DEEP]) from None
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise error(source, [f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}"]) from None
    finally:
        loader.dispose()


def _bounded(size: int, source: str, error: type[ConfigError]) -> None:
    if size > error.max_bytes:
        raise error(source, [f"(top level): larger than {error.max_bytes >> 10} KiB, the most a file of this kind may "
                             "be: is this the right file?"])


def with_lines(exc: ConfigError, node: Any) -> ConfigError:
    """The same errors, each with the line of its path in the file."""
    return type(exc)(exc.source, [_with_line(e, node) for e in exc.errors])


def _with_line(error: str, node: Any) -> str:
    """``path: message`` with `` (line N)`` added, found by walking the YAML node tree."""
    path, sep, msg = error.partition(": ")
    line = None
    for part in path.split("."):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if str(key.value) == part:
                    line, node = key.start_mark.line + 1, value
                    break
            else:
                break
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
            line = node.start_mark.line + 1
        else:
            break
    return f"{path}{sep}{msg} (line {line})" if line is not None and sep else error


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))  # 31622400, not 3.16224e+07
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def error_lines(exc: ValidationError) -> list[str]:
    """pydantic's errors as ``path: message`` lines, in words a person fixing the file can act on."""
    lines = []
    for err in exc.errors():
        path = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling)"
        elif err["type"] == "greater_than":
            msg = f"must be > {_num(err['ctx']['gt'])}"
        elif err["type"] == "greater_than_equal":
            msg = f"must be >= {_num(err['ctx']['ge'])}"
        elif err["type"] == "less_than_equal":
            msg = f"must be <= {_num(err['ctx']['le'])}"
        lines.append(f"{path}: {msg}")
    return lines
