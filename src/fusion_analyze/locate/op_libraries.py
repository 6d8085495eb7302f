"""Which `torch.ops.<namespace>` libraries the backend's install loads, read from the trees.

vLLM's compiled op libraries (`torch.ops._C`, `torch.ops._moe_C`, ...) exist only where vLLM's own build compiled
its extensions. vllm-ascend's images install vLLM with the target device its Dockerfile sets
(`VLLM_TARGET_DEVICE="empty"`, vllm-ascend Dockerfile:91 in 0.30.0rc2), and vLLM's setup.py builds no extension
for that device (`if _no_device(): ext_modules = []`, setup.py:1476-1477 in 0.30.0). A namespace only vLLM's
C++ sources register (csrc: `TORCH_LIBRARY*(...)`, `STABLE_TORCH_LIBRARY*(...)`), that neither vllm-ascend's C++
sources (`TORCH_LIBRARY_EXPAND(CONCAT(_C, _ascend), ops)`: `_C_ascend`) nor Python code of either tree defines
(`Library("ns", "DEF")`, `torch.library.define("ns::...")`, `custom_op("ns::...")`), does not exist there: a call
of one of its ops fails (`torch.ops._C.rms_norm` raises AttributeError).

Read once per session (OP_LIBRARIES). Where a fact is missing (no Dockerfile in the backend's tree, a setup.py
this reader cannot follow), nothing is said: a kernel is never called absent on a guess.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ..index.facts import FactTable
from ..ir.conditions import Truth

OP_LIBRARIES = FactTable("op_libraries", "None -> OpLibraries: the op namespaces of vLLM's compiled build the backend's "
                                         "install lacks, with the lines that say so")

# `TORCH_LIBRARY(ns, m)`, `TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)`, `STABLE_TORCH_LIBRARY_FRAGMENT(_C, m)`:
# the macros that define a namespace's ops (`..._IMPL` ones only implement ops defined elsewhere)
_LIBRARY_RE = re.compile(r"\b(?:STABLE_)?TORCH_LIBRARY(?:_FRAGMENT)?(?:_EXPAND)?\(\s*((?:CONCAT\([^()]*\))|[A-Za-z_]\w*)\s*,")
_TARGET_RE = re.compile(r"""\bVLLM_TARGET_DEVICE=["']?([\w-]+)["']?""")
_SOURCES = frozenset({".cpp", ".cu", ".cc", ".h", ".cuh", ".hpp"})


@dataclass(frozen=True)
class Missing:
    """A namespace of vLLM's compiled build that the backend's install does not have."""

    namespace: str
    target: str  # the VLLM_TARGET_DEVICE vLLM is installed with
    installed_at: str  # file:line of that setting (vllm-ascend's Dockerfile)
    cleared_at: str  # file:line of vLLM's setup.py where no extension is left for that device


class OpLibraries:
    """The namespaces of vLLM's compiled build that the backend's install lacks (`missing`), read on the first
    question: most analyses never ask about one."""

    def __init__(self, index):
        self.index = index
        self._base: tuple | None = None  # (Missing of a namespace without its name, ours, theirs) or ()
        self._asked: dict[str, Missing | None] = {}

    def missing(self, kernel: str | None) -> Missing | None:
        """The `torch.ops.<ns>.<op>` kernel's namespace, where the install lacks it; else None."""
        if not kernel or not kernel.startswith("torch.ops."):
            return None
        parts = kernel.split(".")
        if len(parts) < 4:
            return None
        ns = parts[2]
        if ns not in self._asked:
            self._asked[ns] = self._missing(ns)
        return self._asked[ns]

    def _missing(self, ns: str) -> Missing | None:
        if self._base is None:
            self._base = _read(self.index)
        if not self._base:
            return None
        how, ours, theirs = self._base
        if ns not in ours or ns in theirs or ns in _python_defined(self._package_dirs(), [ns]):
            return None
        return Missing(ns, *how)

    def _package_dirs(self) -> list[Path]:
        return [t.package_dir for _p, t in sorted(self.index.trees.items()) if t.package in ("vllm", "vllm_ascend")]


def op_libraries(index) -> OpLibraries:
    """The session's answer for the backend walked (only a backend whose tree installs vLLM without its build
    has one: vllm-ascend's)."""
    return OP_LIBRARIES.get(index, None, lambda: OpLibraries(index))


def _read(index) -> tuple:
    """((target, installed_at, cleared_at), vLLM's C++ namespaces, vllm-ascend's), or () where not known."""
    vllm, ascend = index.trees.get("vllm"), index.trees.get("vllm_ascend")
    if index.backend != "ascend" or vllm is None or ascend is None:
        return ()
    install = _install_target(ascend.root)
    if install is None:
        return ()
    target, installed_at = install
    setup = _Setup.read(vllm.root / "setup.py", target)
    if setup is None or setup.cleared_at is None or setup.may_build():
        return ()
    cleared = f"{vllm.rel(vllm.root / 'setup.py')}:{setup.cleared_at}"
    return ((target, installed_at, cleared), _registered(vllm.root / "csrc", setup.extension_names),
            _registered(ascend.root / "csrc", ()))


def _install_target(root: Path) -> tuple[str, str] | None:
    """(the VLLM_TARGET_DEVICE the backend's image installs vLLM with, Dockerfile:line): the main Dockerfile's
    `VLLM_TARGET_DEVICE=... pip install ... vllm` line; None where the tree has none."""
    path = root / "Dockerfile"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for n, line in enumerate(lines, start=1):
        m = _TARGET_RE.search(line)
        if m and "pip install" in line and "vllm" in line[m.end():]:
            return m.group(1), f"Dockerfile:{n}"
    return None


def _registered(csrc: Path, extension_names) -> set[str]:
    """The namespaces the C++ sources under `csrc` define: a literal name, `TORCH_EXTENSION_NAME` (each extension
    setup.py builds: the CMake target's name) and `CONCAT(a, b)` of those."""
    out: set[str] = set()
    if not csrc.is_dir():
        return out
    for path in sorted(csrc.rglob("*")):
        if path.suffix not in _SOURCES:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if b"TORCH_LIBRARY" not in data:
            continue
        for m in _LIBRARY_RE.finditer(data.decode("utf-8", "replace")):
            out |= _names(m.group(1), extension_names)
    return out


def _names(arg: str, extension_names) -> set[str]:
    arg = arg.strip()
    if arg.startswith("CONCAT("):
        parts = [p.strip() for p in arg[len("CONCAT("):-1].split(",")]
        if len(parts) != 2:
            return set()
        return {a + b for a in _names(parts[0], extension_names) for b in _names(parts[1], extension_names)}
    if arg == "TORCH_EXTENSION_NAME":
        return set(extension_names)
    if arg in ("NAME", "MODULE") or not re.fullmatch(r"[A-Za-z_]\w*", arg):
        return set()  # a macro's own parameter (`#define TORCH_LIBRARY_EXPAND(NAME, MODULE) ...`)
    return {arg}


def _python_defined(package_dirs: list[Path], namespaces: list[str]) -> set[str]:
    """Of `namespaces`, those Python code of the trees defines ops in."""
    if not namespaces:
        return set()
    wanted = {ns: re.compile(r"""(?:Library\(\s*["']%s["']\s*,\s*["'](?:DEF|FRAGMENT)["']"""
                             r"""|(?:define|custom_op)\(\s*["']%s::)""" % (re.escape(ns), re.escape(ns)))
              for ns in namespaces}
    probes = {ns: ns.encode() for ns in namespaces}
    found: set[str] = set()
    for folder in package_dirs:
        for path in sorted(folder.rglob("*.py")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if b"Library(" not in data and b"define(" not in data and b"custom_op(" not in data:
                continue
            text = None
            for ns, rx in wanted.items():
                if ns in found or probes[ns] not in data:
                    continue
                text = text if text is not None else data.decode("utf-8", "replace")
                if rx.search(text):
                    found.add(ns)
    return found


class _Setup:
    """vLLM's setup.py read for one target device: which extension modules (`CMakeExtension(name="vllm._C")`)
    its module-level statements may leave in `ext_modules`. The device is the one the install sets, so the
    auto-detection that runs only where the variable is unset does not change it; an image built from a
    Dockerfile runs Linux. Anything else a test reads stays unknown."""

    def __init__(self, target: str, functions: dict):
        self.target = target
        self.functions = functions  # name -> the expression its one `return` gives
        self.device: str | None = target
        self.built: dict[str, Truth] = {}  # extension name (its last part) -> whether it is built
        self.cleared_at: int | None = None  # the line of an `ext_modules = []` that surely runs last

    @classmethod
    def read(cls, path: Path, target: str) -> "_Setup | None":
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            return None
        functions = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
                    functions[node.name] = body[0].value
        setup = cls(target, functions)
        setup.block(tree.body, Truth.TRUE)
        return setup

    @property
    def extension_names(self) -> tuple[str, ...]:
        return tuple(sorted(k for k in self.built if k != "?"))

    def may_build(self) -> bool:
        return any(t is not Truth.FALSE for t in self.built.values())

    def block(self, stmts, cond: Truth) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                test = self.truth(stmt.test)
                self.block(stmt.body, cond.and_(test))
                self.block(stmt.orelse, cond.and_(test.negate()))
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.assign(stmt.targets[0].id, stmt.value, cond, stmt.lineno)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _appends(stmt.value):
                self.append(stmt.value, cond)
            elif not isinstance(stmt, (ast.FunctionDef, ast.ClassDef)) and _changes_extensions(stmt):
                self.built["?"] = self.built.get("?", Truth.FALSE).or_(cond.and_(Truth.UNKNOWN))  # not followed

    def assign(self, name: str, value, cond: Truth, line: int) -> None:
        if name == "VLLM_TARGET_DEVICE":
            got = self.value(value)
            if cond is Truth.TRUE:
                self.device = got
            elif cond is Truth.UNKNOWN and got != self.device:
                self.device = None
        elif name == "ext_modules" and isinstance(value, ast.List) and not value.elts:
            if cond is Truth.TRUE:
                self.built = {k: Truth.FALSE for k in self.built}
                self.cleared_at = line
            elif cond is Truth.UNKNOWN:
                self.built = {k: v.and_(Truth.UNKNOWN) for k, v in self.built.items()}

    def append(self, call: ast.Call, cond: Truth) -> None:
        made = call.args[0] if len(call.args) == 1 else None
        name = None if not isinstance(made, ast.Call) else next((k.value.value for k in made.keywords if k.arg == "name"
                                                                 and isinstance(k.value, ast.Constant)
                                                                 and isinstance(k.value.value, str)), None)
        if name is None:
            self.built["?"] = self.built.get("?", Truth.FALSE).or_(cond)  # not read: may be anything
            return
        short = name.rsplit(".", 1)[-1]
        self.built[short] = self.built.get(short, Truth.FALSE).or_(cond)
        if cond is not Truth.FALSE:
            self.cleared_at = None if cond is Truth.TRUE else self.cleared_at

    def value(self, expr) -> str | None:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if isinstance(expr, ast.Name) and expr.id == "VLLM_TARGET_DEVICE":
            return self.device
        if isinstance(expr, ast.Attribute) and expr.attr == "VLLM_TARGET_DEVICE":  # envs.VLLM_TARGET_DEVICE
            return self.target
        if isinstance(expr, ast.Call) and _dotted(expr.func) in ("os.getenv", "os.environ.get") and expr.args \
                and isinstance(expr.args[0], ast.Constant) and expr.args[0].value == "VLLM_TARGET_DEVICE":
            return self.target
        return None

    def truth(self, expr, depth: int = 0) -> Truth:
        if depth > 20:
            return Truth.UNKNOWN
        if isinstance(expr, ast.BoolOp):
            parts = [self.truth(v, depth + 1) for v in expr.values]
            out = parts[0]
            for p in parts[1:]:
                out = out.and_(p) if isinstance(expr.op, ast.And) else out.or_(p)
            return out
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return self.truth(expr.operand, depth + 1).negate()
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.args \
                and expr.func.id in self.functions:
            return self.truth(self.functions[expr.func.id], depth + 1)
        if isinstance(expr, ast.Call) and _dotted(expr.func) == "sys.platform.startswith" and len(expr.args) == 1 \
                and isinstance(expr.args[0], ast.Constant) and isinstance(expr.args[0].value, str):
            return Truth.of("linux".startswith(expr.args[0].value))
        if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
            op, right = expr.ops[0], expr.comparators[0]
            if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
                left = self.value(expr.left)
                if left is not None:
                    return Truth.of(isinstance(op, ast.IsNot))
                return Truth.UNKNOWN
            if isinstance(op, (ast.Eq, ast.NotEq)):
                left, other = self.value(expr.left), self.value(right)
                if left is not None and other is not None:
                    return Truth.of((left == other) is isinstance(op, ast.Eq))
        return Truth.UNKNOWN


def _appends(call: ast.Call) -> bool:
    """`ext_modules.append(...)`."""
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "append" and isinstance(func.value, ast.Name) \
        and func.value.id == "ext_modules"


def _changes_extensions(stmt) -> bool:
    """A statement this reader does not follow that may change `ext_modules` (a loop appending, `+=`, a call
    handed the list): then what it holds is not known."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and node.id == "ext_modules" and not (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and not _appends(stmt.value)
                and any(k.value is node for k in stmt.value.keywords)):  # `setup(ext_modules=ext_modules)` reads it
            return True
    return False


def _dotted(expr) -> str:
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
        return ".".join(reversed(parts))
    return ""
