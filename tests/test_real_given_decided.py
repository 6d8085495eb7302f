"""Tests on something given, decided from the trees or said to wait on what was not given (issue 45, item 5), on
the 0.30 pair with the configuration class's defaults (as `all` analyses the registry): the text configuration's
model type, a factory's object never None, a dataclass field left at its default, and an attribute computed
from an input not given (a configuration field the class does not declare, --tensor-parallel-size)."""

from __future__ import annotations

import json

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.status.waits import classify

from .conftest import ROOT, validate_report


@pytest.fixture(scope="module")
def dsv3(session, hf):
    return analyze_in(session, "DeepseekV3ForCausalLM", Options(hf_root=hf))


@pytest.fixture(scope="module")
def qwen35(session, hf):
    return analyze_in(session, "Qwen3_5ForCausalLM", Options(hf_root=hf))


def _by_test(a) -> dict:
    return {e["test"]: e for e in a.report["undecided"]}


def _conditions(a) -> list[str]:
    return [op["condition"] or "" for op in a.report["ops"]]


def test_qwen3_5_text_model_type_decides_its_mlp(qwen35):
    """Qwen3_5ForCausalLM reads `hf_text_config` (vllm/model_executor/models/qwen3_5.py:129), whose class is
    Qwen3_5TextConfig, `model_type = "qwen3_5_text"` (vllm/transformers_utils/configs/qwen3_5.py:23):
    `config.model_type == "qwen3_5_moe_text"` (qwen3_5.py:166) is false, `== "qwen3_5_text"` (:171) true, so
    the layer's MLP is Qwen3NextMLP and no MoE op runs."""
    assert qwen35.report["configuration"]["model_type"] == "qwen3_5_text"
    assert not [c for c in _conditions(qwen35) if "model_type" in c]
    assert not [t for t in _by_test(qwen35) if "model_type" in t]
    mlp = [op for op in qwen35.report["ops"] if op["path"].startswith("model.layers.mlp")]
    assert mlp and {op["layer_class"] for op in mlp} >= {"MergedColumnParallelLinear"}, [op["layer_class"] for op in mlp]
    assert not [op for op in qwen35.report["ops"] if op["kind"] == "moe"]
    validate_report(qwen35.report)


def test_qwen3_5_attributes_from_fields_not_given(qwen35):
    """With the class's defaults alone, `full_attention_interval` (read through `kwargs.get`, qwen3_5.py
    configs:90) is not declared, so `layer_types` is not known and each layer's `self.layer_type` (qwen3_5.py:135,
    bound from `config.layer_types[extract_layer_index(prefix)]` :253) waits on it; `self.layer_scale =
    getattr(config, "layer_scale", False)` (:187) and `attn_output_gate` wait on fields the class does not
    declare: open inputs, not the tool's debt."""
    by = _by_test(qwen35)
    for test, field in (('self.layer_type == "linear_attention"', "layer_types"),
                        ('self.layer_type == "full_attention"', "layer_types"),
                        ("self.layer_scale", "layer_scale"), ("self.attn_output_gate", "attn_output_gate")):
        e = by[test]
        assert (e["waits_on"], e["given"]) == ("config_field", False), e
        assert f"not given: {field}" in e["why"], e
    # the attention implementation's `self.sliding_window` (a kernel test, attention_v1.py) is
    # `cache_config.sliding_window` that EngineArgs sets from the configuration (vllm/engine/arg_utils.py:
    # 2081-2087): Qwen3_5TextConfig declares no `sliding_window` and computes `layer_types` from a key not given,
    # so it waits on the configuration, and nothing given is left undecided
    assert not [e["test"] for e in qwen35.report["undecided"] if e["given"] is True]
    e = by["self.sliding_window is not None"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "sliding_window" in e["why"], e
    assert not [c for c in _conditions(qwen35) if "sliding_window" in c]


def test_qwen3_5_linear_kind_walks_only_the_linear_branch(session, hf, tmp_path):
    """With a config.json whose layer count and `full_attention_interval` are given, Qwen3_5TextConfig builds
    `layer_types` (configs/qwen3_5.py:89-96): the layers fall into a linear-attention and a full-attention kind,
    and each kind walks only its own branch of `if self.layer_type == "linear_attention"` (qwen3_5.py:144, the
    Qwen3-Next forward that runs it, qwen3_next.py:567)."""
    cfg = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "num_hidden_layers": 8,
           "full_attention_interval": 4, "hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 256, "intermediate_size": 3584, "vocab_size": 248320, "layer_scale": False,
           "attn_output_gate": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    a = analyze_in(session, "Qwen3_5ForCausalLM", Options(config=str(path), hf_root=hf))
    kinds = a.report["layer_kinds"]
    # (the first layer, handed no residual yet, walked apart)
    assert [k["layers"] for k in kinds] == [[0], [1, 2, 4, 5, 6], [3, 7]], json.dumps([k["differs"] for k in kinds[1:]])
    assert [k["differs"]["layer_type"] for k in kinds] == ["'linear_attention'", "'linear_attention'", "'full_attention'"]
    assert not [c for c in _conditions(a) if "layer_type" in c or "model_type" in c]
    linear = {op["attrs"].get("layer_kind") for op in a.report["ops"] if op["kind"] == "linear_attention"}
    full = {op["attrs"].get("layer_kind") for op in a.report["ops"] if op["kind"] == "attention"}
    assert linear == {0, 1} and full == {2}
    assert not [e for e in a.report["undecided"] if "layer_type" in e["test"]]
    validate_report(a.report)


def test_deepseek_v3_mla_impl_attributes_decided(dsv3):
    """vllm-ascend's MLA layer passes `use_mla_rope=mla_modules.rotary_emb is not None` (vllm_ascend/ops/mla.py:
    240), the model's MLAModules holding `rotary_emb=self.rotary_emb` built by `get_rope(...)`
    (vllm/model_executor/models/deepseek_v2.py:548, every return an object): AscendMLAImpl's `self.use_mla_rope =
    kwargs.get("use_mla_rope", True)` (vllm_ascend/attention/mla_v1.py:894) is True, so `if not
    self.use_mla_rope:` (:1558) is decided; `g_proj` is not passed to MLAModules, whose field defaults to None
    (vllm/model_executor/layers/mla.py:38): `self.use_output_gate = self.g_proj is not None` (mla_v1.py:893) is
    False and the output gate (:2283) does not run."""
    by = _by_test(dsv3)
    assert not [t for t in by if "use_mla_rope" in t or "use_output_gate" in t], list(by)
    assert not [c for c in _conditions(dsv3) if "use_mla_rope" in c or "use_output_gate" in c]
    assert any(op["kind"] == "mla_attention" for op in dsv3.report["ops"])
    validate_report(dsv3.report)


def test_deepseek_v3_head_padding_waits_on_the_tp_size(dsv3):
    """`self.head_padding = self.num_heads_padded - self.num_heads` (mla_v1.py:924), the impl's `num_heads` the
    model attention's `num_heads // tp_size` (deepseek_v2.py): without --tensor-parallel-size it waits on it."""
    e = _by_test(dsv3)["self.head_padding > 0"]
    assert (e["waits_on"], e["given"]) == ("tp_size", False), e
    assert "tp_size" in e["why"]


def test_an_attribute_read_from_given_inputs_stays_the_tools_debt():
    """classify: an attribute whose sources read only given inputs (a declared field) stays `given`; one that
    reads a field the configuration does not give waits on it; no sources: the debt, as before."""
    from fusion_analyze.config.model_config import ConfigFacts

    facts = ConfigFacts({"hidden_size": 8, "model_type": "x"}, "t", complete=False)
    given = classify("self.flag", "self.flag", facts, None, lambda name: [["config.hidden_size > 4"]])
    assert given[:2] == ("construction", True)
    open_ = classify("self.flag", "self.flag", facts, None,
                     lambda name: [['getattr(config, "use_flag", False)']])
    assert open_[:2] == ("config_field", False) and "use_flag" in open_[2]
    # one module computes it from given inputs only: still the tool's debt
    mixed = classify("self.flag", "self.flag", facts, None,
                     lambda name: [['getattr(config, "use_flag", False)'], ["config.hidden_size > 4"]])
    assert mixed[:2] == ("construction", True)
    assert classify("self.flag", "self.flag", facts, None, lambda name: [])[:2] == ("construction", True)


def test_cache_config_fields_at_vllm_defaults(session, hf):
    """`self.fast_prefill_enabled = cache_config.kv_sharing_fast_prefill` (vllm/model_executor/models/gemma3n.py:926)
    and Mamba2's `self.use_replayssm = cache_config.use_replayssm if cache_config is not None else False`
    (vllm/model_executor/layers/mamba/mamba_mixer2.py:521): CacheConfig declares both False (vllm/config/cache.py:221,
    :197), EngineArgs passes its own field whose default is CacheConfig's (vllm/engine/arg_utils.py:768, :745 ->
    :2110, :2120) and no start-up code assigns them: decided False, their branches not walked. `mamba_cache_mode`
    ("none", vllm/config/cache.py:178), which start-up code sets only to literals ("align" at
    vllm/model_executor/models/config.py:624 and :635, "none" at :652, "align" in vllm-ascend's
    patch/platform/patch_mamba_config.py:168), is one of "none" and "align": never "all"."""
    from fusion_analyze.semantics.runtime_defaults import vllm_config_default
    from fusion_analyze.semantics.values import Known, OneOf

    gemma = analyze_in(session, "Gemma3nForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(gemma) if "fast_prefill" in t]
    assert not [c for c in _conditions(gemma) if "fast_prefill" in c]
    mamba = analyze_in(session, "Mamba2ForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(mamba) if "use_replayssm" in t]
    assert not [c for c in _conditions(mamba) if "use_replayssm" in c]

    def infer(expr, scope):
        from fusion_analyze.semantics.values import literal

        return literal(expr) or Known(None)

    assert vllm_config_default(session.index, "cache_config", "use_replayssm", infer) == Known(False)
    assert vllm_config_default(session.index, "cache_config", "mamba_cache_mode", infer) == OneOf((Known("none"),
                                                                                                 Known("align")))
    assert vllm_config_default(session.index, "mamba_config", "backend", infer) is None  # arg_utils sets it
    validate_report(gemma.report)


def _kernel_conditions(a, kind=None) -> list[str]:
    return [k.get("condition") or "" for op in a.report["ops"] if kind is None or op["kind"] == kind
            for k in op.get("kernels") or ()]


def test_deepseek_v3_mla_kernels_read_on_the_built_implementation(dsv3):
    """vllm-ascend's AscendMultiHeadLatentAttention holds `self.mla_attn` (composites.yaml mla_attention.impl.holder),
    whose MLAAttention builds `impl = impl_cls(...)` then `self.impl = impl` (vllm/model_executor/layers/attention/
    mla_attention.py:555, :577): AscendMLAImpl's kernels are read with the arguments it is built with, so
    `if not self.use_mla_rope:` (vllm_ascend/attention/mla_v1.py:1558, :1642, :1688) is decided in the kernels'
    conditions too (use_mla_rope True, :894), and `_exec_kv_no_rope`'s cache scatter (:1509) is not listed; the
    fused `npu_kv_rmsnorm_rope_cache` (:1579, :1661) is."""
    conds = _kernel_conditions(dsv3, "mla_attention")
    assert conds and not [c for c in conds if "use_mla_rope" in c], [c for c in conds if "use_mla_rope" in c][:2]
    names = {(k["name"], k["line"]) for op in dsv3.report["ops"] if op["kind"] == "mla_attention" for k in op["kernels"]}
    assert ("torch_npu.npu_kv_rmsnorm_rope_cache", 1661) in names
    assert not [n for n in names if n[0].endswith("npu_scatter_pa_kv_cache")], names
    assert not [t for t in _by_test(dsv3) if "use_mla_rope" in t]


@pytest.fixture(scope="module")
def llama(session, hf):
    return analyze_in(session, "LlamaForCausalLM", Options(hf_root=hf))


def test_platform_methods_and_runtime_objects_decide_kernel_tests(llama):
    """`self.use_direct_call = not current_platform.opaque_attention_op()` (vllm/model_executor/layers/attention/
    attention.py:437): NPUPlatform's `opaque_attention_op` returns True (vllm_ascend/platform.py:151), so the
    layer runs `torch.ops.vllm.unified_attention_with_output` (attention.py:569) under no test on it.
    GroupCoordinator (what `get_tp_group()` returns) sets `self.use_custom_op_call = current_platform.is_tpu() or
    current_platform.use_custom_op_collectives()` (vllm/distributed/parallel_state.py:567), True on Ascend
    (platform.py:163): its all_reduce runs `torch.ops.vllm.all_reduce` (:741) under `self.world_size == 1` only.
    AscendVocabParallelEmbedding's `self.token_exchange_group = plan.token_exchange_group` (vllm_ascend/ops/
    vocab_parallel_embedding.py:189), `plan` the last return of `_resolve_vocab_parallel_plan` (:152, no PCP, no
    embedding TP by default) built without it: the dataclass's default None (:88)."""
    conds = _kernel_conditions(llama)
    for attr in ("use_direct_call", "use_custom_op_call", "token_exchange_group"):
        assert not [c for c in conds if attr in c], (attr, [c for c in conds if attr in c][:2])
    attn = [k for op in llama.report["ops"] if op["kind"] == "attention" for k in op["kernels"]
            if k["name"] == "torch.ops.vllm.unified_attention_with_output"]
    assert attn and attn[0]["condition"] in (None, ""), attn
    reduce = [k for op in llama.report["ops"] if op["kind"] == "allreduce" for k in op["kernels"]]
    assert reduce and all(k["name"] == "torch.ops.vllm.all_reduce" for k in reduce), reduce
    assert {k["condition"] for k in reduce} == {"not (self.world_size == 1)"}
    # the kernels' own tests are counted among the report's undecided tests (the tp_size wait, not the debt)
    e = _by_test(llama).get("self.world_size == 1")
    assert e is not None and e["given"] is not True, e
    assert not [e for e in llama.report["undecided"] if e["given"] is True], llama.report["undecided"]


def test_platform_method_read_from_the_platform_class(session):
    """`current_platform.<m>()` that leaf_ops.yaml does not list: the platform class's own literal return on
    Ascend (NPUPlatform, walk.yaml runtime.platform), Platform's where NPUPlatform has none; nothing on a backend
    without a platform class, nor for a method that computes its answer."""
    import libcst as cst

    from fusion_analyze.ir.conditions import Truth
    from fusion_analyze.semantics.environment import Environment

    ascend = Environment("ascend", session.index)
    assert ascend.platform_truth(cst.parse_expression("current_platform.opaque_attention_op()")) is Truth.TRUE
    assert ascend.platform_truth(cst.parse_expression("current_platform.use_custom_op_collectives()")) is Truth.TRUE
    assert ascend.platform_truth(cst.parse_expression("other.opaque_attention_op()")) is Truth.UNKNOWN
    assert Environment("cuda", session.index).platform_truth(
        cst.parse_expression("current_platform.opaque_attention_op()")) is Truth.UNKNOWN


def test_vllm_config_fields_the_engine_builds(session, hf):
    """VllmConfig declares `model_config: ModelConfig = None`, but EngineArgs.create_engine_config passes
    `model_config=model_config` (vllm/engine/arg_utils.py:2648) from `self.create_model_config()` (:2073), whose
    one return builds ModelConfig (:1820): never None, so Mamba2's `if self.model_config is None:`
    (vllm/model_executor/layers/mamba/mamba_mixer2.py:625) is decided. `speculative_config` comes from a method
    that may return None (:1949): not decided. `self._updates_replayssm_trackers = True` (:539), tested beside a
    local whose None-ness alone decides the test (:1007), is not printed either."""
    from fusion_analyze.semantics.runtime_defaults import vllm_config_default
    from fusion_analyze.semantics.values import NotNone

    assert isinstance(vllm_config_default(session.index, "vllm_config", "model_config", None), NotNone)
    assert vllm_config_default(session.index, "vllm_config", "speculative_config", None) is None
    mamba = analyze_in(session, "Mamba2ForCausalLM", Options(hf_root=hf))
    by = _by_test(mamba)
    assert "self.model_config is None" not in by and "self._updates_replayssm_trackers" not in by, list(by)
    printed = _conditions(mamba) + _kernel_conditions(mamba)
    assert not [c for c in printed if "model_config is None" in c or "_updates_replayssm_trackers" in c]
    validate_report(mamba.report)


def test_deepseek_v3_shared_experts_and_dense_kind_decided(dsv3):
    """`self.is_fused_shared_expert_enabled = resolve_layer_fused_shared_expert(...)` (vllm/model_executor/models/
    deepseek_v2.py:347) is `bool(rocm_aiter_ops.is_fusion_moe_shared_experts_enabled()) and ...`
    (vllm/model_executor/layers/fused_moe/utils.py:74, :85), the AITER check off ROCm: False, so `if
    config.n_shared_experts is None or self.is_fused_shared_expert_enabled:` (deepseek_v2.py:359) is decided with
    the class's n_shared_experts and the shared experts are built. The decoder layer walked per kind knows its
    own `self.mlp`: `isinstance(self.mlp, DeepseekV2MLP) and hidden_states.dtype == torch.float16` (:1411) keeps
    only the dtype test in the dense kind (layers 0-2) and is not walked in the MoE kind."""
    by = _by_test(dsv3)
    assert not [t for t in by if "is_fused_shared_expert_enabled" in t or "isinstance(self.mlp" in t], list(by)
    assert any(op["path"].endswith("shared_experts.down_proj") for op in dsv3.report["ops"])
    kinds = dsv3.report["layer_kinds"]
    assert [k["differs"].get("mlp") for k in kinds] == ["DeepseekV2MLP", "DeepseekV2MLP", "DeepseekV2MoE"]  # layer 0 apart
    fp16 = [op for op in dsv3.report["ops"] if op["file"].endswith("deepseek_v2.py") and 1411 < op["line"] <= 1420
            and "float16" in (op["condition"] or "")]
    assert fp16 and {op["attrs"].get("layer_kind") for op in fp16} == {0, 1}, [(op["line"], op["condition"]) for op in fp16]
    assert all("isinstance" not in op["condition"] for op in fp16)


def test_lora_off_and_a_helper_item_read_back(session, hf):
    """`is_lora_enabled = bool(lora_config)` with `lora_config = vllm_config.lora_config` (vllm/model_executor/
    models/mamba.py:109-110): EngineArgs builds it only `if self.enable_lora` (vllm/engine/arg_utils.py:2458,
    default False :629), which the tool never states: None, so MambaMixer's `if self.is_lora_enabled:` is decided.
    Granite's `self.use_rope = rope_theta != 0` (vllm/model_executor/models/granite.py:203), `rope_theta` item 1
    of `granite_layer_attn_params(...)` (:199), computed from `getattr(config, "layer_rope_theta", None)` (:95):
    a field GraniteConfig does not declare, so the test waits on it (not the tool's debt)."""
    mamba = analyze_in(session, "MambaForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(mamba) if "is_lora_enabled" in t]
    assert not [c for c in _conditions(mamba) if "is_lora_enabled" in c]
    granite = analyze_in(session, "GraniteForCausalLM", Options(hf_root=hf))
    e = _by_test(granite)["self.use_rope"]
    assert (e["waits_on"], e["given"]) == ("config_field", False), e
    assert "layer_rope_theta" in e["why"], e


def test_sliding_window_from_the_engine_and_the_configuration(session, hf):
    """vLLM's Attention takes `sliding_window = cache_config.sliding_window` where the model passes no per-layer
    window (vllm/model_executor/layers/attention/attention.py:263-268) and builds the implementation with it (:423;
    AscendAttentionBackendImpl `self.sliding_window = sliding_window`, vllm_ascend/attention/attention_v1.py:554).
    EngineArgs builds `CacheConfig(sliding_window=sliding_window)` (vllm/engine/arg_utils.py:2105) from a local that
    is None or `model_config.get_sliding_window()` (:2081-2087), `getattr(self.hf_text_config, "sliding_window",
    None)` (vllm/config/model.py:1494). Qwen3MoeConfig sets `sliding_window = ... if self.use_sliding_window else
    None` (use_sliding_window False by default): None, so `self.sliding_window is not None` (attention_v1.py) is
    decided in the kernels' conditions. BloomConfig declares no sliding_window: not decided from its defaults."""
    from fusion_analyze.semantics.runtime_defaults import engine_passed_values

    values = engine_passed_values(session.index, "cache_config", "sliding_window")
    assert values and [type(v).__name__ for v in values] == ["Name", "Call"], values
    assert engine_passed_values(session.index, "cache_config", "kv_cache_dtype_skip_layers") is None
    qwen = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(qwen) if "sliding_window" in t], list(_by_test(qwen))
    attn = [k for op in qwen.report["ops"] for k in op.get("kernels") or ()
            if k["name"] == "torch_npu.npu_fused_infer_attention_score"]
    assert attn and not [k for k in attn if "sliding_window" in (k.get("condition") or "")], attn
    validate_report(qwen.report)


def test_bailing_v3_unquantised_fuses_b_into_qkvb(session, hf):
    """BailingMoeV3's KDA (bailing_moe_v3.py): `self.separate_b_proj = _is_fp8_module_excluded(quant_config, ...)`,
    which returns False where `_is_block_fp8_config` does not hold, `isinstance(quant_config, Fp8Config) and ...`.
    A config.json that names no quantisation makes `vllm_config.quant_config` None (VllmConfig.
    _get_quantization_config), and `isinstance(None, Fp8Config)` is False: the one `qkvb_proj` GEMM runs, not
    `qkv_proj` + `b_proj`, and no GEMM + sigmoid row is claimed on b_proj. Without a configuration the
    checkpoint may be quantised: the test stays open."""
    from .conftest import FIXTURES

    cfg = str(FIXTURES / "configs" / "bailing-moe-v3.json")
    a = analyze_in(session, "BailingMoeV3ForCausalLM", Options(config=cfg, hf_root=hf))
    kda = [op for op in a.report["ops"] if (op["scope"] or "").startswith("BailingMoeV3KimiDeltaAttention.")]
    names = {op["name"] for op in kda}
    assert "qkvb_proj" in names and not names & {"qkv_proj", "b_proj"}
    assert not any("separate_b_proj" in c for c in _conditions(a))
    rows = {r["id"] for r in a.report["opportunities"]}
    assert "matmul_activation@BailingMoeV3KimiDeltaAttention.forward" not in rows
    bare = analyze_in(session, "BailingMoeV3ForCausalLM", Options(hf_root=hf))
    assert any("separate_b_proj" in c for c in _conditions(bare))
    validate_report(a.report)


def test_sliding_window_of_a_class_that_declares_none_waits_on_it(session, hf, tmp_path):
    """BloomConfig declares no `sliding_window`, but a checkpoint may carry the key (transformers keeps every extra
    key, transformers/configuration_utils.py:499-504) and vLLM reads it with `getattr(self.hf_text_config,
    "sliding_window", None)` (vllm/config/model.py:1494): with the class's defaults the test waits on that field,
    not on the tool. A whole config.json without the key decides it: None, and the kernels of the window path
    (attention_v1.py:956) are not listed."""
    bloom = analyze_in(session, "BloomForCausalLM", Options(hf_root=hf))
    e = _by_test(bloom)["self.sliding_window is not None"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "not given: sliding_window" in e["why"], e
    cfg = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "n_layer": 2, "n_head": 8, "hidden_size": 512,
           "vocab_size": 250880, "layer_norm_epsilon": 1e-5}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    whole = analyze_in(session, "BloomForCausalLM", Options(config=str(path), hf_root=hf))
    assert not [t for t in _by_test(whole) if "sliding_window" in t], list(_by_test(whole))
    assert not [k for k in _kernels(whole, "attention") if k["line"] == 956 and k["file"].endswith("attention_v1.py")]
    # MistralConfig states a window (4096) but no `layer_types`, which both llama.py's per-layer window
    # (`if layer_types := getattr(config, "layer_types", None):`, llama.py:186) and EngineArgs' test read
    e = _by_test(analyze_in(session, "MistralForCausalLM", Options(hf_root=hf)))["self.sliding_window is not None"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "not given: layer_types" in e["why"], e
    validate_report(whole.report)


def _kernels(a, kind: str) -> list[dict]:
    return [dict(k, layer_kind=op["attrs"].get("layer_kind")) for op in a.report["ops"] if op["kind"] == kind
            for k in op.get("kernels") or ()]


def test_sliding_window_of_interleaved_layers_decided_per_kind(session, hf):
    """Gemma2Config's `layer_types` alternate (its defaults): EngineArgs sets `cache_config.sliding_window` only
    where every layer slides (`layer_types is None or all(lt == "sliding_attention" for lt in layer_types)`,
    vllm/engine/arg_utils.py:2083-2087), so it is None, and the full layers, which pass no per-layer window
    (gemma2.py), hold None; the sliding layers the configuration's 4096. Each kind walks only its own path:
    the window path (attention_v1.py:956) in the sliding kind, the paged decode (:1110, `self.sliding_window is
    None`) in the full one. Phi3Config's window is None: whatever `layer_types` (not declared) the per-layer
    window is None either way (`sliding_window = None`, then `= config.sliding_window` under a test)."""
    gemma = analyze_in(session, "Gemma2ForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(gemma) if "sliding_window" in t and "attn_metadata" not in t], list(_by_test(gemma))
    lines = {(k["layer_kind"], k["line"]) for k in _kernels(gemma, "attention") if k["file"].endswith("attention_v1.py")}
    # kinds: the first layer (sliding, walked apart), the full layers, the other sliding layers
    assert [kd["differs"].get("self_attn.attn.sliding_window") for kd in gemma.report["layer_kinds"]] == [
        "4096", "None", "4096"]
    assert {(0, 956), (2, 956), (1, 1110)} <= lines and not {(1, 956), (0, 1110), (2, 1110)} & lines, sorted(lines)
    phi3 = analyze_in(session, "Phi3ForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(phi3) if t == "self.sliding_window is not None"]
    validate_report(gemma.report)


def test_model_config_resets_and_model_code_that_changes_the_window(session):
    """ModelConfig sets `self.hf_text_config.sliding_window = None` when it is 0 (vllm/config/model.py:765-767) or
    with `disable_sliding_window` (:860-863, False: EngineArgs' default is ModelConfig's, arg_utils.py:545, and
    the tool reads no such option): a window of 0 is not read as 0, one of 4096 is kept. Step3p5's decoder layer
    sets `cache_config.sliding_window = None` before it builds its attention (step3p5.py:426-427): an engine value
    other than None is not said for an object handed through that module."""
    import libcst as cst

    from fusion_analyze.semantics.evaluator import _set_on_the_way
    from fusion_analyze.semantics.runtime_defaults import model_config_keeps
    from fusion_analyze.semantics.scope import Scope

    index = session.index
    assert model_config_keeps(index, "get_sliding_window", "sliding_window", 4096)
    assert model_config_keeps(index, "get_sliding_window", "sliding_window", None)
    assert not model_config_keeps(index, "get_sliding_window", "sliding_window", 0)
    name = cst.Name("cache_config")
    step = Scope(module=index.get("vllm.model_executor.models.step3p5"))
    llama = Scope(module=index.get("vllm.model_executor.models.llama"))
    assert _set_on_the_way(name, step, "cache_config", "sliding_window")
    assert not _set_on_the_way(name, llama, "cache_config", "sliding_window")


_ATTENTION_ATTRS = ("use_direct_call", "kv_sharing_target_layer_name", "attn_type", "forward_includes_kv_cache_update",
                    "sinks", "sliding_window")


def test_transformers_backend_attention_built_with_the_backends_arguments(session, hf):
    """The Transformers backend builds each layer's vLLM attention as `attn_cls(**kwargs)` in
    Base._create_attention_instances (vllm/model_executor/models/transformers/base.py:617-658): the walk reads
    the layer with those keywords, the model instance as `self`. So the platform's selector runs for it
    (AscendAttentionBackend, whose `forward_includes_kv_cache_update`...), `use_direct_call` is NPUPlatform's
    answer, `kv_sharing_target_layer_name` and `attn_type` keep the defaults the backend leaves, `sinks` is not
    passed where the module's interface call has no `s_aux=` (fusers/attention.py `sinks`), and the window is the
    configuration's: none of these tests is left, and the sinks kernel (attention_v1.py:921) is not listed.
    VaultGemma's layers alternate: the backend's loop index is the module's `layer_idx`, so each kind of layer
    holds its own window."""
    for arch in ("SmolLM3ForCausalLM", "Olmo2ForCausalLM"):
        a = analyze_in(session, arch, Options(hf_root=hf))
        left = {t: e for t, e in _by_test(a).items() if any(attr in t for attr in _ATTENTION_ATTRS)
                and "attn_metadata" not in t}
        # (Olmo2Config declares no `sliding_window`: that one waits on the configuration)
        assert set(left) <= ({"self.sliding_window is not None"} if arch.startswith("Olmo2") else set()), (arch, left)
        assert all(e["waits_on"] == "config_field" for e in left.values()), left
        attn = [op for op in a.report["ops"] if op["kind"] == "attention"]
        assert attn and all(op["attrs"]["attention_backend"].get("selector") for op in attn), attn[0]["attrs"]
        assert not [k for k in _kernels(a, "attention") if k["line"] == 921 and k["file"].endswith("attention_v1.py")]
        assert not [e for e in a.report["undecided"] if e["given"] is True], (arch, a.report["undecided"])
    vault = analyze_in(session, "VaultGemmaForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(vault) if t == "self.sliding_window is not None"]
    lines = {(k["layer_kind"], k["line"]) for k in _kernels(vault, "attention") if k["file"].endswith("attention_v1.py")}
    assert (0, 956) in lines and (1, 956) not in lines, sorted(lines)
    # GPTBigCodeConfig declares no `layer_types`: the window waits on it
    e = _by_test(analyze_in(session, "GPTBigCodeForCausalLM", Options(hf_root=hf)))["self.sliding_window is not None"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "not given: layer_types" in e["why"], e
    validate_report(vault.report)


def test_speculative_tokens_and_a_submodules_bias(session, hf):
    """MambaMixer2's `self.num_spec = vllm_config.num_speculative_tokens` (vllm/model_executor/layers/mamba/
    mamba_mixer2.py:541): VllmConfig's property (vllm/config/vllm.py:613) run on the deployment's objects, no
    speculative configuration and no diffusion configuration (EngineArgs' `create_diffusion_config` returns None
    for its None default, arg_utils.py:2007), is 0, so `if self.num_spec > 0:` (:1019) is decided. That test sits
    under `if is_mamba_cache_all:` (:1018), false on every deployment (start-up code sets `mamba_cache_mode` only to
    "none" or "align"): neither side (:1021-:1039) is walked, with or without --speculative-config. MambaMixer's
    `self.dt_proj.bias is not None` (mamba_mixer.py:486): dt_proj is a ColumnParallelLinear built with
    `bias=True`, which on Ascend is AscendColumnParallelLinear, whose __init__ sets `self.bias = Parameter(...)`
    (vllm_ascend/ops/linear.py) under `if bias:`: never None."""
    def lines(a):
        return sorted({op["line"] for op in a.report["ops"] if op["file"].endswith("mamba_mixer2.py")
                       and 1015 < op["line"] < 1045})

    mamba2 = analyze_in(session, "Mamba2ForCausalLM", Options(hf_root=hf))
    assert "self.num_spec > 0" not in _by_test(mamba2)
    assert lines(mamba2) == [], lines(mamba2)
    assert not [t for t in _by_test(mamba2) if "is_mamba_cache_all" in t or "mamba_cache_mode" in t]
    spec = analyze_in(session, "Mamba2ForCausalLM", Options(
        hf_root=hf, speculative_config='{"method": "mtp", "num_speculative_tokens": 2}'))
    assert "self.num_spec > 0" not in _by_test(spec) and lines(spec) == [], lines(spec)
    mamba = analyze_in(session, "MambaForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(mamba) if "dt_proj" in t]
    assert not [c for c in _conditions(mamba) if "dt_proj" in c]
    validate_report(mamba2.report)


# -- the MoE runner's tests (vllm_ascend/ops/fused_moe/fused_moe.py, moe_mlp.py, router/fused_topk_router.py) -----
_MOE_TESTS = ("is_sequence_parallel", "quant_method", "_should_reduce_routed_before_combine",
              "_get_shared_expert_parallel_mode", "is_fused_supported")


_FUSED_MOE = "vllm_ascend/ops/fused_moe/fused_moe.py"


def _moe_kernels(a) -> dict:
    """(name, file, line) -> condition of the kernels of the MoE layer and its parts."""
    return {(k["name"], k["file"], k["line"]): k.get("condition") for op in a.report["ops"]
            if op["kind"] in ("moe", "moe_gating", "moe_experts", "moe_join") for k in op.get("kernels") or ()}


def _moe_open(a) -> list:
    return [e for e in a.report["undecided"] if any(t in e["test"] for t in _MOE_TESTS)]


@pytest.mark.parametrize("arch, preset, shared", [("DeepseekV3ForCausalLM", "DeepSeek-V3", True),
                                                   ("Qwen3MoeForCausalLM", "Qwen3-30B-A3B", False)])
def test_moe_runner_tests_decided_at_vllm_defaults(session, hf, arch, preset, shared):
    """At vLLM's defaults (no expert parallelism) the MoE runner's tests are decided from the trees:
    - `self.moe_config.is_sequence_parallel` (fused_moe.py:353): FusedMoEConfig's property (vllm/model_executor/
      layers/fused_moe/config.py:1422) reads `moe_parallel_config`, built by FusedMoEParallelConfig.make (:1235,
      `sp_size=sp_size_`), whose property is `self.sp_size > 1` (:1057); `sp_size = tp_size_ if
      is_sequence_parallel else 1` (layer.py:55), the model passing `use_sequence_parallel_moe`, which needs EP
      (vllm_ascend/patch/platform/patch_parallel_config.py:7): 1, not sequence parallel;
    - `quant_method is None` / `quant_method.supports_fused_activation(...)` (moe_comm_method.py:170, moe_mlp.py:48):
      unquantised, the routed experts install AscendUnquantizedFusedMoEMethod (routed_experts.py:423), whose
      `apply` passes `quant_method=self` (:174) and has no fused form (`return False`, :100): `npu_swiglu` runs;
    - `_get_shared_expert_parallel_mode()` (fused_moe.py:290): TENSOR_PARALLEL, from AscendSharedExperts.
      parallel_mode (shared_experts.py:208: not sequence parallel, `enable_shared_expert_dp` False) where the model
      hands shared experts (DeepSeek-V3), else from `ascend_shared_experts is None` (Qwen3-30B-A3B: no
      `shared_expert_intermediate_size`, vllm/model_executor/models/qwen3_moe.py:175-197);
    - `_should_reduce_routed_before_combine()` (:305): not SHARED_EXPERT_DATA_PARALLEL_ONLY, no
      `routed_output_transform`: False, so the routed output is not reduced before the combine (:340) and the
      final all-reduce (:354) runs under no test;
    - `is_fused_supported(hidden_states)` (router/fused_topk_router.py:122): the router's top_k and groups with
      the routed hidden states' width, `moe_config.hidden_dim` (DeepSeek-V3: 8 of 256 experts in 8 groups, 4
      picked, 7168 wide; Qwen3-30B-A3B: 8, no groups, 2048): True, the fused `moe_gating_top_k` runs."""
    a = analyze_in(session, arch, Options(config=preset, hf_root=hf))
    assert not _moe_open(a), _moe_open(a)
    printed = [c for c in _moe_kernels(a).values() if c]
    assert not [c for c in printed if any(t in c for t in _MOE_TESTS)], printed
    kernels = _moe_kernels(a)
    assert kernels[("torch.ops.vllm.maybe_all_reduce_tensor_model_parallel", _FUSED_MOE, 354)] is None
    assert ("torch.ops.vllm.maybe_all_reduce_tensor_model_parallel", _FUSED_MOE, 340) not in kernels
    assert kernels[("torch.ops._C_ascend.moe_gating_top_k", "vllm_ascend/device/device_op.py", 272)] is None
    assert kernels[("torch_npu.npu_swiglu", "vllm_ascend/ops/fused_moe/moe_mlp.py", 95)] is None
    # what is left of the shared expert's reduction is the runtime output alone (`shared_output is None`)
    assert kernels[("torch.ops.vllm.maybe_all_reduce_shared_expert", _FUSED_MOE, 332)] == "not (shared_output is None)"
    assert any(op["path"].endswith("shared_experts.down_proj") for op in a.report["ops"]) is shared
    assert not [e for e in a.report["undecided"] if e["given"] and e["waits_on"] == "engine_argument"]
    validate_report(a.report)


def test_a_latent_moe_reduces_its_routed_output_by_the_tp_size(session, hf, tmp_path):
    """A latent MoE (NemotronH with `moe_latent_size`) hands the runner `routed_output_transform=self.
    fc2_latent_proj` (vllm/model_executor/models/nemotron_h.py:242): `_should_reduce_routed_before_combine()`
    (vllm_ascend/ops/fused_moe/fused_moe.py:311-313) is then `self.moe_config.tp_size > 1 or ep_size > 1`, the
    MoE configuration's TP size that FusedMoEParallelConfig.make computes with its static method
    flatten_tp_across_dp_and_pcp (config.py:1121, unpacked at :1221). Without --tensor-parallel-size the test waits
    on it; at TP 4 the routed output is reduced before the transform (:340) and the final all-reduce (:354) is not
    run; at TP 1 the reverse."""
    cfg = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "moe_latent_size": 1024,
           "hybrid_override_pattern": "M*E", "num_hidden_layers": 3, "hidden_size": 2688, "n_routed_experts": 128,
           "num_experts_per_tok": 6, "moe_intermediate_size": 1856, "n_shared_experts": 1,
           "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "topk_group": 1, "num_attention_heads": 32,
           "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072, "intermediate_size": 1856,
           "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8,
           "mlp_hidden_act": "relu2"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    reduce_routed = ("torch.ops.vllm.maybe_all_reduce_tensor_model_parallel", _FUSED_MOE, 340)
    reduce_final = ("torch.ops.vllm.maybe_all_reduce_tensor_model_parallel", _FUSED_MOE, 354)
    a = analyze_in(session, "NemotronHForCausalLM", Options(config=str(path), hf_root=hf))
    e = _by_test(a)["self._should_reduce_routed_before_combine()"]
    assert (e["waits_on"], e["given"]) == ("tp_size", False), e
    assert "tp_size" in e["why"], e
    kernels = _moe_kernels(a)
    assert kernels[reduce_routed] == "self._should_reduce_routed_before_combine()"
    assert kernels[reduce_final] == "not self._should_reduce_routed_before_combine()"
    tp4 = analyze_in(session, "NemotronHForCausalLM", Options(config=str(path), hf_root=hf, tp=4))
    kernels = _moe_kernels(tp4)
    assert kernels[reduce_routed] is None and reduce_final not in kernels
    assert not _moe_open(tp4), _moe_open(tp4)
    tp1 = analyze_in(session, "NemotronHForCausalLM", Options(config=str(path), hf_root=hf, tp=1))
    kernels = _moe_kernels(tp1)
    assert reduce_routed not in kernels and kernels[reduce_final] is None
    assert not _moe_open(tp1), _moe_open(tp1)
    validate_report(tp4.report)


def test_shared_expert_data_parallel_is_not_taken_at_the_users_word(session, hf):
    """`enable_shared_expert_dp` given true is gated when vllm-ascend builds its configuration: `self.
    enable_shared_expert_dp = (self.enable_shared_expert_dp and <EP> and <TP > 1>)` (vllm_ascend/ascend_config.py:
    747): the shared experts' layout is not taken as SHARED_EXPERT_DATA_PARALLEL_ONLY (which would reduce the
    routed output early and skip the final all-reduce) on the user's word; the runner's tests stay open."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(config="DeepSeek-V3", hf_root=hf, tp=4,
                                                            additional_config='{"enable_shared_expert_dp": true}'))
    kernels = _moe_kernels(a)
    routed = kernels.get(("torch.ops.vllm.maybe_all_reduce_tensor_model_parallel", _FUSED_MOE, 340), "absent")
    assert routed is not None  # not unconditional
    assert ("torch.ops.vllm.maybe_all_reduce_tensor_model_parallel", _FUSED_MOE, 354) in kernels
    assert "self._should_reduce_routed_before_combine()" in _by_test(a)


def test_moe_runner_tests_on_fields_the_class_defaults_leave_out_wait_on_them(session, hf):
    """With Qwen3MoeConfig's defaults alone, `shared_expert_intermediate_size` (read with `getattr(config, ...,
    0)`, vllm/model_executor/models/qwen3_moe.py:175) is not declared: whether the layer has shared experts, and so
    `_get_shared_expert_parallel_mode()` and `_should_reduce_routed_before_combine()`, wait on that field (the
    code of the method's undecided test, read back to the model's construction), not on the tool."""
    a = analyze_in(session, "Qwen3MoeForCausalLM", Options(hf_root=hf))
    by = _by_test(a)
    for test in ("self._should_reduce_routed_before_combine()", "not self._should_reduce_routed_before_combine()"):
        e = by[test]
        assert (e["waits_on"], e["given"]) == ("config_field", False), e
        assert "shared_expert_intermediate_size" in e["why"], e
    assert not [e for e in _moe_open(a) if e["given"]], _moe_open(a)


@pytest.mark.parametrize("given", [True, False], ids=["config", "class-defaults"])
def test_longcat_config_rebuilt_from_the_hf_config(session, hf, given):
    """LongCat-Flash builds its own configuration from the model's: `config = FlashConfig(**vllm_config.
    model_config.hf_config.__dict__)` (vllm/model_executor/models/longcat_flash.py:487), and hands its attention
    `q_lora_rank=(config.q_lora_rank if hasattr(config, "q_lora_rank") else None)` (:381-383) and
    `qk_rope_head_dim=config.qk_rope_head_dim`. The fields carry over (the checkpoint's, or LongcatFlashConfig's
    defaults), so both are decided as DeepSeek-V3's are: the MLA impl runs the fused q_a path and the prefill
    KV write with rope (vllm_ascend/attention/mla_v1.py exec_kv_prefill, npu_kv_rmsnorm_rope_cache), not the
    no-rope branch (kv_a_layernorm + index_copy_)."""
    config = str(ROOT / "fixtures" / "configs" / "longcat-flash.json") if given else None
    a = analyze_in(session, "LongcatFlashForCausalLM", Options(config=config, hf_root=hf))
    tests = list(_by_test(a))
    assert not [t for t in tests if "q_lora_rank" in t or "qk_rope_head_dim" in t or "fused_qkv_a_proj" in t], tests
    mla = [op for op in a.report["ops"] if op["file"].endswith("attention/mla_v1.py")]
    prefill = [op for op in mla if (op["condition"] or "").startswith("has_prefill")]
    assert any(op["name"] == "npu_kv_rmsnorm_rope_cache" for op in prefill), [op["name"] for op in prefill]
    assert not [op for op in mla if op["name"] == "kv_a_layernorm" or "index_copy_" in op["name"]]
    assert not [c for c in _conditions(a) if "q_lora_rank" in c]
    validate_report(a.report)


# -- tests on the configuration a model gave, decided through general mechanisms (with the class's defaults,
# as `all` analyses the registry; a fixture config.json where the class leaves the decisive field open) ---------
_CONFIGS = ROOT / "fixtures" / "configs"


def _ops_at(a, file: str, line: int) -> list:
    return [op for op in a.report["ops"] if op["file"] == file and op["line"] == line]


def test_opt_final_layer_norm_is_an_object_of_a_class_outside_the_trees(session, hf):
    """OPTDecoder builds `self.final_layer_norm = nn.LayerNorm(...)` when `config.do_layer_norm_before and not
    config._remove_final_layer_norm` (vllm/model_executor/models/opt.py:247-251; OPTConfig: True, False), else
    None: torch.nn.LayerNorm is a layer class outside the trees that leaf_ops.yaml lists, so the object is never
    None and `if self.final_layer_norm is not None:` (:289) holds: the final norm (:290) runs under no test."""
    a = analyze_in(session, "OPTForCausalLM", Options(hf_root=hf))
    assert "self.final_layer_norm is not None" not in _by_test(a)
    final = _ops_at(a, "vllm/model_executor/models/opt.py", 290)
    assert [(op["layer_class"], op["condition"]) for op in final] == [("LayerNorm", None)], final
    validate_report(a.report)


def test_minicpm3_experts_set_in_a_helper_method(session, hf):
    """MiniCPMDecoderLayer's __init__ calls `self._init_ffn_block()`, which sets `self.num_experts =
    getattr(self.config, "num_experts", 0)` and builds the MLP under `if self.num_experts == 0:`
    (vllm/model_executor/models/minicpm.py:352-353). The attribute is read in that method: MiniCPM3Config does
    not declare num_experts, so with its defaults alone the test waits on that field (a checkpoint may give it);
    a whole config.json without it (fixtures/configs/minicpm3.json) makes it 0: MiniCPMMLP, no MoE op."""
    e = _by_test(analyze_in(session, "MiniCPM3ForCausalLM", Options(hf_root=hf)))["self.num_experts == 0"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "num_experts" in e["why"], e
    a = analyze_in(session, "MiniCPM3ForCausalLM", Options(config=str(_CONFIGS / "minicpm3.json"), hf_root=hf))
    assert not [t for t in _by_test(a) if "num_experts" in t]
    assert not [c for c in _conditions(a) if "num_experts" in c]
    mlp = {op["layer_class"] for op in a.report["ops"] if op["path"].startswith("model.layers.mlp")}
    assert {"MergedColumnParallelLinear", "RowParallelLinear"} <= mlp, mlp
    assert not [op for op in a.report["ops"] if op["kind"] == "moe"]
    validate_report(a.report)


def test_gpt_oss_rotary_kernels_read_on_its_instance(session, hf):
    """AscendYaRNRotaryEmbedding.forward_oot returns `AscendRotaryEmbedding.forward_oot(self, ...)`
    (vllm_ascend/ops/rotary_embedding.py): that method runs on the YaRN instance, whose `self.use_mtp =
    vllm_config.speculative_config and ...` (:360) is falsy without a speculative configuration, so the MTP
    all-gather (:287-289) is not listed, and its arguments bind after `self`: the kernels are Llama's."""
    a = analyze_in(session, "GptOssForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(a) if "use_mtp" in t]
    rope = [op for op in a.report["ops"] if op["path"].endswith("self_attn.rotary_emb") or op["path"].endswith("attn.rotary_emb")]
    assert rope, [op["path"] for op in a.report["ops"]][:40]
    names = {(k["name"], k["line"]) for op in rope for k in op["kernels"]}
    assert ("torch.ops.vllm.all_gather", 289) not in names and ("torch.ops.vllm.npu_rotary_embedding", 321) in names
    llama = analyze_in(session, "LlamaForCausalLM", Options(hf_root=hf))
    assert names == {(k["name"], k["line"]) for op in llama.report["ops"] if op["path"].endswith("rotary_emb")
                     for k in op["kernels"]}
    validate_report(a.report)


def test_olmo_hybrid_rope_from_the_configuration(session, hf):
    """vLLM's OlmoHybridConfig sets `self.rope_parameters = rope_parameters` (None by default) after
    `super().__init__(**kwargs)` (vllm/transformers_utils/configs/olmo_hybrid.py:215, :280), so transformers'
    base does not standardize it and vLLM's patch_rope_parameters does only from a rope_theta: with the class's
    defaults `self._use_rope` (vllm/model_executor/models/olmo_hybrid.py:142) waits on rope_parameters; the
    fixture's `rope_parameters` (rope_theta 500000) makes it True: the rotary embedding runs under no test."""
    e = _by_test(analyze_in(session, "OlmoHybridForCausalLM", Options(hf_root=hf)))["self._use_rope"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "rope_parameters" in e["why"], e
    a = analyze_in(session, "OlmoHybridForCausalLM", Options(config=str(_CONFIGS / "olmo-hybrid.json"), hf_root=hf))
    assert "self._use_rope" not in _by_test(a)
    rope = _ops_at(a, "vllm/model_executor/models/olmo_hybrid.py", 186)
    assert rope and all("_use_rope" not in (op["condition"] or "") for op in rope), rope
    validate_report(a.report)


def test_apertus_xielu_cuda_path_not_on_ascend(session, hf, real_tree):
    """XIELU.forward_native runs its CUDA extension `if self._xielu_cuda_obj is not None and input.is_cuda:`
    (vllm/model_executor/layers/activation.py:778). No tensor of an Ascend host is a CUDA tensor (leaf_ops.yaml
    platform.tensor_attributes): the Python version runs, under no test. On CUDA the object is set only where
    `import xielu.ops` succeeds in the `try` around it (:715-718): the test waits on whether that package is
    installed on the deployment (optional_package), not on the tool."""
    from fusion_analyze.analysis.session import Session

    a = analyze_in(session, "ApertusForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(a) if "xielu" in t]
    act = [op for op in a.report["ops"] if op["file"] == "vllm/model_executor/layers/activation.py" and 740 <= op["line"] <= 790]
    assert act and all("xielu" not in (op["condition"] or "") and "is_cuda" not in (op["condition"] or "") for op in act)
    cuda = Session.open(str(real_tree("vllm==0.30.0")), None, backend="cuda")
    e = _by_test(analyze_in(cuda, "ApertusForCausalLM", Options(hf_root=hf)))["self._xielu_cuda_obj is not None"]
    assert (e["waits_on"], e["given"]) == ("optional_package", False) and "import xielu.ops" in e["why"], e
    validate_report(a.report)


def test_afmoe_layer_types_and_rope(session, hf):
    """vLLM's AfmoeConfig builds `rope_parameters = {"rope_type": "default", "rope_theta": rope_theta}`
    (vllm/transformers_utils/configs/afmoe.py:60-62), rope_theta read from kwargs: its rope_type is known, so
    get_rope builds the default rotary embedding and FoPE / M-RoPE are not listed. Its `layer_types` is None
    by default: `config.layer_types[layer_idx]` (vllm/model_executor/models/afmoe.py:192) has no value to read,
    so whether a layer attends locally waits on that field. The fixture gives it (every fourth layer full):
    the layers fall into kinds, each deciding `self.is_local_attention`, its window and its rotary embedding."""
    a = analyze_in(session, "AfmoeForCausalLM", Options(hf_root=hf))
    by = _by_test(a)
    assert not [t for t in by if any(k in t for k in ("fope", "mrope", "use_mtp"))], list(by)
    for test in ("self.is_local_attention", "self.sliding_window is not None"):
        assert (by[test]["waits_on"], by[test]["given"]) == ("config_field", False), by[test]
        assert "layer_types" in by[test]["why"]
    c = analyze_in(session, "AfmoeForCausalLM", Options(config=str(_CONFIGS / "afmoe.json"), hf_root=hf))
    assert not [t for t in _by_test(c) if "is_local_attention" in t or "sliding_window" in t or "rotary" in t]
    kinds = c.report["layer_kinds"]
    local = {k["kind"]: k["differs"].get("self_attn.is_local_attention") for k in kinds}
    assert set(local.values()) == {"True", "False"}, kinds
    full = [k for k in kinds if k["differs"].get("self_attn.is_local_attention") == "False"]
    assert [k["layers"] for k in full] == [list(range(3, 32, 4))]
    rope = {op["attrs"].get("layer_kind") for op in c.report["ops"] if op["path"].endswith("self_attn.rotary_emb")}
    assert rope == {k["kind"] for k in kinds if k["differs"].get("self_attn.is_local_attention") == "True"}
    validate_report(c.report)


def test_gemma4_text_config_helper_reads_the_configuration(session, hf):
    """Gemma4Model reads `config = _get_text_config(hf_config)`, which returns `config.text_config` where the
    configuration has one, else the configuration (vllm/model_executor/models/gemma4.py:213-222): for
    Gemma4TextConfig (no text_config of its own) either is the same configuration, so its defaults decide:
    `hidden_size_per_layer_input` 256 builds the per-layer inputs (:1013, :684: gate, projection and norm under
    no test), `num_kv_shared_layers` 0 shares no layer's KV (:417-420), `hidden_activation` picks GeluAndMul; its
    `layer_types` (computed in __post_init__ through `(last_layer_type := self.layer_types[-1])`) gives a
    sliding and a full-attention kind of layer."""
    a = analyze_in(session, "Gemma4ForCausalLM", Options(hf_root=hf))
    tests = ("hidden_activation", "hidden_size_per_layer_input", "embed_tokens_per_layer", "is_kv_shared_layer",
             "per_layer_input_gate", "per_layer_model_projection")
    assert not [t for t in _by_test(a) if any(k in t for k in tests)], list(_by_test(a))
    assert not [c for c in _conditions(a) if any(k in c for k in tests)]
    gate = [op for op in a.report["ops"] if op["path"] == "model.layers.per_layer_input_gate"]
    assert gate and all(op["condition"] is None for op in gate)
    assert {op["layer_class"] for op in a.report["ops"] if op["path"] == "model.layers.mlp.act_fn"} == {"GeluAndMul"}
    assert not _ops_at(a, "vllm/model_executor/models/gemma4.py", 543)  # the KV-shared layer's path
    assert [k["differs"].get("self_attn.is_sliding") for k in a.report["layer_kinds"]] == ["True", "False"]
    validate_report(a.report)


@pytest.mark.parametrize("arch", ["AfmoeForCausalLM", "Gemma4ForCausalLM", "GptOssForCausalLM", "OlmoHybridForCausalLM",
                                  "OPTForCausalLM", "MiniCPM3ForCausalLM", "ApertusForCausalLM"])
def test_nothing_given_left_undecided(session, hf, arch):
    """With the configuration class's defaults (as `all` analyses the registry), no undecided test of these
    models waits on something given."""
    a = analyze_in(session, arch, Options(hf_root=hf))
    assert not [e for e in a.report["undecided"] if e["given"] is True], a.report["undecided"]


# the SFA (sparse MLA) implementation's flags and its lightning indexer's (vllm_ascend/attention/sfa_v1.py,
# indexer.py) that GLM-5's attention reads
_SFA_FLAGS = ("runtime_has_indexer", "enable_sparse_li_c4", "enable_sparse_li_c8", "enable_sparse_li_quant",
              "enable_sparse_sfa_c8", "enable_sparse_sfa_turboquant", "has_indexer", "skip_topk",
              "topk_indices_buffer", "use_index_cache", "uses_packed_sfa_main_cache")


def _on_sfa_flags(texts) -> list[str]:
    return [t for t in texts if any(f"self.{n}" in t for n in _SFA_FLAGS)]


@pytest.fixture(scope="module")
def glm_dsa(session, hf):
    return analyze_in(session, "GlmMoeDsaForCausalLM",
                      Options(config=str(ROOT / "fixtures" / "configs" / "glm-moe-dsa.json"), hf_root=hf))


def test_glm_dsa_sparse_attention_flags_decided_from_its_config(glm_dsa):
    """GLM-5 (GlmMoeDsaForCausalLM) with its config.json, at vLLM's and vllm-ascend's defaults:
    - the packed SFA main cache: `self.enable_sparse_sfa_c8 = ascend_config.enable_sparse_sfa_c8`
      (vllm_ascend/attention/sfa_v1.py:880), a field AscendConfig.derive_and_validate derives as
      `vllm_config.cache_config.cache_dtype in ["fp8", "int8"] and use_sparse_sfa` (vllm_ascend/ascend_config.py:920;
      TurboQuant :919). The cache dtype is `resolve_kv_cache_dtype_string(self.kv_cache_dtype, model_config)`
      (vllm/engine/arg_utils.py:2090), EngineArgs' `kv_cache_dtype = CacheConfig.cache_dtype` ("auto", :459),
      kept "auto" where the checkpoint has no quantization_config (vllm/utils/torch_utils.py:513-525); the one
      start-up setter runs only on "bfloat16" (vllm/model_executor/models/config.py:38). The derivation gives
      the declared default False, so `uses_packed_sfa_main_cache` (sfa_v1.py:903) is False too.
    - the indexer's C8/C4 cache: `get_ascend_config().is_sparse_li_c8_layer(prefix)` (indexer.py:195), whose
      `_is_sparse_li_layer` returns False first when `enable_sparse_li_c8` is (ascend_config.py:1234), derived from
      `attention_config.indexer_kv_dtype` "auto" (:921-922): `enable_sparse_li_quant` (indexer.py:233) is False.
    - top-k reuse: the layer's `_skip_topk = should_reuse_topk(config, layer_id)` (vllm_ascend/patch/worker/
      patch_deepseek_v2.py:212; utils.py:220-227: `max(layer_id - 2 + 1, 0) % 1 != 0`, no pattern given) is False
      for every layer, so the impl's `skip_topk` property (sfa_v1.py:906, read through its getter, not its setter)
      is False; `use_index_cache = self.skip_topk or index_cache_enabled` (:852) is False: `_get_config_bool`
      loops over (hf_config, hf_text_config) and neither has `use_index_cache` (:342-346), nor `indexer_types`
      "shared" (:335); `has_indexer` (:855) and `runtime_has_indexer` (:917) are True.
    - `self.topk_indices_buffer = kwargs.get("topk_indices_buffer")` (:820): MLAAttention fills
      `extra_impl_args["topk_indices_buffer"] = topk_indices_buffer` under `if use_sparse:` before passing them on
      (vllm/model_executor/layers/attention/mla_attention.py:550), the model's `torch.empty(...)`: never None.
    So the plain KV write and sparse attention run, and the indexer is not quantised."""
    by = _by_test(glm_dsa)
    assert not _on_sfa_flags(by), _on_sfa_flags(by)
    assert not _on_sfa_flags(_conditions(glm_dsa) + _kernel_conditions(glm_dsa))
    assert not [e for e in glm_dsa.report["undecided"] if e["given"] is True], \
        [e["test"] for e in glm_dsa.report["undecided"] if e["given"] is True]
    ops = glm_dsa.report["ops"]
    impl = {op["name"] for op in ops if op["path"].endswith("mla_attn.impl")}
    assert {"npu_kv_rmsnorm_rope_cache", "npu_sparse_flash_attention"} <= impl, sorted(impl)
    assert "npu_kv_quant_sparse_flash_attention" not in impl  # (the TurboQuant path)
    assert not [op for op in ops if ".turboquant" in op["path"]]
    assert not [op for op in ops if "topk_indices" in op["name"]]  # no index cache copy, no reuse of skipped layers
    indexer = {op["name"] for op in ops if op["path"].endswith("indexer.impl")}
    assert "npu_lightning_indexer" in indexer, sorted(indexer)
    assert not indexer & {"npu_dynamic_quant", "npu_dynamic_mx_quant"}, sorted(indexer)  # no C8 / C4 indexer cache
    validate_report(glm_dsa.report)


def test_glm_dsa_sparse_attention_flags_wait_on_what_the_class_defaults_leave_out(session, hf):
    """With GlmMoeDsaConfig's defaults alone (as `all` analyses the registry), the same flags are not decided,
    and each says on what, from the code it is computed from: the packed cache on the checkpoint's quantisation
    section (the cache dtype "auto" is resolved from `quantization_config`, vllm/utils/torch_utils.py:518), the
    indexer and top-k reuse on `index_topk_pattern` (`getattr(config, "index_topk_pattern", None)`,
    vllm_ascend/utils.py:222), which the class does not declare (a checkpoint may carry it). The indexer's own
    C8/C4 flags need nothing of the model: decided. None of them is the tool's debt."""
    a = analyze_in(session, "GlmMoeDsaForCausalLM", Options(hf_root=hf))
    by = _by_test(a)
    flags = {t: e for t, e in by.items() if _on_sfa_flags([t])}
    assert flags and all(e["given"] is False for e in flags.values()), flags
    for name in ("enable_sparse_sfa_c8", "enable_sparse_sfa_turboquant", "uses_packed_sfa_main_cache"):
        e = by[f"self.{name}"]
        assert e["waits_on"] == "quantization" and "quantization_config" in e["why"], e
    for name in ("skip_topk", "has_indexer", "use_index_cache", "runtime_has_indexer"):
        e = by[f"self.{name}"]
        assert e["waits_on"] == "config_field" and "index_topk_pattern" in e["why"], e
    assert not [t for t in by if "self.enable_sparse_li" in t]
    assert not [e["test"] for e in a.report["undecided"] if e["given"] is True]
    validate_report(a.report)


def test_glm_dsa_stated_kv_cache_dtype_is_not_taken_for_auto(session, hf):
    """`--kv-cache-dtype fp8` is what EngineArgs' `self.kv_cache_dtype` holds (resolve_kv_cache_dtype_string
    returns it as it is, vllm/utils/torch_utils.py:513): the derivation of enable_sparse_sfa_c8 no longer gives
    the default, so the packed-cache flag is not decided False (the evaluator keeps only a default every
    derivation gives again)."""
    a = analyze_in(session, "GlmMoeDsaForCausalLM",
                   Options(config=str(ROOT / "fixtures" / "configs" / "glm-moe-dsa.json"), hf_root=hf,
                           kv_cache_dtype="fp8"))
    assert "self.enable_sparse_sfa_c8" in _by_test(a) or any("enable_sparse_sfa_c8" in c for c in _conditions(a))


def test_kimi_linear_mla_flags_from_a_copied_configuration(session, hf):
    """Kimi-Linear's MLA layers: vllm-ascend's AscendKimiMLAAttention hands the upstream layer `config=
    upstream_config`, a `copy(config)` with `upstream_config.mla_use_output_gate = use_output_gate` set
    (vllm_ascend/models/kimi_k3.py:323-324), `use_output_gate=bool(config.mla_use_output_gate)` (:457), False
    at KimiLinearConfig's default (vllm/transformers_utils/configs/kimi_linear.py:48). The upstream layer reads
    it back (vllm/models/kimi_k3/amd/linear.py:411) and builds no g_proj, so `getattr(self, "g_proj", None)`
    (:438) is None and the impl's `self.use_output_gate = self.g_proj is not None` is False; `qk_rope_head_dim`
    is the config.json's 64, so `self.qk_rope_head_dim > 0` (vllm_ascend/attention/mla_v1.py) is decided.
    Without a config.json, KimiLinearConfig's `qk_rope_head_dim` defaults to None, which `> 0` cannot compare:
    the test waits on that field, not on the tool."""
    a = analyze_in(session, "KimiLinearForCausalLM",
                   Options(config=str(ROOT / "fixtures" / "configs" / "kimi-linear-kda-mla.json"), hf_root=hf))
    by = _by_test(a)
    assert not [t for t in by if "use_output_gate" in t or "qk_rope_head_dim" in t], list(by)
    assert not [c for c in _conditions(a) + _kernel_conditions(a) if "use_output_gate" in c or "qk_rope_head_dim" in c]
    assert not [op for op in a.report["ops"] if op["name"] == "g_proj"]
    defaults = analyze_in(session, "KimiLinearForCausalLM", Options(hf_root=hf))
    e = _by_test(defaults)["self.qk_rope_head_dim > 0"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "qk_rope_head_dim" in e["why"], e
    assert not [t for t in _by_test(defaults) if "use_output_gate" in t]
    assert not [e["test"] for e in defaults.report["undecided"] if e["given"] is True]
    validate_report(a.report)


def test_axk1_sparse_layers_decided_per_layer(session, hf):
    """AXK1's decoder layer: `self.is_layer_sparse = self._is_layer_sparse()` (vllm/model_executor/models/
    AXK1.py:625), a method that asserts `moe_layer_freq is not None` and returns `n_routed_experts is not None
    and layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0` (:648-654): run per layer (an
    assert is a path that raises), the MoE and the dense layers fall into their own kinds."""
    a = analyze_in(session, "AXK1ForCausalLM", Options(hf_root=hf))
    assert not [t for t in _by_test(a) if "is_layer_sparse" in t]
    assert not [c for c in _conditions(a) if "is_layer_sparse" in c]
    assert not [e["test"] for e in a.report["undecided"] if e["given"] is True]
    validate_report(a.report)


# -- routers, windows, sinks and per-layer configurations (GraniteSWA, NemotronH, Zamba2, MiMo-V2-Flash, DeepSeek-V2)
_RTR_CONFIGS = ROOT / "fixtures" / "configs"


def _given_left(a) -> list:
    return [e for e in a.report["undecided"] if e["given"] is True]


@pytest.mark.parametrize("arch, layers", [("GraniteSWAForCausalLM", 24), ("GraniteMoeSWAForCausalLM", 32)])
def test_granite_swa_window_from_an_unpacked_helper_item(session, hf, arch, layers):
    """GraniteAttention unpacks `sliding_window, rope_theta, has_sink = granite_layer_attn_params(config,
    extract_layer_index(prefix))` (vllm/model_executor/models/granite.py:199) and hands the window to its Attention
    (`per_layer_sliding_window=sliding_window`, :225): item 0 of the helper's return, `config.sliding_window if
    layer_types[layer_idx] == "sliding_attention" else None` (:89-93), read per layer. GraniteSWAConfig computes
    `layer_types` (every fourth layer full, configuration_granite_swa.py __post_init__): the layers fall into a
    full kind (window None: the paged decode, attention_v1.py:1110) and a sliding kind (128: the window path,
    :956), and `self.sliding_window is not None` of the implementation is decided in each."""
    a = analyze_in(session, arch, Options(hf_root=hf))
    kinds = a.report["layer_kinds"]
    assert [k["differs"].get("self_attn.attn.sliding_window") for k in kinds] == ["None", "128"], kinds
    assert kinds[0]["layers"] == list(range(0, layers, 4)) and sum(k["count"] for k in kinds) == layers
    assert "self.sliding_window is not None" not in _by_test(a)
    lines = {(k["layer_kind"], k["line"]) for k in _kernels(a, "attention") if k["file"].endswith("attention_v1.py")}
    assert (1, 956) in lines and (0, 956) not in lines and (0, 1110) in lines and (1, 1110) not in lines, sorted(lines)
    assert not _given_left(a), _given_left(a)
    validate_report(a.report)


def test_nemotron_h_layer_configuration_getter_the_class_does_not_have(session, hf):
    """NemotronHMoEDecoderLayer builds its MoE with `layer_config = get_layer_config(layer_idx) if get_layer_config
    else config`, `get_layer_config = getattr(config, "get_nemotron_h_config_for_layer", None)` (vllm/model_executor/
    models/nemotron_h.py:343-344). NemotronHConfig (a direct PreTrainedConfig subclass) gives no such attribute: what
    getattr finds is a key of config.json, data that calling raises on, or None, so a deployment that runs passes
    the configuration itself, and `config.n_shared_experts is None or config.n_shared_experts == 0` (:174) is
    decided with its default 1: the shared experts are built under no test."""
    a = analyze_in(session, "NemotronHForCausalLM", Options(hf_root=hf))
    assert not [c for c in _conditions(a) if "n_shared_experts" in c]
    shared = [op for op in a.report["ops"] if ".shared_experts" in op["path"]]
    assert shared and all(op["condition"] is None for op in shared), [(op["path"], op["condition"]) for op in shared]
    assert not _given_left(a), _given_left(a)


def test_zamba2_shared_attention_list_filled_in_a_loop(session, hf):
    """Zamba2Attention fills `self.dpa_list` in `for block_idx in range(self.num_hybrid_layers)` with an Attention
    where `block_idx % config.num_mem_blocks == bare_block_idx`, else nn.Identity (vllm/model_executor/models/
    zamba2.py:185-196). `num_hybrid_layers` is `len(layer2block_map)`, a comprehension over `enumerate(config.
    hybrid_layer_ids)` (:705-708), which Zamba2Config computes from its layer types (9 hybrid layers), and
    `bare_block_idx` the model's comprehension index over `range(config.num_mem_blocks)` (:711-722): with one
    memory block every index gives 0 == 0, so each element is the Attention and the test is decided."""
    a = analyze_in(session, "Zamba2ForCausalLM", Options(hf_root=hf))
    dpa = [op for op in a.report["ops"] if op["path"].endswith("self_attn.dpa_list")]
    assert dpa and all("block_idx" not in (op["condition"] or "") for op in dpa), [op["condition"] for op in dpa]
    assert not [t for t in _by_test(a) if "num_mem_blocks" in t]
    assert not _given_left(a), _given_left(a)


def test_mimo_v2_flash_sinks_wait_on_the_checkpoints_field(session, hf):
    """MiMoV2Attention passes `sinks=self.attention_sink_bias`, a Parameter `if add_swa_attention_sink_bias else
    None` (vllm/model_executor/models/mimo_v2.py:288-292, :332), the flag `getattr(config,
    "add_swa_attention_sink_bias", False)` (:382): MiMoV2FlashConfig does not declare it, so with its defaults
    the implementation's `self.sinks is not None` waits on that field (a checkpoint gives it), not on the tool;
    the fixture's config.json (which gives it, and the layer pattern and head sizes that choose the backend)
    leaves no such test."""
    a = analyze_in(session, "MiMoV2FlashForCausalLM", Options(hf_root=hf))
    e = _by_test(a)["self.sinks is not None"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "add_swa_attention_sink_bias" in e["why"], e
    assert not _given_left(a), _given_left(a)
    c = analyze_in(session, "MiMoV2FlashForCausalLM", Options(config=str(_RTR_CONFIGS / "mimo-v2-flash.json"),
                                                              hf_root=hf))
    assert not [t for t in _by_test(c) if "sinks" in t]


def test_deepseek_v2_router_top_k_the_class_leaves_none(session, hf):
    """vllm-ascend's router decides the fused gating with `is_fused_supported(hidden_states)`
    (vllm_ascend/ops/fused_moe/router/fused_topk_router.py:122-136), comparing `self.top_k` with the routed width.
    DeepseekV2Config leaves `num_experts_per_tok` None, which the model hands as top_k (vllm/model_executor/models/
    deepseek_v2.py): `None > 4096.0` raises, so what runs has the checkpoint's value and the test waits on that
    field. DeepSeek-V2-Lite's config.json (6 of 64 experts, one group, 2048 wide) decides it: the fused
    `moe_gating_top_k` (vllm_ascend/device/device_op.py:272) runs under no test."""
    a = analyze_in(session, "DeepseekV2ForCausalLM", Options(hf_root=hf))
    e = _by_test(a)["not self.is_fused_supported(hidden_states)"]
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "num_experts_per_tok" in e["why"], e
    assert not _given_left(a), _given_left(a)
    lite = analyze_in(session, "DeepseekV2ForCausalLM", Options(config=str(_RTR_CONFIGS / "deepseek-v2-lite.json"),
                                                                hf_root=hf))
    assert not [t for t in _by_test(lite) if "is_fused_supported" in t]
    kernels = _moe_kernels(lite)
    assert kernels[("torch.ops._C_ascend.moe_gating_top_k", "vllm_ascend/device/device_op.py", 272)] is None
    validate_report(lite.report)


@pytest.fixture(scope="module")
def hyv4(session, hf):
    return analyze_in(session, "HYV4ForCausalLM", Options(hf_root=hf))


@pytest.fixture(scope="module")
def dsv4(session, hf):
    return analyze_in(session, "DeepseekV4ForCausalLM", Options(hf_root=hf))


# what vllm-ascend's MLA implementation decides from its construction (vllm_ascend/attention/mla_v1.py)
_MLA_IMPL_TESTS = ("support_fp8_attention", "fa_quant_layer", "enable_mlapo", "mlapo_weight_quant_mode",
                   "qk_rope_head_dim == 0", "use_mla_rope", "is_pcp_decode_sharded", "fused_qkv_a_proj",
                   "use_output_gate")


def test_hyv4_mla_impl_built_by_the_models_own_mla_attention(hyv4):
    """HY-V4's attention builds vLLM's MLAAttention itself (vllm/models/hy_v4/nvidia/attention.py:501), which
    builds the implementation (`impl = impl_cls(...)`, vllm/model_executor/layers/attention/mla_attention.py:555):
    the leaf is its own implementation's holder, so AscendMLAImpl is read with the arguments it is built with.
    `support_fp8_attention` is the A2 profile's FP8_ATTENTION (mla_v1.py:873: False), so `enable_fa_quant` and the
    MLAPO weight mode (:913, :926) are read under it and decided; `qk_rope_head_dim` is the configuration's 64
    (:884). The call's `**extra_impl_args` may hold only `sinks` (HY-V4's `{} if sinks is None else {"sinks":
    sinks}`, attention.py:500) and the `topk_indices_buffer` / `index_group_builder` MLAAttention sets on it
    (mla_attention.py:550-552): every key is known, so `kwargs.get("use_mla_rope", True)` is True (:894),
    `kwargs.get("fused_qkv_a_proj")` and `kwargs.get("g_proj")` None (:888, :892)."""
    by = _by_test(hyv4)
    assert not [t for t in by if any(n in t for n in _MLA_IMPL_TESTS)], [t for t in by if any(n in t for n in _MLA_IMPL_TESTS)]
    layer = [op for op in hyv4.report["ops"] if op["kind"] == "mla_attention"]
    assert layer and {op["attrs"].get("runs") for op in layer} == {"AscendMLAImpl.forward"}  # walked as code
    impl = [op for op in hyv4.report["ops"] if op["path"].startswith("model.layers.self_attn.mla_attn.impl")]
    conds = [op["condition"] or "" for op in impl] + _kernel_conditions(hyv4, "mla_attention")
    assert impl and not [c for c in conds if any(n in c for n in _MLA_IMPL_TESTS)]
    validate_report(hyv4.report)


def test_hyv4_normalised_configuration_and_what_is_left(hyv4):
    """`config = _normalize_hyv4_config(hf_config)` (vllm/models/hy_v4/nvidia/model.py:77, :218) sets
    `config.num_shared_experts = config.n_shared_experts` and the other aliases the MoE reads and returns the
    configuration: `config.num_shared_experts > 0` (moe.py:135) is HYV4Config's `n_shared_experts = 1` and the
    shared experts are built under no test. `getattr(self.config, "soft_logits_capping", False)` (model.py:698)
    reads a field HYV4Config does not declare (a checkpoint may carry it): it waits on that field. Of what was
    given, only the router's `is_fused_supported` may be left (the MoE router's width, read for every model)."""
    assert not [c for c in _conditions(hyv4) if "num_shared_experts" in c]
    shared = [op for op in hyv4.report["ops"] if ".shared_experts." in op["path"]]
    assert shared and all(not op["condition"] for op in shared), [op["condition"] for op in shared]
    e = _by_test(hyv4)['getattr(self.config, "soft_logits_capping", False)']
    assert (e["waits_on"], e["given"]) == ("config_field", False) and "soft_logits_capping" in e["why"], e
    given = {e["test"] for e in hyv4.report["undecided"] if e["given"] is True}
    assert given <= {"not self.is_fused_supported(hidden_states)"}, given


def test_deepseek_v4_runs_the_dsa_implementation(dsv4):
    """vllm-ascend's DeepSeek-V4 attention is AscendDeepseekSparseAttention (vllm_ascend/ops/dsa.py:56, an MLA
    wrapper) holding `self.dsa_attn = DSAAttention(...)` (:113): the one module it holds whose construction
    assigns `attn_backend`. DSAAttention picks AscendDSAC4Backend, AscendDSAC128Backend or AscendDSASWABackend
    by the layer's compress ratio (vllm_ascend/models/layer/attention/layer.py:127-132), not given by the
    class's defaults: one of them, each implemented by AscendDSAImpl (dsa_v1.py:262-277 without DSA-CP or
    PCP). So the walk reads AscendDSAImpl, not AscendMLAImpl, and none of the MLA implementation's tests is
    left."""
    mla = [op for op in dsv4.report["ops"] if op["kind"] == "mla_attention"]
    assert mla
    for op in mla:
        backend = op["attrs"]["attention_backend"]
        assert backend["impl"] == "AscendDSAImpl", backend
        assert backend["backend"].rsplit(".", 1)[-1] in ("AscendDSAC4Backend", "AscendDSAC128Backend",
                                                         "AscendDSASWABackend")
    assert not [op for op in dsv4.report["ops"] if op["kind"] in ("mla_preprocess", "mla_decode", "mla_prefill")]
    by = _by_test(dsv4)
    assert not [t for t in by if any(n in t for n in _MLA_IMPL_TESTS)]
    validate_report(dsv4.report)


def test_deepseek_v4_dsa_tests_decided_or_waiting_on_what_was_not_given(dsv4):
    """AscendDSAImpl's tests (vllm_ascend/attention/dsa_v1.py): `enable_pcp_o_proj_weight_sharding` is the
    class's `False` (:1579; only the PCP subclass sets it); `self.compress_ratio` is `get_dsv4_compress_ratio(
    config, ...)`, `getattr(config, "compress_ratios", None)` (vllm_ascend/utils.py:124): a field vLLM's
    DeepseekV4Config does not declare; `is_turboquant(vllm_config)` compares `cache_config.cache_dtype`, which
    `--kv-cache-dtype auto` resolves from the checkpoint's quantization config (vllm/utils/torch_utils.py:507):
    with no config.json it waits on it; `self._tq_kv_plan` is set by `get_kv_plan` when it runs (:1592). The KV
    write's plan is read on the DsaAttnKvPlan `get_dsa_attn_kv_plan` returns (dsa_attn_kv_plan.py:202): on A2
    (no DSV4 compressed cache) every plan it may return has `uses_sparse_flash_mla` and
    `uses_kv_compress_epilog` False, so the scatter is npu_scatter_nd_update_sk (:193), not kv_compress_epilog.
    The TurboQuant latent's `_legacy_hadamard` is True (dsa_v1.py:1624) and the replicated linear's `custom_op`
    its own: read on the objects the implementation holds."""
    by = _by_test(dsv4)
    assert not [t for t in by if "enable_pcp_o_proj_weight_sharding" in t or "_legacy_hadamard" in t
                or "custom_op" in t or "uses_sparse_flash_mla" in t or "uses_kv_compress_epilog" in t]
    e = by["self.compress_ratio == 4"]
    assert (e["waits_on"], e["given"]) == ("config_field", False), e
    e = by["is_turboquant(self.vllm_config)"]
    assert (e["waits_on"], e["given"]) == ("quantization", False) and "quantization_config" in e["why"], e
    e = by["self._tq_kv_plan is None"]
    assert (e["waits_on"], e["given"]) == ("runtime_path", False) and "get_kv_plan" in e["why"], e
    names = {(k["name"], k["line"]) for op in dsv4.report["ops"] for k in op.get("kernels") or ()
             if k["file"].endswith("dsa_attn_kv_plan.py")}
    assert ("torch.ops._C_ascend.npu_scatter_nd_update_sk", 193) in names, names
    assert not [n for n in names if n[0].endswith("kv_compress_epilog") or n[0].endswith("npu_scatter_nd_update_")]
    # what is left of the given: the CV wrapper's `hasattr(linear, "gather_output")` on another object (an
    # attribute may be set on it from outside at load time: not ruled out)
    given = {e["test"] for e in dsv4.report["undecided"] if e["given"] is True}
    assert given <= {"self._has_communication"}, given


def test_deepseek_v4_attention_backend_per_layer_kind(session, hf):
    """With fixtures/configs/deepseek-v4.json (`compress_ratios`: two HCA layers, then CSA / HCA interleaved),
    the layers fall into kinds by their compress ratio and each kind's DSAAttention holds its own backend:
    AscendDSAC4Backend for ratio 4 (the layers with an indexer), AscendDSAC128Backend for 128."""
    a = analyze_in(session, "DeepseekV4ForCausalLM",
                   Options(hf_root=hf, config=str(ROOT / "fixtures" / "configs" / "deepseek-v4.json")))
    backends = {}
    for op in a.report["ops"]:
        if op["kind"] == "mla_attention":
            chosen = op["attrs"]["attention_backend"]
            assert chosen["impl"] == "AscendDSAImpl" and chosen["decided"], chosen
            backends[op["attrs"]["layer_kind"]] = chosen["backend"].rsplit(".", 1)[-1]
    kinds = {k["kind"]: k for k in a.report["layer_kinds"]}
    assert sorted(backends.values()) == ["AscendDSAC128Backend", "AscendDSAC128Backend", "AscendDSAC4Backend"]
    for kind, backend in backends.items():
        has_indexer = kinds[kind]["differs"].get("self_attn.dsa_attn.indexer") == "DeepseekV4Indexer"
        assert has_indexer == (backend == "AscendDSAC4Backend"), (kinds[kind], backend)
    assert sum(k["count"] for k in kinds.values()) == 43


def test_quantisation_and_run_time_state_classified():
    """classify: a test reading the checkpoint's quantisation (a layer's `quant_method`, the KV-cache dtype) waits
    on config.json's `quantization_config` where the deployment does not know it, and is given once a config.json
    was read; a construction handed `quant_config` does not read it; `getattr(vllm_config, "cache_config", ...)`
    is no field of the model's configuration; an attribute only a method sets waits on the runtime."""
    from fusion_analyze.config.model_config import ConfigFacts
    from fusion_analyze.ir.deployment import Deployment
    from fusion_analyze.walk.construction.constructor import RUN_TIME_SOURCE

    facts = ConfigFacts({"hidden_size": 8, "model_type": "x"}, "t", complete=False)
    unknown, known = Deployment(), Deployment(quant_known=True)
    read = lambda name: [["self._detect_w8a8_dynamic(linear.quant_method)"]]  # noqa: E731
    assert classify("self._is_w8a8", "self._is_w8a8", facts, unknown, read)[:2] == ("quantization", False)
    assert classify("self._is_w8a8", "self._is_w8a8", facts, known, read)[:2] == ("construction", True)
    handed = lambda name: [["ReplicatedLinear(8, 8, quant_config=quant_config, prefix=prefix)"],  # noqa: E731
                           ["Indexer(vllm_config, config, quant_config, prefix)"]]
    assert classify("self.flag", "self.flag", facts, unknown, handed)[:2] == ("construction", True)
    cache = lambda name: [['getattr(getattr(vllm_config, "cache_config", None), "cache_dtype", None) == "x"']]  # noqa: E731
    got = classify("is_tq(self.vllm_config)", "is_tq(self.vllm_config)", facts, unknown, cache)
    assert got[:2] == ("quantization", False) and "quantization_config" in got[2], got
    assert classify("is_tq(self.vllm_config)", "x", facts, known, cache)[:2] == ("construction", True)
    later = lambda name: [[RUN_TIME_SOURCE.format("Impl.get_plan")]]  # noqa: E731
    got = classify("self._plan is None", "self._plan is None", facts, known, later)
    assert got[:2] == ("runtime_path", False) and "Impl.get_plan()" in got[2], got
