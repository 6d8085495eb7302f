"""The forward walker on the mini tree: construction idioms, dataflow, backends, robustness."""

from __future__ import annotations

import hashlib
import json

import pytest

from fusion_analyze.analysis.pipeline import analyze

from .conftest import MINI


def _steady_layer(a):
    return [op for op in a.walk.ops if op.section == "layer" and op.steady and op.kind not in ("view",)]


@pytest.fixture(scope="module")
def qwen3():
    return analyze("Qwen3ForCausalLM", str(MINI), str(MINI), None)


def test_qwen3_layer_sequence_and_lines(qwen3):
    seq = [(op.kind, op.name, op.layer_class, op.file.rsplit("/", 1)[-1], op.line) for op in _steady_layer(qwen3)]
    assert seq == [
        ("add_rmsnorm", "input_layernorm", "RMSNorm", "qwen3.py", 75),
        ("matmul", "qkv_proj", "QKVParallelLinear", "qwen3.py", 32),
        ("split", "split", None, "qwen3.py", 33),
        ("rmsnorm", "q_norm", "RMSNorm", "qwen3.py", 36),
        ("rmsnorm", "k_norm", "RMSNorm", "qwen3.py", 39),
        ("rope", "rotary_emb", "RotaryEmbedding", "qwen3.py", 41),
        ("attention", "attn", "Attention", "qwen3.py", 42),
        ("matmul", "o_proj", "RowParallelLinear", "qwen3.py", 43),
        ("allreduce", "o_proj.allreduce", None, "linear.py", 43),
        ("add_rmsnorm", "post_attention_layernorm", "RMSNorm", "qwen3.py", 82),
        ("matmul", "gate_up_proj", "MergedColumnParallelLinear", "qwen2.py", 35),
        ("silu_mul", "act_fn", "SiluAndMul", "qwen2.py", 36),
        ("matmul", "down_proj", "RowParallelLinear", "qwen2.py", 37),
        ("allreduce", "down_proj.allreduce", None, "linear.py", 43),
    ]


def test_first_layer_branch_is_kept_but_not_steady(qwen3):
    first = [op for op in qwen3.walk.ops if op.name == "input_layernorm" and not op.steady]
    assert len(first) == 1 and first[0].kind == "rmsnorm" and first[0].condition == "residual is None"


def test_subclass_passes_layer_type_to_base(qwen3):
    loc = qwen3.walk.locations
    assert loc["backbone"].cls == "Qwen3Model"
    assert (loc["backbone"].forward_file, loc["backbone"].forward_line) == ("vllm/model_executor/models/qwen2.py", 106)
    assert loc["decoder_layer"].cls == "Qwen3DecoderLayer"
    assert loc["attention"].cls == "Qwen3Attention"
    assert loc["mlp"].cls == "Qwen2MLP"  # imported as Qwen3MLP
    assert qwen3.walk.repeat == "config.num_hidden_layers"


def test_dataflow_edges(qwen3):
    ops = {op.id: op for op in qwen3.walk.ops}
    producer = {v: op.id for op in qwen3.walk.ops for v in op.outputs}
    split = ops["model.layers.self_attn:split"]
    assert producer[split.inputs[0]] == "model.layers.self_attn.qkv_proj:qkv_proj"
    q_norm = ops["model.layers.self_attn.q_norm:q_norm"]
    view = ops[producer[q_norm.inputs[0]]]
    assert view.kind == "view" and producer[view.inputs[0]] == split.id
    rope = ops["model.layers.self_attn.rotary_emb:rotary_emb"]
    assert {ops[producer[v]].kind for v in rope.inputs if v in producer} == {"view"}
    act = ops["model.layers.mlp.act_fn:act_fn"]
    assert producer[act.inputs[0]] == "model.layers.mlp.gate_up_proj:gate_up_proj"


def test_ascend_kernels(qwen3):
    ops = {op.id: op for op in qwen3.walk.ops}
    norm = ops["model.layers.post_attention_layernorm:post_attention_layernorm"]
    assert [k.name for k in norm.kernels] == ["torch.ops._C_ascend.npu_add_rms_norm_bias"]
    assert norm.attrs["ascend_class"] == "AscendRMSNorm"
    q_norm = ops["model.layers.self_attn.q_norm:q_norm"]
    assert [k.name for k in q_norm.kernels] == ["torch_npu.npu_rms_norm"]
    act = ops["model.layers.mlp.act_fn:act_fn"]
    assert [(k.name, k.file, k.line) for k in act.kernels] == [("torch_npu.npu_swiglu", "vllm_ascend/ops/activation.py", 8)]


def test_cuda_backend_walks_forward_cuda():
    a = analyze("Qwen3ForCausalLM", str(MINI), str(MINI), "cuda")
    ops = {op.id: op for op in a.walk.ops}
    norm = ops["model.layers.post_attention_layernorm:post_attention_layernorm"]
    assert [k.name for k in norm.kernels] == ["torch.ops._C.fused_add_rms_norm"]
    assert "ascend_class" not in norm.attrs
    assert [k.name for k in ops["model.layers.mlp.act_fn:act_fn"].kernels] == ["torch.ops._C.silu_and_mul"]


def test_row_parallel_all_reduce_condition(qwen3):
    # RowParallelLinear's all-reduce is an op of its own, at the line of linear.py that calls it, after the GEMM
    ops = qwen3.walk.ops
    i = next(i for i, op in enumerate(ops) if op.name == "o_proj")
    o_proj, reduce = ops[i], ops[i + 1]
    assert "all_reduce" not in o_proj.attrs
    assert (reduce.kind, reduce.file, reduce.line) == ("allreduce", "vllm/model_executor/layers/linear.py", 43)
    assert reduce.condition == "self.tp_size > 1" and reduce.inputs == o_proj.outputs[:1]  # reduce_results: decided
    assert reduce.path == o_proj.path and reduce.attrs["inside"] == "o_proj"
    assert qwen3.walk.ops[0].kind == "embedding" and qwen3.walk.ops[0].section == "prologue"
    assert [op.kind for op in qwen3.walk.ops if op.section == "epilogue"][0] == "add_rmsnorm"


def test_moe_block_conditional_construction_router_and_patch():
    a = analyze("Qwen3MoeForCausalLM", str(MINI), str(MINI), None)
    layer = _steady_layer(a)
    kinds = [op.kind for op in layer]
    assert kinds.index("matmul") < kinds.index("moe")
    router = next(op for op in layer if op.attrs.get("role") == "router")
    moe = next(op for op in layer if op.kind == "moe")
    assert router.layer_class == "ReplicatedLinear" and router.line == moe.line
    assert "torch_npu.npu_moe_gating_top_k" in [k.name for k in moe.kernels]
    assert "torch_npu.npu_grouped_matmul" in [k.name for k in moe.kernels]
    assert a.walk.locations["moe"].cls == "Qwen3MoeSparseMoeBlock"
    alt = next(x for x in a.walk.alternatives if x["path"] == "model.layers.mlp")
    assert alt["chosen"] == "Qwen3MoeSparseMoeBlock"
    assert any(name == "Qwen3MoeMLP" and "mlp_only_layers" in cond for name, cond in alt["others"])
    # vllm_ascend/patch replaces Qwen3MoeAttention.forward on Ascend
    att = a.walk.locations["attention"]
    assert att.forward_file == "vllm_ascend/patch/worker/patch_qwen3_moe.py"
    assert att.patched_by == "vllm_ascend/patch/worker/patch_qwen3_moe.py:15"
    fused = next(op for op in layer if op.kind == "kernel")
    assert fused.name == "split_qkv_rmsnorm_rope" and fused.file == "vllm_ascend/patch/worker/patch_qwen3_moe.py"


def test_moe_on_cuda_is_not_patched():
    a = analyze("Qwen3MoeForCausalLM", str(MINI), str(MINI), "cuda")
    att = a.walk.locations["attention"]
    assert att.forward_file == "vllm/model_executor/models/qwen3_moe.py" and att.patched_by is None
    assert [op.name for op in _steady_layer(a) if op.kind == "rmsnorm"] == ["q_norm", "k_norm"]


def test_inheritance_and_call_cycles_end():
    a = analyze("CyclicForCausalLM", str(MINI), str(MINI), None)
    assert any("recursi" in u["reason"] for u in a.walk.unknowns)  # reported, not followed forever
    assert a.walk.locations["model"].cls == "CyclicForCausalLM"


def test_broken_file_is_reported_and_walk_continues(run):
    result = run("UsesBrokenForCausalLM", "--vllm-root", str(MINI), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["errors"][0]["file"] == "vllm/model_executor/layers/broken_layer.py"
    assert "syntax error" in data["errors"][0]["reason"]
    kinds = [op["kind"] for op in data["ops"]]
    assert kinds[0] == "rmsnorm" and "unknown" in kinds


def test_json_output_shape_and_determinism(run):
    args = ("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json")
    first, second = run(*args), run(*args)
    assert first.exit_code == 0 and first.stdout == second.stdout
    data = json.loads(first.stdout)
    assert set(data["locations"]) == {"model", "backbone", "decoder_layer", "attention", "mlp"}
    op = data["ops"][1]
    assert set(op) >= {"id", "kind", "name", "layer_class", "file", "line", "scope", "inputs", "outputs", "condition", "kernels"}
    assert str(MINI) not in first.stdout  # no absolute paths


def test_markdown_sections(run):
    result = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI))
    assert result.exit_code == 0
    md = result.stdout
    assert md.startswith("## 模型算子分析报告: Qwen3ForCausalLM")
    assert "### 1. 模型代码位置" in md and "### 2. 算子序列分析" in md
    assert "- Decoder层: `vllm/model_executor/models/qwen3.py` L47" in md
    assert "vllm/model_executor/models/qwen3.py:75" in md


def test_sources_are_not_written(run, mini):
    def digest():
        h = hashlib.sha256()
        for p in sorted(mini.rglob("*")):
            h.update(str(p.relative_to(mini)).encode())
            if p.is_file():
                h.update(p.read_bytes())
        return h.hexdigest()

    before = digest()
    out = mini.parent / "out.md"
    assert run("qwen3", "--vllm-root", str(mini), "--ascend-root", str(mini), "-o", str(out)).exit_code == 0
    assert run("Qwen3MoeForCausalLM", "--vllm-root", str(mini), "--format", "json").exit_code == 0
    assert digest() == before
    assert out.read_text().startswith("## ")


def _line_of(name: str, text: str) -> int:
    """The line of `text` in fixtures/mini/.../models/<name>, read from the file itself."""
    lines = (MINI / "vllm/model_executor/models" / name).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def _layer_kinds(a):
    return [(op.kind, op.name, op.file.rsplit("/", 1)[-1], op.line) for op in _steady_layer(a)]


def test_helper_method_nested_factory_range_loop_and_function_import():
    # HybridModel builds its layers in self._init_layers() through a nested get_layer() whose own local picks
    # the class; forward loops over range() and indexes self.layers[i]; the attention class is imported
    # inside __init__, the MLP is built in a helper method of the decoder layer.
    a = analyze("HybridForCausalLM", str(MINI), str(MINI), None, cache=False)
    loc = a.walk.locations
    assert (loc["backbone"].cls, loc["decoder_layer"].cls) == ("HybridModel", "HybridDecoderLayer")
    assert (loc["attention"].cls, loc["mlp"].cls) == ("Qwen3Attention", "Qwen2MLP")
    assert a.walk.repeat == "config.num_hidden_layers"
    seq = _layer_kinds(a)
    assert seq[0] == ("mul", "mul", "hybrid.py", _line_of("hybrid.py", "hidden_states * 2.0"))  # before `layer = self.layers[i]`
    assert [s for s in seq if s[0] in ("attention", "silu_mul")] == [
        ("attention", "attn", "qwen3.py", 42), ("silu_mul", "act_fn", "qwen2.py", 36)]
    first = next(op for op in a.walk.ops if op.name == "mul" and op.section == "layer")
    assert first.condition == "i == 0"
    # get_layer() picks the class per layer index: the other class is listed with its condition
    layers = next(x for x in a.walk.alternatives if x["path"] == "model.layers")
    assert layers["chosen"] == "HybridDecoderLayer"
    assert [tuple(o) for o in layers["others"]] == [("HybridConvLayer", "not (layer_idx % 4 == 3)")]
    # attention alternatives: the family name "HybridMoe..." does not make a mixer the default
    alt = next(x for x in a.walk.alternatives if x["path"] == "model.layers.self_attn")
    assert alt["chosen"] == "Qwen3Attention"
    assert [name for name, _cond in alt["others"]] == ["HybridMoeConvAttention"]


def test_layer_factory_locals_computed_from_the_index_are_decoded():
    """A layer factory's local read from the prefix (`layer_idx = int(prefix.split(".")[-1])`, BailingMoeV3's
    layer_fn) and what is computed from it carry the index to the element's call (`layer_id=layer_idx`); a
    local of the enclosing __init__ that does not read it stays untainted."""
    import libcst as cst

    from fusion_analyze.semantics.scope import Scope
    from fusion_analyze.walk.construction.constructor import _factory_taints
    from fusion_analyze.walk.construction.layer_index import CARRIER, DECODED

    def local(code):
        return [(cst.parse_expression(code), None)]

    scope = Scope(module=None, locals={
        "config": local("vllm_config.model_config.hf_config"), "layer_idx": local('int(prefix.split(".")[-1])'),
        "group": local("layer_idx // config.layer_group_size"), "name": local('f"{prefix}.mlp"')})
    assert _factory_taints(scope, "prefix", CARRIER) == {
        "prefix": CARRIER, "layer_idx": DECODED, "group": DECODED, "name": CARRIER}
    # a comprehension's index is the index itself
    assert _factory_taints(Scope(module=None, locals={"j": local("i + 1")}), "i", DECODED) == {"i": DECODED, "j": DECODED}


def test_sliced_layer_list_is_still_the_layer_list():
    a = analyze("SlicedForCausalLM", str(MINI), str(MINI), None, cache=False)
    assert a.walk.locations["decoder_layer"].cls == "HybridDecoderLayer"
    seq = _layer_kinds(a)
    assert ("attention", "attn", "qwen3.py", 42) in seq and not any(op[0] == "mul" for op in seq)
    assert seq == _layer_kinds(analyze("HybridForCausalLM", str(MINI), str(MINI), None, cache=False))[1:]


def test_module_list_append_module_dict_item_and_local_alias():
    a = analyze("LoopForCausalLM", str(MINI), str(MINI), None, cache=False)
    assert a.walk.locations["attention"].cls == "LoopAttention"
    assert [(op.kind, op.name, op.layer_class, op.line) for op in a.walk.ops if op.section == "layer"] == [
        ("matmul", "qkv_proj", "QKVParallelLinear", _line_of("hybrid.py", "qkv, _ = self.qkv_proj(hidden_states)")),
        ("split", "chunk", None, _line_of("hybrid.py", "qkv.chunk(3")),
        ("rmsnorm", "norms", "RMSNorm", _line_of("hybrid.py", 'self.norms["q"](q)')),  # ModuleDict item
        ("attention", "attn", "Attention", _line_of("hybrid.py", "return attn(q, k, v)")),  # attn = self.attn[0]
    ]
    assert not a.walk.unknowns


def test_patch_wrapping_the_forward_it_replaces():
    # vllm_ascend/patch/worker/patch_hybrid.py saves HybridModel.forward and calls it from the new forward
    a = analyze("HybridForCausalLM", str(MINI), str(MINI), "ascend", cache=False)
    backbone = a.walk.locations["backbone"]
    assert backbone.patched_by == "vllm_ascend/patch/worker/patch_hybrid.py:13"
    assert any(op.kind == "attention" for op in a.walk.ops if op.section == "layer")  # the original still walked
    assert ("contiguous", "vllm_ascend/patch/worker/patch_hybrid.py", 10) in [
        (op.name, op.file, op.line) for op in a.walk.ops if op.section == "epilogue"]
    cuda = analyze("HybridForCausalLM", str(MINI), str(MINI), "cuda", cache=False)
    assert cuda.walk.locations["backbone"].patched_by is None
    assert _layer_kinds(cuda) == _layer_kinds(a)


def test_conditional_import_bindings_per_backend():
    import libcst as cst

    from fusion_analyze.index.modules import ImportBinding, ModuleIndex
    from fusion_analyze.ir.conditions import Condition
    from fusion_analyze.semantics.for_backend import binding_decider

    def c(test: str):  # the `if` test around the import, as code
        return Condition.of(cst.parse_expression(test), None)

    rocm = [ImportBinding("m.nvidia", "X", 0, c("TYPE_CHECKING or not current_platform.is_rocm()")),
            ImportBinding("m.amd", "X", 0, c("not (TYPE_CHECKING or not current_platform.is_rocm())"))]
    cuda = [ImportBinding("m.cuda", "X", 0, c("current_platform.is_cuda_alike()")),
            ImportBinding("m.other", "X", 0, c("not (current_platform.is_cuda_alike())"))]
    typing = [ImportBinding("m.real", "X", 0, None), ImportBinding("m.stub", "X", 0, c("TYPE_CHECKING"))]
    for backend in ("ascend", "cuda"):
        index = ModuleIndex([], backend=backend, decider=binding_decider)
        assert index.choose(rocm).module == "m.nvidia"  # neither walked backend is ROCm
        assert index.choose(cuda).module == ("m.cuda" if backend == "cuda" else "m.other")
        assert index.choose(typing).module == "m.real"


def test_a_match_whose_ops_cannot_run_on_one_path_is_no_row():
    """branches.py: BranchesMLP projects under `if self.project_here:` and runs the activation, which reads the
    GEMM's output in the walk's dataflow, under `if not self.project_here:` (neither test decided): no GEMM +
    SwiGLU row and no merged MLP row joins them. BranchesOneSideMLP, both on one side of the test, keeps them."""
    a = analyze("BranchesForCausalLM", str(MINI), str(MINI), None, cache=False)
    ops = {op.id: op for op in a.walk.ops}
    gemm, act = ops["model.layers.mlp.gate_up_proj:gate_up_proj"], ops["model.layers.mlp.act_fn:act_fn"]
    assert gemm.steady and act.steady and act.inputs == gemm.outputs[:1]  # an edge the matcher sees
    assert (gemm.condition, act.condition) == ("self.project_here", "not self.project_here")
    assert not [o.id for o in a.opportunities if gemm.id in o.ops and act.id in o.ops]
    rows = {o.id: o for o in a.opportunities}
    assert "matmul_swiglu@BranchesMLP.forward" not in rows and "gate_up_merge@BranchesMLP.forward" not in rows
    assert rows["matmul_swiglu@BranchesOneSideMLP.forward"].ops == [
        "model.layers.mlp.one_side_mlp.gate_up_proj:gate_up_proj", "model.layers.mlp.one_side_mlp.act_fn:act_fn"]


def test_ops_on_the_two_sides_of_one_test_are_exclusive():
    """Op.branches: the `if` side (0) and the `else` side (1, or 2 for another layer class's op) of the same
    undecided test cannot run together; sides of two different tests, or two `else` ops, can."""
    from fusion_analyze.ir.ops import Op
    from fusion_analyze.match.matcher import exclusive

    def op(name, branches):
        o = Op(id=name, kind="add", name=name, layer_class=None, file="m.py", line=1, scope="M.f", path="", section="layer")
        o.branches = branches
        return o

    body, orelse, other_layer = op("a", [(3, 0)]), op("b", [(3, 1), (1, 0)]), op("c", [(3, 2)])
    assert exclusive(body, orelse) and exclusive(orelse, body) and exclusive(body, other_layer)
    assert not exclusive(orelse, other_layer) and not exclusive(op("d", [(4, 0)]), orelse)
    assert not exclusive(op("e", [(1, 0)]), orelse) and not exclusive(op("f", []), orelse)


def test_a_norms_output_is_no_tuple():
    """branches.py BranchesQuery: `x = self.norm(x)` (RMSNorm without its residual returns the tensor alone), then
    a helper's `if isinstance(x, tuple): x, scale = x; x = x * scale`: decided false, so the multiply is not
    walked and the norm feeds the GEMM."""
    a = analyze("BranchesForCausalLM", str(MINI), str(MINI), None, cache=False)
    query = [(op.kind, op.name, op.condition) for op in a.walk.ops if op.path.startswith("model.layers.mlp.query")]
    assert query == [("rmsnorm", "norm", None), ("matmul", "proj", None)]
    norm, proj = (op for op in a.walk.ops if op.path.startswith("model.layers.mlp.query"))
    assert proj.inputs == norm.outputs


# a decoder layer whose MLP class a method of the layer decides from arguments (MiMo-V2's `is_moe_layer(layer_id)`):
# a positional argument, a keyword one, a default left alone, and `isinstance` of a configuration value
KINDS_MODEL = '''\
from torch import nn

from .qwen2 import Qwen2DecoderLayer, Qwen2MLP, Qwen2Model
from .utils import maybe_prefix


class KindsWideMLP(Qwen2MLP):
    pass


class KindsDecoderLayer(Qwen2DecoderLayer):
    def __init__(self, config, prefix=""):
        super().__init__(config, prefix=prefix)
        self.config = config
        layer_id = int(prefix.split(".")[-1])
        self.is_wide = self.is_wide_layer(layer_id, kind=2)
        if self.is_wide:
            self.mlp = KindsWideMLP(config.hidden_size, config.intermediate_size, config.hidden_act, prefix=f"{prefix}.mlp")
        else:
            self.mlp = Qwen2MLP(config.hidden_size, config.intermediate_size, config.hidden_act, prefix=f"{prefix}.mlp")

    def is_wide_layer(self, layer_idx, kind=1, first=0):
        return (
            layer_idx >= first
            and not isinstance(self.config.layer_kinds, int)
            and self.config.layer_kinds[layer_idx] == kind
        )


class KindsForCausalLM(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = Qwen2Model(vllm_config=vllm_config, prefix=maybe_prefix(prefix, "model"),
                                decoder_layer_type=KindsDecoderLayer)

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        return self.model(input_ids, positions, intermediate_tensors, inputs_embeds)
'''


def test_layer_kinds_from_a_method_called_with_arguments(mini, tmp_path):
    """`self.is_wide_layer(layer_id, kind=2)` is run per layer with its arguments bound to the method's
    parameters (`first` at its default): the layers fall into two kinds by `config.layer_kinds`; the second
    kind's MLP output feeds the next layer's norm whichever kind that layer is (both kinds count a match)."""
    from fusion_analyze.analysis.pipeline import Options

    (mini / "vllm/model_executor/models/kinds.py").write_text(KINDS_MODEL, encoding="utf-8")
    registry = mini / "vllm/model_executor/models/registry.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(text.replace('    "HybridForCausalLM":', '    "KindsForCausalLM": ("kinds", "KindsForCausalLM"),\n'
                                                               '    "HybridForCausalLM":', 1), encoding="utf-8")
    layer_kinds = [1, 2, 2, 1, 2, 1]
    config = {"architectures": ["KindsForCausalLM"], "model_type": "kinds", "num_hidden_layers": 6,
              "layer_kinds": layer_kinds, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 512, "hidden_act": "silu", "rms_norm_eps": 1e-6, "vocab_size": 1000,
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    a = analyze("KindsForCausalLM", str(mini), str(mini), "ascend", options=Options(config=str(path)), cache=False)
    kinds = a.report["layer_kinds"]
    # the first layer apart: the loop hands it no residual (its input norm is the plain one), test_first_layer_kind.py
    assert [k["layers"] for k in kinds] == [[0], [1, 2, 4], [3, 5]]
    assert [k["differs"]["mlp"] for k in kinds] == ["Qwen2MLP", "KindsWideMLP", "Qwen2MLP"]
    assert [k["differs"]["is_wide"] for k in kinds] == ["False", "True", "False"]
    # each kind's last op leaves the layer in `hidden_states`: all feed the next layer's input norm
    carried = {op.attrs.get("layer_kind") for op in a.walk.ops if op.carried}
    assert carried == {0, 1, 2}


def test_a_module_held_under_the_test_of_a_value_handed_down():
    """held.py / held_impl.py: HeldImpl keeps `kwargs["q_proj"] if self.q_lora_rank is None else
    kwargs["q_b_proj"]`, its layer passing each under the layer's own test of the same q_lora_rank (as vllm-ascend's
    MLA impl and patch_deepseek_v2.py do). The impl's `self.q_lora_rank` is traced to the value the layer hands
    it (Term.same), so `q_proj if q_lora_rank is None` and `q_b_proj if q_lora_rank is not None` are its only
    modules: both ColumnParallelLinear, the GEMM runs either way, its label says which it holds under which test,
    and the norm the layer builds when q_lora_rank is given feeds it (a norm + quantize row). `self.k_proj`, kept
    only when the impl's q_lora_rank is None, never runs after that norm: no row joins them."""
    a = analyze("HeldForCausalLM", str(MINI), str(MINI), None, cache=False)
    ops = {op.id: op for op in a.walk.ops}
    norm = ops["model.layers.self_attn.impl.q_a_layernorm:q_a_layernorm"]
    q, k = ops["model.layers.self_attn.impl.q_proj:q_proj"], ops["model.layers.self_attn.impl.k_proj:k_proj"]
    assert q.condition is None and q.inputs == k.inputs == norm.outputs[:1]
    assert q.attrs["holds"] == [{"name": "q_proj", "condition": "self.q_lora_rank is None"},
                                {"name": "q_b_proj", "condition": "not (self.q_lora_rank is None)"}]
    assert "q_lora_rank is not None" in norm.condition and "q_lora_rank is None" in k.condition
    rows = {o.id: o for o in a.opportunities}
    assert rows["norm_quant@HeldImpl.forward"].status == "inactive"
    assert rows["norm_quant@HeldImpl.forward"].ops == [norm.id, q.id]  # not k_proj


# an attention whose configuration a function normalises, whose implementation is built through a `**kwargs` chain
# whose every key is known, with an attribute set on every way of an undecided test and a class-level default
SPREAD_MODEL = '''\
from torch import nn
from vllm.model_executor.layers.linear import ColumnParallelLinear

from .qwen2 import Qwen2DecoderLayer, Qwen2Model
from .utils import maybe_prefix


def _normalize(config):
    """Aliases the layer reads (as HY-V4's _normalize_hyv4_config)."""
    config.spread_width = config.hidden_size
    config.spread_gated = config.use_spread_gate
    return config


class SpreadImpl(nn.Module):
    scaled = False

    def __init__(self, width, **kwargs):
        super().__init__()
        self.proj = kwargs["proj"]
        self.use_rope = kwargs.get("use_rope", True)
        self.gate = kwargs.get("gate")

    def forward(self, x):
        q, _ = self.proj(x)
        if not self.use_rope:
            q = q * 2.0
        if self.gate is not None:
            g, _ = self.gate(x)
            q = q * g
        if self.scaled:
            q = q * 3.0
        return q


class SpreadInner(nn.Module):
    def __init__(self, proj, use_sparse=False, **extra_args):
        super().__init__()
        if use_sparse:
            extra_args["buffer"] = None
        self.impl = SpreadImpl(4, proj=proj, **extra_args)

    def forward(self, x):
        return self.impl(x)


class SpreadAttention(nn.Module):
    def __init__(self, config, prefix=""):
        super().__init__()
        config = _normalize(config)
        self.proj = ColumnParallelLinear(config.spread_width, config.spread_width, bias=False, prefix=f"{prefix}.proj")
        self.gate = None
        if config.spread_gated:
            self.gate = ColumnParallelLinear(config.spread_width, config.spread_width, bias=False,
                                             prefix=f"{prefix}.gate")
        sinks = None
        extra = {} if sinks is None else {"sinks": sinks}
        self.inner = SpreadInner(self.proj, **extra)
        if config.not_given_mode == 1:
            self.mode = 4
        elif config.not_given_mode == 2:
            self.mode = 4
        else:
            self.mode = 4

    def forward(self, positions, hidden_states):
        out = self.inner(hidden_states)
        if self.gate is not None:
            g, _ = self.gate(hidden_states)
            out = out * g
        if self.mode != 4:
            out = out * 5.0
        return out


class SpreadDecoderLayer(Qwen2DecoderLayer):
    def __init__(self, config, prefix=""):
        super().__init__(config, prefix=prefix)
        self.self_attn = SpreadAttention(config, prefix=f"{prefix}.self_attn")


class SpreadForCausalLM(nn.Module):
    def __init__(self, *, vllm_config, prefix=""):
        super().__init__()
        self.model = Qwen2Model(vllm_config=vllm_config, prefix=maybe_prefix(prefix, "model"),
                                decoder_layer_type=SpreadDecoderLayer)

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        return self.model(input_ids, positions, intermediate_tensors, inputs_embeds)
'''


def test_normalised_configuration_complete_kwargs_branches_and_class_defaults(mini, tmp_path):
    """SpreadAttention reads `config.spread_gated`, an alias `_normalize(config)` sets on the configuration it
    returns (`config.spread_gated = config.use_spread_gate`): given True, the gate is built (ConfigRef.set_by).
    SpreadImpl is built through `**extra` (a dict written out, `{}` or `{"sinks": ...}`) and SpreadInner's
    `**extra_args` (which may add `buffer`): every key its `**kwargs` can hold is known, so
    `kwargs.get("use_rope", True)` is True and `kwargs.get("gate")` None, and their branches are not walked.
    `self.mode` is 4 whichever way the undecided `config.not_given_mode` goes (one of its values), and
    `scaled` is the class's `False` (no method sets it): neither multiply runs."""
    from fusion_analyze.analysis.pipeline import Options

    (mini / "vllm/model_executor/models/spread.py").write_text(SPREAD_MODEL, encoding="utf-8")
    registry = mini / "vllm/model_executor/models/registry.py"
    text = registry.read_text(encoding="utf-8")
    registry.write_text(text.replace('    "HybridForCausalLM":', '    "SpreadForCausalLM": ("spread", "SpreadForCausalLM"),\n'
                                                               '    "HybridForCausalLM":', 1), encoding="utf-8")
    config = {"architectures": ["SpreadForCausalLM"], "model_type": "spread", "num_hidden_layers": 2,
              "use_spread_gate": True, "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 512, "hidden_act": "silu", "rms_norm_eps": 1e-6, "vocab_size": 1000,
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    a = analyze("SpreadForCausalLM", str(mini), str(mini), "ascend", options=Options(config=str(path)), cache=False)
    attn = [op for op in a.walk.ops if op.path.startswith("model.layers.self_attn")]
    lines = {op.line for op in attn if op.kind == "mul"}
    src = SPREAD_MODEL.splitlines()

    def line_of(code: str) -> int:
        return next(i for i, t in enumerate(src, 1) if t.strip() == code)

    assert line_of("q = q * 2.0") not in lines and line_of("q = q * g") not in lines
    assert line_of("q = q * 3.0") not in lines and line_of("out = out * 5.0") not in lines
    assert line_of("out = out * g") in lines  # the gate the normalised configuration builds
    gate = [op for op in attn if op.path == "model.layers.self_attn.gate"]
    assert gate and all(op.condition is None for op in gate)
    conditions = " ".join(op.condition or "" for op in attn)
    assert "use_rope" not in conditions and "self.gate is not None" not in conditions
    assert "self.mode" not in conditions and "scaled" not in conditions
