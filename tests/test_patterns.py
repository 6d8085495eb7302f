"""Each pattern file's examples are test cases (as Fixit turns a rule's examples into tests): the snippet
is written as a model file into a copy of the mini tree, walked on its backend, and the status of the
pattern's scenario must be the one the example expects (`none`: the scenario must not be reported)."""

from __future__ import annotations

import shutil
import textwrap
from types import SimpleNamespace

import pytest

from fusion_analyze.match.patterns import PatternError, load_pattern, load_patterns
from fusion_analyze.analysis.session import Session
from fusion_analyze.status.derive import derive
from fusion_analyze.walk.walker import Walker

from .conftest import MINI

HEADER = """\
import torch
import torch.nn.functional as F
from torch import nn

from vllm.distributed import tensor_model_parallel_all_reduce
from vllm.model_executor.layers.activation import GeluAndMul, SiluAndMul
from vllm.model_executor.layers.attention import Attention
from vllm.model_executor.layers.fused_moe import FusedMoE
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.linear import (
    ColumnParallelLinear,
    MergedColumnParallelLinear,
    QKVParallelLinear,
    ReplicatedLinear,
    RowParallelLinear,
)
from vllm.model_executor.layers.rotary_embedding import get_rope


"""

PATTERNS = load_patterns()
CASES = [(p, i, e) for p in PATTERNS for i, e in enumerate(p.examples)]


def _module_name(pid: str, i: int) -> str:
    return f"ex_{pid}_{i}"


@pytest.fixture(scope="module")
def example_sessions(tmp_path_factory):
    root = tmp_path_factory.mktemp("examples") / "mini"
    shutil.copytree(MINI, root)
    models = root / "vllm" / "model_executor" / "models"
    for p, i, e in CASES:
        (models / f"{_module_name(p.id, i)}.py").write_text(HEADER + textwrap.dedent(e.code), encoding="utf-8")
    return {
        "cuda": Session.open(str(root), None, "cuda"),
        "ascend": Session.open(str(root), str(root), "ascend"),
    }


def test_every_pattern_has_a_matching_and_a_non_matching_example():
    for p in PATTERNS:
        expects = {e.expect for e in p.examples}
        assert "none" in expects, f"{p.file}: add an example that must not match"
        assert expects - {"none"}, f"{p.file}: add an example that must match"


@pytest.mark.parametrize("pattern,i,example", CASES, ids=[f"{p.id}-{i}-{e.name}" for p, i, e in CASES])
def test_pattern_example(example_sessions, pattern, i, example):
    session = example_sessions[example.backend]
    mod = session.index.get(f"vllm.model_executor.models.{_module_name(pattern.id, i)}")
    assert mod is not None, "the example module did not parse"
    classes = mod.classes()
    cls = classes[example.cls] if example.cls else list(classes.values())[-1]
    walk = Walker(session.index, session.resolver.patches).walk_model(cls)
    ascend, cuda = session.passes()
    opps = [o for o in derive(walk.ops, PATTERNS, example.backend, ascend, cuda) if o.scenario == pattern.id]
    ops = "\n".join(f"  {o.id} {o.kind} in={o.inputs} out={o.outputs} kernels={[k.name for k in o.kernels]}" for o in walk.ops)
    if example.expect == "none":
        assert not opps, f"{pattern.file}:{example.line}: should not match, got {[o.status for o in opps]}\n{ops}"
    else:
        got = [o.status for o in opps]
        assert example.expect in got, f"{pattern.file}:{example.line}: expected {example.expect}, got {got}\n{ops}"


def _write(tmp_path, text: str, category: str = "norm", name: str = "bad.yaml"):
    d = tmp_path / category
    d.mkdir(parents=True, exist_ok=True)
    f = d / name
    f.write_text(textwrap.dedent(text), encoding="utf-8")
    return f


GOOD = """\
id: my_pattern
category: norm
severity: low
title: {zh: 例子, en: Example}
message: {zh: 消息, en: m}
covers: [rmsnorm]
forms:
  - id: f
    nodes:
      - {as: norm, kind: rmsnorm}
interface: {name: fused_x, params: [], returns: []}
examples:
  - {name: n, expect: none, code: "x = 1"}
estimate: {saved: ["num_tokens"], launches: 1}
"""


@pytest.mark.parametrize("mutate,line,key", [
    (lambda s: s.replace("severity: low", "severity: low\nsevrity: high"), 4, "sevrity"),
    (lambda s: s.replace("      - {as: norm, kind: rmsnorm}", "      - {as: norm, kind: rmsnorm, from: gemm}"), 10, "from: gemm"),
    (lambda s: s.replace("category: norm", "category: nrom"), 2, "category"),
    (lambda s: s.replace("covers: [rmsnorm]", "covers: rmsnorm"), 6, "covers"),
    (lambda s: s.replace("title: {zh: 例子, en: Example}", "title: {zh: 例子, en: [Example"), 5, "YAML"),
    (lambda s: s.replace("expect: none", "expect: maybe"), 13, "expect"),
    # a note holding `: ` in a flow list is a mapping, which the report would print as a dict
    (lambda s: s.replace("params: [], returns: []}", "params: [], returns: [],\n  notes: [scores: by sigmoid]}"), 12,
     "notes[0] must be a string"),
    # a form's own interface must be one the pattern gives (`interfaces`), and is checked as `interface` is
    (lambda s: s.replace("      - {as: norm, kind: rmsnorm}", "      - {as: norm, kind: rmsnorm}\n    interface: grouped"), 11,
     "`interface: grouped` names no entry of `interfaces`"),
    (lambda s: s.replace("estimate:", "interfaces:\n  grouped: {name: g, params: [{name: x}], returns: []}\nestimate:"),
     15, "interfaces.grouped.params[0]: missing key `type`"),
])
def test_malformed_pattern_names_file_line_and_key(tmp_path, mutate, line, key):
    f = _write(tmp_path, mutate(GOOD))
    with pytest.raises(PatternError) as exc:
        load_pattern(f, "p/norm/bad.yaml")
    assert exc.value.message.startswith(f"p/norm/bad.yaml:{line}:"), exc.value.message
    assert key in exc.value.message


def test_a_form_may_give_its_matches_another_interface(tmp_path):
    """matmul_swiglu's experts forms give the MoE experts' grouped GEMM its own interface (per expert, with the
    expert dimension and the experts' intermediate size), and what it saves in those dimensions; the dense forms
    keep the pattern's."""
    text = GOOD.replace("      - {as: norm, kind: rmsnorm}", "      - {as: norm, kind: rmsnorm}\n    interface: grouped\n"
                        "    saved: [\"num_tokens * top_k\"]\n  - id: dense\n    nodes:\n      - {as: norm, kind: layernorm}")
    text = text.replace("estimate:", "interfaces:\n  grouped: {name: fused_g, params: [], returns: []}\nestimate:")
    p = load_pattern(_write(tmp_path, text), "p/norm/bad.yaml")
    grouped, dense = p.forms[0], p.forms[1]
    assert p.interface_of(SimpleNamespace(form=grouped))["name"] == "fused_g"
    assert p.interface_of(SimpleNamespace(form=dense))["name"] == p.interface_of(None)["name"] == "fused_x"
    assert p.saved_of(SimpleNamespace(form=grouped)) == ("num_tokens * top_k",)
    assert p.saved_of(SimpleNamespace(form=dense)) == ("num_tokens",)
    (swiglu,) = [q for q in load_patterns() if q.id == "matmul_swiglu"]
    experts = {f.id: f.interface for f in swiglu.forms}
    assert experts["routed_experts"] == experts["moe_layer_runs_experts"] == "grouped"
    assert experts["gate_up_then_swiglu"] is None
    shapes = [prm.get("shape") for prm in swiglu.interfaces["grouped"]["params"]]
    assert shapes[:2] == ["[num_tokens * top_k, hidden_size]", "[num_experts, 2 * moe_intermediate_size, hidden_size]"]


def test_good_pattern_loads_and_extra_dir_overrides(tmp_path):
    _write(tmp_path, GOOD.replace("id: my_pattern", "id: add_rmsnorm"), name="add_rmsnorm.yaml")
    pats = {p.id: p for p in load_patterns(tmp_path)}
    assert pats["add_rmsnorm"].file.endswith("norm/add_rmsnorm.yaml") and pats["add_rmsnorm"].severity == "low"
    assert "qknorm_rope" in pats  # built-ins stay


def test_cli_malformed_patterns_dir_exits_2_with_file_line(run, tmp_path):
    _write(tmp_path, GOOD.replace("severity: low", "severity: loud"))
    r = run("qwen3", "--vllm-root", str(MINI), "--patterns", str(tmp_path))
    assert r.exit_code == 2
    assert "bad.yaml:3:" in r.output and "severity" in r.output
    assert "Traceback" not in r.output


REQUIRED_IDS = {
    "norm": {"rmsnorm_rope", "qknorm_rope", "layernorm_gated", "norm_quant", "allreduce_norm", "add_rmsnorm"},
    "matmul": {"matmul_bias", "qkv_merge", "gate_up_merge", "matmul_activation", "flash_attention",
               "transpose_matmul", "bmm", "add_matmul_residual", "matmul_allreduce"},
    "moe": {"router_experts", "gate_topk", "shared_routed", "moe_norm", "moe_combine"},
    "attention": {"qkv_split_norm_rope", "softmax_matmul", "mask_softmax", "rope_kvcache", "attn_quant"},
    "activation": {"silu_mul", "gelu_mul", "gate_act_mul", "act_quant"},
    "vector": {"vector_elementwise_chain"},
}


def test_library_covers_the_landscape():
    have: dict[str, set] = {}
    for p in PATTERNS:
        have.setdefault(p.category, set()).add(p.id)
    for cat, ids in REQUIRED_IDS.items():
        assert ids <= have.get(cat, set()), f"{cat}: missing {ids - have.get(cat, set())}"
