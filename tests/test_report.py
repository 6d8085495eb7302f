"""The Mode-A report: golden file on the mini tree, sections 3-4, stubs, benefit model, languages, templates."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from fusion_analyze.match.patterns import load_patterns
from fusion_analyze.render.stubs import stubs_module

from .conftest import FIXTURES, MINI, ROOT, validate_report

GOLDEN = ROOT / "tests" / "golden" / "qwen3_mini_ascend.md"
CONFIG = FIXTURES / "configs" / "qwen3-0.6b.json"


def _report(run, tmp_path, *extra, name="r.md"):
    out = tmp_path / name
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(out), *extra)
    assert r.exit_code == 0, r.output
    return out.read_text(encoding="utf-8")


def test_golden_report_of_the_mini_tree(run, tmp_path, update_golden):
    text = _report(run, tmp_path, "--config", str(CONFIG))
    if update_golden:  # pytest --update-golden, or FUSION_ANALYZE_UPDATE_GOLDEN=1 (docs/testing.md)
        GOLDEN.write_text(text, encoding="utf-8")
        pytest.skip(f"wrote {GOLDEN.relative_to(ROOT)}: review it with git diff")
    assert text == GOLDEN.read_text(encoding="utf-8"), (
        "report changed: if intended, regenerate tests/golden/ with pytest --update-golden (docs/testing.md)")


def test_sections_and_open_opportunities_have_interface_and_benefit(run, tmp_path):
    text = _report(run, tmp_path, "--config", str(CONFIG))
    for head in ("### 1. 模型代码位置", "### 2. 算子序列分析", "### 3. 融合机会清单", "### 4. 优化建议"):
        assert head in text
    s4 = text.split("### 4.")[1]
    chunks = s4.split("#### 机会 ")[1:]
    assert chunks
    for c in chunks:
        assert "```python\n   def fused_" in c and "**预期的收益**" in c and "µs" in c
    assert "⚠ CUDA上vLLM已融合" in text  # allreduce_norm: fused on CUDA by AllReduceFusionPass, open here
    # already-fused scenarios are in the table but have no section 4 entry
    assert "qkv_merge@Qwen3Attention.forward" in text.split("### 4.")[0]
    assert "qkv_merge@" not in s4


def test_numeric_with_config_symbolic_without(run, tmp_path):
    numeric = _report(run, tmp_path, "--config", str(CONFIG), name="a.md")
    assert "prefill (4096 tokens, " in numeric and "decode (32 tokens, " in numeric
    assert re.search(r"每步节省 [\d.]+ (µs|ms)", numeric)  # the saving per step, from the cost model
    assert "hidden_size=1024" in numeric  # shapes in the stub docstrings carry the config's numbers
    symbolic = _report(run, tmp_path, name="b.md")
    assert "prefill (4096 tokens" not in symbolic and "2 × 2 B × [(2 * num_tokens * intermediate_size)]" in symbolic


def test_preset_equals_the_written_config(run, tmp_path):
    a = _report(run, tmp_path, "--config", str(CONFIG), "--format", "json", name="a.json")
    b = _report(run, tmp_path, "--config", "Qwen3-0.6B", "--format", "json", name="b.json")
    validate_report(json.loads(a))
    na = [o["benefit"]["numbers"] for o in json.loads(a)["opportunities"]]
    nb = [o["benefit"]["numbers"] for o in json.loads(b)["opportunities"]]
    assert na == nb and any(na)


def test_tp1_rejects_communication_fusions(run, tmp_path):
    """TP not stated: the all-reduce stays a test of the code, and its fusions are rejected at vLLM's default
    of 1 (said so, with how to cost them); TP 1 stated: the code's `tp_size > 1` is decided, there is no
    all-reduce, so no all-reduce fusion at all."""
    text = _report(run, tmp_path, "--config", str(CONFIG))
    table, s4 = text.split("### 4.")
    assert "不推荐: vLLM默认的 tp_size = 1" in table and "allreduce_norm@" in table
    assert "allreduce_norm@" not in s4 and "matmul_allreduce@" not in s4
    stated = _report(run, tmp_path, "--config", str(CONFIG), "--tp", "1", name="tp1.md")
    assert "allreduce_norm@" not in stated and "matmul_allreduce@" not in stated
    assert "> 部署: `--tensor-parallel-size 1` · TP 1 · DP 1 · EP 1" in stated
    ops = json.loads(_report(run, tmp_path, "--config", str(CONFIG), "--tp", "1", "--format", "json", name="tp1.json"))["ops"]
    assert not [o for o in ops if o["kind"] == "allreduce"]


def test_english_report(run, tmp_path):
    text = _report(run, tmp_path, "--lang", "en")
    assert text.startswith("## Model operator analysis: Qwen3ForCausalLM")
    assert "### 3. Fusion opportunities" in text and "融合机会" not in text


def test_every_stub_in_the_json_is_valid_python(run, tmp_path):
    doc = json.loads(_report(run, tmp_path, "--format", "json", name="r.json"))
    validate_report(doc)
    for o in doc["opportunities"]:
        ast.parse(o["interface"]["stub"])


def test_user_template_and_errors(run, tmp_path):
    t = tmp_path / "mine.j2"
    t.write_text("{{ model.architecture }}: {{ table | length }} rows\n", encoding="utf-8")
    assert re.fullmatch(r"Qwen3ForCausalLM: \d+ rows\n", _report(run, tmp_path, "--template", str(t)))
    bad = tmp_path / "bad.j2"
    bad.write_text("line one\n{% for x in %}\n", encoding="utf-8")
    r = run("qwen3", "--vllm-root", str(MINI), "--template", str(bad), "-o", str(tmp_path / "x.md"))
    assert r.exit_code == 2 and f"{bad}:2: template error" in r.output and "Traceback" not in r.output
    r = run("qwen3", "--vllm-root", str(MINI), "--lang", "fr", "-o", str(tmp_path / "x.md"))
    assert r.exit_code == 2 and "--lang fr" in r.output
    r = run("qwen3", "--vllm-root", str(MINI), "--config", "no-such.json", "-o", str(tmp_path / "x.md"))
    assert r.exit_code == 2 and "--config no-such.json" in r.output
    assert not (tmp_path / "x.md").exists()


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_references(mod) -> int:
    torch = pytest.importorskip("torch")
    n = 0
    for name in [k for k in mod.SPECS if not k.startswith("reference_")]:
        out = getattr(mod, f"reference_{name}")(**mod.example_inputs(name))
        outs = out if isinstance(out, tuple) else (out,)
        assert [list(o.shape) for o in outs] == mod.expected_shapes(name), name
        assert all(torch.is_tensor(o) for o in outs)
        with pytest.raises(NotImplementedError):
            getattr(mod, name)(**mod.example_inputs(name))
        n += 1
    return n


def test_stubs_of_every_pattern_import_and_references_run(tmp_path, torch):
    path = tmp_path / "all_stubs.py"
    patterns = load_patterns()
    # and each other interface a form gives its matches (matmul_swiglu's grouped one, for the MoE experts)
    others = {(p.id, f.interface): (p, SimpleNamespace(form=f, ops={})) for p in patterns for f in p.forms if f.interface}
    path.write_text(stubs_module([(p, None) for p in patterns] + list(others.values()), "all patterns"), encoding="utf-8")
    mod = _import(path)
    assert _run_references(mod) == 32  # one per pattern file (matmul_swiglu is the 31st), and the grouped GEMM's
    assert [p["name"] for p in mod.SPECS["fused_grouped_matmul_swiglu"]["params"]] == ["hidden_states", "weight", "group_list"]


def test_stubs_option_writes_an_importable_module(run, tmp_path, torch):
    stubs = tmp_path / "qwen3_stubs.py"
    _report(run, tmp_path, "--stubs", str(stubs), "--tp", "2")  # all-reduce fusions pay only at TP > 1
    mod = _import(stubs)
    assert _run_references(mod) >= 1
    assert "fused_allreduce_add_rmsnorm" in mod.SPECS


def test_an_op_line_lists_the_kernels_that_always_run_before_the_conditional_ones():
    from fusion_analyze.render.markdown import op_line

    kernels = [{"name": "torch_npu.npu_grouped_matmul", "condition": None},
               {"name": "torch.ops.vllm.all_gather", "condition": "self.moe_config.pcp_size > 1"},
               {"name": "torch_npu.npu_swiglu", "condition": "not (activation == MoEActivation.SITU)"},
               {"name": "torch_npu.npu_moe_init_routing_v2", "condition": None}]
    op = {"kind": "moe_experts", "path": "model.layers.mlp.experts.experts", "name": "experts", "layer_class": "AllGatherCommImpl",
          "attrs": {"part": "experts"}, "kernels": kernels, "condition": None, "file": "moe_comm_method.py", "line": 113}
    line = op_line(op)
    assert "[kernels: torch_npu.npu_grouped_matmul, torch_npu.npu_moe_init_routing_v2; " in line
    assert line.endswith("conditional: torch.ops.vllm.all_gather, torch_npu.npu_swiglu]")
    # a kernel that runs both unconditionally and under a test is listed once, as always running
    op["kernels"] = kernels + [{"name": "torch_npu.npu_grouped_matmul", "condition": "x"}]
    assert op_line(op).count("npu_grouped_matmul") == 1


def test_the_report_json_writer_gives_json_dumps_bytes():
    from enum import Enum

    from fusion_analyze.render.json_text import dumps

    class State(str, Enum):
        OPEN = "open"

    value = {"b": [1, 2.5, -0.0, 1e300, float("inf"), float("-inf"), True, False, None, (), [], {}],
             "a": {"é\n\"x\\": "ü ✓ \u2028 \x00", 3: "int key", 2.5: "float key", True: "bool key", None: "none"},
             "c": [{"z": 1, "y": [[{}], ()]}, State.OPEN, 10 ** 30, float("nan")], "": ""}
    with pytest.raises(TypeError):
        json.dumps({"a": 1, 2: 3}, indent=2, sort_keys=True)  # mixed keys: neither can sort them ...
    with pytest.raises(TypeError):
        dumps({"a": 1, 2: 3})
    with pytest.raises(TypeError):
        dumps({"x": object()})  # ... and an unknown type is an error in both
    for v in (value["a"] | {}, value["b"], value["c"], {"k": value["b"], "j": value["c"]}, "s", 1, None, [], {}):
        v = {str(k): x for k, x in v.items()} if isinstance(v, dict) and len({type(k) for k in v}) > 1 else v
        assert dumps(v) == json.dumps(v, indent=2, sort_keys=True, ensure_ascii=False)
    same_kind = {3: "a", 1: "b", 2: "c"}  # non-string keys of one kind are sorted, then written as strings
    assert dumps(same_kind) == json.dumps(same_kind, indent=2, sort_keys=True, ensure_ascii=False)
