"""Declared shapes of YAML data: frozen dataclasses read with `file:line: what is wrong` errors.

A dataclass field's annotation is the shape of its YAML value:

  str, int, bool          that scalar (a bool is not an int)
  float                   a number (an int is one too, and is kept as written)
  Regex                   a string that compiles as a regular expression
  Literal["a", "b"]       one of these values
  tuple[X, ...]           a list of X
  Mapping[str, X]         a mapping of X (`keys_of(...)` lists the keys allowed: backends)
  X | None                X, or null; such a field has a default, so the key may be left out
  A | B                   a scalar and a container (str | Mapping[...]) are told apart by the value, dataclasses
                          by their Literal fields (`rewrite: glu`)
  Any                     any YAML value, kept as read (plain dicts and lists)
  another dataclass       a mapping of that dataclass's keys

A field without a default is a required key; `key("class")` reads a YAML key that is not a Python name. A key the
dataclass does not declare is an error (a typo is not silently ignored). A dataclass may define `problems()`, for
what one value alone cannot say (a default that names no device): it yields (key, message) pairs, each reported
at that key's line. The line numbers come from resources.load_yaml_lines, the loader of the pattern files too.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, NewType, NoReturn, TypeVar, Union, get_args, get_origin, get_type_hints

from ..errors import UserError
from ..resources import load_yaml_lines, plain, yaml_error_line

Regex = NewType("Regex", str)

T = TypeVar("T")

_MAPPINGS = (Mapping, dict)


class CatalogError(UserError):
    """A data file that does not have its declared shape: `file:line: what is wrong`; the CLI exits 2."""


def key(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A field read from the YAML key `name` (`class`, which is not a Python name)."""
    return dataclasses.field(default=default, metadata={"key": name})


def keys_of(allowed: tuple[str, ...], required: bool = False) -> Any:
    """A mapping field whose keys are among `allowed` (the backends); empty when left out, unless required."""
    if required:
        return dataclasses.field(metadata={"keys": allowed})
    return dataclasses.field(default_factory=dict, metadata={"keys": allowed})


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str  # the attribute
    key: str  # the YAML key
    type: Any
    required: bool
    keys: tuple[str, ...]  # the keys its mapping may have; () for any


@lru_cache(maxsize=None)
def _fields(cls) -> tuple[_Field, ...]:
    hints = get_type_hints(cls)
    return tuple(_Field(f.name, f.metadata.get("key", f.name), hints[f.name],
                        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                        f.metadata.get("keys", ()))
                 for f in dataclasses.fields(cls))


def _is_union(tp) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _kind(tp) -> str:
    """What YAML value a shape takes: scalar, list or mapping."""
    origin = get_origin(tp)
    if origin is tuple:
        return "list"
    if origin in _MAPPINGS or dataclasses.is_dataclass(tp):
        return "mapping"
    return "scalar"


def _describe(tp) -> str:
    if tp is Any:
        return "anything"
    if tp is Regex:
        return "a regular expression (a string)"
    if _is_union(tp):
        return " or ".join(_describe(a) for a in get_args(tp) if a is not type(None))
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(tp))
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(
        tp, {"list": "a list", "mapping": "a mapping"}.get(_kind(tp), str(tp)))


class _Reader:
    def __init__(self, file: str):
        self.file = file

    def fail(self, line: int, message: str) -> NoReturn:
        raise CatalogError(f"{self.file}:{line}: {message}")

    def record(self, cls, raw, where: str, line: int):
        """A dataclass from a mapping: every key declared, every required key there, each value its shape. `line`
        is the line that names the mapping (its key, its list item), where a missing key is reported."""
        if not isinstance(raw, dict):
            keys = ", ".join(f.key for f in _fields(cls))
            self.fail(line, f"{where} must be a mapping of {keys}, not {_yaml_kind(raw)}")
        lines = getattr(raw, "key_lines", {})
        fields = _fields(cls)
        declared = {f.key for f in fields}
        for k in raw:
            if k not in declared:
                self.fail(lines.get(k, line), f"{where}: unknown key `{k}`; allowed: {', '.join(sorted(declared))}")
        values = {}
        for f in fields:
            if f.key not in raw:
                if f.required:
                    self.fail(line, f"{where}: missing key `{f.key}`")
                continue
            values[f.name] = self.value(f.type, raw[f.key], _join(where, f.key), lines.get(f.key, line), f.keys)
        out = cls(**values)
        for k, message in getattr(out, "problems", lambda: ())():
            self.fail(lines.get(k, line), f"{where}: {message}")
        return out

    def value(self, tp, v, where: str, line: int, keys: tuple[str, ...] = ()):
        origin = get_origin(tp)
        if tp is Any:
            return plain(v)
        if _is_union(tp):
            return self.union(tp, v, where, line, keys)
        if origin is Literal:
            if v not in get_args(tp):
                self.fail(line, f"{where} must be {_describe(tp)}, not {_yaml_kind(v)}")
            return v
        if origin is tuple:
            if not isinstance(v, list):
                self.fail(line, f"{where} must be a list, not {_yaml_kind(v)}")
            item = get_args(tp)[0]
            return tuple(self.value(item, x, f"{where}[{i}]", getattr(x, "line", line)) for i, x in enumerate(v))
        if origin in _MAPPINGS:
            if not isinstance(v, dict):
                self.fail(line, f"{where} must be a mapping, not {_yaml_kind(v)}")
            vtype = get_args(tp)[1]
            lines = getattr(v, "key_lines", {})
            out = {}
            for k, x in v.items():
                at = lines.get(k, line)
                if keys and k not in keys:
                    self.fail(at, f"{where}: unknown key `{k}`; allowed: {', '.join(keys)}")
                if not isinstance(k, str):
                    self.fail(at, f"{where}: key `{k}` must be a string")
                out[k] = self.value(vtype, x, _join(where, str(k)), at)
            return out
        if dataclasses.is_dataclass(tp):
            return self.record(tp, v, where, line)
        if tp is Regex:
            if not isinstance(v, str):
                self.fail(line, f"{where} must be {_describe(tp)}, not {_yaml_kind(v)}")
            try:
                re.compile(v)
            except re.error as exc:
                self.fail(line, f"{where} is not a valid regular expression: {exc}")
            return v
        if tp is bool:
            ok = isinstance(v, bool)
        elif tp is int:
            ok = isinstance(v, int) and not isinstance(v, bool)
        elif tp is float:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        else:
            ok = isinstance(v, tp)
        if not ok:
            self.fail(line, f"{where} must be {_describe(tp)}, not {_yaml_kind(v)}")
        return v

    def union(self, tp, v, where: str, line: int, keys: tuple[str, ...] = ()):
        options = [a for a in get_args(tp) if a is not type(None)]
        if v is None and len(options) < len(get_args(tp)):
            return None
        kind = "list" if isinstance(v, list) else "mapping" if isinstance(v, dict) else "scalar"
        fits = [a for a in options if _kind(a) == kind]
        if len(fits) > 1 and all(dataclasses.is_dataclass(a) for a in fits):
            return self.record(self.tagged(fits, v, where, line), v, where, line)
        if len(fits) > 1:  # scalars: the first that takes the value
            fits = [a for a in fits if _takes(a, v)] or fits
        if not fits:
            self.fail(line, f"{where} must be {_describe(tp)}, not {_yaml_kind(v)}")
        return self.value(fits[0], v, where, line, keys)

    def tagged(self, classes: list, raw, where: str, line: int):
        """The dataclass whose Literal fields the mapping's values are (`rewrite: glu` -> the GLU fuser)."""
        tags = [f for f in _fields(classes[0]) if get_origin(f.type) is Literal]
        for cls in classes:
            if all(raw.get(f.key) in get_args(f.type) for f in _fields(cls) if get_origin(f.type) is Literal):
                return cls
        lines = getattr(raw, "key_lines", {})
        for tag in tags:
            allowed = [x for c in classes for f in _fields(c) if f.key == tag.key for x in get_args(f.type)]
            if tag.key not in raw:
                self.fail(line, f"{where}: missing key `{tag.key}` (one of {', '.join(allowed)})")
            self.fail(lines.get(tag.key, line),
                      f"{where}.{tag.key} must be one of {', '.join(allowed)}, not {_yaml_kind(raw[tag.key])}")
        self.fail(line, f"{where} is none of {', '.join(c.__name__ for c in classes)}")


def _takes(tp, v) -> bool:
    if tp in (int, float):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return not isinstance(tp, type) or isinstance(v, tp)


def _join(where: str, k: str) -> str:
    return k if where == "top level" else f"{where}.{k}"


def _yaml_kind(v) -> str:
    """The value as the YAML file has it: `a mapping`, `a list`, `true`, `null`, `'text'`, `3`."""
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, bool) or v is None:
        return {True: "true", False: "false", None: "null"}[v]
    return repr(v)


def read(cls: type[T], path: Path, label: str) -> tuple[T, Any]:
    """(the file as `cls`, the file as yaml.safe_load reads it) of the YAML file at `path`, named `label` in errors;
    CatalogError for a file that is unreadable, not YAML or not of the declared shape."""
    import yaml

    try:
        raw = load_yaml_lines(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as exc:
        raise CatalogError(f"{label}:{yaml_error_line(exc)}: not valid YAML: {exc.problem or exc}")
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CatalogError(f"{label}: cannot read it: {exc}")
    return _Reader(label).record(cls, {} if raw is None else raw, "top level", getattr(raw, "line", 1)), plain(raw) or {}
