"""A module-level name bound to what a selector function returns: the classes it may hold, each under its key.

vllm-ascend reaches device kernels through a facade chosen once at import
(`vllm_ascend/device/device_op.py`: `DeviceOperator = get_device_adaptor()`, whose body is
`return {DeviceAdaptorFamily.STANDARD: BaseDeviceAdaptor, ...}[get_current_hardware_profile().device_adaptor_family]`).
Where the evaluator decides the key (the device's hardware profile, read from the tree's profile table) the walk
follows the one class; where it does not (a device with no SoC family), every class of the table is a candidate,
each under the test that selects it, written as the selector's own code (`<key> == <dict key>`), so a later
decision with a profile can still settle it and the report says which family each kernel needs.
"""

from __future__ import annotations

import libcst as cst

from ...index.facts import FactTable
from ...index.modules import Definition
from ...ir.conditions import Condition, Term, join
from ...semantics.function_bodies import tables

SELECTED = FactTable("selected classes", "a module-level name's assignment -> [(class, condition)] it may hold")


def selected_classes(index, module, name: cst.Name) -> list[tuple[Definition, Condition | None]]:
    """[(class, condition)] a module-level `name = selector()` may hold, where each return of the selector
    function is an item of a dict literal (a local of the function or a module-level one) whose values name
    classes of the trees: one entry per dict element, under `<index> == <key>` (and the return's own tests).
    Empty when the name is bound to anything else."""
    target = index.resolve_expr(module, name)
    if not isinstance(target, Definition) or target.kind != "assign":
        return []
    memo = SELECTED.of(target.module)
    key = id(target.node)
    if key not in memo:
        memo[key] = _read(index, target)
    return list(memo[key])


def _read(index, target: Definition) -> list[tuple[Definition, Condition | None]]:
    call = target.node
    if type(call) is not cst.Call or call.args or not isinstance(call.func, (cst.Name, cst.Attribute)):
        return []
    fn = index.resolve_expr(target.module, call.func)
    if not (isinstance(fn, Definition) and fn.kind == "function" and type(fn.node) is cst.FunctionDef):
        return []
    mod = fn.module
    table = tables(fn.node, mod)
    out: list[tuple[Definition, Condition | None]] = []
    for value, cond in table.returns:
        if type(value) is not cst.Subscript or len(value.slice) != 1 or type(value.slice[0].slice) is not cst.Index:
            return []
        held = _dict_of(index, mod, table, value.value)
        if held is None:
            return []
        picked = value.slice[0].slice.value
        for el in held.elements:
            if type(el) is not cst.DictElement:
                return []
            cls = index.resolve_expr(mod, el.value) if isinstance(el.value, (cst.Name, cst.Attribute)) else None
            if not (isinstance(cls, Definition) and cls.kind == "class"):
                return []
            test = cst.Comparison(picked, [cst.ComparisonTarget(cst.Equal(), el.key)])
            text = f"{mod.code(picked).strip()} == {mod.code(el.key).strip()}"
            out.append((cls, join(cond, Condition((Term(text, test, mod),)))))
    return out


def _dict_of(index, mod, table, expr) -> cst.Dict | None:
    """The dict literal `expr` names: a local assigned once in the function, else a module-level name."""
    if type(expr) is cst.Dict:
        return expr
    if type(expr) is not cst.Name:
        return None
    local = [v for n, v, c, _p in table.local_assignments if n == expr.value]
    if local:
        return local[0] if len(local) == 1 and type(local[0]) is cst.Dict else None
    found = index.resolve_expr(mod, expr)
    if isinstance(found, Definition) and found.kind == "assign" and type(found.node) is cst.Dict:
        return found.node
    return None
