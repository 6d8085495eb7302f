"""Finished reports of `all`, cached per architecture, so a warm batch over unchanged trees analyzes nothing.

An entry is keyed by everything a report depends on: the tool version, the content of every `.py` file of
both trees (one fingerprint, hashed once per run), the pattern files, the --config file, the options and the
architecture, and the tool's own code and data (so a development checkout never serves a report an older
state of the code wrote). Any edit anywhere in the trees changes the fingerprint, so a stale report is never served; the
parse cache still makes the recomputation after such an edit cheap. Entries are written to a temporary name
and renamed into place, so concurrent runs never read a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .. import __version__

_FORMAT = 1


def tree_fingerprint(roots: list[tuple[str, Path]], suffixes: tuple[str, ...] = (".py",)) -> str:
    """sha256 over (package, relative path, content) of every .py file under each package directory."""
    h = hashlib.sha256()
    for package, package_dir in roots:
        files = []
        for dirpath, dirnames, filenames in os.walk(package_dir):
            dirnames.sort()
            files += [os.path.join(dirpath, f) for f in filenames if f.endswith(suffixes)]
        for path in sorted(files):
            rel = os.path.relpath(path, package_dir).replace(os.sep, "/")
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as exc:  # unreadable: its error is part of what the report says
                data = f"<unreadable {exc.__class__.__name__}>".encode()
            h.update(f"{package}/{rel}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


def files_fingerprint(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p).encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"<missing>")
    return h.hexdigest()


class ReportCache:
    def __init__(self, root: Path, inputs: dict):
        self.root = root / f"r{_FORMAT}-{__version__}"
        self.inputs = json.dumps(inputs, sort_keys=True)
        self.hits = 0

    def _path(self, architecture: str) -> Path:
        key = hashlib.sha256(f"{self.inputs}\0{architecture}".encode()).hexdigest()
        return self.root / key[:2] / f"{key}.json"

    def load(self, architecture: str) -> dict | None:
        """{"md": text, "json": text, "row": index row} or None."""
        try:
            with open(self._path(architecture), encoding="utf-8") as f:
                entry = json.load(f)
        except (OSError, ValueError):
            return None
        if entry.get("inputs") != self.inputs or entry.get("architecture") != architecture:
            return None  # a hash collision or a foreign file: recompute
        self.hits += 1
        return entry

    def store(self, architecture: str, md: str, js: str, row: dict) -> None:
        path = self._path(architecture)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"inputs": self.inputs, "architecture": architecture, "md": md, "json": js, "row": row}, f)
            os.replace(tmp, path)
        except OSError:  # a cache that cannot be written only costs time
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
