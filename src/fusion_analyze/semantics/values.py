"""Values and conditions: conditions kept as code, three-valued truth, what is known at a call.

A branch, a factory's `if`, a guard, a platform check: each asks the evaluator (evaluator.py) of the code itself
(a libcst node and the module it is in), and gets TRUE, FALSE or UNKNOWN. UNKNOWN is never guessed into an
answer: the walk keeps both paths and prints the condition, in the model's own words, only when a report renders
it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import libcst as cst

from ..ir.conditions import Condition, Term, Truth, code_of


# -- values --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Known:
    """A value the code states: a literal, or a parameter default the call leaves alone."""

    value: object


@dataclass(frozen=True)
class Unknown:
    """Not known statically; `reason` says why (never replaced by a guess)."""

    reason: str = ""


@dataclass(frozen=True)
class OneOf:
    """One of several values, each under its condition (an `x if c else y`)."""

    options: tuple


@dataclass(frozen=True)
class ConfigRef:
    """The model's Hugging Face configuration object (`config`, `vllm_config.model_config.hf_config`, ...);
    `text` for `hf_text_config` / `get_text_config()`, the text model's part of a multimodal configuration.
    `rebuilt`: the configuration classes it was handed to in turn (`FlashConfig(**hf_config.__dict__)`), each
    as (file, class name, whether it was handed the text part): that configuration, built again from it.
    `set_by`: the functions of the trees it was handed to in turn that set attributes on it and return it
    (`config = _normalize_config(hf_config)`: `config.num_experts = config.n_routed_experts`), each as (file,
    function name): those attributes are what the function assigns, read on the configuration before it."""

    text: bool = False
    rebuilt: tuple = ()
    set_by: tuple = ()


@dataclass(frozen=True)
class Symbol:
    """A named constant of a library outside the trees (`torch.bfloat16`): equal only to itself."""

    name: str

    def __repr__(self) -> str:
        return self.name


class ClassRef:
    """A class of the trees as a value (`adaptor_by_family[...]` holds classes); equal by qualified name."""

    __slots__ = ("definition",)

    def __init__(self, definition) -> None:
        self.definition = definition

    def __eq__(self, other) -> bool:
        return isinstance(other, ClassRef) and other.definition.qualname == self.definition.qualname

    def __hash__(self) -> int:
        return hash(self.definition.qualname)

    def __repr__(self) -> str:
        return f"<class {self.definition.name}>"


class EnumMember(str):
    """A member of an Enum class of the trees whose value is a string (`AttentionBackendEnum.TRITON_ATTN_DIFFKV`
    = "vllm.v1.attention.backends.triton_attn_diffkv.TritonAttentionDiffKVBackend"): equal to that string, as
    the evaluator reads such a member, and carrying its class (`enum`, an index.Definition) and name (`member`),
    for `.name` and what a method of the enum makes of it (`.get_class()`, attention_choice.member_class)."""

    enum: object  # index.Definition of the Enum class
    member: str

    def __new__(cls, value: str, enum, member: str) -> "EnumMember":
        out = super().__new__(cls, value)
        out.enum, out.member = enum, member
        return out


@dataclass(frozen=True)
class NotNone:
    """An object the code builds (`Router(...)`, a factory whose every return builds one): never None; its
    truth and its value are otherwise unknown."""

    what: str = ""


@dataclass(frozen=True)
class Tensor(NotNone):
    """A tensor whose last dimension is known (`x.shape[-1]`): the routed hidden states a MoE layer's parts
    read, padded by the runner to `moe_config.hidden_dim`."""

    width: int = 0


class Defaults:
    """A configuration object of the backend built from no user input (`get_ascend_config()` without
    --additional-config): each attribute is its class's declared default (`x: int = 0`, a nested config built
    by `default_factory`); what the class does not declare as a literal default stays unknown."""

    __slots__ = ("definition", "overrides")

    def __init__(self, definition, overrides: dict | None = None) -> None:
        self.definition = definition
        self.overrides = overrides or {}  # what the user set (--additional-config), field by field

    def __eq__(self, other) -> bool:
        return isinstance(other, Defaults) and other.definition.qualname == self.definition.qualname \
            and other.overrides == self.overrides

    def __hash__(self) -> int:
        return hash(("defaults", self.definition.qualname, repr(sorted(self.overrides.items(), key=repr))))

    def __repr__(self) -> str:
        return f"<defaults of {self.definition.name}{' with ' + repr(self.overrides) if self.overrides else ''}>"


Value = Known | Unknown | OneOf | ConfigRef | NotNone  # the walk's modules (walk.construction.Instance) are values of their own kind


def selecting(cond: Condition | None) -> tuple[Condition | None, list[tuple[str, object]]]:
    """The condition less what its `key == value` terms already imply (`not (k == "default")` next to
    `k == "yarn"`), and those (key, value) pairs: the values that select a branch of an elif chain."""
    if not cond:
        return cond, []
    chosen: dict[str, object] = {}  # key -> the value (or tuple of values) a positive test asks for
    for t in cond.terms:
        found = None if t.negated else (_equality(t) or _membership(t))
        if found is not None:
            chosen.setdefault(found[0], found[1])
    kept, seen = [], set()
    for t in cond.terms:
        if t.render() in seen:  # the path's tests and a local's own tests repeat each other
            continue
        seen.add(t.render())
        found = _equality(t) or _membership(t)
        if t.negated and found is not None and found[0] in chosen:
            asked = chosen[found[0]]
            asked = set(asked) if isinstance(asked, tuple) else {asked}
            ruled = set(found[1]) if isinstance(found[1], tuple) else {found[1]}
            if not asked & ruled:
                continue  # implied by the positive test on the same key
        kept.append(t)
    return Condition(tuple(kept)), [(k, list(v) if isinstance(v, tuple) else v) for k, v in chosen.items()]


def _equality(t: Term) -> tuple[str, object] | None:
    e = t.expr
    if type(e) is cst.Comparison and len(e.comparisons) == 1 and type(e.comparisons[0].operator) is cst.Equal:
        lit = literal(e.comparisons[0].comparator)
        if lit is not None:
            return code_of(t.module, e.left), lit.value
    return None


def _membership(t: Term) -> tuple[str, tuple] | None:
    e = t.expr
    if type(e) is cst.Comparison and len(e.comparisons) == 1 and type(e.comparisons[0].operator) is cst.In:
        box = e.comparisons[0].comparator
        if isinstance(box, (cst.List, cst.Tuple, cst.Set)):
            items = [literal(el.value) for el in box.elements]
            if all(i is not None for i in items):
                return code_of(t.module, e.left), tuple(i.value for i in items)
    return None


# -- what is known at a call ---------------------------------------------------------------------
@dataclass
class Bindings:
    """What is known at one call: which parameters are None, which attributes hold which classes."""

    none: dict[str, bool] = field(default_factory=dict)  # param -> is None?
    attr_classes: dict[str, list[str]] = field(default_factory=dict)  # "self.rotary_emb" -> class + bases
    sure: set = field(default_factory=set)  # params whose None-ness is known, not only "some expression"
    # `<object>.name` -> Value: what the runtime objects of a composite layer's part carry for the whole walk of
    # its code (composites.yaml `fields`: the activation the MoE layer was built with)
    fields: dict = field(default_factory=dict)
    # param -> the class of the object the call passes, nothing else known of it (`quant_method=self` in the
    # quant method's `apply`): its methods are read on the class (Scope.objects)
    objects: dict = field(default_factory=dict)
    widths: dict = field(default_factory=dict)  # param -> the last dimension of the tensor the call passes

    def key(self) -> tuple:
        return (tuple(sorted(self.none.items())), tuple(sorted((k, tuple(v)) for k, v in self.attr_classes.items())),
                tuple(sorted(self.sure)), tuple(sorted((k, repr(v)) for k, v in self.fields.items())),
                tuple(sorted((k, v.qualname) for k, v in self.objects.items())), tuple(sorted(self.widths.items())))

    def for_callee(self) -> "Bindings":
        """What a called method starts from: the attribute classes carry over (same instance); None-ness is
        per parameter name, so the callee's comes from its own arguments (Walker._bind), not the caller's."""
        return Bindings(dict(), dict(self.attr_classes), fields=self.fields)

    def for_call(self, fn: cst.FunctionDef, call: cst.Call, value_of=None) -> "Bindings":
        """Bindings of a helper called with `call`: None-ness of its parameters from the arguments; `value_of`
        (expression -> Value) reads a `self.x` argument of a known instance. An argument that is only some
        expression counts as not None for `p is None` tests of the walk, but is not `sure`: the evaluator is
        handed only what is known (as_values)."""
        from .signatures import bind_arguments, call_arguments, none_defaults

        new = Bindings(dict(), dict(self.attr_classes), fields=self.fields)
        for name in none_defaults(fn):
            new.none[name] = True
            new.sure.add(name)
        for name, expr in bind_arguments(fn, *call_arguments(call)):
            if type(expr) is cst.Name and expr.value in self.objects:  # the object passed on (`quant_method`)
                new.objects[name] = self.objects[expr.value]
            if type(expr) is cst.Name and expr.value in self.widths:
                new.widths[name] = self.widths[expr.value]
            state, sure = self._arg_none(expr, value_of)
            new.sure.discard(name)
            if state is not None:
                new.none[name] = state
                if sure:
                    new.sure.add(name)
            else:
                new.none.pop(name, None)
        return new

    def _arg_none(self, expr, value_of=None) -> tuple[bool | None, bool]:
        if type(expr) is cst.Name:
            if expr.value == "None":
                return True, True
            return self.none.get(expr.value), expr.value in self.sure
        if value_of is not None and type(expr) is cst.Attribute and type(expr.value) is cst.Name \
                and expr.value.value == "self":
            value = value_of(expr)  # self.custom_routing_function of the instance, when the walk knows it
            if isinstance(value, Known):
                return value.value is None, True
            if isinstance(value, NotNone):
                return False, True
        return False, False

    def as_values(self) -> dict:
        """The None-ness known for sure, as values the evaluator reads (`custom_routing_function is not None`)."""
        out = {p: Known(None) if self.none[p] else NotNone(p) for p in sorted(self.sure) if p in self.none}
        out.update({p: Tensor(p, w) for p, w in self.widths.items()})
        return out


# -- the platform and the assume table -----------------------------------------------------------
@lru_cache(maxsize=4)
def _assume_table(backend: str | None) -> tuple:
    from ..catalog import catalog

    return tuple((re.compile(a.match), a.value) for a in catalog().typed.leaf_ops.assume
                 if a.backend in (None, backend))


@lru_cache(maxsize=65536)  # the same leaf tests are asked about for every layer of every model
def assumed(text: str, backend: str | None = None) -> Truth:
    """What the assume table (patterns/catalog/leaf_ops.yaml) says of a leaf test on `backend` (entries
    without a backend hold on both)."""
    for rx, value in _assume_table(backend):
        if rx.search(text):
            return Truth.of(value)
    return Truth.UNKNOWN


def literal(expr) -> Known | None:
    """Known(value) of a Python literal (None, True, 1, "silu", -1.0), else None."""
    kind = type(expr)  # asked of nearly every expression the evaluator meets: no isinstance chain
    if kind is cst.Name:
        return _NAMED.get(expr.value)
    if kind is cst.Integer or kind is cst.Float or kind is cst.SimpleString:
        return Known(constant(expr))
    if kind is cst.UnaryOperation and type(expr.operator) is cst.Minus and isinstance(expr.expression, (cst.Integer, cst.Float)):
        return Known(-constant(expr.expression))
    return None


_NAMED = {"None": Known(None), "True": Known(True), "False": Known(False)}


def constant(node):
    """The value of an Integer, Float or SimpleString node. libcst's `evaluated_value` compiles the text with
    ast.literal_eval (about 90 µs); plain spellings, nearly all of them, are read directly."""
    text = node.value
    if type(node) is cst.SimpleString:
        if "\\" not in text and text[:1] in "'\"":
            q = 3 if text[:3] in ('"""', "'''") else 1
            return text[q:-q]
    elif type(node) is cst.Integer:
        if text.isdigit() and (text == "0" or text[0] != "0"):
            return int(text)
    elif text[-1:] not in "jJ":
        try:
            return float(text.replace("_", ""))
        except ValueError:
            pass
    return node.evaluated_value


def _is_none(expr) -> bool:
    return type(expr) is cst.Name and expr.value == "None"
