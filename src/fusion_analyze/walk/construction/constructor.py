"""Which class builds `self.x`: read __init__ chains, factories, layer lists and conditional construction."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, cast

import libcst as cst

from ...catalog import catalog
from ...locate.ascend import Patch, Replacements
from ...index.module_info import ModuleInfo
from ...index.modules import Definition, ModuleIndex
from ...index.nodes import find_all, iter_nodes
from ...semantics.mro import c3_linearization
from ...semantics.function_bodies import _is_self, class_method, function_imports, tables
from ...semantics.known_calls import _never_none
from ...semantics.callees import Callee
from ...semantics.objects import is_property, static_method
from ...semantics.environment import Environment
from ...semantics.evaluator import Evaluator
from ...config.transformers_auto import auto_model_class
from .default_choice import _dedupe, _explain, _prefer_plain, pick
from .attr_sources import AttrSources
from .instance import Instance, _layer_list
from .layer_index import CARRIER, DECODED, Taint, _join, contains
from .alternatives import OtherChoices
from .rebinding import failing_import, read_first
from ...semantics.scope import Scope, bind_params, copy_chain, star_kwarg
from ...semantics.values import Bindings

# the source value_sources gives for an attribute only a method sets (status/waits.py reads it back): the value
# an earlier call of that method left, a run-time state of the object
RUN_TIME_SOURCE = "<set at run time by {}()>"
from ...ir.conditions import Condition, Truth, code_of, impossible, join

# a source value_sources gives for an operand a method left undecided orders or computes with while it holds None
# (`self.top_k > ...`, top_k the configuration's num_experts_per_tok its class leaves None): the operand's own
# sources, joined (status/waits.py reads it back: a None the code cannot compute with is not what runs)
NONE_OPERAND_SOURCE = "<None where the code computes: {}>"
_ORDERING = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
_COMPUTING = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power)
from ...ir.texts import say

MAX_DEPTH = catalog().limit("construct_depth")
_MAX_SOURCES = 120  # lines of code value_sources reads back for one attribute
_KIND_DEPTH = 2  # how far below a decoder layer its submodules are read for what they decide from the index


class Method(tuple):
    """(class, function) of a method lookup, as a pair; `.module` is where the function's code is (a patch's
    function is not in the class's module) and `.patch` the replacement that put it there (None: the class's own)."""

    module: Any
    patch: Any

    def __new__(cls, owner: Definition, fn: Any, module=None, patch=None):
        self = super().__new__(cls, (owner, fn))
        self.module = module if module is not None else owner.module
        self.patch = patch
        return self


@dataclass(frozen=True)
class _MethodDef:
    """A method of a class standing in where a function Definition is expected (its `node` and `module`)."""

    owner: Definition
    node: cst.FunctionDef

    @property
    def module(self):
        return self.owner.module

    kind = "method"


@dataclass(frozen=True)
class Replaced:
    """A replacement chosen for a target: its patch, and what its value resolved to (`function`, with the class
    it is a method of as `owner`, or a class), else `reason`: why the walk cannot follow it."""

    patch: Patch
    function: "Definition | _MethodDef | None" = None
    owner: Definition | None = None
    cls: Definition | None = None
    reason: str | None = None
    # later patches of the target that never run (an import their `try` body runs first fails), as sentences
    skipped: tuple = ()
    # why the code reached may hold the original instead (its `from m import f` may run before the patch), a
    # sentence; None where the replacement is what it holds
    order: object = None

    @property
    def text(self) -> str:
        """`target = value (file:line)`, as an op's `replaced_by` and `not_followed` say it."""
        p = self.patch
        return f"{p.target} = {p.value} ({p.file}:{p.line})"


_NO_BINDINGS = Bindings()


# packages whose private attributes set from outside are not scanned (Constructor.set_from_outside)
_NOT_SCANNED_FOR_SETTERS = frozenset({"vllm", "transformers"})

class Constructor(AttrSources, OtherChoices):
    def __init__(self, index: ModuleIndex, env: Environment, load_time=None):
        self.index = index
        self.load_time = load_time  # the Transformers backend's load-time rewrites (walk.hf.fusers.LoadTime), or None
        # the one evaluator of this analysis: backend, device (calls), configuration facts, `self.x` read here
        self.env = env
        self.evaluator = Evaluator(env, attrs=self)
        # (instance id, name) -> (the instance, value of self.<name>): the instance is kept so that a later
        # instance given the same id never reads another's value
        self._values: dict = {}
        # while kernels.backend_kernels.Backends reads one instance's kernels: what it read of that instance and of the model's
        # configuration, each as (how to read it again for another instance, what it gave): its memo's key
        self.reads: dict | None = None
        self.reads_of: Instance | None = None
        # one walk's MROs: a class is asked for its MRO at every attribute, method and call. Kept per walk
        # (not per session) so that each analysis still meets, and reports, the unreadable files on the way.
        self._mros: dict[int, tuple[Definition, list[Definition]]] = {}
        self._c3: dict = {}  # qualname -> linearisation, shared by the MROs of one walk
        self._blind: Evaluator | None = None
        # the Ascend replacement index (locate.ascend.Replacements) the Walker hands over: asked at every method
        # and function lookup; empty on CUDA
        self.patches = Replacements([])
        self._replaced: dict = {}  # target -> (the patch chosen, what it resolves to) of this walk
        # target -> what the walk met but could not follow (a replacement whose value it cannot resolve)
        self.not_followed: dict[str, dict] = {}
        # target -> a replacement followed under `if` tests no value decides, with what runs otherwise
        self.undecided_patches: dict[str, dict] = {}
        # the same, of a target whose patch no read has reached yet (a `from m import f` imported before the
        # patch keeps the original: nothing of the patch is then said)
        self._undecided_pending: dict[str, dict] = {}
        self._registry: dict | None = None  # architecture -> registry entry, for models built at run time
        self.unbuilt: dict[int, str] = {}  # id(call) -> why the class it builds is not known
        self._hf = False
        self._outside: list = []  # per attribute being read: calls of classes outside the trees met on the way
        self._quiet = 0  # > 0 while building what another configuration value would: its own choices unlisted
        self._taints: dict = {}  # (class, given) -> what of its __init__ chain reads the layer index (layer_index.py)
        self._sub_decodes: dict = {}  # (class, given, __init__, name) -> whether that submodule reads the index
        self._originals: dict = {}  # (patched __init__, its module) ids -> (both, the original's call it makes)
        # vLLM class name -> the class vllm-ascend registers in its place (kernels.Backends hands it over)
        self.registered_ops: Callable[[], Any] | None = None
        self._running: dict = {}  # id(instance) -> (it, the instance of the class the backend runs for it)
        # the class that runs a class of the trees on this backend (the walk hands Backends.implementation over:
        # vllm-ascend's replacement of a vLLM layer), for the methods run on the objects the walk built
        self.implementation = lambda cls: cls
        self._impls: dict = {}  # id(instance) -> (it, the same object as its backend's class)
        # while `reads` is kept: id(instance) -> (it, its path from `reads_of`), so that what is read on an
        # object the instance holds (`self.moe_config.is_sequence_parallel`) is read again on another instance
        self._paths: dict = {}
        # (instance id, method) -> (the instance, its scope, what is left undecided of `self.<method>(...)`:
        # the tests and returns), for what an undecided test calling it waits on (unknown_sources)
        self._calls: dict = {}
        # function name -> [(its Definition, a call of it, the scope it was read in)] the evaluator left unknown
        self._functions: dict = {}
        self._none_depth = 0  # _none_operands reads an operand's sources once, not those of its sources' operands
        # while `reads` is kept: (path, call, the caller's module, values and fields) of each such call on an
        # object the instance holds, made again on the instance a memo of its kernels serves (Backends), so that
        # what it waits on is said for that walk too
        self.replay: list = []
        self._assigning: set = set()  # (instance id, name) whose assignment is being decided (assigned)

    # -- classes -----------------------------------------------------------------------------
    def mro(self, cls: Definition) -> list[Definition]:
        """Python's C3 linearisation of the bases found in the trees (bases outside them are left out)."""
        hit = self._mros.get(id(cls))
        if hit is None or hit[0] is not cls:
            hit = self._mros[id(cls)] = (cls, c3_linearization(cls, self._bases, self._c3))
        return list(hit[1])

    def _bases(self, cls: Definition) -> list[Definition]:
        out = []
        for base in cls.bases:
            target = self.index.resolve_expr(cls.module, _strip_subscript(base.value))
            if isinstance(target, Definition) and target.kind == "assign":
                target = self._provided(target)
            if isinstance(target, Definition) and target.kind == "class":
                out.append(target)
        return out

    def base_names(self, cls: Definition) -> list[str]:
        names = [c.name for c in self.mro(cls)]
        for base in cls.bases:  # bases outside the trees (nn.Module) still count by name
            expr = _strip_subscript(base.value)
            if type(expr) is cst.Attribute:
                names.append(expr.attr.value)
            elif type(expr) is cst.Name:
                names.append(expr.value)
        return names

    def method(self, cls: Definition, name: str) -> "Method | None":
        """The method `cls.name` runs on this backend: a replacement of the name on a class of the MRO first
        (a vllm-ascend patch: `Qwen3NextAttention.forward = AscendQwen3NextAttention.forward`), else the MRO's
        own. A replacement the walk cannot resolve is recorded (`not_followed`) and the class's own method runs."""
        patches = self.patches
        for c in self.mro(cls):
            if patches and c.qualname in patches.modules_of_class:
                got = self.replaced(f"{c.qualname}.{name}")
                if got is not None and got.function is not None:
                    owner = got.owner if got.owner is not None else c
                    return Method(owner, got.function.node, got.function.module, got.patch)
            fn = class_method(c, name)
            if fn is not None:
                return Method(c, fn)
        return None

    def own_method(self, cls: Definition, name: str) -> "Method | None":
        """The method the class's MRO defines, whatever replaces it (the original a patch saved and calls)."""
        for c in self.mro(cls):
            fn = class_method(c, name)
            if fn is not None:
                return Method(c, fn)
        return None

    def replaced(self, target: str) -> "Replaced | None":
        """The replacement of `target` (an absolute dotted name) on this backend and device: of the index's
        patches of it, the last one assigned whose `if` tests may hold; None when none applies. One the walk
        cannot resolve is recorded in `not_followed` (the report's "not followed" lines)."""
        got = self._chosen(target)
        self._met(target, got)
        self._applied(target)
        return got

    def _applied(self, target: str) -> None:
        """A read reached the target's patch: its undecided tests, if any, are said."""
        pending = self._undecided_pending.get(target)
        if pending is not None:
            self.undecided_patches.setdefault(target, pending)

    def _chosen(self, target: str) -> "Replaced | None":
        if target in self._replaced:
            return self._replaced[target]
        self._replaced[target] = None  # a patch's test that reads the target itself sees the original
        got = self._replaced[target] = self._replacement(target)
        return got

    def _met(self, target: str, got: "Replaced | None") -> None:
        """A replacement the walk met: one it cannot resolve is recorded in `not_followed`."""
        if got is not None and got.reason is not None and target not in self.not_followed:
            p = got.patch
            self.not_followed[target] = {"target": target, "file": p.file, "line": p.line, "value": p.value,
                                         "form": p.form, "reason": got.reason}

    def runs(self, module, hops: list, target):
        """(what a name read in `module` holds when the code runs on this backend, the Replaced that put it
        there or None). `hops`: the module attributes read on the way to `target` (ModuleIndex.traced), nearest
        first; the first one a patch replaces decides: the patch's value runs where the read comes after the
        patch (rebinding.py: a read when the code runs, or a `from m import f` of a module imported after the
        patch module), the original where it came before (the patch module's own names, and modules imported by
        the time it runs: `read_first`). Where that is not known the patch's value is walked, its Replaced saying
        so (`order`), and the original is listed as an undecided alternative. A value the walk cannot resolve
        leaves the original, recorded in `not_followed`."""
        if not self.patches:
            return target, None
        for name, reader in hops:
            if not self.patches.get(name):
                continue
            got = self._chosen(name)
            if got is None:  # every patch of it decided away (its tests, a failing import): the next read
                continue
            p = got.patch
            order = Truth.FALSE if reader is None else read_first(self.index, p.module, reader)
            if (module.name == p.module if reader is None else order is Truth.TRUE):
                return target, None  # read before the patch ran: the original
            if order is Truth.UNKNOWN and reader is not None:  # (a reader's order alone is open)
                got = self._order_open(name, got, reader)
            self._met(name, got)
            self._applied(name)
            if got.reason is not None:
                return target, got
            return (got.function if got.function is not None else got.cls), got
        return target, None

    def _order_open(self, target: str, got: "Replaced", reader: str) -> "Replaced":
        """`got`, saying that `reader`'s `from m import f` may run before its patch (the original would run there),
        and that original listed as the undecided alternative of the target."""
        p = got.patch
        self.undecided_patches.setdefault(target, {
            "path": target, "chosen": f"{p.value} ({p.file}:{p.line})", "condition": f"{reader} imported after {p.module}",
            "others": [(target, f"{reader} imported before {p.module}")], "decided": False})
        return replace(got, order=say("patch_order_open", reader=reader, where=f"{p.file}:{p.line}"))

    def _replacement(self, target: str) -> "Replaced | None":
        patches = self.patches.get(target)
        skipped = []
        for i in range(len(patches) - 1, -1, -1):
            p = patches[i]
            failed = failing_import(self.index, p.needs) if p.needs else None
            if failed is not None:  # `try: from m import n` where m binds no n: the patch after it never runs
                skipped.append(say("patch_import_fails", where=f"{p.file}:{p.line}", stmt=failed))
                continue
            truth = self._patch_truth(p)
            if truth is Truth.FALSE:
                continue
            if truth is Truth.UNKNOWN:  # the walk follows it; what runs where its tests fail is listed
                self._undecided_patch(target, p, patches[:i])
            got = self._resolve_patch(p)
            return replace(got, skipped=tuple(skipped)) if skipped else got
        return None

    def _undecided_patch(self, target: str, p, earlier: list) -> None:
        """A replacement whose `if` tests no value decides: the walk follows it, and lists what runs otherwise
        (an earlier patch of the target whose tests may hold, else the original) as an undecided alternative."""
        others = []
        for q in reversed(earlier):
            truth = self._patch_truth(q)
            if truth is Truth.FALSE:
                continue
            others.append((f"{q.value} ({q.file}:{q.line})", _tests_text(q) or ""))
            if truth is Truth.TRUE:
                break
        else:
            others.append((target, ""))  # the original runs where no patch's tests hold
        self._undecided_pending.setdefault(target, {
            "path": target, "chosen": f"{p.value} ({p.file}:{p.line})", "condition": _tests_text(p),
            "others": sorted(set(others)), "decided": False})

    def _patch_truth(self, p) -> Truth:
        """Whether the `if` tests a patch stands under hold, decided in the patch module (the device's hardware
        profile, the vLLM version, ...), and those its module is imported under, in the `__init__` importing it."""
        if not p.tests and not p.imported_under:
            return Truth.TRUE
        out = Truth.TRUE
        for where, text, negated in _all_tests(p):
            mod = self.index.get(where)
            try:
                # with the module's scope, so that calls are run (`vllm_version_is("0.23.0")`, the hardware profile)
                t = self.evaluator.truth(cst.parse_expression(text), mod, scope=Scope(module=mod)) \
                    if mod is not None else Truth.UNKNOWN
            except Exception:  # a test the evaluator cannot read: it may hold
                t = Truth.UNKNOWN
            t = t.negate() if negated else t
            if t is Truth.FALSE:
                return Truth.FALSE
            out = out.and_(t)
        return out

    def _resolve_patch(self, p) -> "Replaced":
        """What a patch's value is: a function of the trees, a method of another class (`Other.forward`, also
        through `getattr(Other, "m")` or a saved alias of one), or a class; else why it is not followed."""
        pmod = self.index.get(p.module)
        if pmod is None:
            return Replaced(p, reason=say("replacement_unreadable", module=p.module))
        if not p.value_name:
            return Replaced(p, reason=say("replacement_not_a_name", value=p.value))
        try:
            expr = cst.parse_expression(p.value_name)
        except Exception:
            return Replaced(p, reason=say("replacement_not_a_name", value=p.value))
        return self._resolve_value(p, pmod, expr, 0)

    def _resolve_value(self, p, module, expr, depth: int) -> "Replaced":
        target = self.index.resolve_expr(module, expr)
        if isinstance(target, Definition):
            if target.kind == "function":
                return Replaced(p, function=target)
            if target.kind == "class":
                return Replaced(p, cls=target)
            if target.kind == "assign" and depth < 4 and isinstance(target.node, (cst.Name, cst.Attribute)):
                return self._resolve_value(p, target.module, target.node, depth + 1)  # _orig = Other.forward
        if type(expr) is cst.Attribute:  # Other.method: a method of another class, found along its MRO
            base = self.index.resolve_expr(module, expr.value)
            if isinstance(base, Definition) and base.kind == "assign" and isinstance(base.node, (cst.Name, cst.Attribute)):
                base = self.index.resolve_expr(base.module, base.node)
            if isinstance(base, Definition) and base.kind == "class":
                for c in self.mro(base):
                    fn = class_method(c, expr.attr.value)
                    if fn is not None:
                        return Replaced(p, function=_MethodDef(c, fn), owner=c)
                return Replaced(p, reason=say("replacement_no_method", value=p.value, cls=base.name,
                                              method=expr.attr.value))
        if isinstance(target, Definition):
            return Replaced(p, reason=say("replacement_a_value", value=p.value))
        return Replaced(p, reason=say("replacement_undefined", value=p.value))

    # -- __init__ chains -----------------------------------------------------------------------
    def init_scopes(self, inst: Instance) -> list[tuple[Definition, cst.FunctionDef, Scope]]:
        """(class, __init__, scope) from the most derived class down through super().__init__ calls. The
        binding is done once per instance; each caller gets scopes of its own (it fills their locals)."""
        chain = inst.init_chain
        if chain is None:
            chain = inst.init_chain = self._init_scopes(inst)
        return copy_chain(chain)

    def _init_scopes(self, inst: Instance) -> list[tuple[Definition, cst.FunctionDef, Scope]]:
        out = []
        if inst.cls is None:
            return out
        call, call_scope = inst.call, inst.scope
        mro = self.mro(inst.cls)
        i = 0
        original = None  # the class whose own __init__ a patched one has just called (its saved original)
        while i < len(mro):
            c = mro[i]
            patched = self._patched_init(c) if c is not original else None
            if patched is not None:  # a vllm-ascend patch replaces the __init__: its body, in its module
                pfn, pmod = patched
                scope = Scope(module=pmod, owner=inst)
                bind_params(pfn, call, call_scope, scope, skip_self=True)
                out.append((_in_module(c, pmod), pfn, scope))
                orig = self._original_call(pfn, pmod)
                if orig is not None:  # `_orig_init(self, *args, **kwargs)`: the class's own __init__ runs next
                    if not _forwards(pfn, orig):
                        call, call_scope = orig, scope
                    original = c
                    continue
                fn, fmod = pfn, pmod
            else:
                fn, fmod = class_method(c, "__init__"), c.module
                if fn is None:
                    i += 1
                    continue
                scope = Scope(module=c.module, owner=inst)
                bind_params(fn, call, call_scope, scope, skip_self=True)
                out.append((c, fn, scope))
            sup = tables(fn, fmod).super_init_call
            if sup is None:
                break
            call, call_scope = sup, scope
            i += 1
            named = sup.func.value  # `Base.__init__(self, ...)` runs Base's, which need not be next in the MRO
            if isinstance(named, (cst.Name, cst.Attribute)):
                base = self.index.resolve_expr(fmod, named)
                dotted = self.index.dotted(fmod, named) if base is None else None
                if dotted and dotted.split(".")[0] not in self.index.trees:
                    break  # `nn.Module.__init__(self)`: the bases of the trees between are skipped
                if getattr(base, "kind", None) == "class" and base is not c:
                    later = [j for j in range(i, len(mro)) if mro[j] is base]
                    mro, i = (mro, later[0]) if later else (self.mro(base), 0)
        return out

    def _original_call(self, fn: cst.FunctionDef, module):
        """_original_call of a patched __init__, read once per walk (every layer's instance asks it)."""
        key = (id(fn), id(module))
        kept = self._originals.get(key)
        if kept is None or kept[0] is not fn or kept[1] is not module:
            kept = self._originals[key] = (fn, module, _original_call(self.index, fn, module))
        return kept[2]

    def _patched_init(self, c: Definition):
        """(function node, module) of the patch that replaces `c.__init__` on this backend, else None."""
        if not self.patches or c.qualname not in self.patches.modules_of_class:
            return None
        got = self.replaced(f"{c.qualname}.__init__")
        f = got.function if got is not None else None
        return (f.node, f.module) if f is not None and type(f.node) is cst.FunctionDef else None

    def attr(self, inst: Instance, name: str, depth: int = 0) -> Instance | None:
        """The instance assigned to `self.<name>` in the __init__ chain (most derived assignment wins)."""
        result = self._attr(inst, name, depth)
        path, reads = self._path_of(inst), self.reads
        if path is not None and reads is not None:  # what a memo of this instance's kernels depends on
            full = path + ((name, False),)
            reads[("attr", name) if not path else ("attr", full)] = (
                lambda ctor, i: _built_key(ctor.follow(i, full)), _built_key(result))
            self._track(result, full)
        return result

    def member(self, inst: Instance, name: str) -> Instance | None:
        """The object `inst.<name>` surely is, as the backend runs it (its class replaced by the backend's, the
        same object for every read): one class, built under no test; None where it is not such an object."""
        got = self.attr(inst, name)
        if got is None or got.cls is None or got.condition is not None or got.alternatives:
            return None
        impl = self.implementation(got.cls)
        if impl is got.cls:
            return got
        kept = self._impls.get(id(got))
        if kept is None or kept[0] is not got:
            kept = self._impls[id(got)] = (got, Instance(impl, got.call, got.scope, None))
        path = self._path_of(inst)
        if path is not None:
            self._track(kept[1], path + ((name, True),))
        return kept[1]

    def follow(self, inst: Instance | None, path: tuple) -> Instance | None:
        """The object at `path` (steps (name, as the backend runs it)) from `inst`, as attr / member read it."""
        for name, impl in path:
            if inst is None:
                return None
            inst = self.member(inst, name) if impl else self.attr(inst, name)
        return inst

    def _path_of(self, inst) -> tuple | None:
        """While `reads` is kept: the path from `reads_of` to `inst` (() for it), None for another object."""
        if self.reads is None or inst is None:
            return None
        if inst is self.reads_of:
            return ()
        kept = self._paths.get(id(inst))
        return kept[1] if kept is not None and kept[0] is inst else None

    def _track(self, inst, path: tuple) -> None:
        if inst is not None and inst is not self.reads_of and id(inst) not in self._paths:
            self._paths[id(inst)] = (inst, path)

    def start_reads(self, inst: Instance) -> None:
        """Keep what is read of `inst` and of the objects it holds (the memo of its kernels, Backends)."""
        self.reads, self.reads_of, self._paths, self.replay = {}, inst, {}, []

    def stop_reads(self) -> None:
        self.reads = self.reads_of = None
        self._paths, self.replay = {}, []

    def _attr(self, inst: Instance, name: str, depth: int = 0) -> Instance | None:
        if inst.cls is None or depth > MAX_DEPTH:
            return None
        if name in inst.built:
            return inst.built[name]
        inst.built[name] = None  # cycle guard
        self._outside.append([])
        try:
            result = self._attr_built(inst, name, depth)
        finally:
            outside = self._outside.pop()
        if (result is None or result.cls is None) and outside:
            inst.outside[name] = outside[0]  # what builds it is a class outside the trees
        if result is not None and result.cls is not None and result.attr_name is None:
            result.attr_name = name
        inst.built[name] = result
        return result

    def _attr_built(self, inst: Instance, name: str, depth: int) -> Instance | None:
        result = None
        for c, fn, scope in self.init_scopes(inst):
            found = tables(fn, c.module).self_assignments.get(name, ())
            if not found:
                continue
            options: list[Instance] = []
            local_text = {t: c.module.code(v).strip() for t, v, _c, _p in tables(fn, c.module).local_assignments}
            for expr, cond, pos in found:
                self._fill_locals(fn, scope, c.module, before=pos)
                decided = self.evaluator.decide(cond, _NO_BINDINGS, scope=scope)
                if decided is Truth.FALSE:
                    continue  # the configuration rules this assignment out
                if decided is Truth.TRUE:
                    options, cond = [], None  # it runs, and replaces what earlier assignments built
                else:
                    cond = _explain(self._traced(decided, scope) if isinstance(decided, Condition) else None, local_text)
                for alt in self.evaluate(expr, scope, depth + 1):
                    alt.condition = join(cond, alt.condition)
                    if not impossible(alt.condition):  # (a test and its negation: never built)
                        options.append(alt)
                if id(expr) in self.unbuilt:  # why nothing is known of what it builds
                    inst.why[name] = self.unbuilt[id(expr)]
            result = pick(options)
            break
        if result is None:
            result = self._helper_attr(inst, name, depth)
        if result is None:
            result = self._filled_container(inst, name, depth)
        if result is None:
            result = self._class_attr(inst, name, depth)
        if result is None:
            result = self._field_attr(inst, name, depth)
        if result is not None and result.cls is None and result.condition is None:
            result = self._late_attr(inst, name, depth) or result
        if self.hf is not None and self.hf.applies(inst.cls):  # what the Transformers backend put there
            result = self.hf.swap(inst, name, result)
        return result

    def running_instance(self, inst: Instance) -> Instance:
        """The instance as the backend runs it: on Ascend, a vLLM layer class vllm-ascend registers another class
        for (REGISTERED_ASCEND_OPS: ColumnParallelLinear -> AscendColumnParallelLinear) built with the same call;
        the instance itself otherwise. One per instance (its values are read once)."""
        registered = self.registered_ops
        if self.env.backend != "ascend" or inst.cls is None or inst.cls.module.name.split(".")[0] != "vllm" \
                or registered is None:
            return inst
        kept = self._running.get(id(inst))
        if kept is None or kept[0] is not inst:
            cls = registered().get(inst.cls.name, inst.cls)
            kept = self._running[id(inst)] = (inst, inst if cls is inst.cls else
                                              Instance(cls, inst.call, inst.scope, inst.condition))
        return kept[1]

    def _field_attr(self, inst: Instance, name: str, depth: int) -> Instance | None:
        """`self.<name>` of a @dataclass the walk built: what the argument of its call for that field builds
        (`FusedMoEConfig(..., moe_parallel_config=moe_parallel_config)`, a factory's return)."""
        from ...semantics.objects import dataclass_argument, is_dataclass, rebound

        cls = inst.cls
        if inst.call is None or inst.scope is None or cls is None:
            return None
        mro = self.mro(cls)
        if not is_dataclass(mro) or rebound(mro, name):
            return None
        got = dataclass_argument(cls, inst.call, name)
        if got is None or got[1] != "call":
            return None
        return pick(self.evaluate(got[0], inst.scope, depth + 1))

    def assigned_local(self, inst: Instance, name: str) -> str | None:
        """The local of an __init__ of the instance's class (its MRO) that `self.<name>` is, where that
        __init__ assigns it once, unconditionally, from a plain name (`self.use_mha = use_mha`); else None."""
        if inst.cls is None:
            return None
        for c in self.mro(inst.cls):
            init = class_method(c, "__init__")
            if init is None:
                continue
            found = tables(init, c.module).self_assignments.get(name)
            if found:
                if len(found) == 1 and found[0][1] is None and isinstance(found[0][0], cst.Name):
                    return found[0][0].value
                return None
        return None

    def self_value(self, inst: Instance, name: str, evaluator, depth: int = 0):
        """The value `self.<name>` holds after the __init__ chain (`self.qk_norm = qk_norm`), for the evaluator:
        the last assignment whose condition holds, unknown when an undecided one may replace it."""
        result = self._self_value(inst, name, evaluator, depth)
        path, reads = self._path_of(inst), self.reads
        if path is not None and reads is not None:
            reads[("value", name) if not path else ("value", path, name)] = (
                lambda ctor, i: _value_at(ctor, ctor.follow(i, path), name), repr(result))
        return result

    def _self_value(self, inst: Instance, name: str, evaluator, depth: int = 0):
        from ...semantics.values import Unknown

        key = (id(inst), name)
        kept = self._values.get(key)
        if kept is not None and kept[0] is inst:
            return kept[1]
        self._values[key] = (inst, Unknown(f"self.{name} depends on itself"))
        result = Unknown(f"self.{name} is not assigned in __init__")
        scopes = inst.value_chain
        if scopes is None:  # its own scopes, read once per instance (attr()'s builds are not disturbed)
            scopes = inst.value_chain = self.init_scopes(inst)
        assigned = False
        for k, (c, fn, scope) in enumerate(scopes):
            found = tables(fn, c.module).self_assignments.get(name, ())
            if not found:
                continue
            # the locals an outer read of this instance filled (`self.b = self.a and i > 0` reads self.a with
            # the locals before it) are put back after; the subclasses' __init__ whose super().__init__ call
            # bound this one's parameters hold their locals up to that call while it is read
            outer = self._fill_callers(scopes[:k])
            saved = _scope_state(scope)
            try:
                result = self._read_assignments(inst, name, evaluator, depth, c, fn, scope, found)
            finally:
                _put_back(scope, saved)
                for s_, state in outer:
                    _put_back(s_, state)
            assigned = True
            break
        if not assigned and inst.cls is not None:
            helped = self._helper_value(inst, name, evaluator, depth)
            if helped is not None:
                result, assigned = helped, True
        if not assigned and inst.cls is not None:
            result = self._object_value(inst, name, evaluator, depth) or result
        again = self._set_at_load(inst, name, result) if assigned else None
        if again is not None:  # the loader's hook assigns it again after __init__: __init__'s value is not it
            result = Unknown(f"self.{name} is assigned again once the weights are loaded ({again})")
        elif assigned:
            outside = self.set_from_outside(name)
            if outside is not None:  # another object sets it after __init__ (the worker's cache set-up)
                result = Unknown(f"self.{name} is set on the object from outside its class ({outside})")
        self._values[key] = (inst, result)
        return result

    def _helper_value(self, inst: Instance, name: str, evaluator, depth: int):
        """`self.<name>` that no __init__ of the chain assigns but a method it calls does
        (`self._init_ffn_block()`: `self.num_experts = getattr(self.config, "num_experts", 0)`, minicpm.py): its
        assignments read in that method, its parameters bound to the call; None where no such method assigns it."""
        assert inst.cls is not None  # (asked of an instance of a known class only)
        for found, hscope, assigned, scope in self._init_helpers(inst, name):
            try:
                return self._read_assignments(inst, name, evaluator, depth, _in_module(found[0], found.module),
                                              found[1], hscope, assigned)
            finally:
                scope.version += 1
        return None

    def _set_at_load(self, inst: Instance, name: str, value) -> str | None:
        """`Class.method (file:line)` of a load hook of the instance's class (walk.yaml `runtime.load_hooks`:
        process_weights_after_loading) whose body assigns `self.<name>` something other than the known value
        __init__ gave it (MLA's `self.enable_mlapo = False` only turns off what __init__ left off: still False);
        None where none does."""
        from ...semantics.values import Known, literal

        if inst.cls is None:
            return None
        for hook in catalog().typed.walk.runtime.load_hooks:
            found = self.method(inst.cls, hook)
            assigned = tables(found[1], found.module).self_assignments.get(name) if found is not None else None
            if found is None or not assigned or isinstance(value, Known) and all(
                    isinstance(lit := literal(v), Known) and lit == value and type(lit.value) is type(value.value)
                    for v, _c, _p in assigned):
                continue
            return f"{found[0].name}.{hook} ({found.module.rel}:{found.module.line_of(found[1])})"
        return None

    def set_from_outside(self, name: str) -> str | None:
        """`file:line` of a statement of the backend's plugin package that assigns the private attribute `name` on
        another object (`layer._ascend_kda_state_copy = plan` in vllm-ascend's kda_state_copy_plan.py, once the KV
        cache is allocated): __init__'s value is not what the forward reads. The plugin trees only: vLLM's own
        package is not scanned (its text scan costs more than a model's walk)."""
        if not name.startswith("_"):
            return None
        for package in sorted(self.index.trees):
            if package in _NOT_SCANNED_FOR_SETTERS:
                continue
            found = self.index.outside_setters(package).get(name)
            if found:
                return f"{found[0][0]}:{found[0][1]}"
        return None

    def _object_value(self, inst: Instance, name: str, evaluator, depth: int):
        """`self.<name>` of an object no __init__ of the trees assigns it (semantics/objects.py): a @dataclass's
        field, the argument of the call that built it (`FusedMoEConfig(moe_parallel_config=...)`) or its
        declared default; a @property of its class, its body run on the object (`is_sequence_parallel`:
        `self.sp_size > 1`). None where neither (or a method rebinds it)."""
        from ...semantics.objects import dataclass_argument, is_dataclass, is_property, rebound

        cls = inst.cls
        if cls is None:
            return None
        mro = self.mro(cls)
        if inst.call is not None and inst.scope is not None and is_dataclass(mro) and not rebound(mro, name):
            got = dataclass_argument(cls, inst.call, name)
            if got is not None:
                value, where = got
                return evaluator.infer(value, inst.scope if where == "call" else Scope(module=cls.module), depth + 1)
        found = self.method(cls, name)
        if found is not None and found.patch is None and is_property(found.module, found[1]):
            return evaluator.run_property(inst, found, depth)
        if found is None and not is_dataclass(mro) and not rebound(mro, name):
            return self._class_level(mro, name, evaluator, depth)
        return None

    def _class_level(self, mro, name: str, evaluator, depth: int):
        """`self.<name>` that no method of the instance's classes assigns: the value the first class of its MRO
        gives it in its body (`enable_pcp_o_proj_weight_sharding = False`, a subclass's __init__ sets it on its
        own instances only); None where none gives one, or it is an object built there (shared by instances)."""
        from ...semantics.runtime_defaults import _declared

        for c in mro:
            value = _declared(c).get(name)
            if value is None:  # (a bare annotation: the next class may give it a value)
                continue
            if type(value) is cst.Call:
                return None
            return evaluator.infer(value, Scope(module=c.module), depth + 1)
        return None

    def _read_assignments(self, inst: Instance, name: str, evaluator, depth: int, c, fn, scope: Scope, found):
        """`self.<name>` after the assignments `found` of one __init__ (self_value)."""
        from ...semantics.values import Unknown

        result = Unknown(f"self.{name} is not assigned in __init__")
        base = None  # the last assignment that surely runs
        open_: list[tuple] = []  # it and those after it under an undecided test, each with its truth
        for expr, cond, pos in found:
            self._fill_locals(fn, scope, c.module, before=pos)
            t = evaluator.condition_truth(cond, scope=scope)
            if t is Truth.TRUE:
                result = self._assigned_value(inst, name, evaluator, depth, expr, scope)
                base, open_ = (expr, cond, pos, t), []
            elif t is Truth.UNKNOWN:
                result = Unknown(f"self.{name} is assigned under a condition that is not decided")
                open_ = (open_ or ([base] if base is not None else [])) + [(expr, cond, pos, t)]
        if open_:
            return self._one_of_branches(inst, name, evaluator, depth, fn, c.module, scope, open_) or result
        return result

    def _assigned_value(self, inst: Instance, name: str, evaluator, depth: int, expr, scope: Scope):
        """The value one assignment `self.<name> = expr` stores, read with the locals before it."""
        from ...semantics.values import NotNone, Unknown

        result = evaluator.infer(expr, scope, depth)
        if isinstance(result, Unknown) and type(expr) is cst.Subscript and type(expr.value) is cst.Call:
            result = self._built_value(inst, name, result)  # `self.op, ... = factory(...)`
        elif isinstance(result, Unknown) and type(expr) is cst.Call:
            # `self.rotary_emb = get_rope(...)`: an object where the construction builds a module
            # class there on every path (a value that is no module says nothing: not taken as None)
            built = self._built_value(inst, name, result)
            result = built if isinstance(built, NotNone) else result
        return result

    def _one_of_branches(self, inst: Instance, name: str, evaluator, depth: int, fn, module, scope: Scope,
                         found: list):
        """`self.<name>` after assignments under tests the evaluator does not decide, where whichever way those
        tests go one of them is the last that runs (an `if` / `elif` / `else` chain, or a value assigned first
        and replaced under a test): one of the values they store (OneOf; the one value where they agree).
        None where some way of the tests assigns none of them, a test is no code, or a stored value is not
        known."""
        from itertools import product

        from ...semantics.values import OneOf, Unknown

        tests: dict = {}  # the undecided tests, by their code: (module, text) -> (index, ...)
        needs = []  # per assignment: [(test, must hold)] it needs beyond what is decided
        for _expr, cond, _pos, t in found:
            need = []
            for term in (cond.terms if cond and t is not Truth.TRUE else ()):
                truth = evaluator.term_truth(term, None, scope=scope)
                if truth is Truth.TRUE:
                    continue
                if truth is Truth.FALSE or term.expr is None:
                    return None  # (a FALSE term: the whole assignment was FALSE, never listed here)
                module_name, text, holds = term.key()
                need.append((tests.setdefault((module_name, text), len(tests)), holds))
            needs.append(need)
        if len(tests) > 6:  # 64 ways at most
            return None
        last: set[int] = set()
        for way in product((False, True), repeat=len(tests)):
            runs = [i for i, need in enumerate(needs) if all(way[k] == holds for k, holds in need)]
            if not runs:
                return None  # this way of the tests assigns none of them: what it holds then is not read here
            last.add(runs[-1])
        values = []
        for i in sorted(last):
            expr, _cond, pos, _t = found[i]
            self._fill_locals(fn, scope, module, before=pos)
            value = self._assigned_value(inst, name, evaluator, depth, expr, scope)
            if isinstance(value, (Unknown, OneOf)):
                return None
            if value not in values:
                values.append(value)
        return values[0] if len(values) == 1 else OneOf(tuple(values))

    def unknown_sources(self, name: str, limit: int = 4, with_none: bool = False) -> list[list[str]]:
        """For each instance of this walk whose `self.<name>` the evaluator read and left unknown (up to
        `limit`): the code it is computed from (value_sources). For status/waits.py: what an undecided test on
        the attribute waits on."""
        from ...semantics.values import OneOf, Unknown

        from ...semantics.values import Known

        # `with_none`: a None too, for a test that cannot use one (`self.qk_rope_head_dim > 0`)
        held = [inst for (_i, n), (inst, value) in list(self._values.items())
                if n == name and (isinstance(value, (Unknown, OneOf)) or (with_none and value == Known(None)))
                and inst.cls is not None]
        held += [inst for (_i, n), (inst, _s, _e) in list(self._calls.items()) if n == name]
        if held:
            return [self.value_sources(inst, name) for inst in held[:limit]]
        return [self.value_sources(None, name, call=got) for got in self._functions.get(name, [])[:limit]]

    def _run_time_setter(self, inst: Instance, name: str) -> str | None:
        """`Class.method` of the first method (not __init__) of the instance's classes that assigns
        `self.<name>`, where no __init__ of its chain does: a value the object keeps between calls."""
        for c in self.mro(inst.cls) if inst.cls is not None else ():
            if not c.mentions(f"self.{name}".encode()):
                continue
            node = c.node
            for fn in node.body.body if isinstance(node, cst.ClassDef) and type(node.body) is cst.IndentedBlock else ():
                if type(fn) is cst.FunctionDef and fn.name.value != "__init__" \
                        and name in tables(fn, c.module).self_assignments:
                    return f"{c.name}.{fn.name.value}"
        return None

    def note_function(self, target: Definition, call: cst.Call, scope: Scope) -> None:
        """A call of the function `target` (of the trees) whose value the evaluator left unknown: kept once per
        call site, for what a test calling it waits on (unknown_sources)."""
        kept = self._functions.setdefault(target.name, [])
        if len(kept) < 4 and not any(c is call for _t, c, _s in kept):
            kept.append((target, call, scope))

    def note_call(self, inst: Instance, name: str, scope: Scope, left: list, call=None, caller=None) -> None:
        """`self.<name>(...)` of `inst` stayed undecided: `left`, the expressions it still depends on (read in
        `scope`), name what it waits on."""
        self._calls[(id(inst), name)] = (inst, scope, left)
        path = self._path_of(getattr(caller, "owner", None))  # the call is made again in the caller's place
        if path is not None and call is not None and caller is not None:
            self.replay.append((path, call, caller.module, dict(caller.values), dict(caller.fields)))

    def made_again(self, inst: Instance, replay: list) -> None:
        """The undecided calls a memo's walk made on the objects its instance holds, made on `inst` (note_call)."""
        for path, call, module, values, fields in replay:
            held = self.follow(inst, path)
            if held is not None:
                self.evaluator.infer(call, Scope(module=module, owner=held, values=values, fields=fields))

    def _none_operands(self, owner: Instance, scope: Scope, exprs: list) -> list[str]:
        """NONE_OPERAND_SOURCE of each `self.x` of `owner` that the tests and returns `exprs` left undecided order
        or compute with (`self.top_k > n`) while it holds None: Python raises there, so what runs holds another
        value, which the code `self.x` is computed from gives."""
        from ...semantics.values import Known

        out: list[str] = []
        if self._none_depth > 0:
            return out
        self._none_depth += 1
        try:
            for expr in exprs:
                for node in iter_nodes(expr) if isinstance(expr, cst.CSTNode) else ():
                    if type(node) is cst.Comparison and any(type(c.operator) in _ORDERING for c in node.comparisons):
                        operands = [node.left] + [c.comparator for c in node.comparisons]
                    elif type(node) is cst.BinaryOperation and type(node.operator) in _COMPUTING:
                        operands = [node.left, node.right]
                    else:
                        continue
                    for op in operands:
                        if type(op) is cst.Attribute and _is_self(op.value) \
                                and self.evaluator.infer(op, scope) == Known(None):
                            got = NONE_OPERAND_SOURCE.format(" ; ".join(self.value_sources(owner, op.attr.value)))
                            if got not in out:
                                out.append(got)
        finally:
            self._none_depth -= 1
        return out

    def value_sources(self, inst: Instance | None, name: str, depth: int = 20, call: tuple | None = None) -> list[str]:
        """The code `self.<name>` is computed from, read back along the __init__ chain (never evaluated): its
        assignments' values and tests, and, through them, the instance's other `self.x`, the __init__'s locals,
        and the arguments its parameters were bound to where the caller wrote them (`num_heads` of
        `AscendMLAImpl` is `num_heads // tp_size` of the model's attention), `kwargs["k"]` included."""
        out: list[str] = []
        seen: set = set()
        unpacked: dict = {}  # id(scope) -> {name: the item of a call's return it was unpacked from}

        def attr(owner: Instance, attr_name: str, left: int) -> None:
            key = (id(owner), attr_name)
            if left <= 0 or key in seen or owner.cls is None or len(out) > _MAX_SOURCES:
                return
            seen.add(key)
            scopes = owner.value_chain
            if scopes is None:  # its own scopes, as self_value reads them (attr()'s builds are not disturbed)
                scopes = owner.value_chain = self.init_scopes(owner)
            for k, (c, fn, scope) in enumerate(scopes):
                found = tables(fn, c.module).self_assignments.get(attr_name, ())
                if not found:
                    continue
                # `a, b, c = helper(...)`: each name the helper's return item (read back below)
                unpacked[id(scope)] = {t.value: v for t, v, _c, _p in tables(fn, c.module).assignments
                                       if type(t) is cst.Name and type(v) is cst.Subscript
                                       and type(v.value) is cst.Call}
                # (the subclasses' locals their super().__init__ hands on; what an outer read of the same
                # __init__ filled is put back after)
                outer = self._fill_callers(scopes[:k])
                saved = _scope_state(scope)
                try:
                    for expr, cond, pos in found:
                        self._fill_locals(fn, scope, c.module, before=pos)
                        # the tests it is assigned under first: they decide which value it holds, and a value's
                        # own sources (a factory's whole body) may fill the budget
                        for term in (cond.terms if cond is not None else ()):
                            if term.expr is not None:
                                code(term.expr, scope, left - 1)
                        code(expr, scope, left - 1)
                        out.extend(self._optional_imports(fn, c.module, expr))
                finally:
                    _put_back(scope, saved)
                    for s_, state in outer:
                        _put_back(s_, state)
                return
            for met, hscope, found, _scope in self._init_helpers(owner, attr_name):  # a method __init__ calls
                for expr, cond, hpos in found:
                    self._fill_locals(met[1], hscope, met.module, before=hpos)
                    code(expr, hscope, left - 1)
                    for term in (cond.terms if cond is not None else ()):
                        if term.expr is not None:
                            code(term.expr, hscope, left - 1)
                return
            called = self._calls.get((id(owner), attr_name))
            if called is not None and called[0] is owner:  # a method of it whose value is left undecided
                for expr in called[2]:
                    code(expr, called[1], left - 1)
                out.extend(self._none_operands(owner, called[1], called[2]))
                return
            setter = self._run_time_setter(owner, attr_name)
            if setter is not None:  # `self._tq_kv_plan = ...` in get_kv_plan: what an earlier call left
                out.append(RUN_TIME_SOURCE.format(setter))
            getter = self.method(owner.cls, attr_name)
            if getter is not None and getter.patch is None and is_property(getter.module, getter[1]):
                # a @property (`runtime_has_indexer`: `self.has_indexer and not getattr(self, ...)`): its returns
                # and their tests, read on the object
                inner = Scope(module=getter.module, owner=owner)
                for local, value, cond, _pos in tables(getter[1], getter.module).local_assignments:
                    inner.locals.setdefault(local, []).append((value, cond))
                for value, cond in tables(getter[1], getter.module).returns:
                    code(value, inner, left - 1)
                    for term in (cond.terms if cond is not None else ()):
                        if term.expr is not None:
                            code(term.expr, inner, left - 1)

        def code(expr, scope: Scope, left: int) -> None:
            if left <= 0 or len(out) > _MAX_SOURCES or scope is None:
                return
            try:
                out.append(" ".join(code_of(scope.module, expr).split()))
            except Exception:  # an expression of another module's tree: its names say nothing here
                return
            got = star_kwarg(expr, scope)
            if got is not None:
                code(got[0], got[1], left - 1)
                return
            names(expr, scope, left)

        def names(node, scope: Scope, left: int) -> None:
            """The names an expression reads, followed to what they hold (an attribute's own name is none)."""
            t = type(node)
            if t is cst.Attribute:
                owner = scope.owner
                if _is_self(node.value) and isinstance(owner, Instance):
                    attr(owner, node.attr.value, left - 1)
                    return
                if type(node.value) is cst.Name:  # mla_modules.rotary_emb of `MLAModules(rotary_emb=..., ...)`
                    got = _field_of_built(node.value.value, node.attr.value, scope, self._local_of)
                    if got is not None:
                        code(got[0], got[1], left - 1)
                        return
                holder = node.value.attr.value if type(node.value) is cst.Attribute else \
                    node.value.value if type(node.value) is cst.Name else ""
                if holder.endswith("_config"):  # `cache_config.sliding_window`: what EngineArgs builds it from
                    from ...semantics.runtime_defaults import engine_local, engine_local_code

                    out.extend(engine_local_code(self.index, holder, node.attr.value))
                    found = engine_local(self.index, holder, node.attr.value)
                    if found is not None:  # (and into the helpers it calls: resolve_kv_cache_dtype_string)
                        built = Scope(module=found.module)
                        for local, value, cond in found.before:
                            built.locals.setdefault(local, []).append((value, cond))
                        for value, _cond, _pos in found.assignments:
                            names(value, built, left - 1)
                derived = self._derivations(node, scope)
                if derived:  # `ascend_config.enable_sparse_sfa_c8` of get_ascend_config(): what derives it
                    for value, where in derived:
                        code(value, where, left - 1)
                    return
                names(node.value, scope, left)
                return
            if t is cst.Name:
                if (node.value, id(scope)) in seen:
                    return
                seen.add((node.value, id(scope)))
                if node.value in scope.locals:
                    for value, cond in scope.locals[node.value]:
                        code(value, scope, left - 1)
                        for term in (cond.terms if cond is not None else ()):  # what decides which one it holds
                            if term.expr is not None:
                                code(term.expr, scope, left - 1)
                elif node.value in scope.params:
                    value, where = scope.params[node.value]
                    code(value, where, left - 1)
                elif node.value in unpacked.get(id(scope), {}):
                    code(unpacked[id(scope)][node.value], scope, left - 1)
                return
            if t in (cst.Subscript, cst.Call):
                sub = star_kwarg(node, scope)
                if sub is not None:
                    code(sub[0], sub[1], left - 1)
                    return
            if t is cst.Subscript and type(node.value) is cst.Call and returned_item(node, scope, left):
                return
            if t is cst.Call and type(node.func) is cst.Name and node.func.value == "getattr" and len(node.args) >= 2 \
                    and _is_self(node.args[0].value) and type(node.args[1].value) is cst.SimpleString \
                    and isinstance(scope.owner, Instance):  # getattr(self, "x", None): self.x
                attr(scope.owner, str(node.args[1].value.evaluated_value), left - 1)
                return
            if t is cst.Call and type(node.func) is cst.Name and node.func.value == "getattr" and len(node.args) >= 2 \
                    and type(node.args[1].value) is cst.SimpleString and type(node.args[0].value) in (cst.Name, cst.Attribute):
                # getattr(cache_config, "cache_dtype", None): read as `cache_config.cache_dtype`
                read = cst.Attribute(value=node.args[0].value, attr=cst.Name(str(node.args[1].value.evaluated_value)))
                names(read, scope, left)
                for arg in node.args[2:]:
                    names(arg.value, scope, left)
                return
            if t is cst.Call and isinstance(node.func, (cst.Name, cst.Attribute)):
                built = Callee(self.index, scope.module, node, runs=self.runs).named
                if isinstance(built, Definition) and built.kind == "class":
                    return  # an object the code builds: what it is built with does not make it None or not
                if built is None and isinstance(scope.module, ModuleInfo) \
                        and self.index.dotted(scope.module, node.func) in _never_none():
                    return  # likewise of an outside callable that never returns None (`torch.nn.Parameter(...)`)
                if isinstance(built, Definition) and built.kind == "function" and helper(built, node, scope, left):
                    for child in node.args:  # (and what it is called with)
                        names(child.value, scope, left)
                    return
                if isinstance(built, Definition) and built.kind == "function" \
                        and not (type(node.func) is cst.Attribute and _is_self(node.func.value)) \
                        and returned(built, node, scope, left):
                    return
            if t is cst.Lambda:
                return
            for child in node.children:
                if isinstance(child, cst.CSTNode):
                    names(child, scope, left)

        def helper(target, call: cst.Call, scope: Scope, left: int) -> bool:
            """A small helper of the trees the evaluator runs (only decisions, or loops over a known sequence:
            `should_reuse_topk(config, layer_id)`, `_get_config_bool(configs, "use_index_cache")`): its returns
            and their tests, read in it with its parameters bound to the call, a parameter bound to a literal
            written in its place (`hasattr(config, "use_index_cache")`). False for any other function."""
            from ...semantics.known_calls import _decision_function
            from ...semantics.loops import loop_function

            fn = target.node
            if type(fn) is not cst.FunctionDef or left <= 1 or (id(fn), id(call)) in seen \
                    or not (_decision_function(fn, target.module) or loop_function(fn, target.module)):
                return False
            seen.add((id(fn), id(call)))
            inner = Scope(module=target.module)
            bind_params(fn, call, scope, inner, skip_self=False)
            literals = {p: v for p, (v, _w) in inner.params.items()
                        if isinstance(v, (cst.SimpleString, cst.Integer, cst.Float))
                        or (type(v) is cst.Name and v.value in ("True", "False", "None"))}
            table = tables(fn, target.module)
            for local, value, cond, _pos in table.local_assignments:
                inner.locals.setdefault(local, []).append((_written(value, literals), cond))
            for stmt, cond in table.statements:  # every test on the way, and what each return gives
                tests = [stmt.test] if type(stmt) is cst.If else []
                returns = [small.value for small in (stmt.body if type(stmt) is cst.SimpleStatementLine else ())
                           if type(small) is cst.Return and small.value is not None]
                for expr in tests + returns:
                    code(_written(expr, literals), inner, left - 1)
            return True

        def returned_item(node: cst.Subscript, scope: Scope, left: int) -> bool:
            """`helper(...)[k]` of a function of the trees: item k of each tuple it returns, read in the
            function with its parameters bound to the call (`rope_theta` of granite_layer_attn_params)."""
            from ...semantics.runtime_defaults import iter_returns
            from ...semantics.values import literal

            key = literal(node.slice[0].slice.value) if len(node.slice) == 1 and type(
                node.slice[0].slice) is cst.Index else None
            call = node.value
            if key is None or type(key.value) is not int or not isinstance(call, cst.Call):
                return False
            target = Callee(self.index, scope.module, call, runs=self.runs).named
            if not isinstance(target, Definition) or target.kind != "function" or not isinstance(target.node, cst.FunctionDef):
                return False
            fn: cst.FunctionDef = target.node
            inner = Scope(module=target.module)
            bind_params(fn, call, scope, inner, skip_self=False)
            for local, value, cond, _pos in tables(fn, target.module).local_assignments:
                inner.locals.setdefault(local, []).append((value, cond))
            for ret in iter_returns(fn):
                if type(ret.value) is cst.Tuple and key.value < len(ret.value.elements):
                    code(ret.value.elements[key.value].value, inner, left - 1)
            return True

        def returned(target: Definition, call: cst.Call, scope: Scope, left: int) -> bool:
            """A function of the trees the code calls (`get_dsv4_compress_ratio(config, layer_idx)`): what its
            returns and the tests before them read, in the function with its parameters bound to the call
            (`getattr(config, "compress_ratios", None)`); its arguments where it returns none of them."""
            fn = target.node
            if not isinstance(fn, cst.FunctionDef) or left <= 1 or ("function", id(fn), id(call)) in seen:
                return False
            seen.add(("function", id(fn), id(call)))
            body = tables(fn, target.module)
            if not body.returns:
                return False
            for arg in call.args:  # what it is handed (a field read in the call itself)
                names(arg.value, scope, left - 1)
            inner = Scope(module=target.module)
            bind_params(fn, call, scope, inner, skip_self=False)
            for local, value, cond, _pos in body.local_assignments:
                inner.locals.setdefault(local, []).append((value, cond))
            for value, cond in body.returns:
                code(value, inner, left - 1)
                for term in (cond.terms if cond is not None else ()):
                    if term.expr is not None:
                        code(term.expr, inner, left - 1)
            return True

        if call is not None:  # (the function, its call, the scope it was read in): what its returns read
            returned(call[0], call[1], call[2], depth)
        elif inst is not None:
            attr(inst, name, depth)
        return list(dict.fromkeys(out))

    def _optional_imports(self, fn: cst.FunctionDef, module, expr) -> list[str]:
        """The imports of packages outside the trees that a `try` around `expr` makes before it (`try: import
        xielu.ops` then `self._xielu_cuda_obj = torch.classes.xielu.XIELU()`, vllm/model_executor/layers/
        activation.py): whether the assignment runs is whether they import on the deployment."""
        out = []
        for t in find_all(fn, cst.Try):
            stmts = list(t.body.body)
            at = next((i for i, st in enumerate(stmts) if any(n is expr for n in find_all(st, type(expr)))), None)
            for st in stmts[:at] if at is not None else ():
                for small in st.body if type(st) is cst.SimpleStatementLine else ():
                    if type(small) is cst.Import:
                        names = [code_of(module, a.name) for a in small.names]
                    elif type(small) is cst.ImportFrom and not small.relative and small.module is not None:
                        names = [code_of(module, small.module)]
                    else:
                        continue
                    if any(n.split(".")[0] not in self.index.trees for n in names):
                        out.append(" ".join(code_of(module, small).split()))
        return out

    def _derivations(self, node: cst.Attribute, scope: Scope) -> list:
        """`x.<field>` where x is the backend's configuration built from no user input (`ascend_config =
        get_ascend_config()`, walk.yaml runtime.defaults): [(value, scope)] of each `self.<field> = value` its
        class's methods make (AscendConfig.derive_and_validate), each read in its method; [] otherwise."""
        from ...semantics.runtime_defaults import _assigned_by_methods

        held = node.value
        if type(held) is cst.Name and len(scope.locals.get(held.value, ())) == 1:
            held = scope.locals[held.value][0][0]
        if type(held) is not cst.Call or type(held.func) is not cst.Name:
            return []
        qualname = (catalog().typed.walk.runtime.defaults or {}).get(held.func.value)
        if not qualname or self.index.dotted(scope.module, held.func) is None:
            return []
        mod, _, name = str(qualname).rpartition(".")
        cls = self.index.lookup(mod, name)
        if not isinstance(cls, Definition) or cls.kind != "class" or not _assigned_by_methods(cls, node.attr.value):
            return []
        out = []
        for fn in (st for st in cast(cst.ClassDef, cls.node).body.body if type(st) is cst.FunctionDef):
            table = tables(fn, cls.module)
            for value, _cond, _pos in table.self_assignments.get(node.attr.value, ()):
                inner = Scope(module=cls.module)
                for local, v, c, _p in table.local_assignments:
                    inner.locals.setdefault(local, []).append((v, c))
                out.append((value, inner))
        return out

    def external_call(self, inst: Instance, name: str) -> tuple[str, cst.Call, Scope] | None:
        """`self.gate = nn.Linear(...)`: (the dotted name of the constructor outside the trees, its call, the
        __init__'s scope with the locals before the call filled, to read its arguments in)."""
        for c, fn, scope in self.init_scopes(inst):
            for expr, _cond, pos in tables(fn, c.module).self_assignments.get(name, ()):
                if type(expr) is cst.Call and isinstance(expr.func, (cst.Name, cst.Attribute)):
                    dotted = self.index.dotted(c.module, expr.func)
                    if dotted and dotted.split(".")[0] not in self.index.trees:
                        self._fill_locals(fn, scope, c.module, before=pos)
                        return dotted, expr, scope
            return None
        return None

    def _fill_locals(self, fn: cst.FunctionDef, scope: Scope, module, before: int) -> None:
        scope.locals = {}
        scope.version += 1
        for expr_target, value, cond, pos in tables(fn, module).all_locals:  # (`a, b = f(...)`: f(...)[k])
            if pos < before:
                scope.locals.setdefault(expr_target, []).append((value, cond))
        scope.fills = {name: [(value, cond) for pos, cond, value in fills if pos < before]
                       for name, fills in tables(fn, module).local_fills.items()}
        scope.kwarg_fills = self._kwarg_fills(fn, scope, module, before)
        scope.attr_sets = {}
        for target, value, cond, pos in tables(fn, module).assignments:
            if pos < before and type(target) is cst.Attribute and type(target.value) is cst.Name \
                    and target.value.value in scope.locals:  # `copied.field = value` on a local object
                scope.attr_sets.setdefault(target.value.value, {}).setdefault(target.attr.value, []).append((value, cond))
        scope.loops = tables(fn, module).loop_names  # (`for i in range(n)`: i is one of its values)

    def assigned(self, inst: Instance, name: str) -> Truth:
        """Whether the __init__ chain of `inst` assigns `self.<name>` at all: TRUE where one assignment surely
        runs, FALSE where every one stands under a test decided false (`self.g_proj = ...` under `if
        self.use_output_gate:` with no output gate) or there is none, UNKNOWN otherwise."""
        key = (id(inst), name)
        if key in self._assigning:  # (`if not hasattr(self, "x"): self.x = ...`: asked while it is decided)
            return Truth.UNKNOWN
        self._assigning.add(key)
        try:
            return self._assigned(inst, name)
        finally:
            self._assigning.discard(key)

    def _assigned(self, inst: Instance, name: str) -> Truth:
        scopes = inst.value_chain
        if scopes is None:
            scopes = inst.value_chain = self.init_scopes(inst)
        out = Truth.FALSE
        for k, (c, fn, scope) in enumerate(scopes):
            found = tables(fn, c.module).self_assignments.get(name, ())
            if not found:
                continue
            outer = self._fill_callers(scopes[:k])
            saved = _scope_state(scope)
            try:
                for _expr, cond, pos in found:
                    self._fill_locals(fn, scope, c.module, before=pos)
                    t = self.evaluator.condition_truth(cond, scope=scope)
                    if t is Truth.TRUE:
                        return Truth.TRUE
                    if t is Truth.UNKNOWN:
                        out = Truth.UNKNOWN
            finally:
                _put_back(scope, saved)
                for s_, state in outer:
                    _put_back(s_, state)
        return out

    def _fill_callers(self, chain: list) -> list:
        """Fill the locals of each __init__ of `chain` (the subclasses' ones before the __init__ being read) up to
        its `super().__init__(...)` call, whose arguments bind the next one's parameters
        (`super().__init__(config=upstream_config)` after `upstream_config = copy(config)`); [(scope, what it
        held)] to put back."""
        out = []
        for c, fn, scope in chain:
            at = tables(fn, c.module).super_init_position
            if at is None:
                continue
            out.append((scope, _scope_state(scope)))
            self._fill_locals(fn, scope, c.module, before=at)
        return out

    def _kwarg_fills(self, fn: cst.FunctionDef, scope: Scope, module, before: int) -> dict:
        """{`**kwargs` name: {key: (value, scope) or None}} of the `kwargs["key"] = value` the body makes before
        statement `before` (FunctionTables.kwarg_fills), each under a test decided here; None where it is not
        (Scope.kwarg_fills). A dict the body changes another way says nothing of its keys."""
        fills = tables(fn, module).kwarg_fills
        star = fn.params.star_kwarg  # (there where the body fills `kwargs[...]`)
        if not fills or star is None:
            return {}
        out: dict = {}
        for pos, cond, key, value in fills:
            if pos >= before:
                continue
            truth = self.evaluator.condition_truth(cond, scope=scope)
            if truth is Truth.FALSE:
                continue
            out[key] = (value, scope) if truth is Truth.TRUE else None
        return {star.name.value: out} if out else {}

    # -- expressions -----------------------------------------------------------------------------
    def evaluate(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> list[Instance]:
        """Instances an expression builds (several when it is conditional)."""
        if depth > MAX_DEPTH or expr is None:
            return []
        if type(expr) is cst.IfExp:
            known = self.evaluator.truth(expr.test, scope.module, scope=scope)
            if known is Truth.UNKNOWN:  # `f(x) if f else y`, f a configuration value that is no callable
                known = self.evaluator.branch_that_cannot_run(expr, scope, depth)
            if known is not Truth.UNKNOWN:  # decided: only the branch that runs
                return self.evaluate(expr.body if known is Truth.TRUE else expr.orelse, scope, depth + 1)
            cond = self._traced(Condition.of(expr.test, scope.module), scope)
            out = []
            # copies: `None if self.replicate_shared_expert else self.shared_expert` is the instance `self.x`
            # holds, whose own condition must not take this expression's test; a branch whose module is built
            # only where this test does not hold (the same value tested where it is handed on) is none
            for alt in self.evaluate(expr.body, scope, depth + 1):
                out.append(replace(alt, condition=join(cond, alt.condition)))
            for alt in self.evaluate(expr.orelse, scope, depth + 1):
                out.append(replace(alt, condition=join(cond.negate(), alt.condition)))
            return [alt for alt in out if not impossible(alt.condition)]
        if type(expr) is cst.Name and expr.value == "None":
            return [Instance(None)]
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return [i for i in self._value_of(expr, scope, depth) if i is not None]
        got = star_kwarg(expr, scope)
        if got is not None:  # kwargs["q_proj"], kwargs.get("fused_qkv_a_proj"): what the caller passed by that name
            value, where = got
            return self.evaluate(value, where, depth + 1)
        if type(expr) is cst.Call:
            return self._call(expr, scope, depth)
        if type(expr) is cst.BooleanOperation and type(expr.operator) is cst.Or:
            return self.evaluate(expr.left, scope, depth + 1) or self.evaluate(expr.right, scope, depth + 1)
        if type(expr) is cst.Subscript:
            item = _integer_item(expr)
            if item is not None and type(expr.value) is cst.Call:  # f(...)[k]: item k of what f returns
                return self._call(expr.value, scope, depth, item=item)
            if all(type(s.slice) is cst.Slice for s in expr.slice):  # self.layers[a:b] is still the layer list
                base = [i for i in self.evaluate(expr.value, scope, depth + 1) if i.element is not None]
                if base:
                    return base
            index = expr.slice[0].slice.value if len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index else None
            base = self._dict_values(expr.value, index, scope, depth)  # LAYER_TYPES[config.x]
            if base:
                return base
        return []

    def _value_of(self, expr, scope: Scope, depth: int) -> list[Instance]:
        if type(expr) is cst.Attribute and type(expr.value) is cst.Name and expr.value.value == "self":
            if scope.owner is not None:
                found = self.attr(scope.owner, expr.attr.value, depth + 1)
                return [found] if found is not None else []
            return []
        if type(expr) is cst.Name and expr.value == "self" and "self" not in scope.params and scope.owner is not None:
            return [scope.owner]  # `get_replicated_op(disable_tp, prefix, self)`: the instance being built
        if type(expr) is cst.Attribute and self.nested_attr(expr, scope, depth) is not None:
            return self.nested_attr(expr, scope, depth)
        if type(expr) is cst.Attribute and type(expr.value) is cst.Name:
            got = _field_of_built(expr.value.value, expr.attr.value, scope, self._local_of)
            if got is not None:  # mla_modules.o_proj with mla_modules = MLAModules(o_proj=self.o_proj, ...)
                return self.evaluate(got[0], got[1], depth + 1)
        if type(expr) is cst.Name:
            name = expr.value
            if name in scope.locals:
                out: list[Instance] = []
                values = scope.locals.pop(name)  # `x = x or Default` reads the parameter x on the right
                scope.version += 1
                try:
                    certain = False  # an assignment that surely runs replaces the parameter and what came before
                    for value, cond in values:
                        truth = self.evaluator.condition_truth(cond, scope=scope) if cond else Truth.TRUE
                        if truth is Truth.FALSE:
                            continue  # `if router is None: router = ...` with a router given
                        if truth is Truth.TRUE:
                            out, certain, cond = [], True, None
                        elif cond:  # `elif b:` after a decided `if a:`: only b is left of `not (a) and b`
                            left = self.evaluator.decide(cond, _NO_BINDINGS, scope=scope)
                            cond = left if isinstance(left, Condition) else cond
                        for alt in self.evaluate(value, scope, depth + 1):
                            alt.condition = join(cond, alt.condition)
                            out.append(alt)
                    if not certain and (name in scope.params or name in scope.defaults):
                        out = self._value_of(expr, scope, depth + 1) + out  # the parameter, where no assignment ran
                finally:
                    scope.locals[name] = values
                    scope.version += 1
                return out
            if name in scope.params:
                value, where = scope.params[name]
                return self.evaluate(value, where, depth + 1)
            if name in scope.defaults:
                return self.evaluate(scope.defaults[name], Scope(module=scope.module, owner=scope.owner), depth + 1)
        hops: list = []
        target = self.index.traced(scope.module, expr, hops)
        if target is None and type(expr) is cst.Name:
            local = function_imports(scope.module).get(expr.value)  # `from ... import X` inside a function
            target = self.index.lookup(local[0], local[1], None, hops, None) if local else None
        target = self.runs(scope.module, hops, target)[0]  # a class a vllm-ascend patch put in its place
        if isinstance(target, Definition) and target.kind == "class":
            return [Instance(target)]  # a class object (called later)
        if isinstance(target, Definition) and target.kind == "assign":
            return self.evaluate(target.node, Scope(module=target.module), depth + 1)
        return []

    # -- where a tested value is set -----------------------------------------------------------------
    def _traced(self, cond: Condition, scope: Scope) -> Condition:
        """`cond` (tests written where `scope` binds the names) with each test that reads a value handed down
        marked with where that value is set (Term.same): vllm-ascend's MLA impl's `self.q_lora_rank` is
        `kwargs["q_lora_rank"]`, its layer's `self.q_lora_rank`, the decoder layer's `q_lora_rank=...`: the impl's
        `self.q_lora_rank is None` and the layer's `self.q_lora_rank is not None` test one value."""
        terms, changed = [], False
        for t in cond.terms:
            if t.expr is not None and t.same is None and t.alias is None:
                same = self._origins_in(t.expr, scope)
                if same is not None:
                    t, changed = replace(t, same=same), True
            terms.append(t)
        return Condition(tuple(terms)) if changed else cond

    def _origins_in(self, expr, scope: Scope):
        """The test with every name or `self.x` it reads replaced by one for where its value is set; None where
        none is handed down."""
        ctor = self

        class Swap(cst.CSTTransformer):
            swapped = False

            def on_visit(self, node) -> bool:
                return not (isinstance(node, cst.Attribute) and _is_self(node.value)) and not isinstance(node, cst.Name)

            def on_leave(self, original, updated):
                if isinstance(original, cst.Attribute) and _is_self(original.value) or \
                        isinstance(original, cst.Name) and original.value not in ("None", "True", "False", "self"):
                    at = ctor._origin(original, scope)
                    if at is not None:
                        self.swapped = True
                        return cst.Name(f"_set_at_{id(at)}")
                return updated

        try:
            swap = Swap()
            out = expr.visit(swap)
        except Exception:  # noqa: BLE001 - a test libcst will not rebuild: not traced
            return None
        return out if swap.swapped and isinstance(out, cst.BaseExpression) else None

    def _origin(self, expr, scope: Scope):
        """The expression where the value of `expr` (a name, `self.x`) is set, followed through the arguments
        that bound parameters, single unconditional assignments (`self.x = x`, `x = ...`) and `kwargs["x"]`;
        None where it is set where it is read."""
        start, hops = expr, 0
        while hops < 16:
            nxt = self._handed(expr, scope)
            if nxt is None:
                break
            expr, scope = nxt
            hops += 1
        return expr if expr is not start else None

    def _handed(self, expr, scope: Scope):
        """(expression, scope) one step back along the way `expr` got its value; None where it is set here."""
        if scope is None:
            return None
        if isinstance(expr, cst.Attribute) and _is_self(expr.value):
            owner = scope.owner
            if not isinstance(owner, Instance) or owner.cls is None:
                return None
            for c, fn, sc in self.init_scopes(owner):
                found = tables(fn, c.module).self_assignments.get(expr.attr.value, ())
                if found:
                    if len(found) != 1 or found[0][1] is not None:
                        return None  # assigned under a test, or more than once: not one value handed down
                    self._fill_locals(fn, sc, c.module, before=found[0][2])
                    return found[0][0], sc
            return None
        if isinstance(expr, cst.Name):
            if expr.value in scope.locals:
                values = scope.locals[expr.value]
                return (values[0][0], scope) if len(values) == 1 and values[0][1] is None else None
            return scope.params.get(expr.value)
        got = star_kwarg(expr, scope)
        if got is not None:
            return got
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            return _field_of_built(expr.value.value, expr.attr.value, scope, self._local_of)
        return None

    def _local_of(self, scope: Scope, name: str):
        """The one expression a local `name` of the __init__ that `scope` binds is assigned (None when it is
        assigned more than once, or not at all)."""
        owner = scope.owner
        if not isinstance(owner, Instance) or owner.cls is None:
            return None
        for c, fn, _sc in self.init_scopes(owner):
            if c.module is not scope.module:
                continue
            found = [v for t, v, _c, _p in tables(fn, c.module).local_assignments if t == name]
            if len(found) == 1:
                return found[0]
        return None

    def _call(self, call: cst.Call, scope: Scope, depth: int, item: int | None = None) -> list[Instance]:
        func = call.func
        # Layer lists: make_layers(n, lambda prefix: Layer(...)) and nn.ModuleList([Layer(...) for ...]).
        lam = next((a.value for a in call.args if type(a.value) is cst.Lambda), None)
        if lam is None:  # the factory passed by name: a nested def recorded as a lambda in the locals
            lam = next((v for a in call.args if type(a.value) is cst.Name
                        for v, _c in scope.locals.get(a.value.value, []) if type(v) is cst.Lambda), None)
        if item is not None and lam is None:
            # only a function's returned tuple has items; a layer list (make_layers(n, lambda ...)) is the list
            target = Callee(self.index, scope.module, call, runs=self.runs).named
            if isinstance(target, Definition) and target.kind == "function":
                return self._factory(target, call, scope, depth, item=item)
            return []
        fname = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
        if lam is not None and type(lam.body) is cst.Call:
            elems = self.evaluate(lam.body, scope, depth + 1)
            first = call.args[0].value if call.args else None
            repeat = scope.module.code(first).strip() if first is not None and first is not lam and not type(first) is cst.Name or (type(first) is cst.Name and first.value not in scope.locals) else None
            chosen = pick(elems)  # a per-layer class choice: the default, the others listed as alternatives
            if chosen is None:
                return []
            names = [p.name.value for p in lam.params.params]
            per_layer = _per_layer(self, lam.body, scope, names[0], "prefix", depth) if len(names) == 1 else None
            lst = _layer_list(chosen, repeat, per_layer)
            lst.count = self._count(first if first is not lam else None, scope)
            return [lst]
        if fname == "ModuleList" and call.args:
            arg = call.args[0].value
            if isinstance(arg, (cst.ListComp, cst.GeneratorExp)):  # [Layer(...) for ...] or a generator
                elems = self.evaluate(arg.elt, scope, depth + 1)
                repeat = _range_arg(arg.for_in, scope.module)
                target = arg.for_in.target
                per_layer = (_per_layer(self, arg.elt, scope, target.value, "index", depth)
                             if type(target) is cst.Name and repeat is not None and arg.for_in.inner_for_in is None else None)
                out = [_layer_list(e, repeat, per_layer) for e in elems[:1]]
                for lst in out:
                    it = arg.for_in.iter
                    lst.count = self._count(it.args[-1].value if type(it) is cst.Call and len(it.args) == 1 else None, scope)
                return out
            if type(arg) is cst.Name and scope.fills.get(arg.value):  # a local list filled by .append(M(...))
                elems = []
                for value, cond in scope.fills[arg.value]:
                    for alt in self.evaluate(value, scope, depth + 1):
                        alt.condition = join(cond, alt.condition)
                        elems.append(alt)
                chosen = pick(elems)
                return [_layer_list(chosen, None)] if chosen is not None else []
            if type(arg) is cst.List and arg.elements:
                elems = self.evaluate(arg.elements[0].value, scope, depth + 1)
                return [_layer_list(e, str(len(arg.elements))) for e in elems[:1]] if elems else []
        if type(func) is cst.Name and fname in ("next", "iter", "cycle") and len(call.args) == 1:
            return self._elements(call.args[0].value, scope, depth)  # next(cycle([Block(...) for ...])): a Block
        if type(func) is cst.Attribute and func.attr.value in ("tie_weights", "to", "cuda", "npu"):
            return self.evaluate(func.value, scope, depth + 1)
        if (type(func) is cst.Attribute and _is_self(func.value) and scope.owner is not None
                and scope.owner.cls is not None):
            found = self.method(scope.owner.cls, func.attr.value)  # self._init_model(...) builds the backbone
            if found is not None:
                owner_cls, fn = found
                as_def = Definition("function", fn.name.value, owner_cls.module, fn)
                return self._factory(as_def, call, scope, depth, owner=scope.owner, skip_self=True)
        auto, cls, why = auto_model_class(self.index, call, scope.module, _model_type(self.evaluator))
        if auto:  # the Transformers backend's AutoModel.from_config(...), read without resolving AutoModel
            if cls is None:
                self.unbuilt[id(call)] = why
            return [Instance(cls, call, scope)] if cls is not None else []
        # a class named, or returned by a selector function (`_select_attn_cls(vllm_config)(...)`)
        callees = self.evaluate(func, scope, depth + 1) if isinstance(func, (cst.Name, cst.Attribute, cst.Call)) else []
        if callees:
            return [Instance(c.cls, call, scope, c.condition, decided=c.decided) for c in callees if c.cls is not None]
        target = Callee(self.index, scope.module, call, runs=self.runs).named
        if isinstance(target, Definition) and target.kind == "function":
            built = self._registered_model(target, call, scope)
            return built if built is not None else self._factory(target, call, scope, depth)
        static = static_method(self.index, scope.module, func, self.method) if target is None else None
        if static is not None:  # `FusedMoEParallelConfig.make(...)`: a static method of a class, a factory
            return self._factory(static, call, scope, depth)
        dotted = self.index.dotted(scope.module, func) if target is None and isinstance(func, (cst.Name, cst.Attribute)) else None
        if dotted and self._outside and dotted.split(".")[0] not in self.index.trees:
            self._outside[-1].append(dotted)  # `lambda: nn.ReLU()` of a registry: a class outside the trees
        return []

    def _count(self, expr, scope: Scope) -> int | None:
        """A layer list's length (`config.num_hidden_layers`) where the configuration gives it."""
        if expr is None:
            return None
        value = self.evaluator.infer(expr, scope)
        known = getattr(value, "value", None) if type(value).__name__ == "Known" else None
        return known if type(known) is int and known > 0 else None

    def kind_signature(self, inst: Instance, given: dict | None = None, depth: int = 0, path: str = "") -> tuple:
        """What one decoder layer's construction decides from its layer index, for grouping layers into kinds:
        per `self.<name>` whose value or test reads the index (layer_index.py; `given`: which of the first
        __init__'s params carry or are the index), whether each assignment runs (its test decided with the
        layer's index bound) and the class built there or the value; and, where a submodule is built from the
        index (`Gemma3Attention(..., prefix=f"{prefix}.self_attn")` deciding `self.is_sliding`), what that
        submodule decides, as `self_attn.is_sliding`. Entries that do not read the index are the same in every
        layer: they are not evaluated per layer."""

        out: list = []
        if inst.cls is None:
            return ()
        info = self._index_taints(inst, given)
        for (c, fn, scope), (taints, env, selfenv) in zip(self.init_scopes(inst), info):
            for name, found in tables(fn, c.module).self_assignments.items():
                t = taints.get(name)
                if t is None:
                    continue
                key = (inst.cls.qualname, _given_key(given), id(fn), name)
                if t == CARRIER and self._sub_decodes.get(key) is False:
                    continue  # a submodule handed the module name that never reads the index from it
                truths = []
                if t == DECODED:
                    for _expr, cond, pos in found:
                        self._fill_locals(fn, scope, c.module, before=pos)
                        decided = self.evaluator.decide(cond, _NO_BINDINGS, scope=scope)
                        truths.append(decided.name if isinstance(decided, Truth) else "UNKNOWN")
                    if all(x == "FALSE" for x in truths):
                        out.append((path + name, tuple(truths), say("kind_unassigned")))
                        continue
                built = self.attr(inst, name)
                if t == DECODED:
                    shown = built.cls.name if built is not None and built.cls is not None else None
                    if shown is None:
                        value = self.self_value(inst, name, self.evaluator)
                        shown = _shown_value(value)
                    out.append((path + name, tuple(truths), shown))
                if built is None or built.cls is None or depth >= _KIND_DEPTH:
                    self._sub_decodes.setdefault(key, False)
                    continue
                # a submodule handed the index itself (`SmolLM3Attention(config, layer_idx=layer_idx)`) is told
                # apart by its class, and by what its own __init__ decides from it (`self.use_rope =
                # config.no_rope_layers[layer_idx]`, tested in its forward): read further like a carrier's
                sub_given = self._sub_given(built, [e for e, _c, _p in found], env, selfenv, t)
                sub = self.kind_signature(built, sub_given, depth + 1, f"{path}{name}.")
                self._sub_decodes[key] = self._sub_decodes.get(key, False) or bool(sub)
                out.extend(sub)
        return tuple(out)

    def _index_taints(self, inst: Instance, given: dict | None) -> list:
        """Per __init__ of the instance's chain: ({self.<name>: carrier | decoded}, its names' taints), read
        once per class and `given` (layer_index.py). `given` None: the element of a layer list, whose call
        binds the index (`_PerLayer`); where that call is not known, every parameter counts as decoded."""
        memo_key = (inst.cls.qualname if inst.cls else None, _given_key(given))
        hit = self._taints.get(memo_key)
        if hit is not None:
            return hit
        chain = self.init_scopes(inst)
        decoders = frozenset(catalog().typed.walk.runtime.layer_index)
        selfenv: dict = {}
        envs: list = []
        for _round in range(3):  # the chain's self.<name> read each other: until nothing changes
            before = dict(selfenv)
            envs = []
            call_given = given
            for k, (c, fn, scope) in enumerate(chain):
                params = self._param_taints(fn, call_given, k == 0 and given is None, scope)
                env = dict(params)
                taint = Taint(env, selfenv, decoders)
                table = tables(fn, c.module)
                for _i in range(3):
                    changed = False
                    for target, value, cond, _pos in table.all_locals:
                        t = _join(taint.of(value), taint.condition(cond))
                        if t and _join(env.get(target), t) != env.get(target):
                            env[target] = _join(env.get(target), t)
                            changed = True
                    if not changed:
                        break
                taints: dict = {}
                for name, found in table.self_assignments.items():
                    t = None
                    for expr, cond, pos in found:  # the locals as they are there (`self.config = config` before
                        at = Taint(_env_at(params, taint, table.all_locals, pos), selfenv, decoders)
                        t = _join(t, _join(at.of(expr), at.condition(cond)))  # `config = layer_config`)
                    if t:
                        taints[name] = t
                        selfenv[name] = _join(selfenv.get(name), t)
                envs.append((taints, env, selfenv))
                sup = table.super_init_call
                call_given = {"__call__": (sup, env, selfenv)} if sup is not None else None
            if selfenv == before:
                break
        self._taints[memo_key] = envs
        return envs

    def _param_taints(self, fn: cst.FunctionDef, given, top: bool, scope: Scope) -> dict:
        """The taint of each parameter of `fn`: `given` names them, or holds the call that binds them (a
        super().__init__ call with the caller's taints); a layer list's element reads its call's arguments
        in the per-layer scope (`_PerLayer.bind`)."""
        if top:  # the element of a layer list: its own call, in the scope that bound the index
            bound = getattr(scope.owner, "index_binding", None)
            if bound is None:
                return {p: DECODED for p in _param_names(fn)}
            given = {"__call__": bound}
        if not given:
            return {}
        if "__all__" in given:
            return {p: given["__all__"] for p in _param_names(fn)}
        if "__call__" not in given:
            return dict(given)
        call, env, selfenv = given["__call__"]
        tmp = Scope(module=scope.module)
        bind_params(fn, call, tmp, tmp, skip_self=True)
        taint = Taint(env, selfenv, frozenset(catalog().typed.walk.runtime.layer_index))
        out = {}
        for p, (expr, _where) in tmp.params.items():
            t = taint.of(expr)
            if t:
                out[p] = t
        return out

    def _sub_given(self, built: Instance, exprs: list, env: dict, selfenv: dict, t: str) -> dict:
        """The taints of a submodule's params: its call's arguments read in the builder's names, where the
        call is the assignment's own; else (a factory) every param takes the assignment's taint."""
        if built.call is not None and any(contains(e, built.call) for e in exprs):
            return {"__call__": (built.call, dict(env), dict(selfenv))}
        return {"__all__": t}

    def _factory(self, fn_def: Definition, call: cst.Call, scope: Scope, depth: int, owner=None,
                 skip_self: bool = False, item: int | None = None) -> list[Instance]:
        fn = cast(cst.FunctionDef, fn_def.node)  # (a function of the trees, or a method)
        inner = Scope(module=fn_def.module, owner=owner)
        bind_params(fn, call, scope, inner, skip_self=skip_self)
        out: list[Instance] = []
        # Parameters the call leaves at a None default decide some of the factory's branches.
        env = Bindings(none={p: True for p, d in inner.defaults.items()
                             if p not in inner.params and type(d) is cst.Name and d.value == "None"})
        table = tables(fn, fn_def.module)
        # every local first, then their conditions; a local unpacked from a call (`tp_size, tp_rank = f(...)`)
        # is item k of it, for the values the factory's return is built with
        for target, value, cond, _pos in table.all_locals:
            inner.locals.setdefault(target, []).append((value, cond))
        inner.version += 1
        decided_locals: dict = {}
        ruled_locals: dict = {}  # local -> [(value, condition)] the configuration rules out
        for target, values in list(inner.locals.items()):
            inner.locals.pop(target)  # `if x is None: x = Default` tests x as it was before: the parameter
            inner.version += 1
            for value, cond in values:
                decided = self.evaluator.decide(cond, env, scope=inner)
                if decided is not Truth.FALSE:
                    decided_locals.setdefault(target, []).append((value, decided if decided is not Truth.TRUE else None))
                else:
                    ruled_locals.setdefault(target, []).append((value, cond))
            inner.locals[target] = values
            inner.version += 1
        inner.locals = decided_locals
        inner.version += 1
        ruled_out: list | None = [] if self._quiet == 0 else None
        returns = table.returns_decided(env, self.evaluator, inner, ruled_out)
        if ruled_out is not None:  # `x = A(...) if ... elif ...: x = B(...)`, then `return x`
            where = {id(v): table.statements[pos][0] for _t, v, _c, pos in table.local_assignments}
            for ret, _cond in returns:
                if type(ret) is cst.Name:
                    ruled_out += [(v, c, where[id(v)]) for v, c in ruled_locals.get(ret.value, ()) if id(v) in where]
        if item is not None:  # `return op, rank, size`: its item; a return of one value has none
            returns = [(r.elements[item].value, c) for r, c in returns
                       if type(r) is cst.Tuple and item < len(r.elements)]
        for ret, cond in returns:
            for alt in self.evaluate(ret, inner, depth + 1):
                alt.condition = join(cond, alt.condition)
                alt.factory = fn_def.qualname
                if inner.raises is not None and alt.raises is None:  # the call never reaches this return
                    alt.raises = (scope.module, call, inner.raises)
                out.append(alt)
        out = _prefer_plain(_dedupe(out))
        if ruled_out and out:
            # the ruled-out branches read their own locals (`cls = A if ... else B; x = cls(...)`)
            merged = {k: list(decided_locals.get(k, [])) + list(ruled_locals.get(k, []))
                      for k in set(decided_locals) | set(ruled_locals)}
            others = self._others(fn_def.module, ruled_out, replace(inner, locals=merged, values=dict(inner.values)), depth)
            for alt in out:
                alt.decided = alt.decided + others
        return out


# -- helpers -------------------------------------------------------------------------------------
def _built_key(inst: Instance | None):
    """What decides a kernel walk about a submodule: its class and the condition it is built under."""
    return None if inst is None else (inst.cls.qualname if inst.cls is not None else None, str(inst.condition or ""))


def _value_at(ctor: "Constructor", inst: Instance | None, name: str):
    """repr of `self.<name>` of the object a memo's path leads to (None where there is none)."""
    return repr(ctor.self_value(inst, name, ctor.evaluator)) if inst is not None else None


def _model_type(evaluator) -> str | None:
    return getattr(evaluator.config, "model_type", None)


def _field_of_built(name: str, field_name: str, scope: Scope, local_of, hops: int = 0):
    """(expression, scope) of keyword `field_name` of the call that built the value of `name` (a record of
    modules handed down: `MLAModules(kv_b_proj=self.kv_b_proj, ...)`), followed through parameters and
    locals (`local_of` reads a local of the __init__ a scope binds, whatever the scope's locals hold now);
    None when it is not such a call."""
    if hops > 4 or scope is None:
        return None
    if name in scope.params:
        value, where = scope.params[name]
    else:
        value, where = local_of(scope, name), scope
        if value is None:
            return None
    if type(value) is cst.Name:
        return _field_of_built(value.value, field_name, where, local_of, hops + 1)
    if type(value) is cst.Call:
        for a in value.args:
            if a.keyword is not None and a.keyword.value == field_name:
                return a.value, where
    return None


def _integer_item(expr: cst.Subscript) -> int | None:
    if len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index and type(expr.slice[0].slice.value) is cst.Integer:
        return int(expr.slice[0].slice.value.value)
    return None


def _shown_value(value) -> str:
    """A value a kind of layer holds, as `differs` says it: a flag, a name or a number as Python writes it;
    the options where the configuration leaves several; else what is not known, and why."""
    from ...semantics.values import Known, OneOf

    if isinstance(value, Known) and (value.value is None or type(value.value) in (bool, str, int, float)):
        return repr(value.value)
    if isinstance(value, OneOf) and all(isinstance(o, Known) for o in value.options):
        return say("kind_unknown", why=say("kind_one_of", options=[repr(o.value) for o in value.options]))
    if isinstance(value, Known):
        return say("kind_unknown", why=say("kind_not_shown", type=type(value.value).__name__))
    return say("kind_unknown", why=getattr(value, "reason", None) or say("kind_not_decided"))


def _param_names(fn: cst.FunctionDef) -> list[str]:
    ps = fn.params
    return [p.name.value for p in list(ps.posonly_params) + list(ps.params) + list(ps.kwonly_params)]


def _given_key(given: dict | None):
    """A hashable key of what a kind signature is given (the call and the taints it reads its arguments in)."""
    if given is None:
        return None
    if "__call__" in given:
        call, env, selfenv = given["__call__"]
        return (id(call), tuple(sorted(env.items())), tuple(sorted(selfenv.items())))
    return tuple(sorted(given.items()))


def _per_layer(ctor: "Constructor", body: cst.BaseExpression, scope: Scope, name: str, how: str, depth: int):
    """i -> the layer list's element built with the layer index bound: the factory's parameter `name` is the
    prefix vLLM's `make_layers` hands it (`f"{prefix}.{idx}"`: "model.layers.i"), or a comprehension's index is
    i; the element's own __init__ then reads its index from it (`extract_layer_index(prefix)`)."""
    built: dict[int, Instance | None] = {}

    def element(i: int) -> Instance | None:
        if i not in built:
            value = cst.SimpleString(f'"model.layers.{i}"') if how == "prefix" else cst.Integer(str(i))
            inner = replace(scope, params={**scope.params, name: (value, Scope(module=scope.module))},
                            locals=dict(scope.locals), values=dict(scope.values), version=scope.version + 1)
            inner.locals.pop(name, None)
            elem = built[i] = pick(ctor.evaluate(body, inner, depth + 1))
            if elem is not None and elem.call is not None and contains(body, elem.call):
                # the call that binds the index to the element's params (layer_index.py): read in the factory,
                # with its locals computed from the index (`layer_idx = int(prefix.split(".")[-1])`)
                elem.index_binding = (elem.call, _factory_taints(scope, name, CARRIER if how == "prefix" else DECODED), {})
        return built[i]
    return element


def _env_at(params: dict, taint: Taint, local_assignments, pos: int) -> dict:
    """The taints of a function's names at statement `pos`: its parameters', joined with each assignment of a
    local before it (read with the whole function's taints: a loop's later assignment is not looked back at)."""
    env = dict(params)
    for target, value, cond, p in local_assignments:
        if p < pos:
            t = _join(taint.of(value), taint.condition(cond))
            if t:
                env[target] = _join(env.get(target), t)
    return env


def _factory_taints(scope: Scope, name: str, taint: str) -> dict:
    """The taints of a layer factory's names: its index parameter `name`, and each local computed from it (a
    nested def's locals are the scope's: `layer_idx = int(prefix.split(".")[-1])`, handed on as
    `layer_id=layer_idx`), to a fixed point; a local the scope assigns from other names too keeps the join."""
    env = {name: taint}
    reader = Taint(env, {}, frozenset(catalog().typed.walk.runtime.layer_index))
    for _round in range(4):
        changed = False
        for local, values in scope.locals.items():
            if local == name:
                continue
            t = None
            for value, cond in values:
                t = _join(t, _join(reader.of(value), reader.condition(cond)))
            if t and env.get(local) != t:
                env[local] = t
                changed = True
        if not changed:
            break
    return env


def _range_arg(for_in, module) -> str | None:
    it = for_in.iter
    if type(it) is cst.Call and type(it.func) is cst.Name and it.func.value == "range" and it.args:
        return module.code(it.args[-1].value if len(it.args) == 1 else it.args[1].value).strip()
    return None


def _strip_subscript(expr):
    return expr.value if type(expr) is cst.Subscript else expr


def _all_tests(p: Patch) -> list[tuple[str, str, bool]]:
    """(module to decide it in, test, negated) of each `if` test a patch runs under: those its module is imported
    under (by the patch package's `__init__`), then its own."""
    return list(p.imported_under) + [(p.module, t, negated) for t, negated in p.tests]


def _tests_text(p: Patch) -> str | None:
    """A patch's `if` tests as one condition: `a and not (b)`."""
    said = dict.fromkeys(f"not ({t})" if negated else t for _m, t, negated in _all_tests(p))  # each test once
    return " and ".join(said) or None


def _in_module(c: Definition, module) -> Definition:
    """The class `c` read with a patched __init__ of `module`: its own node, the patch module's names."""
    return Definition("class", c.name, module, node=c.node, condition=c.condition)


def _original_call(index: ModuleIndex, fn: cst.FunctionDef, module) -> cst.Call | None:
    """In a patched __init__, the call of the original it saved (`_orig = Cls.__init__`, then
    `_orig(self, *args, **kwargs)`), less `self`; None when it calls none (the patch replaces the whole body)."""
    for node in iter_nodes(fn, lambda n: type(n) is cst.FunctionDef):
        if not (type(node) is cst.Call and type(node.func) is cst.Name and node.args and _is_self(node.args[0].value)):
            continue
        saved = index.resolve_expr(module, node.func)
        value = saved.node if isinstance(saved, Definition) and saved.kind == "assign" else None
        if type(value) is cst.Attribute and value.attr.value == "__init__":
            return node.with_changes(args=node.args[1:])
    return None


def _forwards(fn: cst.FunctionDef, call: cst.Call) -> bool:
    """`call` passes on exactly what `fn` was called with: `(*args, **kwargs)` of its own star parameters."""
    star, kw = fn.params.star_arg, fn.params.star_kwarg
    names = [(a.star, a.value.value) for a in call.args if type(a.value) is cst.Name]
    return (len(names) == len(call.args) == 2 and type(star) is cst.Param and type(kw) is cst.Param
            and names == [("*", star.name.value), ("**", kw.name.value)])


def _scope_state(scope: Scope) -> tuple:
    """What _fill_locals sets in a scope, to put back after a read that filled it otherwise."""
    return scope.locals, scope.fills, scope.kwarg_fills, scope.attr_sets


def _put_back(scope: Scope, state: tuple) -> None:
    scope.locals, scope.fills, scope.kwarg_fills, scope.attr_sets = state
    scope.version += 1


class _Written(cst.CSTTransformer):
    """A helper's parameters bound to literals, written in their place (value_sources)."""

    def __init__(self, literals: dict):
        self.literals = literals

    def leave_Name(self, original, updated):
        return self.literals.get(original.value, updated)

    def leave_Attribute(self, original, updated):  # (`x.attr`: an attribute's own name is no parameter)
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original, updated):  # (`f(attr=...)`: nor a keyword)
        return updated.with_changes(keyword=original.keyword)


def _written(expr, literals: dict):
    return expr.visit(_Written(literals)) if literals and expr is not None else expr
