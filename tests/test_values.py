"""The evaluator alone (walk/evaluator.py, walk/values.py): a table of snippet, bindings -> truth, in the style of tests of
statically known branches. The walk asks this one place for every branch, guard and platform test."""

from __future__ import annotations

import libcst as cst
import pytest

from fusion_analyze.semantics.for_backend import evaluator
from fusion_analyze.semantics.values import Bindings, Known, OneOf, Unknown, literal
from fusion_analyze.ir.conditions import Condition, Truth, join


class _Module:
    """Stands for a ModuleInfo: the evaluator only asks it for an expression's code."""

    @staticmethod
    def code(node) -> str:
        return cst.Module([]).code_for_node(node)


M = _Module()
EVALUATOR = evaluator(None)  # what holds on every backend
NONE_X = Bindings(none={"x": True})
SET_X = Bindings(none={"x": False})
ROPE = Bindings(attr_classes={"self.rotary_emb": ["MRotaryEmbedding", "RotaryEmbedding", "CustomOp"]})

TRUTH_TABLE = [
    # (snippet, bindings, expected)
    ("x is None", NONE_X, Truth.TRUE),
    ("x is None", SET_X, Truth.FALSE),
    ("x is not None", NONE_X, Truth.FALSE),
    ("x is None", Bindings(), Truth.UNKNOWN),          # not bound at this call: unknown, never a guess
    ("y is None", NONE_X, Truth.UNKNOWN),
    ("not x is None", SET_X, Truth.TRUE),
    ("x is None and y", NONE_X, Truth.UNKNOWN),        # one known, one not
    ("x is None and y", SET_X, Truth.FALSE),           # FALSE and anything
    ("x is not None or y", SET_X, Truth.TRUE),         # TRUE or anything
    ("x is not None or y", NONE_X, Truth.UNKNOWN),
    ("isinstance(self.rotary_emb, MRotaryEmbedding)", ROPE, Truth.TRUE),
    ("isinstance(self.rotary_emb, (YaRNScalingRotaryEmbedding, mod.MRotaryEmbedding))", ROPE, Truth.TRUE),
    ("isinstance(self.rotary_emb, YaRNScalingRotaryEmbedding)", ROPE, Truth.FALSE),
    ("isinstance(self.other, MRotaryEmbedding)", ROPE, Truth.UNKNOWN),
    # the assume table (patterns/catalog/leaf_ops.yaml): platforms this tool does not walk, debug switches
    ("current_platform.is_rocm()", Bindings(), Truth.FALSE),
    ("not current_platform.is_xpu()", Bindings(), Truth.TRUE),
    ("TYPE_CHECKING", Bindings(), Truth.FALSE),
    ("TYPE_CHECKING or not current_platform.is_rocm()", Bindings(), Truth.TRUE),
    ("envs.VLLM_USE_V2_RUNNER", Bindings(), Truth.FALSE),
    ("get_pp_group().is_first_rank", Bindings(), Truth.TRUE),
    ("self.training", Bindings(), Truth.FALSE),
    ("config.num_experts > 0", Bindings(), Truth.UNKNOWN),
]


@pytest.mark.parametrize("snippet,env,expected", TRUTH_TABLE, ids=[t[0] for t in TRUTH_TABLE])
def test_truth(snippet, env, expected):
    assert EVALUATOR.truth(cst.parse_expression(snippet), M, env) is expected


PLATFORM = [
    # (snippet, backend, expected): on Ascend vLLM runs as an out-of-tree platform
    ("current_platform.is_cuda()", "ascend", Truth.FALSE),
    ("current_platform.is_cuda_alike()", "cuda", Truth.TRUE),
    ("current_platform.is_cuda()", None, Truth.UNKNOWN),
    ("current_platform.is_out_of_tree()", "ascend", Truth.TRUE),
    ("not current_platform.is_out_of_tree()", "cuda", Truth.TRUE),
    ("current_platform.is_cuda() or current_platform.is_rocm()", "ascend", Truth.FALSE),
    ("current_platform.is_rocm()", "cuda", Truth.FALSE),
]


@pytest.mark.parametrize("snippet,backend,expected", PLATFORM, ids=[f"{t[0]}@{t[1]}" for t in PLATFORM])
def test_platform_truth(snippet, backend, expected):
    assert evaluator(backend).truth(cst.parse_expression(snippet), M) is expected


def test_three_valued_logic_is_kleene():
    T, F, U = Truth.TRUE, Truth.FALSE, Truth.UNKNOWN
    assert [a.and_(b) for a, b in [(T, T), (T, U), (F, U), (U, U)]] == [T, U, F, U]
    assert [a.or_(b) for a, b in [(F, F), (F, U), (T, U), (U, U)]] == [F, U, T, U]
    assert [v.negate() for v in (T, F, U)] == [F, T, U]
    assert [Truth.of(v) for v in (True, False, None)] == [T, F, U] and U.as_bool() is None


def _cond(*tests: str) -> Condition:
    out = None
    for t in tests:
        neg = t.startswith("!")
        c = Condition.of(cst.parse_expression(t.lstrip("!")), M)
        out = join(out, c.negate() if neg else c)
    return out


def test_conditions_stay_code_and_render_in_the_models_words():
    c = _cond("quant_config is None", "!self.use_fused")
    assert str(c) == "quant_config is None and not (self.use_fused)"
    assert str(c.with_prefix("built when ").with_suffix(" [use_fused = x > 1]")) == (
        "built when quant_config is None and not (self.use_fused) [use_fused = x > 1]")
    assert c == _cond("quant_config is None", "!self.use_fused") and len({c, _cond("quant_config is None", "!self.use_fused")}) == 1
    assert join(None, c) is c and join(c, None) is c and join(None, None) is None


def test_decide_drops_what_the_bindings_make_true_and_keeps_the_rest():
    env = Bindings(none={"prefix": True, "quant_config": False})
    assert EVALUATOR.decide(_cond("prefix is None", "config.tie"), env, none_only=True) == _cond("config.tie")
    assert EVALUATOR.decide(_cond("!quant_config is not None"), env, none_only=True) is Truth.FALSE
    assert EVALUATOR.decide(_cond("prefix is None"), env, none_only=True) is Truth.TRUE
    assert EVALUATOR.decide(None, env) is Truth.TRUE
    # none_only: the assume table is not asked (a factory's locals keep their platform tests)
    assert EVALUATOR.decide(_cond("current_platform.is_rocm()"), env, none_only=True) == _cond("current_platform.is_rocm()")
    assert EVALUATOR.decide(_cond("current_platform.is_rocm()"), env) is Truth.FALSE
    assert EVALUATOR.condition_truth(_cond("prefix is None", "!quant_config is None"), env) is Truth.TRUE


class _Scope:
    def __init__(self, params=None, defaults=None):
        self.params, self.defaults, self.locals, self.module, self.owner = params or {}, defaults or {}, {}, M, None


def test_infer_follows_parameters_to_literals_and_says_unknown_otherwise():
    e = cst.parse_expression
    assert literal(e("-1.5")) == Known(-1.5) and literal(e("'silu'")) == Known("silu") and literal(e("None")) == Known(None)
    outer = _Scope(defaults={"bias": e("False")})
    inner = _Scope(params={"qkv_bias": (e("bias"), outer)})
    assert EVALUATOR.infer(e("qkv_bias"), inner) == Known(False)  # qkv_bias <- bias <- default False
    assert EVALUATOR.infer(e("True if a else 3"), inner) == OneOf((Known(True), Known(3)))
    unknown = EVALUATOR.infer(e('getattr(config, "attention_bias", False)'), inner)
    assert isinstance(unknown, Unknown) and "attention_bias" in unknown.reason


MODULE = '''
import enum
import torch

_ENABLED = True
_LAZY = None
_TWICE = 1
_TWICE = 2


def load():
    global _LAZY
    _LAZY = object()


class Kind(str, enum.Enum):
    DECODER = "decoder"
    ENCODER_ONLY = "encoder_only"
'''

GLOBALS_TABLE = [
    # module-level names, class constants and listed outside constants, as the module sees them
    ("_ENABLED", Known(True)),
    ("Kind.DECODER == Kind.ENCODER_ONLY", Known(False)),
    ("Kind.DECODER", Known("decoder")),               # a str Enum's member equals its string
    ("torch.bfloat16 in (torch.bfloat16, torch.float16)", Known(True)),
    ("(4096 // 32) * 2 + 1", Known(257)),
    ("len([1, 2, 3]) == 3", Known(True)),
    ("next(iter({'a': 1}.values()))", Known(1)),
    ("sorted((3, 1, 2))", Known((1, 2, 3))),
]


@pytest.mark.parametrize("snippet,expected", GLOBALS_TABLE, ids=[t[0] for t in GLOBALS_TABLE])
def test_module_level_values(tmp_path, snippet, expected):
    from fusion_analyze.walk.construction.constructor import Scope

    from .conftest import tree_index

    index = tree_index(tmp_path, {"consts.py": MODULE})
    scope = Scope(module=index.get("vllm.consts"))
    assert EVALUATOR.infer(cst.parse_expression(snippet), scope) == expected


@pytest.mark.parametrize("snippet", ["_LAZY is None", "_TWICE", "torch.version.cuda", "x // 2", "Kind.MISSING"])
def test_module_level_values_that_are_not_constants_stay_unknown(tmp_path, snippet):
    """A name rebound by `global` (set lazily at run time), one assigned twice, what an outside library knows
    only on the machine, an unbound local: never a value."""
    from fusion_analyze.walk.construction.constructor import Scope

    from .conftest import tree_index

    index = tree_index(tmp_path, {"consts.py": MODULE})
    scope = Scope(module=index.get("vllm.consts"))
    assert isinstance(EVALUATOR.infer(cst.parse_expression(snippet), scope), Unknown)


CALLS = '''
class Router:
    pass


def check(top_k, renormalize=True, scoring_func="softmax", topk_group=None):
    """Only ifs, assignments and returns: run on its arguments."""
    if scoring_func == "sigmoid" and not renormalize:
        return False
    topk_group = topk_group if topk_group is not None else 1
    return 1 <= topk_group <= top_k


def make_router(kind):
    if kind == "a":
        return Router()
    return Router()


def with_side_effects(x):
    print(x)
    return True


def is_block_fp8(quant_config):
    return isinstance(quant_config, Router) and quant_config.weight_block_size is not None


def excluded(quant_config, prefix):
    """BailingMoeV3's `_is_fp8_module_excluded`: False for an unquantised model (quant_config None)."""
    if not is_block_fp8(quant_config):
        return False
    return with_side_effects(prefix)
'''

HELPERS = '''
from copy import copy


def get_bool(configs, attr):
    """A loop over the configurations handed in: the first that has the attribute gives it."""
    for config in configs:
        if config is not None and hasattr(config, attr):
            return bool(getattr(config, attr))
    return False


def first_set(items):
    for item in items:
        if item is None:
            continue
        return item
    return None


def reuse(layer_id, freq=1, offset=2):
    assert freq > 0
    return max(layer_id - offset + 1, 0) % freq != 0


def loops_on_what_it_is_not_told(items, flag):
    for item in items:
        if flag:
            return item
    return None
'''

HELPERS_TABLE = [
    ("get_bool(({'x': 1}, None), 'x')", Known(True)),        # a tuple written out, item by item
    ("get_bool((None, {'y': 0}), 'y')", Known(False)),
    ("get_bool((None, None), 'x')", Known(False)),            # ran off the loop: its last return
    ("first_set((None, 3, 4))", Known(3)),                    # `continue`, then the first item that is set
    ("reuse(0)", Known(False)),                               # max() of known numbers; an assert on the way
    ("reuse(5, freq=2)", Known(False)),
    ("reuse(6, freq=2)", Known(True)),
    ("max(1, 4, 2)", Known(4)),
    ("min(3, 0.5)", Known(0.5)),
    ("copy(7)", Known(7)),                                    # a copy holds what the original holds
]


@pytest.mark.parametrize("snippet,expected", HELPERS_TABLE, ids=[t[0] for t in HELPERS_TABLE])
def test_helpers_with_loops_asserts_and_builtins(tmp_path, snippet, expected):
    """A helper whose body loops over a sequence known item by item (semantics/loops.py) is run as Python runs
    it; `max` / `min` of known numbers; an `assert` in a decision function is a path that raises."""
    from fusion_analyze.walk.construction.constructor import Scope

    from .conftest import tree_index

    index = tree_index(tmp_path, {"helpers.py": HELPERS})
    assert EVALUATOR.infer(cst.parse_expression(snippet), Scope(module=index.get("vllm.helpers"))) == expected


@pytest.mark.parametrize("snippet", ["get_bool((x, None), 'a')", "get_bool(configs, 'a')", "max(x, 0)",
                                     "loops_on_what_it_is_not_told((1, 2), flag)", "reuse(layer)"])
def test_helpers_with_loops_on_what_is_not_known_stay_unknown(tmp_path, snippet):
    from fusion_analyze.walk.construction.constructor import Scope

    from .conftest import tree_index

    index = tree_index(tmp_path, {"helpers.py": HELPERS})
    got = EVALUATOR.infer(cst.parse_expression(snippet), Scope(module=index.get("vllm.helpers")))
    assert not isinstance(got, Known), got


CALLS_TABLE = [
    ("check(2)", Known(True)),
    ("check(2, renormalize=False, scoring_func='sigmoid')", Known(False)),
    ("check(2, topk_group=3)", Known(False)),            # 1 <= 3 <= 2 fails: a chained comparison
    ("Router() is not None", Known(True)),             # an object the code builds is never None
    ("make_router(x) is None", Known(False)),          # every return builds one
    # isinstance of a known None or scalar literal: no class of the trees holds it; builtins as Python says
    ("isinstance(None, Router)", Known(False)),
    ("excluded(None, 'model.layers.0.b_proj')", Known(False)),  # through the called function's body
    ("isinstance(True, (Router, int))", Known(True)),
    ("isinstance('a', (int, float))", Known(False)),
    ("isinstance(None, type(None))", Known(True)),
]


@pytest.mark.parametrize("snippet,expected", CALLS_TABLE, ids=[t[0] for t in CALLS_TABLE])
def test_calls_the_evaluator_can_run(tmp_path, snippet, expected):
    from fusion_analyze.walk.construction.constructor import Scope

    from .conftest import tree_index

    index = tree_index(tmp_path, {"calls.py": CALLS})
    assert EVALUATOR.infer(cst.parse_expression(snippet), Scope(module=index.get("vllm.calls"))) == expected


@pytest.mark.parametrize("snippet", ["with_side_effects(1)", "make_router(x)", "check(k)", "isinstance(x, Router)",
                                     "isinstance(None, Missing)", "isinstance((1,), tuple)", "excluded(q, 'p')"])
def test_calls_it_cannot_run_stay_unknown(tmp_path, snippet):
    from fusion_analyze.walk.construction.constructor import Scope

    from .conftest import tree_index

    index = tree_index(tmp_path, {"calls.py": CALLS})
    got = EVALUATOR.infer(cst.parse_expression(snippet), Scope(module=index.get("vllm.calls")))
    assert not isinstance(got, Known)


ASCEND_CONFIG = '''
import dataclasses


class FinegrainedTPConfig:
    oproj_tensor_parallel_size: int = 0
    mlp_tensor_parallel_size: int = 0

    def _validate(self, vc):
        if vc.parallel_config.tensor_parallel_size == 1:
            self.oproj_tensor_parallel_size = 0  # a downgrade: the default stays


class AscendConfig:
    enable_mlapo: bool = True
    weight_nz_mode: int = 1
    mc2_comm_alg: str = ""
    enable_shared_expert_dp: bool = False
    enable_sp_by_pass: bool = False
    enable_prefill_mc2: bool = False
    log_path: str = dataclasses.field(default_factory=lambda: os.path.join("~", "ascend"))
    fusion_level: int = dataclasses.field(default=2)
    finegrained_tp_config: FinegrainedTPConfig = dataclasses.field(default_factory=lambda: FinegrainedTPConfig())
    extra: dict = dataclasses.field(default_factory=dict)

    cache_dtype: str = "auto"
    enable_kv_quant: bool = False
    enable_kv_auto: bool = False
    _quant_layers: set = dataclasses.field(default_factory=set)

    def derive_and_validate(self, vc):
        self.enable_shared_expert_dp = self.enable_shared_expert_dp and vc.parallel_config.enable_expert_parallel
        self.enable_sp_by_pass = vc.compilation_config.pass_config.enable_sp
        self.enable_prefill_mc2 = self.enable_prefill_mc2 or vc.parallel_config.enable_expert_parallel
        use_sparse = model_is_sparse(vc.model_config)
        self.enable_kv_quant = self.cache_dtype in ["fp8", "int8"] and use_sparse
        self.enable_kv_auto = self.cache_dtype == "auto" and use_sparse

    def is_quant_layer(self, name):
        return self._is_layer(name, self.enable_kv_quant, self._quant_layers)

    @staticmethod
    def _is_layer(name, enabled, names):
        if not enabled:
            return False
        return name in names


def oproj_tp_enable() -> bool:
    return get_ascend_config().finegrained_tp_config.oproj_tensor_parallel_size > 0
'''

DEFAULTS_TABLE = [
    ("get_ascend_config().enable_mlapo", Known(True)),
    ("get_ascend_config().weight_nz_mode", Known(1)),
    ("get_ascend_config().mc2_comm_alg", Known("")),
    ("get_ascend_config().fusion_level", Known(2)),
    ("get_ascend_config().extra", Known({})),
    ("get_ascend_config().finegrained_tp_config.mlp_tensor_parallel_size", Known(0)),
    # a validator that only downgrades (`= 0`) or ANDs a False default keeps it
    ("get_ascend_config().finegrained_tp_config.oproj_tensor_parallel_size", Known(0)),
    ("oproj_tp_enable()", Known(False)),
    ("get_ascend_config().enable_shared_expert_dp", Known(False)),
    # a derivation read in its method gives the default again: kept (whatever the model, the "auto" dtype is no
    # quantised one); a method of the configuration run on its fields
    ("get_ascend_config().enable_kv_quant", Known(False)),
    ("get_ascend_config().is_quant_layer('model.layers.0.attn')", Known(False)),
    # what a validator derives from other settings, what a factory computes, what is not declared: unknown
    ("get_ascend_config().enable_sp_by_pass", None),
    ("get_ascend_config().enable_prefill_mc2", None),
    ("get_ascend_config().enable_kv_auto", None),  # (it may become True: derived, not kept)
    ("get_ascend_config().log_path", None),
    ("get_ascend_config().no_such_field", None),
]


@pytest.mark.parametrize("snippet,expected", DEFAULTS_TABLE, ids=[t[0] for t in DEFAULTS_TABLE])
def test_backend_configuration_is_its_declared_defaults(tmp_path, snippet, expected):
    """`get_ascend_config()` with no --additional-config: each field its class's declared default, a nested
    configuration built by its default_factory; a field a validator derives from other settings is unknown."""
    from fusion_analyze.walk.construction.constructor import Scope
    from fusion_analyze.semantics.environment import Environment
    from fusion_analyze.semantics.evaluator import Evaluator
    from fusion_analyze.semantics.values import Defaults

    from .conftest import tree_index

    index = tree_index(tmp_path, {"ascend_config.py": ASCEND_CONFIG})
    module = index.get("vllm.ascend_config")
    cls = index.lookup("vllm.ascend_config", "AscendConfig")
    ev = Evaluator(Environment("ascend"), calls={"get_ascend_config": lambda _c, _s: Known(Defaults(cls))})
    got = ev.infer(cst.parse_expression(snippet), Scope(module=module))
    assert isinstance(got, Unknown) if expected is None else got == expected


def test_a_dict_literal_with_unknown_values_still_reads_its_known_items():
    """GPT-OSS hands get_rope rope_parameters={"rope_type": "yarn", "factor": config...[...], ...}: the known
    item decides the factory's branch, an unknown one stays unknown (never a default)."""
    import libcst as cst

    from fusion_analyze.semantics.for_backend import evaluator
    from fusion_analyze.semantics.scope import Scope
    from fusion_analyze.semantics.values import Known, Unknown

    ev = evaluator(None)
    scope = Scope(module=None, values={"x": Unknown("x")})
    d = '{"rope_type": "yarn", "factor": x}'
    assert ev.infer(cst.parse_expression(f'({d}).get("rope_type", "default")'), scope) == Known("yarn")
    assert isinstance(ev.infer(cst.parse_expression(f'({d}).get("factor", 1.0)'), scope), Unknown)
    assert isinstance(ev.infer(cst.parse_expression(f'({d})["factor"]'), scope), Unknown)
    assert isinstance(ev.infer(cst.parse_expression(f'({d}).values()'), scope), Unknown)
    assert ev.infer(cst.parse_expression(f'({d}).get("missing", 2)'), scope) == Known(2)


def test_a_decision_function_is_run_once_per_call_site_and_argument_values(tmp_path, monkeypatch):
    """A layer's construction asks the same decision function from every copy of its __init__'s scope: the
    evaluator keeps its value per call site and plain argument values (constants, the configuration), never
    across other values, and runs it again where an argument is not a plain value."""
    from fusion_analyze.semantics import function_bodies
    from fusion_analyze.walk.construction.constructor import Scope

    from .conftest import tree_index

    module = tree_index(tmp_path, {"calls.py": CALLS}).get("vllm.calls")
    ev = evaluator(None)
    call = cst.parse_expression("check(k, topk_group=g)")
    runs: list = []
    run = function_bodies.FunctionTables.returns_decided
    monkeypatch.setattr(function_bodies.FunctionTables, "returns_decided",
                        lambda self, *a, **kw: runs.append(1) or run(self, *a, **kw))

    def at(k: str, g: str) -> Scope:
        where = Scope(module=module)
        return Scope(module=module, params={"k": (cst.parse_expression(k), where), "g": (cst.parse_expression(g), where)})

    assert ev.infer(call, at("2", "3")) == Known(False)  # 1 <= 3 <= 2
    assert ev.infer(call, at("4", "3")) == Known(True)
    assert ev.infer(call, at("True", "1")) == Known(True)  # True is not 1: its own run
    assert len(runs) == 3
    assert ev.infer(call, at("2", "3")) == Known(False)  # the same values from another scope: kept
    assert ev.infer(call, at("4", "3")) == Known(True)
    assert len(runs) == 3
    unbound = Scope(module=module)  # k and g not known: run each time
    assert not isinstance(ev.infer(call, unbound), Known)
    ev.infer(call, unbound)
    assert len(runs) == 5


ISINSTANCE = [
    # (value, type expression, expected): `isinstance(self.config.moe_layer_freq, int)` on a configuration value
    (Known([0, 1, 1]), "int", Known(False)),
    (Known(3), "int", Known(True)),
    (Known(True), "int", Known(True)),  # as Python: a bool is an int
    (Known("a"), "(int, str)", Known(True)),
    (Known(None), "float", Known(False)),
    (Known(3), "list", Known(False)),  # a scalar is neither sequence
    (Known([0, 1]), "list", Unknown("a list or a tuple (not told apart)")),  # the reader holds lists as tuples
    (Known(3), "SomeClass", Unknown("isinstance of a type not read here")),
    (Unknown("x"), "int", Unknown("isinstance of an unknown value")),
]


@pytest.mark.parametrize("value,wanted,expected", ISINSTANCE, ids=[f"{t[0]}-{t[1]}" for t in ISINSTANCE])
def test_isinstance_of_a_plain_value(value, wanted, expected):
    from fusion_analyze.semantics.known_calls import isinstance_value

    assert isinstance_value(value, cst.parse_expression(wanted)) == expected


def test_enum_member_is_its_string_and_knows_its_member():
    from fusion_analyze.semantics.values import EnumMember

    m = EnumMember("pkg.mod.Cls", object(), "TRITON")
    assert m == "pkg.mod.Cls" and repr(m) == repr("pkg.mod.Cls") and m.member == "TRITON"
    assert Known(m) == Known("pkg.mod.Cls")


PROPERTIES = '''
class Impl:
    def __init__(self, **kwargs):
        self._skip = bool(kwargs.get("skip", False))

    @property
    def skip(self) -> bool:
        return self._skip

    @skip.setter
    def skip(self, value: bool) -> None:
        self._skip = bool(value)


def build(flag, **extra):
    extra["buffer"] = None
    if flag:
        extra["group"] = 1
    return Impl(**extra)


def changes_it(**extra):
    extra.pop("buffer", None)
    extra["buffer"] = 1
    return Impl(**extra)
'''


def test_a_property_with_a_setter_is_read_through_its_getter(tmp_path):
    """`@x.setter` redefines the name, but what reading `obj.x` runs is the getter: the method a read of the
    class finds (chunks.lone and function_bodies.class_method) is the `@property` one."""
    from fusion_analyze.semantics.function_bodies import class_method
    from fusion_analyze.semantics.objects import is_property

    from .conftest import tree_index

    index = tree_index(tmp_path, {"props.py": PROPERTIES})
    cls = index.lookup("vllm.props", "Impl")
    fn = class_method(cls, "skip")
    assert fn is not None and is_property(cls.module, fn) and len(fn.params.params) == 1


def test_a_kwargs_dict_filled_before_it_is_passed_on(tmp_path):
    """`extra["k"] = v` into a function's own `**extra` before `Impl(**extra)`: what the callee's `kwargs.get("k")`
    reads (FunctionTables.kwarg_fills), each fill with its test; a dict changed another way says nothing."""
    from fusion_analyze.semantics.function_bodies import tables

    from .conftest import tree_index

    index = tree_index(tmp_path, {"props.py": PROPERTIES})
    module = index.get("vllm.props")
    build = index.lookup("vllm.props", "build")
    fills = tables(build.node, module).kwarg_fills
    assert [(key, cond is None) for _pos, cond, key, _v in fills] == [("buffer", True), ("group", False)]
    assert tables(index.lookup("vllm.props", "changes_it").node, module).kwarg_fills is None


TENSOR_CHECKS = [
    # a tensor's `.is_cuda` (an attribute): no tensor is on a CUDA device on Ascend; on CUDA one may be on the host
    ("input_ids.is_cuda", "ascend", Truth.FALSE),
    ("not x.weight.is_cuda", "ascend", Truth.TRUE),
    ("input_ids.is_cuda", "cuda", Truth.UNKNOWN),
    ("current_platform.is_cuda", "ascend", Truth.UNKNOWN),  # the platform's method, not called: not a tensor's flag
]


@pytest.mark.parametrize("snippet,backend,expected", TENSOR_CHECKS, ids=[f"{t[0]}@{t[1]}" for t in TENSOR_CHECKS])
def test_a_tensors_device_flag(snippet, backend, expected):
    assert evaluator(backend).truth(cst.parse_expression(snippet), M) is expected


ENGINE_CONFIG = '''\
from dataclasses import dataclass

from vllm.platforms import current_platform


@dataclass
class VllmConfig:
    engram_config: object | None = None
    cuda_only_config: object | None = None
    anywhere_config: object | None = None

    def __post_init__(self):
        self._resolve_engram()
        if self.anywhere_config is None and self.cuda_only_config is None:
            self.anywhere_config = object()

    def _resolve_engram(self):
        if self.engram_config is None:
            if not current_platform.is_cuda():
                return
            self.engram_config = object()
        if current_platform.is_cuda():
            self.cuda_only_config = object()
'''


ENGINE_ARGS = '''\
from dataclasses import dataclass

from vllm.config.vllm import VllmConfig


@dataclass
class EngineArgs:
    engram_config: object | None = VllmConfig.engram_config
    cuda_only_config: object | None = None

    def __post_init__(self):
        if isinstance(self.engram_config, dict):
            self.engram_config = object()

    def create_engine_config(self):
        return VllmConfig(engram_config=self.engram_config, cuda_only_config=self.cuda_only_config)
'''


USER = '''\
from vllm.config import get_current_vllm_config


def read(vllm_config):
    a = get_current_vllm_config().engram_config
    b = vllm_config.cuda_only_config
    c = vllm_config.anywhere_config
'''


@pytest.mark.parametrize("backend,expected", [("ascend", [Known(None), Known(None), None]),
                                              ("cuda", [None, None, None])])
def test_a_field_no_start_up_code_sets_on_the_backend_stays_none(tmp_path, backend, expected):
    """`vllm_config.engram_config` starts None (VllmConfig's default, EngineArgs passes its own field whose default
    is VllmConfig's, no option sets it) and VllmConfig sets it only past `if not current_platform.is_cuda():
    return`; EngineArgs converts it only when it is a dict: on Ascend it stays None, also read through
    `get_current_vllm_config()`. A field set behind a test that holds on Ascend (`anywhere_config`) is not decided;
    on CUDA none of them is."""
    from fusion_analyze.semantics.environment import Environment
    from fusion_analyze.semantics.evaluator import Evaluator
    from fusion_analyze.semantics.scope import Scope

    from .conftest import tree_index

    index = tree_index(tmp_path, {"config/vllm.py": ENGINE_CONFIG, "config/__init__.py": "",
                                  "engine/arg_utils.py": ENGINE_ARGS, "platforms/__init__.py": "current_platform = None\n",
                                  "model_executor/user.py": USER}, backend=backend)
    module = index.get("vllm.model_executor.user")
    fn = module.tree.body[-1]
    ev = Evaluator(Environment(backend, index))
    got = []
    for stmt in fn.body.body:
        value = ev.infer(stmt.body[0].value, Scope(module=module))
        got.append(value if isinstance(value, Known) else None)
    assert got == expected
