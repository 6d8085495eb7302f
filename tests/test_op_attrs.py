"""Op.attrs declared once, in two places kept in step (issue 32): the `OpAttrs` TypedDict of ir/ops.py and the
`op_attrs` definition of schemas/report.schema.json, whose `additionalProperties: false` makes a report with an
undeclared key fail validation."""

from __future__ import annotations

import json
import types
import typing
from typing import Literal, get_args, get_origin, get_type_hints

import pytest

from fusion_analyze.ir.ops import OpAttrs

from .conftest import MINI, ROOT, validate_report


def _schema() -> dict:
    return json.loads((ROOT / "schemas" / "report.schema.json").read_text(encoding="utf-8"))


def _op_attrs_schema() -> dict:
    return _schema()["$defs"]["op_attrs"]


def _json_type(hint) -> dict:
    """What the schema says for a declared type: its JSON type (or enum), as the schema writes it."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        if set(args) == {int, float}:
            return {"type": "number"}
        if len(args) == 2 and type(None) in args:  # `str | None`: the type or null
            inner = _json_type(next(a for a in args if a is not type(None)))
            return {"type": [inner["type"], "null"]}
        raise AssertionError(f"no JSON type for {hint}")
    if origin is list:
        return {"type": "array", "items": _json_type(args[0])}
    if origin is dict:
        assert args[0] is str, hint
        return {"type": "object"}
    return {"type": {str: "string", int: "integer", bool: "boolean", float: "number"}[hint]}


def test_the_declared_keys_are_the_schemas():
    declared = get_type_hints(OpAttrs)
    schema = _op_attrs_schema()
    assert sorted(declared) == sorted(schema["properties"]), (
        "OpAttrs (src/fusion_analyze/ir/ops.py) and $defs/op_attrs (schemas/report.schema.json) declare "
        "different keys: add the key to both")
    assert schema["additionalProperties"] is False  # an undeclared key fails a report's validation
    assert OpAttrs.__total__ is False and not OpAttrs.__required_keys__  # every key is optional
    assert _schema()["properties"]["ops"]["items"]["properties"]["attrs"] == {"$ref": "#/$defs/op_attrs"}


@pytest.mark.parametrize("key", sorted(get_type_hints(OpAttrs)))
def test_each_key_has_the_same_type_and_a_description(key):
    prop = _op_attrs_schema()["properties"][key]
    assert prop.get("description"), f"{key}: no description in the schema"
    want = _json_type(get_type_hints(OpAttrs)[key])
    have = {k: v for k, v in prop.items() if k != "description"}
    if have.get("$ref") == "#/$defs/relpath":  # a file: a string, relative to its tree
        have = {"type": "string"}
    if want == {"type": "object"}:  # the values of a dict: checked below
        have = {"type": have["type"]}
    assert have == want, f"{key}: OpAttrs declares {get_type_hints(OpAttrs)[key]}, the schema says {prop}"


def test_values_hold_numbers_strings_and_booleans():
    hint = get_type_hints(OpAttrs)["values"]
    assert set(get_args(get_args(hint)[1])) == {int, float, str, bool}
    assert _op_attrs_schema()["properties"]["values"]["additionalProperties"] == {"type": ["number", "string", "boolean"]}


def _mini_report(run, tmp_path, *extra) -> dict:
    out = tmp_path / "r.json"
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json", "-o", str(out), *extra)
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("backend", ["ascend", "cuda"])
def test_every_key_of_a_report_is_declared(run, tmp_path, backend):
    doc = _mini_report(run, tmp_path, "--backend", backend)
    validate_report(doc)
    seen = {k for op in doc["ops"] for k in op["attrs"]}
    assert seen and seen <= set(get_type_hints(OpAttrs)), seen - set(get_type_hints(OpAttrs))


def test_an_undeclared_key_fails_validation(run, tmp_path):
    doc = _mini_report(run, tmp_path)
    doc["ops"][0]["attrs"]["not_declared"] = 1
    with pytest.raises(AssertionError, match="not_declared"):
        validate_report(doc)
    doc["ops"][0]["attrs"] = {"class_line": "12"}  # a declared key of the wrong type
    with pytest.raises(AssertionError, match="class_line"):
        validate_report(doc)
