"""Every replacement a vllm-ascend patch module makes, whatever its form, followed by the walk; one it cannot
resolve is reported ("not followed"), never silent. The mini tree (a private copy) with patch files added, and
Qwen3-Next on the 0.30 pair."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze
from fusion_analyze.config.model_config import load_facts
from fusion_analyze.config.reader import ConfigRead
from fusion_analyze.sources.trees import open_tree

from .conftest import validate_report

# Qwen2 of the mini tree: its attention's forward replaced through an alias of the class with a method of another
# class; its MLP's forward replaced by a value no name gives (the walk cannot follow it).
PATCH = '''\
import functools

import torch
from vllm.model_executor.models.qwen2 import Qwen2Attention, Qwen2MLP

_ATTN_TARGET = Qwen2Attention


class AscendQwen2Attention(Qwen2Attention):
    def forward(self, positions, hidden_states):
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = torch.ops.vllm.split_qkv_rmsnorm_rope(qkv, positions)
        attn_output = self.attn(q, k, v)
        output, _ = self.o_proj(attn_output)
        return output


def _make_forward():
    def forward(self, x):
        return x
    return forward


_ATTN_TARGET.forward = AscendQwen2Attention.forward
Qwen2MLP.forward = functools.wraps(Qwen2MLP.forward)(_make_forward())
'''

# the other forms the index reads: a tuple of targets, setattr with a constant name, setattr in a loop over names,
# and tests the patches stand under
FORMS = '''\
from vllm.model_executor.models.qwen2 import Qwen2Attention, Qwen2MLP, Qwen2Model


class Other:
    def forward(self, x):
        return x

    def helper(self):
        return 1


def new_forward(self, x):
    return x


Qwen2MLP.forward, Qwen2Model.extra = new_forward, Other.helper
setattr(Qwen2Attention, "helper", Other.helper)
for _name in ("alpha", "beta"):
    setattr(Qwen2Model, _name, getattr(Other, _name))
if SOMETHING:
    Qwen2Attention.gamma = new_forward
else:
    Qwen2Attention.gamma = Other.forward
'''


def _with_patch(mini, name: str, source: str):
    (mini / "vllm_ascend" / "patch" / "worker" / name).write_text(source, encoding="utf-8")
    return mini


def test_index_reads_every_form(mini):
    from fusion_analyze.analysis.session import Session

    _with_patch(mini, "patch_forms.py", FORMS)
    session = Session.open(str(mini), str(mini), "ascend", cache=False)
    got = {(p.target.rsplit(".", 2)[-2] + "." + p.target.rsplit(".", 1)[-1], p.value_name, p.form, p.tests)
           for p in session.resolver.patches if p.file.endswith("patch_forms.py")}
    assert got == {
        ("Qwen2MLP.forward", "new_forward", "tuple", ()),
        ("Qwen2Model.extra", "Other.helper", "tuple", ()),
        ("Qwen2Attention.helper", "Other.helper", "setattr", ()),
        ("Qwen2Model.alpha", "Other.alpha", "setattr loop", ()),
        ("Qwen2Model.beta", "Other.beta", "setattr loop", ()),
        ("Qwen2Attention.gamma", "new_forward", "assign", (("SOMETHING", False),)),
        ("Qwen2Attention.gamma", "Other.forward", "assign", (("SOMETHING", True),)),
    }
    # the replacement index groups them by target, in line order
    gamma = session.resolver.replacements.get("vllm.model_executor.models.qwen2.Qwen2Attention.gamma")
    assert [p.value_name for p in gamma] == ["new_forward", "Other.forward"]


@pytest.fixture
def patched(mini):
    return analyze("Qwen2ForCausalLM", str(_with_patch(mini, "patch_qwen2.py", PATCH)), str(mini), "ascend",
                   cache=False)


def test_alias_target_and_method_of_another_class_are_walked(patched):
    att = patched.walk.locations["attention"]
    assert att.forward_file == "vllm_ascend/patch/worker/patch_qwen2.py" and att.forward_line == 10
    assert att.patched_by == "vllm_ascend/patch/worker/patch_qwen2.py:24"
    fused = [op for op in patched.walk.ops if op.name == "split_qkv_rmsnorm_rope" and op.section == "layer"]
    assert fused and fused[0].file == "vllm_ascend/patch/worker/patch_qwen2.py" and fused[0].line == 12
    # the original forward's split is not walked
    assert not [op for op in patched.walk.ops if op.kind == "split" and op.file.endswith("qwen2.py")
                and op.section == "layer"]


def test_unresolvable_replacement_is_reported_not_silent(patched, tmp_path):
    from fusion_analyze.render.markdown import render_markdown

    nf = patched.walk.not_followed
    assert [(r["target"], r["file"], r["line"]) for r in nf] == [
        ("vllm.model_executor.models.qwen2.Qwen2MLP.forward", "vllm_ascend/patch/worker/patch_qwen2.py", 25)]
    assert "not a name of the trees" in nf[0]["reason"]
    # the op reached in its place carries it
    carried = [op for op in patched.walk.ops if op.attrs.get("not_followed")]
    assert carried and carried[0].attrs["not_followed"] == [
        "vllm.model_executor.models.qwen2.Qwen2MLP.forward = functools.wraps(Qwen2MLP.forward)(_make_forward())"
        " (vllm_ascend/patch/worker/patch_qwen2.py:25)"]
    doc = json.loads(json.dumps(patched.report))
    validate_report(doc)
    assert [r["line"] for r in doc["not_followed"]] == [25]
    md = render_markdown(patched, lang="en")
    assert "Not followed:" in md
    assert "`vllm_ascend/patch/worker/patch_qwen2.py` L25 `vllm.model_executor.models.qwen2.Qwen2MLP.forward = " in md


def test_no_replacement_on_cuda(mini):
    a = analyze("Qwen2ForCausalLM", str(_with_patch(mini, "patch_qwen2.py", PATCH)), str(mini), "cuda", cache=False)
    assert a.walk.not_followed == [] and a.walk.locations["attention"].patched_by is None


# -- the 0.30 pair --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def qwen3_next(real_tree):
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    return analyze("Qwen3NextForCausalLM", str(vllm), str(ascend), None)


def test_qwen3_next_linear_attention_runs_the_ascend_gdn(qwen3_next):
    ops = qwen3_next.walk.ops
    gdn = [op for op in ops if op.path.endswith("linear_attn") or ".linear_attn." in op.path]
    assert gdn
    # the patched forward (patch_qwen3_5.py: `_GDN_PATCH_TARGET.forward = AscendGatedDeltaNetAttention.forward`)
    att = qwen3_next.walk.locations["attention"]
    assert (att.forward_file, att.patched_by) == ("vllm_ascend/ops/gdn.py", "vllm_ascend/patch/worker/patch_qwen3_5.py:224")
    inner = [op for op in gdn if op.kind != "linear_attention"]
    assert inner and all(op.file.startswith("vllm_ascend/") or op.file == "vllm/model_executor/layers/linear.py"
                         for op in inner), sorted({op.file for op in inner})
    # nothing of vLLM's CUDA forward
    assert not [op for op in ops if "forward_cuda" in op.scope or op.file.endswith("qwen_gdn_linear_attn.py")]
    # the core custom op runs the layer's patched _forward_core (gdn.py), with its AscendC / Triton kernels
    core = next(op for op in gdn if op.name == "qwen_gdn_attention_core")
    names = {k.name for k in core.kernels}
    assert "torch.ops._C_ascend.chunk_gated_delta_rule_fwd_h_vllm" in names
    assert any(k.file == "vllm_ascend/ops/gdn.py" for k in core.kernels)
    assert "triton:vllm_ascend.ops.triton.fla.fused_qkvzba_split_reshape.fused_qkvzba_split_reshape_cat_kernel" in {
        k.name for op in gdn for k in op.kernels}


def test_qwen3_next_full_attention_walks_the_patch_method(qwen3_next):
    # `Qwen3NextAttention.forward = AscendQwen3NextAttention.forward`: a method of another class
    full = [op for op in qwen3_next.walk.ops if ".self_attn" in op.path or op.path.endswith("self_attn")]
    assert full and {op.file for op in full if op.kind in ("matmul", "attention", "kernel")} == {
        "vllm_ascend/patch/worker/patch_qwen3_5.py"}
    fused = [op for op in full if op.name == "triton_split_qkv_rmsnorm_mrope"]
    assert fused and fused[0].line == 61
    assert qwen3_next.walk.not_followed == []


# -- configuration classes: the class vLLM builds for a model type ------------------------------------------------

def test_platform_patch_registers_the_configuration_class(real_tree, tmp_path):
    """patch_glm5next_config.py: `_CONFIG_REGISTRY["glm5_next_text"] = Glm5NextTextConfig` of vllm-ascend wins
    over vLLM's entry; a field it defaults (mhc=True) and the checkpoint leaves out is what the walk reads."""
    from fusion_analyze.semantics.values import Known

    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"architectures": ["Glm5NextForCausalLM"], "model_type": "glm5_next_text",
                               "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
                               "intermediate_size": 512, "vocab_size": 1000}), encoding="utf-8")
    a = analyze("Glm5NextForCausalLM", str(vllm), str(ascend), None, options=Options(config=str(cfg)))
    facts = a.configuration
    assert (facts.cls.name, facts.cls.file) == ("Glm5NextTextConfig", "vllm_ascend/models/glm5next/config.py")
    reg = facts.cls.registered
    assert (reg.file, reg.line, reg.package) == ("vllm_ascend/patch/platform/patch_glm5next_config.py", 31, "vllm_ascend")
    assert facts.cls.over == ("vllm Glm5NextTextConfig (vllm/transformers_utils/config.py:110)",)
    assert "patch_glm5next_config.py:31" in str(facts.describe_source())
    assert facts.attr("mhc") == Known(True)
    # the walk reads it: the mHC expand of the first layer runs, decided (no test on config.mhc left)
    mhc = [op for op in a.walk.ops if op.file == "vllm_ascend/models/glm5next/ops/mhc_ops.py"]
    assert mhc and not any("mhc" in (op.condition or "") for op in a.walk.ops)
    doc = json.loads(json.dumps(a.report))
    validate_report(doc)
    assert doc["configuration"]["class"]["registered"]["file"] == "vllm_ascend/patch/platform/patch_glm5next_config.py"
    # on CUDA no vllm-ascend patch runs: vLLM's own registration decides
    cuda = load_facts("Glm5NextForCausalLM", "model", [_tree(vllm, "vllm")], str(cfg))
    assert cuda.cls.file == "vllm/transformers_utils/configs/glm5_next.py" and cuda.cls.registered.line == 110


def test_vllm_registry_wins_over_transformers_class_of_the_type(real_tree, hf):
    """deepseek_v32 is transformers' DeepseekV32Config and, in vLLM's _CONFIG_REGISTRY, DeepseekV3Config: vLLM's
    parser builds the latter, so a checkpoint without index_topk has none (DeepseekV32Config would give 2048)."""
    from fusion_analyze.semantics.values import Known

    vllm = real_tree("vllm==0.30.0")
    trees = [_tree(vllm, "vllm"), _tree(hf, "transformers")]
    read = ConfigRead({"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32"}, "config.json", True)
    facts = load_facts("DeepseekV32ForCausalLM", "deepseek_v2", trees, None, read)
    assert (facts.cls.name, facts.cls.file) == ("DeepseekV3Config",
                                                 "transformers/models/deepseek_v3/configuration_deepseek_v3.py")
    assert (facts.cls.registered.file, facts.cls.registered.line) == ("vllm/transformers_utils/config.py", 103)
    assert facts.cls.over == (
        "transformers DeepseekV32Config (transformers/models/deepseek_v32/configuration_deepseek_v32.py:28)",)
    said = str(facts.describe_source())
    assert "DeepseekV3Config registered for model type deepseek_v32 at vllm/transformers_utils/config.py:103" in said
    assert "DeepseekV32Config" in said
    assert facts.getattr("index_topk", Known(None)) == Known(None)
    assert facts.attr("first_k_dense_replace") == Known(3)


def test_a_text_sub_configuration_of_vllm_is_not_the_class_of_its_model_type(real_tree, hf):
    """BailingMoeV3's checkpoint says model_type "bailing_hybrid": vLLM's registry lists only the VL wrapper
    (`bailing_moe_v3_vl`, vllm/transformers_utils/config.py), so vLLM's parser asks AutoConfig, which builds
    transformers' BailingHybridConfig; vLLM's BailingMoeV3TextConfig (configs/bailing_moe_v3_vl.py), whose
    `model_type = "bailing_hybrid"` only names the wrapper's text part, is not chosen. Without a transformers
    tree the class is not known (never vLLM's text class); the wrapper's own type still reads the wrapper."""
    vllm = real_tree("vllm==0.30.0")
    read = ConfigRead({"architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_hybrid"}, "config.json", True)
    facts = load_facts("BailingMoeV3ForCausalLM", "bailing_moe_v3", [_tree(vllm, "vllm"), _tree(hf, "transformers")],
                       None, read)
    assert (facts.cls.name, facts.cls.file, facts.cls.registered) == (
        "BailingHybridConfig", "transformers/models/bailing_hybrid/configuration_bailing_hybrid.py", None)
    assert "transformers 5.23.0's BailingHybridConfig" in str(facts.describe_source())
    alone = load_facts("BailingMoeV3ForCausalLM", "bailing_moe_v3", [_tree(vllm, "vllm")], None, read)
    assert alone.cls is None
    wrapper = ConfigRead({"architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_moe_v3_vl"},
                         "config.json", False)
    vl = load_facts("BailingMoeV3ForCausalLM", "bailing_moe_v3", [_tree(vllm, "vllm")], None, wrapper)
    assert vl.cls.registered is not None and vl.cls.registered.class_name == "BailingMoeV3VLConfig"


def _tree(path, package):
    return open_tree(str(path), package, required=True)


# a replacement under a test no value decides, over an earlier one of the same target
UNDECIDED = '''\
from vllm.model_executor.models.qwen2 import Qwen2MLP


class AscendQwen2MLP(Qwen2MLP):
    def forward(self, x):
        gate_up, _ = self.gate_up_proj(x)
        x = self.act_fn(gate_up)
        x, _ = self.down_proj(x)
        return x


def first_forward(self, x):
    return x


Qwen2MLP.forward = first_forward
if SOMETHING_UNKNOWN:
    Qwen2MLP.forward = AscendQwen2MLP.forward
'''


def test_undecided_patch_lists_what_runs_otherwise(mini):
    a = analyze("Qwen2ForCausalLM", str(_with_patch(mini, "patch_undecided.py", UNDECIDED)), str(mini), "ascend",
                cache=False)
    target = "vllm.model_executor.models.qwen2.Qwen2MLP.forward"
    alts = [alt for alt in a.walk.alternatives if alt["path"] == target]
    assert alts == [{"path": target, "chosen": "AscendQwen2MLP.forward (vllm_ascend/patch/worker/patch_undecided.py:18)",
                     "condition": "SOMETHING_UNKNOWN", "decided": False,
                     "others": [("first_forward (vllm_ascend/patch/worker/patch_undecided.py:16)", "")]}]
    # the walk follows the last one: the MLP's ops are AscendQwen2MLP.forward's
    mlp = [op for op in a.walk.ops if op.file == "vllm_ascend/patch/worker/patch_undecided.py"]
    assert {op.line for op in mlp} >= {6, 8}
    doc = json.loads(json.dumps(a.report))
    validate_report(doc)
    from fusion_analyze.render.markdown import render_markdown

    md = render_markdown(a, lang="en")
    assert f"`{target}`: `AscendQwen2MLP.forward (vllm_ascend/patch/worker/patch_undecided.py:18)`" in md
    assert "  - `first_forward (vllm_ascend/patch/worker/patch_undecided.py:16)`" in md


# a patched __init__ that runs the saved original, then builds a submodule of its own; the patched forward uses it
PATCHED_INIT = '''\
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.models.qwen2 import Qwen2Attention

_orig_init = Qwen2Attention.__init__


def _init_with_q_norm(self, *args, **kwargs):
    _orig_init(self, *args, **kwargs)
    self.q_norm = RMSNorm(self.head_dim, eps=1e-6)


class AscendQwen2Attention(Qwen2Attention):
    def forward(self, positions, hidden_states):
        qkv, _ = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = self.q_norm(q)
        q, k = self.rotary_emb(positions, q, k)
        attn_output = self.attn(q, k, v)
        output, _ = self.o_proj(attn_output)
        return output


Qwen2Attention.__init__ = _init_with_q_norm
Qwen2Attention.forward = AscendQwen2Attention.forward
'''


def test_patched_init_is_read_when_objects_are_built(mini):
    a = analyze("Qwen2ForCausalLM", str(_with_patch(mini, "patch_init.py", PATCHED_INIT)), str(mini), "ascend",
                cache=False)
    ops = [op for op in a.walk.ops if op.section == "layer" and op.file == "vllm_ascend/patch/worker/patch_init.py"]
    by_line = {op.line: op for op in ops}
    # self.q_norm, assigned only by the patched __init__, is the RMSNorm it builds
    assert by_line[16].layer_class == "RMSNorm" and by_line[16].kind != "unknown"
    # the original __init__ it calls still builds the rest (its arguments passed on positionally)
    assert by_line[14].layer_class == "QKVParallelLinear" and by_line[19].layer_class == "RowParallelLinear"
    assert a.walk.not_followed == [] and not [u for u in a.walk.unknowns if u["file"].endswith("patch_init.py")]


def test_deepseek_mla_attention_is_built_by_the_patched_init(session):
    """patch_deepseek_v2.py replaces DeepseekV2MLAAttention.__init__ (`_deepseek_v2_mla_attention_init`, calling
    no original): its `self.q_proj = ColumnParallelLinear(...)` builds the q_proj the Ascend MLA impl runs, where
    vLLM's own __init__ picks `q_proj_cls` from a DCP setting no value decides."""
    from fusion_analyze.analysis.pipeline import analyze_in

    a = analyze_in(session, "DeepseekV3ForCausalLM")
    q = [op for op in a.walk.ops if op.id.startswith("model.layers.self_attn.mla_attn.impl.q_proj:")]
    assert q and {(op.kind, op.layer_class) for op in q} == {("matmul", "ColumnParallelLinear")}
    assert not [u for u in a.walk.unknowns if u["name"] == "q_proj"]


# -- replacements of other forms: a PluggableLayer's class, custom ops that run the layer, code outside the trees --

@pytest.fixture(scope="module")
def pair(real_tree):
    return str(real_tree("vllm==0.30.0")), str(real_tree("vllm-ascend==0.30.0rc2"))


def test_pluggable_layer_runs_the_class_ascend_registers(pair):
    """BailingMoELinearAttention is a PluggableLayer (bailing_linear_attn.py:376): PluggableLayer.__new__
    (custom_op.py:57-60) builds the class vllm-ascend registers under its name (utils.py:894,
    AscendBailingMoELinearAttention). Its inherited forward calls torch.ops.vllm.linear_attention, whose function
    (minimax_linear_attn.py:328) runs the layer's _forward: the Ascend class's own, walked as ops."""
    a = analyze("BailingMoeV2_5ForCausalLM", *pair, None)
    ops = [op for op in a.walk.ops if op.path == "model.layers.self_attn" or op.path.startswith("model.layers.self_attn.")
           and ".mla_attn" not in op.path]
    mixer = next(op for op in ops if op.attrs.get("mixer") and op.kind == "linear_attention")
    assert (mixer.attrs["ascend_class"], mixer.attrs["ascend_file"]) == (
        "AscendBailingMoELinearAttention", "vllm_ascend/ops/bailing_moe_linear_attn.py")
    qkv = next(op for op in ops if op.name == "query_key_value")
    assert (qkv.file, qkv.line) == ("vllm_ascend/ops/bailing_moe_linear_attn.py", 96)
    # the custom op is a hop, not one opaque kernel
    assert not [op for op in ops if op.name == "linear_attention" and op.kind == "kernel"]
    assert not [op for op in ops if op.file == "vllm/model_executor/layers/mamba/linear/bailing_linear_attn.py"
                and op.scope.endswith("._forward")]


def test_custom_op_the_walk_cannot_follow_is_listed(pair):
    """torch.ops.vllm.dsa_v41_forward (dsa_v41.py:55-81, registered with op_name=/op_func=) runs
    `attn.v41_impl.forward(attn, ...)`; v41_impl is built by `get_v41_cp_classes()[1](...)`, a class the walk
    does not know: a replacement not followed, never one silent kernel."""
    a = analyze("DeepseekV41ForCausalLM", *pair, None)
    nf = [r for r in a.walk.not_followed if r["target"] == "torch.ops.vllm.dsa_v41_forward"]
    assert [(r["file"], r["line"], r["form"]) for r in nf] == [("vllm_ascend/attention/dsa_v41.py", 64, "custom op")]
    carried = [op for op in a.walk.ops if op.attrs.get("not_followed")]
    assert carried and carried[0].name == "dsa_v41_forward"


def test_kernels_of_a_package_outside_the_trees(pair):
    """Qwen3-Next's GDN core (gdn.py): fla_npu.ops.ascendc's functions (imported at gdn.py:23-27) are its
    kernels, said to be outside the trees; the availability probe's smoke call (gdn.py:189, in a try whose
    outcome is cached on the class) is no kernel, the fused path's own call (gdn.py:258) is."""
    a = analyze("Qwen3NextForCausalLM", *pair, None)
    core = next(op for op in a.walk.ops if op.name == "qwen_gdn_attention_core")
    outside = {(k.name, k.line) for k in core.kernels if k.note}
    assert {("fla_npu.ops.ascendc.causal_conv1d_fn", 481), ("fla_npu.ops.ascendc.causal_conv1d_update", 438),
            ("fla_npu.ops.ascendc.recurrent_gated_delta_rule", 564)} <= outside
    assert all(k.note and "outside the trees" in str(k.note) for k in core.kernels if k.name.startswith("fla_npu."))
    npu = {k.line for k in core.kernels if k.name == "torch_npu.npu_chunk_gated_delta_rule"}
    assert npu == {258}
    assert not [k for k in core.kernels if k.name.startswith(("aiter.", "torch.", "x."))
                and k.note]  # only functions of imported packages outside the trees, not tensors' methods


def test_model_without_compile_decorator_runs_no_pass(pair):
    """DeepseekV41's classes (vllm_ascend/models/deepseek_v41/model.py) carry no @support_torch_compile: vLLM does
    not compile the model, so no graph pass fuses anything (both backends), and the compile section says so.
    Qwen3's backbone (qwen3.py) carries it: its passes keep their flags' defaults."""
    a = analyze("DeepseekV41ForCausalLM", *pair, None)
    assert a.walk.compiled_by == []
    assert a.passes["ascend"] and all(p.not_compiled for p in a.passes["ascend"])
    assert all("support_torch_compile" in str(p.default) for p in a.passes["ascend"] + a.passes["cuda"])
    assert "support_torch_compile" in a.report["compile"]["note"]
    assert not [o for o in a.opportunities if o.status in ("fused_by_pass", "fused_by_pass_if")]
    q = analyze("Qwen3ForCausalLM", *pair, None)
    assert q.walk.compiled_by and all(w.startswith("vllm/model_executor/models/") for w in q.walk.compiled_by)
    assert not [p for p in q.passes["ascend"] if p.not_compiled]


@pytest.mark.parametrize("guard, runs", [("if x.dtype != torch.float32:\n            ", True),
                                         ("if x.dtype == torch.float32:\n            ", False),
                                         ("", True)])
def test_a_replacement_classs_own_forward_casting_its_input_first_is_a_cast_op_before_the_layer(mini, guard, runs):
    """A leaf's replacement class (AscendRMSNorm) whose own forward first casts its input: the cast is an op of
    the layer at its line there, before the layer's op, which reads its output; a `x.dtype != torch.float32`
    guard holds for an activation (the model's dtype, never float32 under --dtype auto), `==` does not."""
    path = mini / "vllm_ascend" / "ops" / "layernorm.py"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("    def forward_oot(self, x, residual=None):\n",
                                 "    def forward_oot(self, x, residual=None):\n        \"\"\"doc\"\"\"\n"
                                 f"        {guard}x = x.to(torch.float32)\n"), encoding="utf-8")
    a = analyze("Qwen2ForCausalLM", str(mini), str(mini), "ascend", cache=False)
    norms = [op for op in a.walk.ops if op.attrs.get("ascend_class") == "AscendRMSNorm"]
    casts = [op for op in a.walk.ops if op.kind == "cast" and op.file == "vllm_ascend/ops/layernorm.py"]
    assert norms
    if not runs:
        assert casts == []
        return
    assert len(casts) == len(norms)
    for cast in casts:
        norm = a.walk.ops[a.walk.ops.index(cast) + 1]
        assert norm in norms and norm.inputs[0] == cast.outputs[0] and cast.path == norm.path
        assert cast.scope == "AscendRMSNorm.forward_oot" and cast.attrs["dtype"] == "torch.float32"
        assert (cast.condition, cast.steady) == (norm.condition, norm.steady)  # the call's, no test of its own


# -- module functions a patch rebinds (patch_triton.py's `_cc1d.causal_conv1d_update = ...`) ----------------------

def _conv_ops(a):
    return [op for op in a.walk.ops if op.section == "layer" and (".self_attn" in op.path or op.path.endswith("self_attn"))]


def test_rebound_module_functions_are_walked_with_their_patch(mini):
    """ConvMixer (mini tree) calls vLLM's conv functions as model code names them: from-imported from their
    module, as an attribute of the imported module, and through a package's re-export; patch_conv.py rebinds
    each (the package's attribute for the re-exported one). The walk runs the patch's functions, each op with
    the patch's file:line; a value it cannot resolve (a lambda) is not followed and said; a rebind in a try body
    whose import names nothing the module defines never runs, and the earlier patch of that target does."""
    a = analyze("ConvMixerForCausalLM", str(mini), str(mini), "ascend", cache=False)
    ops = _conv_ops(a)
    by = {op.name: (op.file, op.line, op.attrs.get("replaced_by")) for op in ops}
    patch = "vllm_ascend/patch/worker/patch_conv.py"
    target = "vllm.model_executor.layers.conv_ops"
    # from-import of a name the patch rebinds to a wrapper: the wrapper's call of the Ascend function
    assert by["silu"] == ("vllm_ascend/ops/conv.py", 8, f"{target}.conv.conv_update = _conv_update ({patch}:18)")
    # `conv_mod.conv_fwd(...)`: the module's attribute, read when the call runs
    assert by["sigmoid"] == ("vllm_ascend/ops/conv.py", 12, f"{target}.conv.conv_fwd = _npu_conv_fwd ({patch}:19)")
    # `from conv_ops import gated_rule`: the package's re-exported name, rebound on the package
    assert by["tanh"] == ("vllm_ascend/ops/conv.py", 16, f"{target}.gated_rule = gated_rule ({patch}:20)")
    # the rebind at line 27 stands after `from vllm_ascend.ops.conv import conv_state_v2`, which fails: line 21 runs
    relu = next(op for op in ops if op.name == "relu")
    assert (relu.file, relu.attrs["replaced_by"]) == ("vllm_ascend/ops/conv.py",
                                                     f"{target}.conv.conv_state = _npu_conv_state ({patch}:21)")
    assert relu.attrs["replacement_skipped"] == [
        f"the patch at {patch}:27 never runs: from vllm_ascend.ops.conv import conv_state_v2, which its try body "
        "runs first, fails (the module binds no such name)"]
    # none of vLLM's kernels of the replaced functions is walked
    assert [op.name for op in ops if op.kind == "kernel"] == ["_conv_fwd_kernel"]
    # `conv_gate = lambda x: x`: not followed, said on the op reached in its place (vLLM's conv_gate launches
    # _conv_fwd_kernel) and in the report
    gate = next(op for op in ops if op.name == "_conv_fwd_kernel")
    assert gate.attrs["not_followed"] == [f"{target}.conv.conv_gate = lambda x: x ({patch}:22)"]
    assert [(r["target"], r["line"]) for r in a.walk.not_followed] == [(f"{target}.conv.conv_gate", 22)]
    doc = json.loads(json.dumps(a.report))
    validate_report(doc)
    from fusion_analyze.render.markdown import render_markdown

    assert f"patched at {patch}:20" in render_markdown(a, lang="en")


def test_rebound_module_function_on_cuda_is_the_original(mini):
    a = analyze("ConvMixerForCausalLM", str(mini), str(mini), "cuda", cache=False)
    ops = _conv_ops(a)
    assert [op.name for op in ops if op.kind == "kernel"] == [
        "_conv_update_kernel", "_conv_fwd_kernel", "_gated_rule_kernel", "_conv_fwd_kernel", "_conv_fwd_kernel"]
    assert not [op for op in ops if op.attrs.get("replaced_by")] and a.walk.not_followed == []


def test_rebinding_the_defining_module_does_not_reach_a_package_that_bound_it_first(mini):
    """`import conv_ops.gated as _g; _g.gated_rule = f` runs after the package `conv_ops` was imported (importing
    `conv_ops.gated` runs the package's `__init__` first), whose `from .gated import gated_rule` already holds
    the original: a model that imports the name from the package runs vLLM's function. A from-import in the
    patch module itself (`_orig = conv.conv_fwd`, then called) is the original too."""
    (mini / "vllm_ascend" / "patch" / "worker" / "patch_conv.py").write_text('''\
import vllm.model_executor.layers.conv_ops.conv as _conv
import vllm.model_executor.layers.conv_ops.gated as _gated

from vllm_ascend.ops.conv import gated_rule

_orig_fwd = _conv.conv_fwd


def _conv_fwd(x):
    return _orig_fwd(x)


_gated.gated_rule = gated_rule
_conv.conv_fwd = _conv_fwd
''', encoding="utf-8")
    a = analyze("ConvMixerForCausalLM", str(mini), str(mini), "ascend", cache=False)
    ops = _conv_ops(a)
    assert "_gated_rule_kernel" in {op.name for op in ops} and "tanh" not in {op.name for op in ops}
    fwd = next(op for op in ops if op.name == "_conv_fwd_kernel" and op.attrs.get("replaced_by"))  # the saved original
    assert fwd.file == "vllm/model_executor/layers/conv_ops/conv.py"
    assert fwd.attrs["replaced_by"].endswith("(vllm_ascend/patch/worker/patch_conv.py:14)")


@pytest.fixture(scope="module")
def olmo_hybrid(session):
    """OLMo-Hybrid (fixtures/configs/olmo-hybrid.json): its GDN layer's olmo_gdn_linear_attn.py from-imports
    causal_conv1d_fn / causal_conv1d_update from vLLM's mamba ops module and chunk_gated_delta_rule from the
    flash_linear_attention ops package; vllm-ascend's patch_triton.py rebinds all three."""
    from fusion_analyze.analysis.pipeline import analyze_in

    from .conftest import FIXTURES

    return analyze_in(session, "OlmoHybridForCausalLM", Options(config=str(FIXTURES / "configs" / "olmo-hybrid.json")))


def test_olmo_hybrid_gdn_runs_vllm_ascend_conv_and_chunk(olmo_hybrid):
    ops = olmo_hybrid.walk.ops
    patch = "vllm_ascend/patch/worker/patch_triton.py"
    by = {}
    for op in ops:
        if op.attrs.get("replaced_by"):
            by.setdefault(op.attrs["replaced_by"], set()).add(op.file)
    assert by == {
        f"vllm.model_executor.layers.mamba.ops.causal_conv1d.causal_conv1d_update = _npu_causal_conv1d_update ({patch}:57)":
            {"vllm_ascend/ops/causal_conv1d.py"},
        f"vllm.model_executor.layers.mamba.ops.causal_conv1d.causal_conv1d_fn = _npu_causal_conv1d_fn ({patch}:58)":
            {"vllm_ascend/ops/causal_conv1d.py"},
        f"vllm.third_party.flash_linear_attention.ops.chunk_gated_delta_rule = chunk_gated_delta_rule ({patch}:61)":
            {"vllm_ascend/ops/triton/fla/chunk.py"}}
    # the later rebind (:329) imports causal_conv1d_update_npu, which ops/triton/mamba/causal_conv1d.py does not
    # define: it never runs, and the ops of :57 say so
    update = [op for op in ops if op.attrs.get("replaced_by", "").endswith(f"({patch}:57)")]
    assert update and all(f"{patch}:329 never runs" in op.attrs["replacement_skipped"][0] for op in update)
    # none of vLLM's Triton code of the replaced functions
    assert not [op for op in ops if op.file in ("vllm/model_executor/layers/mamba/ops/causal_conv1d.py",
                                               "vllm/third_party/flash_linear_attention/ops/chunk.py")]
    assert not [op for op in ops if op.name in ("_causal_conv1d_update_kernel", "_causal_conv1d_fwd_kernel")]
    assert olmo_hybrid.walk.not_followed == []


def test_patch_module_imported_under_a_test_runs_under_it(session):
    """vllm-ascend's patch/worker/__init__.py imports patch_idex_310 only where the hardware profile lacks
    STANDARD_WORKER_PATCHES (310P) and patch_triton only `if HAS_TRITON:`: their patches carry those tests."""
    by_module = {p.module: p.imported_under for p in session.resolver.patches}
    test = "get_current_hardware_profile().supports(HardwareCapability.STANDARD_WORKER_PATCHES)"
    assert by_module["vllm_ascend.patch.worker.patch_idex_310"] == (("vllm_ascend.patch.worker", test, True),)
    assert by_module["vllm_ascend.patch.worker.patch_qwen3_5"] == (("vllm_ascend.patch.worker", test, False),)
    assert by_module["vllm_ascend.patch.worker.patch_triton"] == (("vllm_ascend.patch.worker", "HAS_TRITON", False),)
    assert by_module["vllm_ascend.patch.worker.patch_distributed"] == ()


def test_a_patchs_tests_run_the_calls_they_make(real_tree):
    """vllm-ascend 0.23's patch_fused_moe.py replaces vLLM's FusedMoE only `if not vllm_version_is("0.23.0")`, and
    patch/platform/__init__.py imports it under the same test: with vLLM 0.23.0 both are false (the call is run
    with the tree's version), so the class vLLM's models build is vLLM's own."""
    from fusion_analyze.analysis.session import Session
    from fusion_analyze.ir.conditions import Truth
    from fusion_analyze.walk.walker import Walker

    s = Session.open(str(real_tree("vllm==0.23.0")), str(real_tree("vllm-ascend==0.23.0")))
    w = Walker(s.index, s.resolver.replacements)
    (p,) = [p for p in s.resolver.patches if p.target == "vllm.model_executor.layers.fused_moe.layer.FusedMoE"]
    assert p.tests == (("not vllm_version_is('0.23.0')", False),)
    assert p.imported_under == (("vllm_ascend.patch.platform", "not vllm_version_is('0.23.0')", False),)
    assert w.ctor._patch_truth(p) is Truth.FALSE
    assert w.ctor.replaced(p.target) is None
