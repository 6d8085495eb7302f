"""Which compiler runs the model's graph on Ascend, decided from the trees for one deployment.

vLLM hands the FX graph to the platform's compile backend, vllm-ascend's `AscendCompiler`
(`vllm_ascend/compilation/compiler_interface.py`), whose `compile` runs one of two functions: with
`enable_npugraph_ex` the graph goes to npugraph_ex (torchair's FX compiler, a package outside the trees),
otherwise `fusion_pass_compile` runs vllm-ascend's pass manager (`GraphFusionPassManager`) through Inductor's
pattern matcher. Whether `enable_npugraph_ex` holds is decided in three places, each read here:

1. vLLM's configuration (`vllm/config/vllm.py`): the optimisation level's `cudagraph_mode`
   (`OPTIMIZATION_LEVEL_0N`, the default level is the `optimization_level` field's), the compilation mode
   (VLLM_COMPILE above O0) and `--enforce-eager`, which turns both off;
2. vllm-ascend's platform (`vllm_ascend/platform.py`): the chain of tests on `cudagraph_mode` whose branches
   set `enable_npugraph_ex` to False (piecewise compilation, no graph) or leave it (full graphs only), after the
   platform's own rewrites of the mode (0.13 turns FULL_AND_PIECEWISE into PIECEWISE);
3. the option's default in `vllm_ascend/ascend_config.py`, or the user's `--additional-config`.

Where each pass's patterns are registered is read from the pass modules (and the base classes they import from
vllm_ascend.compilation): `pm.register_replacement` is Inductor's pattern matcher, which `fusion_pass_compile`
runs; `npugraph_ex.register_replacement` (or `torchair.`) hands the pattern to npugraph_ex. A pass whose
patterns are not registered with the compiler that runs does not fuse anything there.

Nothing is imported or run: every step is a structural reading, and a step that cannot be read leaves the
compiler undecided (None) with the reason in `note`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ..index.facts import FactTable
from ..index.modules import ModuleIndex, ModuleInfo
from ..index.nodes import find_all
from ..ir.texts import say

COMPILE_FACTS = FactTable("compile_path", "what the trees say about the compile path, read once per index")

VLLM_CONFIG = "vllm.config.vllm"
VLLM_COMPILATION = "vllm.config.compilation"
ASCEND_PLATFORM = "vllm_ascend.platform"
ASCEND_COMPILER = "vllm_ascend.compilation.compiler_interface"
ASCEND_CONFIG = "vllm_ascend.ascend_config"
OPTION = "enable_npugraph_ex"

# the registries a pattern can be handed to: Inductor's pattern matcher (run by fusion_pass_compile through the
# pass manager) and npugraph_ex's (torchair's older name for it)
INDUCTOR, NPUGRAPH_EX = "inductor", "npugraph_ex"
_REGISTRY_OF = (("torch._inductor.pattern_matcher", INDUCTOR), ("npugraph_ex", NPUGRAPH_EX),
                ("torchair", NPUGRAPH_EX))
EAGER = "eager"  # nothing is compiled: no graph pass runs


@dataclass(frozen=True)
class Cite:
    file: str
    line: int
    what: str

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "what": self.what}


@dataclass
class CompilePath:
    compiler: str | None  # the function AscendCompiler.compile runs, or EAGER; None: not decided
    registry: str | None  # the registry whose patterns run there (INDUCTOR / NPUGRAPH_EX); None with EAGER
    cudagraph_mode: str | None
    mode: str | None  # vLLM's CompilationMode member
    npugraph_ex: bool | None  # enable_npugraph_ex after the platform's update
    evidence: list[Cite] = field(default_factory=list)
    note: str | None = None
    stated: tuple = ()  # the deployment's values that decided it (--enforce-eager, -O0, ...)

    def to_json(self) -> dict:
        return {"compiler": self.compiler, "registry": self.registry, "cudagraph_mode": self.cudagraph_mode,
                "mode": self.mode, "enable_npugraph_ex": self.npugraph_ex,
                "evidence": [c.to_json() for c in self.evidence], "note": self.note, "stated": list(self.stated)}


# --- reading helpers ------------------------------------------------------------------------------------------

def _text(info: ModuleInfo, node: cst.CSTNode) -> str:
    return " ".join(info.code(node).replace("\\\n", " ").split())


def _body(cls) -> list:
    """The statements of a class definition's body (empty for anything else)."""
    node = getattr(cls, "node", None)
    return list(node.body.body) if isinstance(node, cst.ClassDef) else []


def _member(expr, enum: str) -> str | None:
    """`CUDAGraphMode.PIECEWISE` -> "PIECEWISE"."""
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == enum:
        return expr.attr.value
    return None


def _target_name(t) -> str | None:
    """The last name an assignment target writes: `a.b.mode` -> mode, `d["x"]["enable_npugraph_ex"]` -> that key."""
    if isinstance(t, cst.Attribute):
        return t.attr.value
    if isinstance(t, cst.Subscript) and len(t.slice) == 1:
        idx = t.slice[0].slice
        if isinstance(idx, cst.Index) and isinstance(idx.value, cst.SimpleString):
            value = idx.value.evaluated_value
            return value if isinstance(value, str) else None
    if isinstance(t, cst.Name):
        return t.value
    return None


def _assigns(body) -> list[tuple[str, cst.BaseExpression, cst.Assign]]:
    """(name, value, node) of the assignments directly in a block (not in nested ifs)."""
    out = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign):
                    for t in small.targets:
                        name = _target_name(t.target)
                        if name:
                            out.append((name, small.value, small))
    return out


# --- vLLM: the mode a deployment starts from ------------------------------------------------------------------

def _enum_parts(index: ModuleIndex) -> dict[str, tuple[str, ...]]:
    """CUDAGraphMode member -> the runtime modes its value holds (FULL_AND_PIECEWISE -> (FULL, PIECEWISE))."""
    info = index.get(VLLM_COMPILATION)
    cls = info.classes().get("CUDAGraphMode") if info is not None else None
    if cls is None:
        return {}
    plain: dict[str, object] = {}
    out: dict[str, tuple[str, ...]] = {}
    for name, value, _ in _assigns(_body(cls)):
        if isinstance(value, cst.Integer):
            plain[name] = int(value.value)
            out[name] = (name,)
        elif isinstance(value, cst.Tuple):
            parts = [e.value.value for e in value.elements if isinstance(e.value, cst.Name)]
            if parts and all(p in plain for p in parts):
                out[name] = tuple(parts)
    out["__order__"] = tuple(sorted((n for n in plain), key=lambda n: plain[n]))  # type: ignore[arg-type]
    return out


def _mode_predicates(index: ModuleIndex) -> dict[str, tuple[str, str]]:
    """CUDAGraphMode method -> (how, member) from its `return`: `self.has_mode(CUDAGraphMode.PIECEWISE)` ->
    ("has", PIECEWISE); `self.max_cudagraph_mode() == CUDAGraphMode.FULL` -> ("max", FULL)."""
    info = index.get(VLLM_COMPILATION)
    cls = info.classes().get("CUDAGraphMode") if info is not None else None
    out: dict[str, tuple[str, str]] = {}
    if info is None:
        return out
    for fn in _body(cls):
        if not isinstance(fn, cst.FunctionDef):
            continue
        ret = [r for r in find_all(fn, cst.Return) if r.value is not None]
        if len(ret) != 1:
            continue
        text = _text(info, ret[0].value)
        members = [m for m in (_member(a, "CUDAGraphMode") for a in find_all(ret[0].value, cst.Attribute)) if m]
        if len(members) != 1:
            continue
        if text.startswith("self.has_mode("):
            out[fn.name.value] = ("has", members[0])
        elif text.startswith("self.max_cudagraph_mode() =="):
            out[fn.name.value] = ("max", members[0])
    return out


def _levels(index: ModuleIndex) -> tuple[dict[str, tuple[str, Cite]], str | None, Cite | None]:
    """{"O2": (cudagraph_mode member, where)}, the default level and where it is declared."""
    info = index.get(VLLM_CONFIG)
    if info is None:
        return {}, None, None
    levels: dict[str, tuple[str, Cite]] = {}
    default, at = None, None
    for stmt in info.statements_with(b"OPTIMIZATION_LEVEL_0"):
        for small in (stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ()):
            if not (isinstance(small, cst.Assign) and isinstance(small.value, cst.Dict)):
                continue
            name = _target_name(small.targets[0].target) or ""
            if not name.startswith("OPTIMIZATION_LEVEL_0"):
                continue
            for el in find_all(small.value, cst.DictElement):
                if isinstance(el.key, cst.SimpleString) and el.key.evaluated_value == "cudagraph_mode":
                    member = _member(el.value, "CUDAGraphMode")
                    if member:
                        levels["O" + name[-1]] = (member, Cite(info.rel, info.line_of(el), _text(info, el)))
    for stmt in info.nodes_with(b"optimization_level:"):
        for n in find_all(stmt, cst.AnnAssign):
            if _target_name(n.target) == "optimization_level" and n.value is not None:
                default = _member(n.value, "OptimizationLevel")
                at = Cite(info.rel, info.line_of(n), _text(info, n))
                break
        if default:
            break
    return levels, default, at


def _eager_site(index: ModuleIndex) -> Cite | None:
    """Where vLLM turns compilation and graphs off for `enforce_eager`."""
    info = index.get(VLLM_CONFIG)
    if info is None:
        return None
    for stmt in info.nodes_with(b"enforce_eager"):
        for node in find_all(stmt, cst.If):
            if "enforce_eager" not in _text(info, node.test):
                continue
            names = {(n, _member(v, "CUDAGraphMode") or _member(v, "CompilationMode")) for n, v, _ in _assigns(node.body.body)}
            if ("mode", "NONE") in names and ("cudagraph_mode", "NONE") in names:
                return Cite(info.rel, info.line_of(node), _text(info, node.test))
    return None


# --- vllm-ascend: the platform's update and the compiler's choice ---------------------------------------------

@dataclass
class _Branch:
    test: cst.BaseExpression | None  # None: the chain's else
    body: list
    line: int
    text: str


def _chains(info: ModuleInfo) -> tuple[list[tuple[cst.If, str | None, str]], list[_Branch]]:
    """The platform's rewrites of the mode before the chain (`if cudagraph_mode == A: cudagraph_mode = B`)
    and the branches of the `if/elif` chain on cudagraph_mode that sets enable_npugraph_ex."""
    rewrites: list[tuple[cst.If, str | None, str]] = []
    chain: list[_Branch] = []
    for stmt in info.nodes_with(OPTION.encode()):
        for node in find_all(stmt, cst.If):
            if "cudagraph_mode" not in _text(info, node.test):
                continue
            branches, cur = [], node
            while isinstance(cur, cst.If):
                branches.append(_Branch(cur.test, list(cur.body.body), info.line_of(cur), _text(info, cur.test)))
                cur = cur.orelse
            if isinstance(cur, cst.Else):
                branches.append(_Branch(None, list(cur.body.body), info.line_of(cur), "else"))
            sets = [any(n == OPTION for n, _, _ in _assigns(b.body)) for b in branches]
            if len(branches) >= 3 and any(sets) and not chain:
                chain = branches
            elif len(branches) == 1 and not chain:
                for name, value, _ in _assigns(node.body.body):
                    to = _member(value, "CUDAGraphMode")
                    if name == "cudagraph_mode" and to:
                        rewrites.append((node, to, _text(info, node.test)))
        if chain:
            break
    return rewrites, chain


def _holds(test, mode: str, parts: dict, preds: dict) -> bool | None:
    """Whether a test on `cudagraph_mode` holds for `mode`; None: not a test this reader decides."""
    if isinstance(test, cst.BooleanOperation):
        a, b = _holds(test.left, mode, parts, preds), _holds(test.right, mode, parts, preds)
        if isinstance(test.operator, cst.Or):
            return True if (a or b) else (None if a is None or b is None else False)
        return False if (a is False or b is False) else (None if a is None or b is None else True)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        left, comp = test.left, test.comparisons[0]
        if isinstance(left, cst.Attribute) and left.attr.value == "cudagraph_mode":
            member = _member(comp.comparator, "CUDAGraphMode")
            if member and isinstance(comp.operator, (cst.Equal, cst.NotEqual)):
                return (member == mode) is isinstance(comp.operator, cst.Equal)
            if isinstance(comp.operator, (cst.In, cst.NotIn)) and isinstance(comp.comparator, (cst.Tuple, cst.List)):
                members = {_member(e.value, "CUDAGraphMode") for e in comp.comparator.elements}
                return (mode in members) is isinstance(comp.operator, cst.In)
        return None
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and not test.args:
        owner = test.func.value
        if isinstance(owner, cst.Attribute) and owner.attr.value == "cudagraph_mode" and test.func.attr.value in preds:
            how, member = preds[test.func.attr.value]
            have = parts.get(mode)
            if have is None:
                return None
            if how == "has":
                return member in have
            order = parts.get("__order__", ())
            return max(have, key=order.index) == member if all(p in order for p in have) else None
    return None


def _compile_choice(index: ModuleIndex) -> tuple[str | None, str | None, Cite | None]:
    """(function run with enable_npugraph_ex, function run without, the `if`) from AscendCompiler.compile."""
    info = index.get(ASCEND_COMPILER)
    if info is None:
        return None, None, None
    for cls in info.classes().values():
        for fn in _body(cls):
            if not (isinstance(fn, cst.FunctionDef) and fn.name.value == "compile"):
                continue
            for node in find_all(fn, cst.If):
                if OPTION not in _text(info, node.test) or not isinstance(node.orelse, cst.Else):
                    continue
                yes, no = _returned(node.body.body), _returned(node.orelse.body.body)
                if yes and no:
                    return yes, no, Cite(info.rel, info.line_of(node), _text(info, node.test))
    return None, None, None


def _returned(body) -> str | None:
    for stmt in body:
        for r in find_all(stmt, cst.Return):
            if isinstance(r.value, cst.Call) and isinstance(r.value.func, cst.Name):
                return r.value.func.value
    return None


def _option_default(index: ModuleIndex) -> tuple[bool | None, Cite | None, bool]:
    """enable_npugraph_ex's default in ascend_config.py, where, and whether it is read from the nested
    `ascend_compilation_config` (a config class's field) rather than from additional_config itself."""
    from .ascend_passes import _field_default

    info = index.get(ASCEND_CONFIG)
    if info is None:
        return None, None, False
    found = _field_default(index, info, OPTION)
    if not found:
        return None, None, False
    node, value = found
    said = _text(info, value)
    on = True if said == "True" else False if said == "False" else None
    nested = not isinstance(node, cst.Call)  # `.get("enable_npugraph_ex", False)` on additional_config: top level
    return on, Cite(info.rel, info.line_of(node), f"{OPTION} = {said}"), nested


# --- the registrations ----------------------------------------------------------------------------------------

def registries(index: ModuleIndex, module: str) -> dict[str, Cite]:
    """{registry: where} of the `register_replacement` calls of a pass module and of the vllm_ascend.compilation
    modules it imports from (the base pattern class's `register`)."""
    info = index.get(module)
    if info is None:
        return {}
    key = ("registries", module)
    table = COMPILE_FACTS.of(index)
    if key in table:
        return table[key]
    out: dict[str, Cite] = {}
    seen = {module}
    todo = [info]
    for binding in info.imports.values():
        b = index.choose(binding)
        mod = getattr(b, "module", None)
        other = index.get(mod) if mod and mod.startswith("vllm_ascend.compilation") and mod not in seen else None
        if mod and other is not None:
            seen.add(mod)
            todo.append(other)
    for m in todo:
        for stmt in m.nodes_with(b"register_replacement"):
            for call in find_all(stmt, cst.Call):
                f = call.func
                if not (isinstance(f, cst.Attribute) and f.attr.value == "register_replacement"):
                    continue
                d = index.dotted(m, f.value) or _text(m, f.value)
                for prefix, reg in _REGISTRY_OF:
                    if d == prefix or d.startswith(prefix + "."):
                        out.setdefault(reg, Cite(m.rel, m.line_of(call), f"{_text(m, f)}(...)"))
                        break
                else:
                    for alias in _aliases(m, f.value):
                        for prefix, reg in _REGISTRY_OF:
                            if alias == prefix:
                                out.setdefault(reg, Cite(m.rel, m.line_of(call), f"{_text(m, f)}(...) ({alias})"))
    table[key] = out
    return out


def _aliases(info: ModuleInfo, expr) -> list[str]:
    """The modules a name is imported as anywhere in the module (`try: import npugraph_ex as nge / except:
    import torchair as nge`: both)."""
    if not isinstance(expr, cst.Name):
        return []
    out = []
    for stmt in info.statements_with(expr.value.encode()):
        for imp in find_all(stmt, cst.Import):
            for alias in imp.names:
                bound = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
                if bound == expr.value:
                    out.append(_text(info, alias.name))
    return out


# --- the decision ---------------------------------------------------------------------------------------------

def decide(index: ModuleIndex, *, enforce_eager: bool = False, optimization_level: str | None = None,
           cudagraph_mode: str | None = None, additional_config: dict | None = None) -> CompilePath:
    """The compiler that runs the graph for these engine arguments (vLLM's defaults where None)."""
    ev: list[Cite] = []
    stated = []
    if "vllm_ascend" not in index.trees:
        return CompilePath(None, None, None, None, None, note="no vllm-ascend tree: vLLM's own compile path")
    parts, preds = _enum_parts(index), _mode_predicates(index)
    levels, default_level, level_at = _levels(index)
    level = optimization_level or default_level
    if optimization_level:
        stated.append(f"-O{optimization_level.lstrip('O')}")
    elif level_at:
        ev.append(level_at)
    mode: str | None = ("VLLM_COMPILE" if level and level != "O0" else "NONE") if level else None
    if cudagraph_mode:
        graph: str | None = cudagraph_mode
        stated.append(f"cudagraph_mode={cudagraph_mode}")
    elif level in levels:
        graph = levels[level][0]
        ev.append(levels[level][1])
    else:
        graph = None
    if enforce_eager:
        stated.append("--enforce-eager")
        site = _eager_site(index)
        graph, mode = "NONE", "NONE"
        if site:
            ev.append(site)
    if graph is None:
        return CompilePath(None, None, None, mode, None, ev, note="vLLM's cudagraph_mode for this level is not read",
                           stated=tuple(stated))
    plat = index.get(ASCEND_PLATFORM)
    if plat is None:
        return CompilePath(None, None, graph, mode, None, ev, stated=tuple(stated), note="no vllm_ascend/platform.py")
    rewrites, chain = _chains(plat)
    for node, to, text in rewrites:
        if _holds(node.test, graph, parts, preds) is True and to:
            ev.append(Cite(plat.rel, plat.line_of(node), f"{text}: cudagraph_mode = {to}"))
            graph = to
    if not chain:
        return CompilePath(None, None, graph, mode, None, ev, stated=tuple(stated),
                           note=f"no test of cudagraph_mode that sets {OPTION} found in vllm_ascend/platform.py")
    npugraph_ex: bool | None = None
    for b in chain:
        holds = True if b.test is None else _holds(b.test, graph, parts, preds)
        if holds is None:
            return CompilePath(None, None, graph, mode, None, ev, stated=tuple(stated),
                               note=f"vllm_ascend/platform.py:{b.line} `{b.text}` is not decided for {graph}")
        if not holds:
            continue
        ev.append(Cite(plat.rel, b.line, b.text if b.test is not None else "else: cudagraph_mode is not supported"))
        sets = {n: v for n, v, _ in _assigns(b.body)}
        if _member(sets.get("mode"), "CompilationMode") == "NONE" or graph == "NONE":
            mode = "NONE"
        value = sets.get(OPTION)
        if isinstance(value, cst.Name) and value.value == "False":
            npugraph_ex = False
        break
    if mode == "NONE":
        return CompilePath(EAGER, None, graph, mode, False, ev, stated=tuple(stated),
                           note="compilation mode NONE: the model runs eagerly, no graph pass runs")
    if npugraph_ex is None:  # the platform leaves the option as configured
        default, at, nested = _option_default(index)
        given = (additional_config or {}).get("ascend_compilation_config", {}) if nested else (additional_config or {})
        if isinstance(given, dict) and OPTION in given:
            npugraph_ex = bool(given[OPTION])
            stated.append(f"--additional-config {OPTION}={given[OPTION]}")
        else:
            npugraph_ex = default
            if at:
                ev.append(at)
    yes, no, at = _compile_choice(index)
    if at:
        ev.append(at)
    if npugraph_ex is None or yes is None:
        return CompilePath(None, None, graph, mode, npugraph_ex, ev, stated=tuple(stated),
                           note=f"{OPTION} or AscendCompiler.compile's choice is not read")
    compiler = yes if npugraph_ex else no
    return CompilePath(compiler, NPUGRAPH_EX if npugraph_ex else INDUCTOR, graph, mode, npugraph_ex, ev,
                       stated=tuple(stated))


def for_deployment(index: ModuleIndex, deployment) -> CompilePath:
    """decide() with what a deployment states (ir/deployment.py); fields it does not have are vLLM's defaults.
    `optimization_level` ("O0".."O3" or 0..3) and `compilation_config` ({"cudagraph_mode": ...}) are read
    where the deployment carries them."""
    if deployment is None:
        return decide(index)
    level = getattr(deployment, "optimization_level", None)
    if level is not None:
        level = f"O{str(level).lstrip('Oo-')}"
    cc = getattr(deployment, "compilation_config", None) or {}
    graph = cc.get("cudagraph_mode") if isinstance(cc, dict) else None
    if isinstance(graph, str):
        graph = graph.upper().split(".")[-1]
    key = ("decide", bool(getattr(deployment, "enforce_eager", False)), level, graph,
           repr(sorted((getattr(deployment, "additional_config", None) or {}).items())))
    table = COMPILE_FACTS.of(index)
    if key not in table:
        table[key] = decide(index, enforce_eager=key[1], optimization_level=level, cudagraph_mode=graph,
                            additional_config=getattr(deployment, "additional_config", None))
    return table[key]


# --- the release notes: why a pass left the tree ----------------------------------------------------------------

# what a release-note line says happened to a fusion: it left for npugraph_ex, or it was removed
_MOVED = ("npugraph_ex", "torchair")
_REMOVED = ("removed", "remove ", "deprecat", "dropped")
_FUSION_WORDS = ("fusion", "fuse", "fused")
_MOVE_VERBS = ("move", "migrat", "integrat", "provid", "handled by", "now ")


def release_notes(index: ModuleIndex) -> dict | None:
    """The vllm-ascend tree's release notes (docs/source/user_guide/release_notes.md in the sdist), as the lines
    that speak of a fusion and of npugraph_ex or a removal: {"file": rel path, "lines": [[line, text], ...]}. None where the
    tree has no such file."""
    tree = index.trees.get("vllm_ascend")
    if tree is None:
        return None
    table = COMPILE_FACTS.of(index)
    if "release_notes" in table:
        return table["release_notes"]
    found = None
    for rel in ("docs/source/user_guide/release_notes.md", "docs/source/release_notes.md", "RELEASE_NOTES.md"):
        path = tree.root / rel
        if path.is_file():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            lines = [[i, " ".join(t.split())] for i, t in enumerate(text.splitlines(), 1)
                     if any(w in t.lower() for w in _FUSION_WORDS)
                     and any(w in t.lower() for w in _MOVED + _REMOVED)]
            found = {"file": rel, "lines": lines}
            break
    table["release_notes"] = found
    return found


def _words(text: str) -> str:
    """Lower-case letters and digits only: `matmul all-reduce RMSNorm` -> matmulallreducermsnorm."""
    return "".join(c for c in text.lower() if c.isalnum())


def _name_keys(name: str) -> list[str]:
    """The ways a release note names a pass class: the class name less Pass / Fusion / Pattern
    (MatmulAllReduceAddRMSNorm), and that less an `Add` a note leaves out (MatmulAllReduceRMSNorm)."""
    import re

    core = re.sub(r"(Fusion)?(Pass|Pattern)$", "", name)
    keys = [_words(core)]
    parts = re.findall(r"[A-Z]+(?=[A-Z][a-z]|$)|[A-Z][a-z0-9]*|[a-z0-9]+", core)
    if "Add" in parts:  # "matmul all-reduce RMSNorm" for MatmulAllReduceAddRMSNorm: the residual add unsaid
        keys.append(_words("".join(p for p in parts if p != "Add")))
    return [k for k in keys if len(k) >= 8]


def left_the_tree(name: str, old: dict | None, new: dict | None) -> dict:
    """What the newer tree's release notes say of a pass that is no longer in it: the lines of `new` that
    `old` does not have (the releases in between) and that name it. {"how": "moved_to_npugraph_ex" /
    "removed" / "unknown", "file", "line", "text", "note"}."""
    if not new:
        return {"how": "unknown", "note": say("left_no_release_notes")}
    before = {t for _, t in (old or {}).get("lines", [])}
    keys = _name_keys(name)
    hits = [(n, t) for n, t in new.get("lines", []) if t not in before and any(k in _words(t) for k in keys)]
    for n, t in hits:
        low = t.lower()
        if (any(m in low for m in _MOVED) and any(v in low for v in _MOVE_VERBS)
                and not any(r in low for r in _REMOVED)):
            return {"how": "moved_to_npugraph_ex", "file": new["file"], "line": n, "text": t}
    for n, t in hits:
        if any(r in t.lower() for r in _REMOVED):
            return {"how": "removed", "file": new["file"], "line": n, "text": t}
    if hits:
        n, t = hits[0]
        return {"how": "unknown", "file": new["file"], "line": n, "text": t,
                "note": say("left_note_unclear")}
    return {"how": "unknown", "note": say("left_not_named", name=name)}
