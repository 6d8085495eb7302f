"""On-disk cache of parsed files, keyed by the file's content hash and the tool and libcst versions.

An entry is the pickled libcst tree (and, once a run asked for line numbers, its line table), so a second run
over the same tree parses nothing. Entries are written to a temporary name and renamed into place, so two
runs sharing the cache never read a half-written entry; an unreadable entry is ignored and rewritten.
"""

from __future__ import annotations

import copy
import copyreg
import dataclasses
import hashlib
import keyword
import operator
import os
import pickle
import sys
import tempfile
from pathlib import Path

import libcst

from .. import __version__

def _libcst_version() -> str:
    try:  # libcst has no __version__: its distribution metadata has the version
        from importlib.metadata import version

        return version("libcst")
    except Exception:  # noqa: BLE001 - an unusual install: the tool version still keys the cache
        return getattr(libcst, "__version__", "unknown")


_LIBCST = _libcst_version()
_FORMAT = 4  # bump when the entry layout changes (2: {node: line} instead of {node: CodeRange}; 3: per chunk, lines
# relative to it; 4: whitespace and punctuation nodes of equal fields stored once per entry)


class ParseCache:
    def __init__(self, root: Path):
        self.base = root
        self.root = root / f"f{_FORMAT}-{__version__}-libcst{_LIBCST}-py{sys.version_info[0]}{sys.version_info[1]}"
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(source: bytes) -> str:
        return hashlib.sha256(source).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.pkl"

    def load(self, key: str):
        """(tree, {node: line} or None), or None on a miss."""
        try:
            with open(self._path(key), "rb") as f:
                tree, lines = pickle.load(f)
        except FileNotFoundError:
            self.misses += 1
            return None
        except Exception:  # a truncated or foreign entry: parse again and write it anew
            self.misses += 1
            try:
                os.unlink(self._path(key))
            except OSError:
                pass
            return None
        self.hits += 1
        return tree, lines

    def store(self, key: str, tree, lines=None, if_missing: bool = False) -> None:
        """Write an entry; with `if_missing`, not when one is there (another run or worker parsed it too)."""
        path = self._path(key)
        if if_missing and path.exists():
            return

        def dump(f):
            pickler = pickle.Pickler(f, protocol=pickle.HIGHEST_PROTOCOL)
            pickler.dispatch_table = _shared(_dispatch_table())
            pickler.dump((tree, dict(lines) if lines is not None else None))

        _write(path, dump)

    def load_side(self, kind: str, key: str):
        """A small derived value stored beside the trees (`kind`: what it is, e.g. a file's imports), or None.
        Not counted as a parse-cache hit or miss."""
        try:
            with open(self.root / kind / key[:2] / f"{key}.pkl", "rb") as f:
                return pickle.load(f)
        except Exception:  # missing, truncated or foreign: computed again
            return None

    def store_side(self, kind: str, key: str, value) -> None:
        """Write a derived value (`load_side`), renamed into place."""
        _write(self.root / kind / key[:2] / f"{key}.pkl", lambda f: pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL))


def _write(path: Path, dump) -> None:
    """`dump(file)` into a temporary file renamed to `path`: a reader never sees half an entry."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            dump(f)
        os.replace(tmp, path)
    except Exception:  # a cache that cannot be written only costs time
        try:
            os.unlink(tmp)  # type: ignore[possibly-undefined]
        except (OSError, NameError):
            pass


_TABLE: dict = {}


def _dispatch_table() -> dict:
    """Reducers for libcst's node classes that read the fields into the state dict directly: the pickle is the
    same bytes as libcst's own __getstate__ gives (field name -> value), in under half the time, which is
    most of the cost of filling the cache. Each class's reducer is one function made for its fields (a dict
    display of `node.<field>` reads: no attrgetter tuple, zip or dict() call per node)."""
    if not _TABLE:
        new = copyreg.__newobj__  # type: ignore[attr-defined]
        stack = [libcst.CSTNode]
        while stack:
            cls = stack.pop()
            stack.extend(cls.__subclasses__())
            names = tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else ()
            if not names or not all(n.isidentifier() and not keyword.iskeyword(n) for n in names):
                continue
            state = ", ".join(f"{n!r}: node.{n}" for n in names)
            scope = {"new": new, "args": (cls,)}
            exec(f"def reduce(node):\n    return new, args, {{{state}}}\n", scope)  # noqa: S102 - field names only
            _TABLE[cls] = scope["reduce"]
        _TABLE.update(copyreg.dispatch_table)
    return _TABLE


# Nodes that hold only whitespace and punctuation, never asked for by identity (no walk visits them: index/nodes.py
# _SKIP), which are most of a tree's objects (an empty SimpleWhitespace alone is about a third): an entry stores
# one of each set of field values, and each further one as a reference to it, so loading creates one object
# where it created hundreds (unpickling a node runs libcst's __setstate__ in Python: most of a load's cost).
_WS, _NL = libcst.SimpleWhitespace, libcst.Newline


def _plain(node) -> bool:
    return type(node) is _WS


def _shared_key(node):
    t = type(node)
    if t is _WS:
        return t, node.value
    if t is _NL:
        return t, node.value
    if t is libcst.TrailingWhitespace:
        return (t, node.whitespace.value, node.newline.value) if node.comment is None and _plain(node.whitespace) \
            and type(node.newline) is _NL else None
    if _plain(node.whitespace_before) and _plain(node.whitespace_after):  # Dot, Comma, AssignEqual, Colon
        return t, node.whitespace_before.value, node.whitespace_after.value
    return None


_SHARED_TYPES = (_WS, _NL, libcst.TrailingWhitespace, libcst.Dot, libcst.Comma, libcst.AssignEqual, libcst.Colon)


def _shared(table: dict) -> dict:
    """The dispatch table of one entry: the first node of each key (_shared_key) is stored as a copy, and every
    node of that key as `operator.getitem((copy,), 0)`, one C call at load, that argument tuple stored once."""
    seen: dict = {}

    def make(plain):
        def reduce(node):
            key = _shared_key(node)
            if key is None:
                return plain(node)
            found = seen.get(key)
            if found is None:
                first = copy.copy(node)
                found = seen[key] = (first, ((first,), 0))
            if node is found[0]:
                return plain(node)
            return operator.getitem, found[1]
        return reduce

    out = dict(table)
    for t in _SHARED_TYPES:
        out[t] = make(table[t])
    return out


def default_cache() -> ParseCache | None:
    if os.environ.get("FUSION_ANALYZE_NO_CACHE"):
        return None
    env = os.environ.get("FUSION_ANALYZE_PARSE_CACHE")
    if env:
        return ParseCache(Path(env).expanduser())
    from ..sources.fetch import cache_dir

    return ParseCache(cache_dir() / "parse")
