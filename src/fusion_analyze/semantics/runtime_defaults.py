"""What vLLM's runtime hands the code with no user input: the device's hardware profile for
`get_current_hardware_profile()`, and a backend configuration built from no --additional-config
(`get_ascend_config()`) whose attributes are its classes' declared field defaults, or in older classes what
`self.x = additional_config.get("x", default)` reads from an empty dict (walk.yaml `runtime`)."""

from __future__ import annotations

import ast

import re
from typing import NamedTuple

import libcst as cst

from ..index.facts import FactTable
from ..index.nodes import children, find_all
from .known_calls import _dotted_text
from .scope import Scope
from .values import Defaults, Known, OneOf, Unknown, Value, literal

DERIVED_FIELDS = FactTable("derived_fields", "a config class node -> names its methods assign (derived, not defaults)")
DECLARED_DEFAULTS = FactTable("declared", "a config class node -> {field: its declared default}")


def version_calls(index) -> dict:
    """`vllm_version_is("0.23.0")` (walk.yaml runtime.vllm_version_test): whether the argument is the --vllm-root
    tree's version; vllm-ascend picks classes and registrations by it."""
    from ..catalog import catalog

    version = getattr((getattr(index, "trees", None) or {}).get("vllm"), "version", None)
    if not version:
        return {}

    def holds(call, _scope):
        arg = literal(call.args[0].value) if len(call.args) == 1 else None
        return Known(arg.value == version) if arg is not None and isinstance(arg.value, str) else Unknown("not a version")

    return {name: holds for name in catalog().typed.walk.runtime.vllm_version_test}


def _assigned_by_methods(cls, name: str) -> list:
    """Values of each `self.<name> = value` in the class's methods (a validator deriving the field); only the
    methods whose text assigns it are parsed (alone, while the class is not)."""
    module = cls.module
    key = (cls.identity, name)
    table = DERIVED_FIELDS.of(module)
    if key not in table:
        found: list = []
        tops = cls.nodes_with(_self_assigns(name))
        for top in tops:
            for node in find_all(top, cst.Assign):
                for t in node.targets:
                    t = t.target
                    if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == "self" \
                            and t.attr.value == name:
                        found.append(node.value)
            _GUARDS.update(_guards(top))
        table[key] = found
    return table[key]


def _self_assigns(name: str) -> re.Pattern:
    """The text of an assignment `self.<name> = ...`: only the methods that hold it can derive the field."""
    return re.compile(rb"\bself\.%s\s*=(?!=)" % re.escape(name).encode())


def _guards(top) -> dict:
    """An assignment's value node (in a method of `cls`) -> the `if self.x == <literal>` / `self.x in (...)`
    tests around it, as (field, the literals that make it run): `elif self.enable_fused_mc2 == 2:
    self.enable_fused_mc2 = 1` runs only when the field is 2."""
    out: dict = {}

    def visit(body, guards):
        for stmt in body:
            if type(stmt) is cst.If:
                node = stmt
                while type(node) is cst.If:
                    visit(node.body.body, guards + [_field_test(node.test)])
                    node = node.orelse
                if type(node) is cst.Else:
                    visit(node.body.body, guards)
            elif type(stmt) is cst.SimpleStatementLine:
                for small in stmt.body:
                    if type(small) is cst.Assign:
                        out[small.value] = [g for g in guards if g is not None]
            elif hasattr(stmt, "body") and hasattr(stmt.body, "body"):
                visit(stmt.body.body, guards)

    if type(top) is cst.FunctionDef:  # a method parsed alone
        visit(top.body.body, [])
    for stmt in top.body.body if type(top) is cst.ClassDef and type(top.body) is cst.IndentedBlock else []:
        if type(stmt) is cst.FunctionDef:
            visit(stmt.body.body, [])
    return out


def _field_test(test) -> tuple | None:
    """A test of one field against literals: `self.x == 2` -> ("x", True, (2,)); `self.x in (0, 1)` ->
    ("x", True, (0, 1)); `self.x is not None` -> ("x", False, (None,)) (it runs unless x is one of them)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    left, comp = test.left, test.comparisons[0]
    if not (type(left) is cst.Attribute and type(left.value) is cst.Name and left.value.value == "self"):
        return None
    lit = literal(comp.comparator)
    if lit is None:
        return None
    op = type(comp.operator)
    if op in (cst.Equal, cst.Is):
        return left.attr.value, True, (lit.value,)
    if op in (cst.NotEqual, cst.IsNot):
        return left.attr.value, False, (lit.value,)
    if op is cst.In and isinstance(lit.value, tuple):
        return left.attr.value, True, lit.value
    return None


def _ruled_out(defaults, value, infer) -> bool:
    """An assignment of a validator that cannot run with no user input (or the user's): a test around it on a
    field whose value (declared default, or --additional-config) fails it (`elif self.enable_fused_mc2 == 2:`
    with 0, `if self.expert_map_record_path is not None:` with None)."""
    overrides = getattr(defaults, "overrides", None) or {}
    for field, holds_in, values in _GUARDS.get(value, ()):
        if field in overrides:
            got = overrides[field]
        else:
            declared = _declared(defaults.definition).get(field)
            lit = literal(declared) if declared is not None else None
            if lit is None:
                continue
            got = lit.value
        if (got in values) != holds_in:
            return True
    return False


_GUARDS: dict = {}


def _gates(name: str, value) -> bool:
    """`self.<name> and ...`: an assignment that keeps the field's value only where the other parts hold."""
    left = value
    while type(left) is cst.BooleanOperation and type(left.operator) is cst.And:
        left = left.left
    return left is not value and type(left) is cst.Attribute and type(left.value) is cst.Name \
        and left.value.value == "self" and left.attr.value == name


def _keeps(name: str, default: Value, assigned: list) -> bool:
    """A falsy default no derivation can change: each assignment sets the default again (a downgrade,
    `self.x = 0`) or `self.x and ...`, which is the default while it is falsy."""
    if not isinstance(default, Known) or default.value or not isinstance(default.value, (bool, int, type(None), str)):
        return False
    for value in assigned:
        lit = literal(value)
        if lit is not None and lit.value == default.value and type(lit.value) is type(default.value):
            continue
        if _gates(name, value):
            continue
        return False
    return True


def config_default(defaults, name: str, infer) -> Value:
    """The declared default of field `name` of a configuration class built from no user input: a literal (or
    a module constant), `field(default=...)`, or a nested configuration (`field(default_factory=C)`,
    `default_factory=lambda: C()`, `C()`). A field a method derives from other settings is unknown."""
    cls = defaults.definition
    overrides = getattr(defaults, "overrides", None)
    if overrides and name in overrides:  # the user's value (--additional-config), a nested one field by field
        given = overrides[name]
        if isinstance(given, Unknown):  # stated, but as nothing this reads
            return given
        if isinstance(given, dict):
            nested = _declared_default(defaults, name, infer)
            if isinstance(nested, Known) and isinstance(nested.value, Defaults):
                return Known(Defaults(nested.value.definition, given))
        gated = [v for v in _assigned_by_methods(cls, name)
                 if _gates(name, v) and not _ruled_out(defaults, v, infer)]
        if given and gated:  # `self.x = self.x and <other settings>`: the user's value holds only where they do
            return Unknown(f"{cls.name}.{name} is the user's value only where other settings allow it "
                           "(a validator gates it when the configuration is built)")
        return Known(given)
    found = _declared_default(defaults, name, infer)
    derived = [v for v in _assigned_by_methods(cls, name) if not _ruled_out(defaults, v, infer)]
    if isinstance(found, Unknown) and derived:  # older classes: `self.x = additional_config.get("x", False)`
        gets = [v for v in derived if _dict_get_default(v) is not None]
        if gets:
            found = infer(_dict_get_default(gets[0]), Scope(module=cls.module))
            derived = [v for v in derived if v is not gets[0]]
    if derived and not _keeps(name, found, derived) and not _derived_keeps(defaults, name, found, derived, infer):
        return Unknown(f"{cls.name}.{name} is derived from other settings when the configuration is built")
    return found


_DERIVING: set = set()  # (class, field) being read through its derivations: a derivation that reads it waits


def _derived_keeps(defaults, name: str, default: Value, derived: list, infer) -> bool:
    """A declared default every derivation sets again: each `self.<name> = value` of the class's methods (a
    validator run when the configuration is built, AscendConfig.derive_and_validate) read in its method, with
    `self` this configuration and the runtime's objects as the evaluator reads them, gives the default
    (`self.enable_sparse_sfa_c8 = vllm_config.cache_config.cache_dtype in ["fp8", "int8"] and use_sparse_sfa`
    with the cache dtype "auto": False), whether the method runs or not."""
    from .function_bodies import tables

    cls = defaults.definition
    if not isinstance(default, Known) or (cls.qualname, name) in _DERIVING:
        return False
    wanted = {id(v) for v in derived}
    _DERIVING.add((cls.qualname, name))
    try:
        for fn in (f for top in cls.nodes_with(_self_assigns(name)) for f in find_all(top, cst.FunctionDef)):
            table = tables(fn, cls.module)
            for value, _cond, _pos in table.self_assignments.get(name, ()):
                if id(value) not in wanted:
                    continue
                wanted.discard(id(value))
                if _is_literal(value, default.value) or _gates(name, value):
                    continue
                scope = Scope(module=cls.module, values={"self": Known(defaults)})
                for local, v, c, _p in table.local_assignments:
                    scope.locals.setdefault(local, []).append((v, c))
                got = infer(value, scope)
                if not (isinstance(got, Known) and type(got.value) is type(default.value) and got.value == default.value):
                    return False
        return not wanted  # (an assignment not found in a method: not read here)
    finally:
        _DERIVING.discard((cls.qualname, name))


def _dict_get_default(value) -> cst.BaseExpression | None:
    """`options.get("key", default)`: what it reads from a configuration dict the user left empty."""
    if (type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "get"
            and len(value.args) == 2 and type(value.args[0].value) is cst.SimpleString):
        return value.args[1].value
    return None


def _declared(cls) -> dict:
    """name -> the value the class body gives it (`x: int = 1`, `x = 1`; the last wins), read once per class."""
    key = cls.identity
    found = DECLARED_DEFAULTS.of(cls.module).get(key)
    if found is None and cls.kind == "class" and isinstance(cls.ast_node, ast.ClassDef):
        # the class is not parsed: its body's fields from `ast`, each value parsed alone when read (a
        # configuration class is read for a few of its fields: EngineArgs declares hundreds)
        found = DECLARED_DEFAULTS.of(cls.module)[key] = _Fields(cls.module, _ast_fields(cls.ast_node))
    if found is None:
        found = DECLARED_DEFAULTS.of(cls.module)[key] = {}
        node = cls.skeleton
        for stmt in node.body.body if type(node.body) is cst.IndentedBlock else []:
            for small in stmt.body if type(stmt) is cst.SimpleStatementLine else []:
                if type(small) is cst.AnnAssign and type(small.target) is cst.Name:
                    found[small.target.value] = small.value  # a bare annotation: no default
                elif type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                    found[small.targets[0].target.value] = small.value
    return found


def _ast_fields(node: ast.ClassDef) -> dict:
    """_declared's names from a class's `ast` statement: name -> the value's ast expression (None for a bare
    annotation), the last wins, the same statements _declared reads from libcst."""
    out: dict = {}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out.pop(stmt.target.id, None)
            out[stmt.target.id] = stmt.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out.pop(stmt.targets[0].id, None)
            out[stmt.targets[0].id] = stmt.value
    return out


class _Fields(dict):
    """_declared's mapping for a class not parsed: each value an `ast` expression until read, then the libcst
    node of that expression parsed alone at its file lines (ModuleInfo.expression_alone)."""

    def __init__(self, module, fields: dict):
        super().__init__(fields)
        self._module = module

    def __getitem__(self, name):
        value = dict.__getitem__(self, name)
        if isinstance(value, ast.AST):
            value = self._module.expression_alone(value)
            dict.__setitem__(self, name, value)
        return value

    def get(self, name, default=None):
        return self[name] if name in self else default

    def items(self):  # type: ignore[override]
        return [(name, self[name]) for name in self.keys()]

    def values(self):  # type: ignore[override]
        return [self[name] for name in self.keys()]


def _declared_default(defaults, name: str, infer) -> Value:
    cls = defaults.definition
    index = cls.module._index
    value = _declared(cls).get(name)
    if value is None:
        return Unknown(f"{cls.name} declares no default for {name}")

    def nested(expr) -> Value | None:
        if type(expr) is cst.Lambda and type(expr.body) is cst.Call and not expr.body.args:
            expr = expr.body.func
        elif type(expr) is cst.Call and not expr.args:
            expr = expr.func
        if isinstance(expr, (cst.Name, cst.Attribute)):
            target = index.resolve_expr(cls.module, expr)
            if getattr(target, "kind", None) == "class":
                return Known(Defaults(target))
            if type(expr) is cst.Name and expr.value in ("dict", "list"):
                return Known({} if expr.value == "dict" else ())
        return None

    if type(value) is cst.Call and _dotted_text(value.func) in ("field", "dataclasses.field", "Field", "pydantic.Field"):
        for arg in value.args:
            if arg.keyword is not None and arg.keyword.value == "default":
                return infer(arg.value, Scope(module=cls.module))
            if arg.keyword is not None and arg.keyword.value == "default_factory":
                return nested(arg.value) or Unknown(f"{cls.name}.{name} is built by a factory")
        return Unknown(f"{cls.name}.{name} has no default")
    if type(value) is cst.Call:
        return nested(value) or Unknown(f"{cls.name}.{name} is computed when the configuration is built")
    return infer(value, Scope(module=cls.module))


def _module_int(index, module: str, name: str) -> int | None:
    """A module-level integer constant of the trees (`_MC2_TOKENS_PER_RANK_LIMIT = 512`), None where absent."""
    info = index.get(module) if index is not None else None
    defs = [d for d in (info.defs.get(name, ()) if info is not None else ()) if d.kind == "assign"]
    got = literal(defs[0].node) if len(defs) == 1 else None
    return got.value if got is not None and isinstance(got.value, int) else None


def mc2_capacity(index, deployment) -> int | None:
    """ascend_forward_context.set_mc2_tokens_capacity for the deployment (no prefill MC2, no MegaMoE, no
    speculative decoding): the largest graph-capture size, which vllm-ascend sets to min(max_num_seqs × 1 decode
    token, 512) (platform.py `_get_reduced_cg_cap`: vLLM's CUDA default without its `* 2`), or in eager mode
    max_num_seqs × 1; split over TP, capped per rank at the tree's limit (`_MC2_TOKENS_PER_RANK_LIMIT`, or
    `_DISPATCH_FFN_COMBINE_TOKENS_PER_RANK_LIMIT` with enable_fused_mc2), times TP; None where the tree has no
    such limit (another design: nothing is decided from it)."""
    from ..catalog import catalog

    spec = catalog().typed.walk.runtime.moe_comm or {}
    module = str(spec.get("capacity", "")).rpartition(".")[0]
    fused = bool(deployment.additional_config.get("enable_fused_mc2"))
    limit = _module_int(index, module, spec.get("fused_limit" if fused else "limit", ""))
    if limit is None:
        return None
    seqs = deployment.num_seqs
    max_tokens = min(seqs, 512) if deployment.graph_mode else seqs
    tp = deployment.tp_size
    per_rank = min(-(-max_tokens // tp), limit)
    return per_rank * tp


# vLLM's configuration objects at their defaults: VllmConfig's fields (`cache_config: CacheConfig =
# Field(default_factory=CacheConfig)`), the engine arguments that build them, and the modules that may change them
# after (VllmConfig's checks, the platforms' check_and_update_config)
VLLM_CONFIG = ("vllm.config.vllm", "VllmConfig")
ENGINE_ARGS_CLASS = ("vllm.engine.arg_utils", "EngineArgs")
_SETTERS = ("vllm.engine.arg_utils", "vllm.model_executor.models.config", "vllm_ascend.platform")
# and every module of these folders: vLLM's configuration classes and platforms, vllm-ascend's platform patches
_SETTER_FOLDERS = (("vllm", ("config",)), ("vllm", ("platforms",)), ("vllm_ascend", ("patch", "platform")))
VLLM_CONFIG_DEFAULTS = FactTable("vllm_config_defaults",
                                 "(VllmConfig field, its field) -> its value at vLLM's defaults, or None")


def vllm_config_default(index, holder: str, name: str, infer) -> Value | None:
    """`cache_config.kv_sharing_fast_prefill`: field `name` of the configuration object VllmConfig holds as
    `holder`, at its class's declared default (a literal or a module constant), where it is certain no engine
    argument of the report changes it (the report's deployment states none of the arguments that build these
    objects): EngineArgs passes it only as its own field whose default is that class's (`kv_sharing_fast_prefill:
    bool = CacheConfig.kv_sharing_fast_prefill`), and none of the modules that build and check vLLM's
    configuration (VllmConfig, EngineArgs, the platforms) assigns `.<name> = ...`. Where they assign it only
    literals (`cache_config.mamba_cache_mode = "align"` in vllm/model_executor/models/config.py), it is one of
    the default and those (OneOf: `mamba_cache_mode == "all"` is false with "none" and "align"). None
    otherwise."""
    if index is None or not holder.endswith("_config"):
        return None
    if holder == "vllm_config":  # a field of VllmConfig itself: what the engine builds it with
        return VLLM_CONFIG_DEFAULTS.get(index, (holder, name), lambda: _engine_built(index, name))
    return VLLM_CONFIG_DEFAULTS.get(index, (holder, name), lambda: _vllm_config_default(index, holder, name, infer))


def _engine_built(index, name: str) -> Value | None:
    """`vllm_config.<name>` (VllmConfig declares `model_config: ModelConfig = None`) where the engine always
    builds it: EngineArgs' `create_engine_config` passes `VllmConfig(<name>=<local>, ...)`, the local assigned
    once, unconditionally, from a class call or a method of EngineArgs whose every return builds a class
    (`model_config = self.create_model_config()`, which returns `ModelConfig(...)`): an object, never None.
    None (not decided) for anything else."""
    from .values import NotNone

    engine = index.lookup(*ENGINE_ARGS_CLASS)
    if getattr(engine, "kind", None) != "class":
        return None
    from .function_bodies import class_method, tables

    fn = class_method(engine, "create_engine_config")
    if fn is None:
        return None
    passed = None
    for call in find_all(fn, cst.Call):
        if _dotted_text(call.func) == VLLM_CONFIG[1]:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == name:
                    passed = arg.value
    if type(passed) is not cst.Name:
        return None
    table = tables(fn, engine.module)
    made = [(value, cond) for target, value, cond, _pos in table.local_assignments if target == passed.value]
    if len(made) != 1 or made[0][1] or type(made[0][0]) is not cst.Call:
        return None
    call = made[0][0]
    func = call.func
    if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
        method = class_method(engine, func.attr.value)
        if method is None:
            return None
        if _unset_returns_none(engine, method):
            return Known(None)
        returns = [r.value for r in iter_returns(method)]
        if not returns or not all(type(r) is cst.Call and getattr(index.resolve_expr(engine.module, r.func), "kind", None)
                                  == "class" for r in returns if r is not None) or any(r is None for r in returns):
            return None
        return NotNone(f"EngineArgs.{func.attr.value}()")
    built = index.resolve_expr(engine.module, func) if isinstance(func, (cst.Name, cst.Attribute)) else None
    return NotNone(str(getattr(built, "name", ""))) if getattr(built, "kind", None) == "class" else None


STARTS_NONE = FactTable("starts none", "a VllmConfig field's name -> whether it starts as None in the engine")


def engine_field_starts_none(index, name: str) -> bool:
    """VllmConfig's field `name` starts as None in the engine the tool models: VllmConfig declares it `= None`,
    EngineArgs' `create_engine_config` passes it `<name>=self.<name>` (or not at all), EngineArgs declares its own
    `<name>` as VllmConfig's default (`engram_config: ... = VllmConfig.engram_config`) or None, and the tool reads
    no `--<name>` option. Whether start-up code sets it later is `field_setters`'s question. Read once per
    session."""
    return STARTS_NONE.get(index, name, lambda: _engine_field_starts_none(index, name))


def _engine_field_starts_none(index, name: str) -> bool:
    from ..ir.deployment import READ
    from .function_bodies import class_method

    vllm_config, engine = index.lookup(*VLLM_CONFIG), index.lookup(*ENGINE_ARGS_CLASS)
    if getattr(vllm_config, "kind", None) != "class" or getattr(engine, "kind", None) != "class":
        return False
    declared = _declared(vllm_config).get(name)
    if declared is None or literal(declared) != Known(None) or f"--{name.replace('_', '-')}" in READ:
        return False
    fn = class_method(engine, "create_engine_config")
    passed = [arg.value for call in (find_all(fn, cst.Call) if fn is not None else ())
              if _dotted_text(call.func) == VLLM_CONFIG[1] for arg in call.args
              if arg.keyword is not None and arg.keyword.value == name]
    if fn is None or any(_dotted_text(p) != f"self.{name}" for p in passed):
        return False
    own = _declared(engine).get(name)
    return not passed or (own is not None and (_dotted_text(own) == f"{VLLM_CONFIG[1]}.{name}"
                                               or literal(own) == Known(None)))


FIELD_SETTERS = FactTable("field setters", "a configuration field's name -> (module, function, statement) of each "
                          "assignment `<x>.<name> = ...` of the setter modules, or None (one runs on import)")


def field_setters(index, name: str) -> list[tuple] | None:
    """(module, function, statement) of every assignment `<x>.<name> = ...` in the code that may change vLLM's
    configuration at start-up (the setter modules and folders: VllmConfig, EngineArgs, the platforms, vllm-ascend's
    platform and its patches); None where one stands outside a function (it runs on import). Read once per
    session."""
    return FIELD_SETTERS.get(index, name, lambda: _field_setters(index, name))


def _field_setters(index, name: str) -> list[tuple] | None:
    pattern = re.compile(rb"\.%s\s*=(?!=)" % re.escape(name).encode())
    names: list[str] = list(_SETTERS)
    for package, folder in _SETTER_FOLDERS:
        tree = index.trees.get(package)
        if tree is not None:
            for path in sorted(tree.package_dir.joinpath(*folder).glob("*.py")):
                stem = "" if path.stem == "__init__" else f".{path.stem}"
                names.append(f"{package}.{'.'.join(folder)}{stem}")
    out: list[tuple] = []
    for module in dict.fromkeys(names):
        found = index.module_path(module)
        path = found[0] / "__init__.py" if found is not None and found[0].is_dir() else found[0] if found else None
        try:
            if path is None or not pattern.search(path.read_bytes()):
                continue  # no such text: the module need not be read
        except OSError:
            pass
        info = index.get(module)
        if info is None:
            continue
        for top in info.nodes_with(pattern):
            if not _setters_in(top, None, name, info, out):
                return None
    return out


def _setters_in(node, fn, name: str, info, out: list) -> bool:
    """Collect `(info, fn, statement)` for each assignment of `.<name>` under `node`; False for one at module
    level."""
    if type(node) is cst.FunctionDef:
        fn = node
    if type(node) is cst.SimpleStatementLine:
        for small in node.body:
            targets = [t.target for t in small.targets] if type(small) is cst.Assign else \
                [small.target] if isinstance(small, (cst.AnnAssign, cst.AugAssign)) else []
            if any(type(t) is cst.Attribute and t.attr.value == name for t in targets):
                if fn is None:
                    return False
                out.append((info, fn, node))
        return True
    return all(_setters_in(child, fn, name, info, out) for child in children(node))


def _unset_returns_none(engine, method: cst.FunctionDef) -> bool:
    """EngineArgs' `create_x_config()` that starts with `if self.<f> is None: return None` (vllm/engine/arg_utils.py
    `create_diffusion_config`), where EngineArgs declares `<f> ... = None` and the tool reads no `--<f>` option:
    the engine builds no such configuration (VllmConfig holds None)."""
    from ..ir.deployment import READ

    body = method.body.body
    first = next((st for st in body if not (type(st) is cst.SimpleStatementLine and len(st.body) == 1
                                            and type(st.body[0]) is cst.Expr
                                            and isinstance(st.body[0].value, cst.SimpleString))), None)
    if type(first) is not cst.If or first.orelse is not None:
        return False
    test = first.test
    if not (type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.comparisons[0].operator) is cst.Is
            and literal(test.comparisons[0].comparator) == Known(None) and type(test.left) is cst.Attribute
            and type(test.left.value) is cst.Name and test.left.value.value == "self"):
        return False
    inner = first.body.body
    if not (len(inner) == 1 and type(inner[0]) is cst.SimpleStatementLine and type(inner[0].body[0]) is cst.Return
            and literal(inner[0].body[0].value or cst.Name("None")) == Known(None)):
        return False
    field = test.left.attr.value
    default = _declared(engine).get(field)
    return default is not None and literal(default) == Known(None) and f"--{field.replace('_', '-')}" not in READ


def iter_returns(fn):
    """The return statements of a function, not those of functions or classes nested in it."""
    out = []

    def visit(node):
        for child in node.children:
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if type(child) is cst.Return:
                out.append(child)
            visit(child)

    visit(fn.body)
    return out


def _held_class(index, vllm_config, holder: str):
    """The class VllmConfig builds its field `holder` with (`cache_config: CacheConfig =
    Field(default_factory=CacheConfig)`), or None."""
    made = _declared(vllm_config).get(holder)
    factory = None
    if type(made) is cst.Call and _dotted_text(made.func) in ("field", "dataclasses.field", "Field", "pydantic.Field"):
        for arg in made.args:
            if arg.keyword is not None and arg.keyword.value == "default_factory":
                factory = arg.value
    return index.resolve_expr(vllm_config.module, factory) if isinstance(factory, (cst.Name, cst.Attribute)) else None


def _vllm_config_default(index, holder: str, name: str, infer) -> Value | None:
    vllm_config = index.lookup(*VLLM_CONFIG)
    if getattr(vllm_config, "kind", None) != "class":
        return None
    cls = _held_class(index, vllm_config, holder)
    if cls is None or getattr(cls, "kind", None) != "class":
        return None
    name_of, module_of = getattr(cls, "name", ""), getattr(cls, "module", None)
    value = _declared(cls).get(name)
    if value is None or type(value) is cst.Call:  # no default, or one a factory builds
        return None
    setter = re.compile(rf"\.{re.escape(name)}\s*=(?!=)[ \t]*([^\n]*)")
    passed = re.compile(rf"\b{re.escape(name)}\s*=(?!=)\s*([^,)\n]*)")
    texts = []
    for module in _SETTERS:
        info = index.get(module)
        texts.append((module, info.text() if info is not None else ""))
    for package, folder in _SETTER_FOLDERS:  # code that may change vLLM's configuration at start-up
        tree = index.trees.get(package)
        if tree is not None:
            for path in sorted(tree.package_dir.joinpath(*folder).glob("*.py")):
                texts.append((path.stem, path.read_text(encoding="utf-8", errors="replace")))
    assigned: list = []  # the literals code that runs at start-up assigns it after the class builds it
    for module, text in texts:
        for m in setter.finditer(text):
            got = _literal_text(m.group(1))
            if got is None:
                return None  # set to something else than a literal: not read here
            assigned.append(got)
        if module == ENGINE_ARGS_CLASS[0] and passed.search(text):
            if any(v.strip() != f"self.{name}" for v in passed.findall(text)):
                return None  # EngineArgs builds it from something else
            engine = index.lookup(*ENGINE_ARGS_CLASS)
            own = _declared(engine).get(name) if getattr(engine, "kind", None) == "class" else None
            if own is None or _dotted_text(own) != f"{name_of}.{name}":
                return None  # the engine argument's own default may differ from the class's
    found = infer(value, Scope(module=module_of))
    if not isinstance(found, Known):
        return None
    options = [found]
    for got in assigned:
        if all(got != o or type(got.value) is not type(o.value) for o in options):
            options.append(got)
    return found if len(options) == 1 else OneOf(tuple(options))


def _literal_text(text: str) -> Known | None:
    """The literal a setter's right-hand side is (`"align"`, `None`, `False`), its comment left out; None for
    anything else."""
    text = text.split("#", 1)[0].strip().rstrip(";").strip()
    if not text:
        return None
    try:
        return literal(cst.parse_expression(text))
    except cst.ParserSyntaxError:
        return None


ENGINE_LOCALS = FactTable("engine_config_locals",
                          "(VllmConfig field, its field) -> the local EngineArgs.create_engine_config passes it (its "
                          "assignments, with their tests), or None")


class EngineLocal(NamedTuple):
    """The local `create_engine_config` builds a configuration field from (`sliding_window` of
    `CacheConfig(sliding_window=sliding_window)`): its assignments (value, test, position) in order, and every
    local assignment of the method before the call (what its tests read: `layer_types`)."""

    module: object  # EngineArgs' module
    assignments: list
    before: list  # [(local, value, test)]
    # [(value, test)] of each `<holder>.<name> = value` the start-up code makes after the engine built it (the
    # model's `verify_and_update_config`: `cache_config.cache_dtype = "auto"` under `if cache_config.cache_dtype ==
    # "bfloat16":`): the value built is kept where each sets it again or runs under a test it fails
    setters: tuple = ()


def engine_passed_values(index, holder: str, name: str) -> list | None:
    """`cache_config.sliding_window`: where EngineArgs' `create_engine_config` builds the class VllmConfig holds
    as `holder` with `name=<local>` (`CacheConfig(sliding_window=sliding_window)`, vllm/engine/arg_utils.py), the
    expressions that local is assigned in that method (`None`, then `model_config.get_sliding_window()` under a
    test), each with EngineArgs' class (their module); None where it passes something else, or where start-up
    code assigns `<holder>.<name> = ...` after it is built. The evaluator reads them with the model's
    configuration (a configuration-dependent value is never kept per tree)."""
    found = engine_local(index, holder, name)
    return [value for value, _cond, _pos in found.assignments] if found is not None else None


def engine_local(index, holder: str, name: str) -> EngineLocal | None:
    """engine_passed_values with each assignment's test, and the method's locals those tests read."""
    if index is None or not holder.endswith("_config") or holder == "vllm_config":
        return None
    return ENGINE_LOCALS.get(index, (holder, name), lambda: _engine_passed_values(index, holder, name))


def _engine_passed_values(index, holder: str, name: str) -> EngineLocal | None:
    from .function_bodies import class_method, tables

    vllm_config = index.lookup(*VLLM_CONFIG)
    engine = index.lookup(*ENGINE_ARGS_CLASS)
    if getattr(vllm_config, "kind", None) != "class" or getattr(engine, "kind", None) != "class":
        return None
    cls = _held_class(index, vllm_config, holder)
    fn = class_method(engine, "create_engine_config")
    if getattr(cls, "kind", None) != "class" or fn is None:
        return None
    passed = []
    for call in find_all(fn, cst.Call):
        if isinstance(call.func, (cst.Name, cst.Attribute)) and index.resolve_expr(engine.module, call.func) is cls:
            passed += [arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == name]
    if len(passed) != 1 or type(passed[0]) is not cst.Name:
        return None
    setter = re.compile(rf"\b{re.escape(holder)}\.{re.escape(name)}\s*=(?!=)")
    setters: list = []
    for module in _SETTERS:
        info = index.get(module)
        if info is not None and setter.search(info.text()):
            found = _setters(info, holder, name)  # changed after it is built: each such assignment, with its test
            if found is None:
                return None
            setters += found
    for package, folder in _SETTER_FOLDERS:
        tree = index.trees.get(package)
        if tree is not None:
            for path in sorted(tree.package_dir.joinpath(*folder).glob("*.py")):
                if setter.search(path.read_text(encoding="utf-8", errors="replace")):
                    rel = path.relative_to(tree.package_dir.parent).with_suffix("")
                    info = index.get(".".join(rel.parts))
                    found = _setters(info, holder, name) if info is not None else None
                    if found is None:
                        return None
                    setters += found
    table = tables(fn, engine.module)
    values = [(value, cond, pos) for target, value, cond, pos in table.local_assignments if target == passed[0].value]
    if not values:
        return None
    at = max(pos for _v, _c, pos in values)
    before = [(target, value, cond) for target, value, cond, pos in table.local_assignments if pos < at]
    return EngineLocal(engine.module, values, before, tuple(setters))


def _setters(info, holder: str, name: str) -> list | None:
    """[(value, condition)] of each `<holder>.<name> = value` in a function of module `info` (its methods
    included), its `if` tests kept; None where the text names one the functions do not hold (module level, a
    nested form not read)."""
    from .function_bodies import tables

    out = []
    pattern = re.compile(rb"\b%s\.%s\s*=(?!=)" % (re.escape(holder).encode(), re.escape(name).encode()))
    for fn in (f for top in info.nodes_with(pattern) for f in find_all(top, cst.FunctionDef)):
        for target, value, cond, _pos in tables(fn, info).assignments:
            if type(target) is cst.Attribute and target.attr.value == name and (
                    (type(target.value) is cst.Name and target.value.value == holder)
                    or (type(target.value) is cst.Attribute and target.value.attr.value == holder)):
                out.append((value, cond))
    found = len(re.findall(rf"\b{re.escape(holder)}\.{re.escape(name)}\s*=(?!=)", info.text()))
    return out if len(out) == found else None


def setter_keeps(setters, value, fails) -> bool:
    """Whether start-up code leaves an engine-built field at `value`: each setter (EngineLocal.setters) assigns
    that literal again, or runs under a test `fails(test)` says this value fails."""
    for new, cond in setters:
        if _is_literal(new, value):
            continue
        if not any(fails(term) for term in (cond.terms if cond is not None else ())):
            return False
    return True


MODEL_CONFIG = ("vllm.config.model", "ModelConfig")
MODEL_CONFIG_SETTERS = FactTable("model_config_setters",
                                 "a field of the model's configuration -> ModelConfig's `self.hf_text_config.<field> "
                                 "= v` assignments: (v, the test it runs under)")


def model_config_setters(index, key: str) -> list | None:
    """[(value, condition)] of each assignment ModelConfig's methods make to the model's configuration's field
    `key` (`self.hf_text_config.sliding_window = None` under `if self.get_sliding_window() == 0:`, vllm/config/
    model.py), with ModelConfig; None where ModelConfig is not in the trees."""
    return MODEL_CONFIG_SETTERS.get(index, key, lambda: _model_config_setters(index, key))


def _model_config_setters(index, key: str) -> list | None:
    from .function_bodies import tables

    cls = index.lookup(*MODEL_CONFIG) if index is not None else None
    if cls is None or cls.kind != "class":
        return None
    out = []
    for stmt in cls.node.body.body if type(cls.node.body) is cst.IndentedBlock else []:
        if type(stmt) is not cst.FunctionDef:
            continue
        for target, value, cond, _pos in tables(stmt, cls.module).assignments:
            if type(target) is cst.Attribute and target.attr.value == key and type(target.value) is cst.Attribute \
                    and target.value.attr.value in ("hf_config", "hf_text_config") \
                    and type(target.value.value) is cst.Name and target.value.value.value == "self":
                out.append((value, cond))
    return out


def model_config_keeps(index, getter: str, key: str, value) -> bool:
    """Whether ModelConfig leaves the configuration's `key` at `value` (what its method `getter` returns at start,
    `getattr(self.hf_text_config, key, None)`): each of its assignments to the field (model_config_setters) sets
    that value again, or runs under a test this value fails: `self.<getter>() == 0` with another value, or a
    boolean field of ModelConfig (`self.disable_sliding_window`) that no engine argument the tool reads sets,
    at a false default EngineArgs takes from ModelConfig, and that ModelConfig sets only under such a test."""
    setters = model_config_setters(index, key)
    if setters is None:
        return False
    return all(_is_literal(v, value) or _fails(index, getter, value, cond, 0) for v, cond in setters)


def _is_literal(node, value) -> bool:
    """`node` is a literal of `value` (and of its type: 0 is not False)."""
    lit = literal(node)
    return lit is not None and type(lit.value) is type(value) and lit.value == value


def _fails(index, getter: str, value, cond, depth: int) -> bool:
    """Whether one term of `cond` surely fails with the field at `value` and vLLM's defaults (model_config_keeps)."""
    for term in cond.terms if cond is not None else ():
        test = term.expr
        if test is None:
            continue
        if type(test) is cst.Comparison and len(test.comparisons) == 1 and type(test.left) is cst.Call \
                and not test.left.args and _dotted_text(test.left.func) == f"self.{getter}":
            op, lit = type(test.comparisons[0].operator), literal(test.comparisons[0].comparator)
            if lit is not None and op in (cst.Equal, cst.NotEqual) and term.negated is False:
                if (value == lit.value and type(value) is type(lit.value)) != (op is cst.Equal):
                    return True
        elif type(test) is cst.Attribute and type(test.value) is cst.Name and test.value.value == "self" \
                and not term.negated and depth < 2 and _false_flag(index, getter, value, test.attr.value, depth):
            return True
    return False


def _false_flag(index, getter: str, value, flag: str, depth: int) -> bool:
    """ModelConfig's boolean field `flag` is False: declared `flag: bool = False`, EngineArgs' own field
    `flag: bool = ModelConfig.flag` (no engine argument the deployment reads sets it), and every assignment
    ModelConfig makes to it runs under a test that fails (`self.disable_sliding_window = True` under
    `if self.get_sliding_window() == 0:`)."""
    from .function_bodies import tables

    cls, engine = index.lookup(*MODEL_CONFIG), index.lookup(*ENGINE_ARGS_CLASS)
    if getattr(cls, "kind", None) != "class" or getattr(engine, "kind", None) != "class":
        return False
    if literal(_declared(cls).get(flag) or cst.Name("x")) != Known(False):
        return False
    own = _declared(engine).get(flag)
    if own is None or _dotted_text(own) != f"{MODEL_CONFIG[1]}.{flag}":
        return False
    from ..ir.deployment import READ

    if f"--{flag.replace('_', '-')}" in READ:
        return False
    for stmt in cls.node.body.body if type(cls.node.body) is cst.IndentedBlock else []:
        if type(stmt) is cst.FunctionDef:
            for v, cond, _pos in tables(stmt, cls.module).self_assignments.get(flag, ()):
                if literal(v) != Known(False) and not _fails(index, getter, value, cond, depth + 1):
                    return False
    return True


def engine_local_code(index, holder: str, name: str) -> list[str]:
    """The code `<holder>.<name>` is built from where EngineArgs builds it from a local (engine_local), for
    status/waits.py: each assignment, the locals its tests read (`getattr(model_config.hf_text_config,
    "layer_types", None)`) and the tests, and the read of the configuration a `model_config.<m>()` makes
    (`getattr(self.hf_text_config, "sliding_window", None)`); [] where it is not built so."""
    from ..ir.conditions import code_of
    from .function_bodies import class_method

    found = engine_local(index, holder, name)
    if found is None:
        return []
    out: list[str] = []
    module = found.module
    model_config = index.lookup(*MODEL_CONFIG)
    for value, cond, _pos in found.assignments:
        out.append(code_of(module, value))
        func = value.func if type(value) is cst.Call else None
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "model_config" \
                and getattr(model_config, "kind", None) == "class":
            method = class_method(model_config, func.attr.value)
            out += [code_of(model_config.module, r.value) for r in iter_returns(method) if r.value is not None] \
                if method is not None else []
        for term in cond.terms if cond is not None else ():
            if term.expr is None:
                continue
            read = {n.value for n in find_all(term.expr, cst.Name)}
            out += [code_of(module, v) for local, v, _c in found.before if local in read]
            out.append(code_of(module, term.expr))
    return [" ".join(t.split()) for t in dict.fromkeys(out)]
