"""What a walk produces, as data: ops with their kernels, role locations, the whole result.

`match/`, `status/` and `render/` read these and nothing else of `walk/`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Kernel:
    name: str
    file: str
    line: int
    condition: str | None = None
    # the runtime paths it can run on (walk/kernels/runtime_paths.py): (path, what is left of its condition there or None, how
    # many of those tests must hold); () when it runs on none of them; None when the op's paths were not read
    paths: tuple[tuple[str, str | None, int], ...] | None = None
    # the condition as code, for deciding it on a path; not part of what the kernel is
    cond: object = field(default=None, compare=False, repr=False)
    # a call site reached on several paths whose conditions do not merge: each path's condition (`cond` is
    # then the tests they share, and `condition` reads "shared and (a or b)")
    alts: tuple = field(default=(), compare=False, repr=False)

    def to_json(self) -> dict:
        d = {"name": self.name, "file": self.file, "line": self.line, "condition": self.condition}
        if self.paths is not None:
            d["paths"] = {name: rest for name, rest, _positive in self.paths}
        return d


@dataclass
class Op:
    id: str
    kind: str
    name: str
    layer_class: str | None
    file: str
    line: int
    scope: str
    path: str
    section: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    condition: str | None = None
    steady: bool = True
    kernels: list[Kernel] = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    # the undecided tests it stands under, innermost first: (test number, 0 for the `if` side, 1 for `else`,
    # 2 for an other layer class's op that is not steady there either); status/derive.py matches each test's
    # `else` side in place of its `if` side (not in the report)
    branches: list = field(default_factory=list, compare=False, repr=False)

    def to_json(self) -> dict:
        return {
            "id": self.id, "kind": self.kind, "name": self.name, "layer_class": self.layer_class,
            "file": self.file, "line": self.line, "scope": self.scope, "path": self.path,
            "section": self.section, "inputs": list(self.inputs), "outputs": list(self.outputs),
            "condition": self.condition, "steady": self.steady,
            "kernels": [k.to_json() for k in self.kernels], "attrs": dict(sorted(self.attrs.items())),
        }


@dataclass
class RoleLocation:
    cls: str
    file: str
    line: int
    forward_file: str | None
    forward_line: int | None
    patched_by: str | None = None

    def to_json(self) -> dict:
        d = {"class": self.cls, "file": self.file, "line": self.line,
             "forward_file": self.forward_file, "forward_line": self.forward_line}
        if self.patched_by:
            d["patched_by"] = self.patched_by
        return d


@dataclass
class WalkResult:
    ops: list[Op]
    locations: dict[str, RoleLocation]
    repeat: str | None
    unknowns: list[dict]
    alternatives: list[dict]
    load_time: dict | None = None  # the Transformers backend's load-time rewrites the walk applied (hf_fusers.py)
