"""Host values: what the code computes on the host, not on the device, so its arithmetic is no device op.

- Values of a host package (walk.yaml `runtime.host_packages`: numpy, math, random): `np.ones(...)`, a method
  of such a value (`rng.choice(...)`, `a.astype(...)`), its items and arithmetic.
- Python scalars the trees declare: a parameter annotated `int` / `float` / `bool` / `str` (or Optional of
  one, or a list / tuple of them), and an attribute of an object whose class (the parameter's annotation, a
  TypeVar's bound) declares the field so (`attn_metadata.num_actual_tokens`, `num_actual_tokens: int` in the
  metadata dataclass).
- Lazy one-time initialisation: `if self.x is not None: return` then code that assigns `self.x` (or
  `if self.x is None: <assign self.x>`), a flag likewise: that code runs once, not per step; its ops are not
  steady (the cost model and the matcher skip them) and say so (`attrs.once`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import libcst as cst

from ..catalog import catalog
from ..index.modules import Definition
from ..index.nodes import find_all
from .frame import WalkerState, _self_attr

_SCALARS = frozenset({"int", "float", "bool", "str", "bytes", "complex"})
_CONTAINERS = frozenset({"list", "tuple", "set", "frozenset", "dict", "List", "Tuple", "Set", "Dict", "Sequence",
                         "Mapping", "Iterable"})
_HOST = "host"  # an annotation that declares a host value


def host_packages() -> frozenset[str]:
    return frozenset(catalog().runtime.get("host_packages", ()))


def host_callable(dotted: str | None) -> bool:
    """`dotted` (a call's resolved name) is, or is held by, one of walk.yaml `runtime.host_callables`
    (`vllm.triton_utils.triton.cdiv`, `vllm.platforms.current_platform.is_arch_support_pdl`)."""
    return bool(dotted) and any(dotted == c or dotted.startswith(c + ".")
                                for c in catalog().runtime.get("host_callables", ()))


def host_method(name: str) -> bool:
    """A method only a Python scalar has (walk.yaml `runtime.host_methods`: `bit_length`)."""
    return name in catalog().runtime.get("host_methods", ())


# What a tensor says of itself on the host: its metadata (`x.shape`, `x.numel()`, `x.size(0)`) is Python values.
_METADATA_ATTRS = frozenset({"shape", "ndim", "dtype", "device", "is_cuda", "itemsize"})
_METADATA_CALLS = frozenset({"size", "dim", "numel", "stride", "element_size", "data_ptr", "is_contiguous", "item",
                             "tolist"})
# builtins that give a Python scalar of any argument (a tensor's `int(x)` is read back to the host)
_SCALAR_BUILTINS = frozenset({"len", "int", "float", "bool", "round"})
# builtins whose value is a host value when every argument is one (`max(num_reqs, 1)`)
_HOST_OF_HOST = frozenset({"max", "min", "abs", "sum"})


class HostValues(WalkerState):
    """Mixin of Walker: which expressions are host values, and which code is a lazy one-time init."""

    if TYPE_CHECKING:  # set on Walker
        _value_types: dict[str, Definition]
        _field_kinds: dict[tuple[str, str], object]

    # -- numpy (host package) values -------------------------------------------------------------------------

    def _host_call(self, frame, call: cst.Call) -> bool:
        """A call that computes on the host: a host package's function (`np.block(...)`, `math.sqrt(...)`) or a
        method of a host value (`rng.choice(...)`, `signs.astype(...)`)."""
        func = call.func
        if isinstance(func, (cst.Name, cst.Attribute)):
            dotted = self.index.dotted(frame.module, func)
            if dotted and (dotted.split(".")[0] in host_packages() or host_callable(dotted)):
                return True
        if type(func) is cst.Attribute and host_method(func.attr.value):
            return True
        return type(func) is cst.Attribute and not _self_attr(func) and self._host_expr(frame, func.value)

    def _python_scalar(self, frame, expr) -> bool:
        """An expression whose value is a Python scalar by its structure: a tensor's metadata (`x.shape[0]`,
        `x.numel() - 1`), a builtin that converts (`len(x)`, `int(n)`), `max`/`min` of such values and literals,
        a host call's value. Its methods and arithmetic are no device op (`num_reqs.bit_length()`)."""
        t = type(expr)
        if t is cst.Name:
            return expr.value in frame.host
        if t is cst.Attribute:
            return not _self_attr(expr) and expr.attr.value in _METADATA_ATTRS
        if t is cst.Subscript:
            return self._python_scalar(frame, expr.value)
        if t is cst.UnaryOperation:
            return self._python_scalar(frame, expr.expression) or isinstance(expr.expression, (cst.Integer, cst.Float))
        if t is cst.BinaryOperation:
            sides = (expr.left, expr.right)
            return all(self._python_scalar(frame, s) or isinstance(s, (cst.Integer, cst.Float)) for s in sides) \
                and any(self._python_scalar(frame, s) for s in sides)
        if t is not cst.Call:
            return False
        func = expr.func
        if type(func) is cst.Attribute and not _self_attr(func) and func.attr.value in _METADATA_CALLS \
                and not (type(func.value) is cst.Name and func.value.value == "self"):
            return True
        if type(func) is cst.Name and frame.module.defs.get(func.value) is None:
            if func.value in _SCALAR_BUILTINS:
                return True
            if func.value in _HOST_OF_HOST and expr.args and not any(a.star for a in expr.args):
                return all(self._python_scalar(frame, a.value) or isinstance(a.value, (cst.Integer, cst.Float))
                           for a in expr.args)
        return self._host_call(frame, expr)

    def _host_expr(self, frame, expr) -> bool:
        """An expression whose value is a host package's (numpy) value, by its structure and the names the
        frame bound to such values."""
        t = type(expr)
        if t is cst.Name:
            return expr.value in frame.host
        if t is cst.Call:
            return self._host_call(frame, expr) or self._python_scalar(frame, expr)
        if t is cst.Attribute and not _self_attr(expr) and expr.attr.value in _METADATA_ATTRS:
            return True
        if t is cst.Subscript or t is cst.Attribute:
            return not _self_attr(expr) and self._host_expr(frame, expr.value)
        if t is cst.UnaryOperation:
            return self._host_expr(frame, cast(cst.UnaryOperation, expr).expression)
        if t is cst.BinaryOperation:  # host on one side, a host value or a literal on the other
            binary = cast(cst.BinaryOperation, expr)
            sides = (binary.left, binary.right)
            return any(self._host_expr(frame, s) for s in sides) and all(
                self._host_expr(frame, s) or isinstance(s, (cst.Integer, cst.Float)) for s in sides)
        return False

    # -- scalars the trees declare ---------------------------------------------------------------------------

    def _annotation(self, module, ann, depth: int = 0):
        """What an annotation declares: `_HOST` (a Python scalar, Optional of one, a container of them), the
        class of the trees it names (a TypeVar's bound followed), else None (a tensor, or not known)."""
        if ann is None or depth > 4:
            return None
        t = type(ann)
        if t is cst.SimpleString:  # "AscendMLAMetadata"
            try:
                return self._annotation(module, cst.parse_expression(ann.evaluated_value), depth + 1)
            except Exception:
                return None
        if t is cst.BinaryOperation and type(ann.operator) is cst.BitOr:  # X | None
            sides = [s for s in (ann.left, ann.right) if not (type(s) is cst.Name and s.value == "None")]
            kinds = [self._annotation(module, s, depth + 1) for s in sides]
            if kinds and all(k == _HOST for k in kinds):
                return _HOST
            return kinds[0] if len(kinds) == 1 else None
        if t is cst.Subscript:
            head = ann.value.attr.value if type(ann.value) is cst.Attribute else ann.value.value \
                if type(ann.value) is cst.Name else None
            items = [e.slice.value for e in ann.slice if type(e.slice) is cst.Index]
            items = [i for i in items if not (type(i) is cst.Name and i.value == "None") and type(i) is not cst.Ellipsis]
            if head in ("Optional", "Union"):
                kinds = [self._annotation(module, i, depth + 1) for i in items]
                if kinds and all(k == _HOST for k in kinds):
                    return _HOST
                return kinds[0] if len(kinds) == 1 else None
            if head in _CONTAINERS and items and all(self._annotation(module, i, depth + 1) == _HOST for i in items):
                return _HOST
            return None
        if t is cst.Name and ann.value in _SCALARS:
            return _HOST
        if t is cst.Name or t is cst.Attribute:
            d = self.index.resolve_expr(module, ann)
            if isinstance(d, Definition) and d.kind == "class":
                return d
            if isinstance(d, Definition) and d.kind == "assign" and type(d.node) is cst.Call:  # TypeVar("M", bound=X)
                call = d.node
                if type(call.func) in (cst.Name, cst.Attribute) and self.index.dotted(d.module, call.func) in (
                        "typing.TypeVar", "typing_extensions.TypeVar"):
                    bound = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "bound"), None)
                    return self._annotation(d.module, bound, depth + 1)
        return None

    def _field_kind(self, cls: Definition, name: str):
        """What `cls` (along its MRO) declares its field `name` to be, from the class body's annotations
        (`num_actual_tokens: int`, dataclasses and NamedTuples): `_HOST`, a class, or None."""
        key = (f"{cls.module.name}.{cls.name}", name)
        try:
            return self._field_kinds[key]
        except KeyError:
            pass
        found = None
        for c in self.ctor.mro(cls):
            body = getattr(getattr(c.node, "body", None), "body", ())
            ann = next((small.annotation.annotation for stmt in body if type(stmt) is cst.SimpleStatementLine
                        for small in stmt.body if type(small) is cst.AnnAssign and type(small.target) is cst.Name
                        and small.target.value == name), None)
            if ann is not None:
                found = self._annotation(c.module, ann)
                break
        self._field_kinds[key] = found
        return found

    def _class_of(self, frame, expr) -> Definition | None:
        """The class of the trees an expression's value is declared to be: a parameter's annotation (kept on its
        value wherever it is handed on), an attribute's field annotation of its object's class."""
        if type(expr) is cst.Name:
            vals = frame.env.get(expr.value) or []
            return self._value_types.get(vals[0]) if len(vals) == 1 else None
        if type(expr) is cst.Attribute and not _self_attr(expr):
            owner = self._class_of(frame, expr.value)
            kind = self._field_kind(owner, expr.attr.value) if owner is not None else None
            return kind if isinstance(kind, Definition) else None
        return None

    def _host_field(self, frame, expr: cst.Attribute) -> bool:
        """`obj.f` where obj's declared class declares `f` a Python scalar (`attn_metadata.num_decode_tokens`)."""
        owner = self._class_of(frame, expr.value)
        return owner is not None and self._field_kind(owner, expr.attr.value) == _HOST

    def _typed_params(self, frame) -> None:
        """After binding: a parameter annotated a Python scalar holds no tensor; one annotated a class of the
        trees keeps that class on its value (its fields' declared types are read where it is used)."""
        params = frame.fn.params
        for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
            if p.annotation is None:
                continue
            kind = self._annotation(frame.module, p.annotation.annotation)
            name = p.name.value
            if kind == _HOST:
                frame.env[name] = []
                frame.host.add(name)  # `n: int`: its methods are the scalar's (`n.bit_length()`)
            elif isinstance(kind, Definition):
                vals = frame.env.get(name) or []
                if len(vals) == 1:
                    self._value_types.setdefault(vals[0], kind)

    # -- lazy one-time initialisation ------------------------------------------------------------------------

    def _lazy_attr(self, test, positive: bool) -> str | None:
        """`self.x` of a test `self.x is not None` / `self.x` (positive: it holds once initialised) or
        `self.x is None` / `not self.x` (not positive)."""
        if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
            return self._lazy_attr(test.expression, not positive)
        if _self_attr(test):
            return test.attr.value if positive else None
        if (type(test) is cst.Comparison and len(test.comparisons) == 1 and _self_attr(test.left)
                and type(test.comparisons[0].comparator) is cst.Name and test.comparisons[0].comparator.value == "None"):
            op = type(test.comparisons[0].operator)
            if (op is cst.IsNot) == positive and op in (cst.Is, cst.IsNot):
                return test.left.attr.value
        return None

    def _assigns_self(self, frame, stmts, name: str, depth: int = 0) -> bool:
        """The statements assign `self.<name>`, themselves or in a method of the instance they call
        (`self._initialize_transforms(device)`), two calls deep."""
        for stmt in stmts:
            for target in find_all(stmt, cst.AssignTarget):
                if any(_self_attr(t) and t.attr.value == name for t in _flat_targets(target.target)):
                    return True
            for node in find_all(stmt, (cst.AugAssign, cst.AnnAssign)):
                if _self_attr(node.target) and node.target.attr.value == name:
                    return True
        if depth >= 2 or frame.inst is None or frame.inst.cls is None:
            return False
        for stmt in stmts:
            for call in find_all(stmt, cst.Call):
                if not _self_attr(call.func):
                    continue
                found = self.ctor.method(frame.inst.cls, call.func.attr.value)
                if found is not None and type(found[1]) is cst.FunctionDef and \
                        self._assigns_self(frame, found[1].body.body, name, depth + 1):
                    return True
        return False

    def _reset(self, frame, name: str) -> bool:
        """A method of the instance's class (its MRO), other than `__init__`, sets `self.<name>` back to None or
        False: the guard does not hold for good (a per-step state, not a one-time init)."""
        if frame.inst is None or frame.inst.cls is None:
            return True
        key = (f"{frame.inst.cls.module.name}.{frame.inst.cls.name}", "reset:" + name)
        found = self._field_kinds.get(key)
        if found is None:
            found = False
            for c in self.ctor.mro(frame.inst.cls):
                body = getattr(getattr(c.node, "body", None), "body", ())
                for fn in body:
                    if type(fn) is not cst.FunctionDef or fn.name.value == "__init__":
                        continue
                    for assign in find_all(fn, cst.Assign):
                        if type(assign.value) is cst.Name and assign.value.value in ("None", "False") and any(
                                _self_attr(t) and t.attr.value == name
                                for target in assign.targets for t in _flat_targets(target.target)):
                            found = True
            self._field_kinds[key] = found
        return bool(found)

    def _once_after(self, frame, stmt: cst.If, rest) -> str | None:
        """`if self.x is not None: ... return` whose following statements assign `self.x`: they run once (the
        guard holds from the second call on). The guard's text and line, else None."""
        name = self._lazy_attr(stmt.test, True)
        if name is None or not self._assigns_self(frame, rest, name) or self._reset(frame, name):
            return None
        return f"{' '.join(frame.module.code(stmt.test).split())} ({frame.module.rel}:{frame.module.line_of(stmt)})"

    def _once_body(self, frame, stmt: cst.If) -> str | None:
        """`if self.x is None: <assign self.x>`: the body runs once. The test's text and line, else None."""
        name = self._lazy_attr(stmt.test, False)
        if name is None or not self._assigns_self(frame, stmt.body.body, name) or self._reset(frame, name):
            return None
        return f"{' '.join(frame.module.code(stmt.test).split())} ({frame.module.rel}:{frame.module.line_of(stmt)})"


def _flat_targets(t):
    if isinstance(t, (cst.Tuple, cst.List)):
        for e in t.elements:
            yield from _flat_targets(e.value)
    else:
        yield t
