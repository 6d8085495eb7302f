"""Which architecture a batch worker takes next: one close to what that worker has read already, and far
from what the other workers have read.

Each worker keeps what it parsed and walked (trees, class tables, kernel memos) for the models after; two
workers that both analyze MoE models, or both hybrid ones, read and walk that machinery twice. So a model is
described by the modules its model file imports (read with a regular expression: this only orders the work,
it decides nothing of a report), and a worker takes the pending model that brings it the fewest modules
another worker has read already, then the one that shares most with the models it analyzed; ties go to the
first in order. Every worker still pulls
while work is pending, so the load stays balanced."""

from __future__ import annotations

import re

_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import|import[ \t]+([.\w]+))", re.M)


def features(session, architectures: list[str]) -> dict[str, frozenset[str]]:
    """architecture -> its model module and the modules that module imports (relative ones made absolute)."""
    module_of = {e.architecture: e.module for e in session.resolver.entries}
    out: dict[str, frozenset[str]] = {}
    read: dict[str, frozenset[str]] = {}
    for arch in architectures:
        module = module_of.get(arch)
        if module is None:
            continue
        if module not in read:
            read[module] = _imports(session.index, module)
        out[arch] = read[module]
    return out


def _imports(index, module: str) -> frozenset[str]:
    found = index.module_path(module)
    if found is None or not found[0].is_file():
        return frozenset({module})
    path, is_pkg = found
    try:
        text = path.read_bytes()
    except OSError:
        return frozenset({module})
    package = module if is_pkg else module.rpartition(".")[0]
    names = {module}
    for m in _IMPORT.finditer(text):
        name = (m.group(1) or m.group(2)).decode()
        if name.startswith("."):
            dots = len(name) - len(name.lstrip("."))
            base = package.rsplit(".", dots - 1)[0] if dots > 1 else package
            name = f"{base}.{name[dots:]}".rstrip(".")
        names.add(name)
    return frozenset(names)


class Affinity:
    """The modules each worker has read (through the models it analyzed since the workers started)."""

    def __init__(self, feats: dict[str, frozenset[str]]):
        self.feats = feats
        self.seen: dict[int, set[str]] = {}

    def take(self, pending: list[str], worker: int) -> str:
        """Remove and return the next architecture for `worker` (see the module's docstring)."""
        mine = self.seen.setdefault(worker, set())
        theirs = set().union(*(s for w, s in self.seen.items() if w != worker))
        best, best_score = 0, None
        for i, arch in enumerate(pending):
            f = self.feats.get(arch, frozenset())
            new = f - mine
            score = (-len(new & theirs), len(f) - len(new))  # read again by this worker; shared with its own
            if best_score is None or score > best_score:
                best, best_score = i, score
        arch = pending.pop(best)
        mine |= self.feats.get(arch, frozenset())
        return arch

    def forget(self, worker: int) -> None:
        """A worker replaced (it died or timed out): its successor has read nothing."""
        self.seen.pop(worker, None)
