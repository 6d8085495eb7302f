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
    # the one given input still not traced: the attention implementation's `self.sliding_window` (a kernel
    # test, attention_v1.py), `cache_config.sliding_window` that EngineArgs sets from the configuration
    # (vllm/engine/arg_utils.py:2081-2087)
    assert [e["test"] for e in qwen35.report["undecided"] if e["given"] is True] == ["self.sliding_window is not None"]
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
    assert [k["layers"] for k in kinds] == [[0, 1, 2, 4, 5, 6], [3, 7]], json.dumps([k["differs"] for k in kinds[1:]])
    assert [k["differs"]["layer_type"] for k in kinds] == ["'linear_attention'", "'full_attention'"]
    assert not [c for c in _conditions(a) if "layer_type" in c or "model_type" in c]
    linear = {op["attrs"].get("layer_kind") for op in a.report["ops"] if op["kind"] == "linear_attention"}
    full = {op["attrs"].get("layer_kind") for op in a.report["ops"] if op["kind"] == "attention"}
    assert linear == {0} and full == {1}
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
    :2110, :2120) and no start-up code assigns them: decided False, their branches not walked. `mamba_cache_mode`,
    which vllm-ascend's platform patches set (vllm_ascend/patch/platform/patch_mamba_config.py), is not read at
    its class default."""
    from fusion_analyze.semantics.runtime_defaults import vllm_config_default
    from fusion_analyze.semantics.values import Known

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
    assert vllm_config_default(session.index, "cache_config", "mamba_cache_mode", infer) is None
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
    assert [k["differs"].get("mlp") for k in kinds] == ["DeepseekV2MLP", "DeepseekV2MoE"]
    fp16 = [op for op in dsv3.report["ops"] if op["file"].endswith("deepseek_v2.py") and 1411 < op["line"] <= 1420
            and "float16" in (op["condition"] or "")]
    assert fp16 and {op["attrs"].get("layer_kind") for op in fp16} == {0}, [(op["line"], op["condition"]) for op in fp16]
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
    bloom = analyze_in(session, "BloomForCausalLM", Options(hf_root=hf))
    assert "self.sliding_window is not None" in _by_test(bloom)


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
