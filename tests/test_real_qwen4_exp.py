"""Qwen4Exp on the 0.30 pair (a hand check found its report hid the hyper-connection GEMMs and Triton kernels, the
QSA selection and attention kernels, listed host-side Python as ops, decided `input_ids.is_cuda` as on CUDA and
never said that the QSA implementation cannot be built on Ascend). fixtures/configs/qwen4-exp.json is the
configuration the hand check used (tests/test_held_calls.py holds the same idioms on the mini tree)."""

from __future__ import annotations

import pytest

from .conftest import FIXTURES

QX = "vllm/models/qwen4_exp/nvidia/"


@pytest.fixture(scope="module")
def qwen4(session, hf):
    from fusion_analyze.analysis.pipeline import Options, analyze_in

    return analyze_in(session, "Qwen4ExpForCausalLM", Options(config=str(FIXTURES / "configs" / "qwen4-exp.json"),
                                                              hf_root=hf))


def _lines(root, rel: str, text: str) -> list[int]:
    src = (root / rel).read_text(encoding="utf-8").splitlines()
    return [i for i, line in enumerate(src, 1) if text in line]


def test_hyper_connection_methods_called_through_a_local_are_walked(qwen4):
    """`attn_hc = self.attn_hyper_connection; attn_hc.mix(...)` / `.combine_and_mix(...)`, `mlp_hc = ...`, the
    final mixer (model.py): GatedResidual's methods run, with their GEMMs and custom-op kernels, in every kind of
    layer and in the epilogue; none of them is an unknown callee any more."""
    ops = qwen4.walk.ops
    unknown = [op.name for op in ops if op.kind == "unknown"]
    assert not [n for n in unknown if n.startswith(("attn_hc.", "mlp_hc.", "final_mixer.")) or "hyper_connection" in n]
    for kind in (0, 1, 2):
        for hc in ("attn_hyper_connection", "mlp_hyper_connection"):
            gemms = [op for op in ops if op.steady and op.kind == "matmul" and op.attrs.get("layer_kind") == kind
                     and op.path == f"model.layers.{hc}.input_mix_weight_up"]
            assert gemms, (kind, hc)
    epilogue = {op.name: op for op in ops if op.section == "epilogue" and op.path.startswith("model.hyper_connection_mixer")}
    assert {"input_mix_weight_down", "input_mix_weight_up", "qwen4_exp_hc_combine_norm", "qwen4_exp_hc_gate_mix"} <= set(epilogue)
    assert epilogue["input_mix_weight_down"].kind == "matmul"


def test_functions_imported_in_a_method_and_an_impl_held_in_a_local_are_walked(qwen4):
    """indexer_qsa.py imports qsa_select_paged_decode / _prefill / expand_qsa_block_indices inside forward, and
    `_run_qsa` calls `impl.forward_qsa(...)` through `impl = cast(..., self.impl)`: their Triton kernels are
    launches of the layer, not unknown callees."""
    ops = qwen4.walk.ops
    kernels = {op.name for op in ops if op.kind == "kernel" and op.path.startswith("model.layers.self_attn")}
    assert {"_qsa_mqa_paged_uniform_kernel", "_qsa_mqa_paged_prefill_kernel", "_expand_qsa_indices_kernel",
            "_qsa_sparse_paged_gqa_splitk_kernel"} <= kernels
    unknown = {op.name for op in ops if op.kind == "unknown"}
    assert not unknown & {"qsa_select_paged_decode", "qsa_select_paged_prefill", "expand_qsa_block_indices",
                          "impl.forward_qsa", "impl.do_kv_cache_update"}


def test_a_literal_mode_decides_the_short_conv_writeback(qwen4):
    """ple_layer.py calls the short conv with `mode="decode"` (no writeback kernel: ops/ple.py `if mode !=
    "decode"`) and with "prefill" / "spec": the decode calls launch the conv kernel alone, and no printed
    condition tests `mode` any more; the bit_length of the binary-search count (mode "spec" / "prefill") is
    host Python."""
    ple = [op for op in qwen4.walk.ops if op.path == "model.layers.ple"]
    conv = [op for op in ple if op.name == "_ple_conv_kernel"]
    writeback = [op for op in ple if op.name == "_ple_conv_writeback_kernel"]
    assert len(conv) == 4 and len(writeback) == 2  # two of the four calls are mode="decode"
    assert not [op for op in ple if op.condition and "mode" in op.condition.replace("model", "")]


def test_host_side_python_is_no_op(qwen4, real_tree):
    """int.bit_length, triton.cdiv / next_power_of_2, current_platform.is_arch_support_pdl(), builtin slice and
    the product of two cdiv's (qsa_pre_indexer.py's grid) are not device ops."""
    names = [op.name for op in qwen4.walk.ops]
    for host in ("bit_length", "triton.cdiv", "next_power_of_2", "is_arch_support_pdl"):
        assert not [n for n in names if host in n], host
    assert "slice" not in names
    root = real_tree("vllm==0.30.0")
    (grid,) = _lines(root, QX + "ops/qsa_pre_indexer.py", "num_q_work = triton.cdiv(num_tokens, TILE_T_Q)")
    assert not [op for op in qwen4.walk.ops if op.file.endswith("ops/qsa_pre_indexer.py") and op.line == grid]


def test_input_ids_is_cuda_is_false_on_ascend(qwen4):
    """compute_ngram_ids runs its Triton kernel only for CUDA tensors (`if input_ids.is_cuda:`): on Ascend the
    torch fallback runs, and no condition says `is_cuda`."""
    ops = qwen4.walk.ops
    assert not [op for op in ops if op.name == "_ple_ngram_ids_kernel"]
    fallback = [op for op in ops if op.path == "model.layers.ple.ple_embedding" and op.name == "searchsorted"]
    assert fallback and not [op for op in ops if op.condition and "is_cuda" in op.condition]


def test_the_qsa_implementation_that_raises_on_ascend_is_a_blocker(qwen4, real_tree):
    """Qwen4ExpQSAFlashAttentionImpl.__init__ raises NotImplementedError when is_flash_attn_varlen_func_available()
    is False, which it is off CUDA, XPU and ROCm (fa_utils.py): the report says the deployment cannot run on
    Ascend, in the full-attention kind of layer, with the raise's line. The PLE layer's "inputs were not prepared"
    raise is decided only by the forward's None defaults: not said."""
    root = real_tree("vllm==0.30.0")
    (line,) = _lines(root, QX + "qsa.py", 'raise NotImplementedError("Qwen4Exp QSA requires FlashAttention")')
    kinds = qwen4.report["layer_kinds"]
    full = next(k["kind"] for k in kinds if "self_attn" in k["differs"] and k["differs"]["self_attn"] != "not assigned in this kind")
    assert qwen4.report["blockers"] == [{
        "file": QX + "qsa.py", "line": line, "raises": 'NotImplementedError("Qwen4Exp QSA requires FlashAttention")',
        "in": "Qwen4ExpQSAFlashAttentionImpl.__init__", "path": "model.layers.self_attn.impl", "when": "construction",
        "layer_kind": full}]
    from fusion_analyze.render.markdown import render_data

    md = render_data(qwen4.report, lang="en")
    assert "cannot run on ascend: `Qwen4ExpQSAFlashAttentionImpl.__init__` raises" in md
    assert f"({QX}qsa.py:{line}) during construction, in decoder-layer kind {full + 1}" in md


def test_the_engram_config_is_none_off_cuda(qwen4):
    """`engram_config = get_current_vllm_config().engram_config` (ngram_embedding.py): vLLM creates one only on
    CUDA (VllmConfig._resolve_and_verify_engram_config returns first where `not current_platform.is_cuda()`), and
    vllm-ascend only for DeepseekV41 (platform.py _validate_engram_config): None on Ascend, so the PLE table is
    Qwen4ExpPLEDeviceEmbedding, whose supports_prefetch (a ClassVar) is False: the lookup runs on the device."""
    ops = qwen4.walk.ops
    table = [op for op in ops if op.kind == "embedding" and op.path.endswith("ple_embedding.ngram_embedding")]
    assert [op.layer_class for op in table] == ["Qwen4ExpPLEDeviceEmbedding"]
    assert table[0].condition is None and table[0].steady
    assert not [op for op in ops if op.condition and ("engram_config" in op.condition or "supports_prefetch" in op.condition)]


def test_the_start_layer_has_no_pending_combine(qwen4):
    """Layer 0 is a kind of its own (the PLE layer): it runs only as the loop's first iteration, where
    `block_output` is still None, so `attn_hc.combine(...)` under `if prev_block_output is not None:` and the
    fused combine_and_mix do not run there (not steady); `attn_hc.mix` does. Later kinds take combine_and_mix."""
    ops = [op for op in qwen4.walk.ops if op.path.startswith("model.layers.attn_hyper_connection")]
    steady = {(op.attrs.get("layer_kind"), op.name) for op in ops if op.steady}
    assert (0, "qwen4_exp_grouped_gemma_rmsnorm") in steady
    assert (0, "qwen4_exp_hc_combine") not in steady and (0, "qwen4_exp_hc_combine_norm") not in steady
    assert (1, "qwen4_exp_hc_combine_norm") in steady and (1, "qwen4_exp_grouped_gemma_rmsnorm") not in steady


def test_hyper_connection_kernels_are_the_nvidia_packages_own(qwen4):
    """qwen4_exp/nvidia/ops/hc.py and qwen4_exp/amd/ops/hc.py register the same custom-op names: the nvidia
    package's model calls its own copy, whose Triton kernels the ops list."""
    names = [k.name for op in qwen4.walk.ops if op.path.startswith("model.layers.attn_hyper_connection")
             for k in op.kernels]
    assert any(n.startswith("triton:vllm.models.qwen4_exp.nvidia.ops.hc.") for n in names)
    assert not [n for n in names if ".amd." in n]


def test_the_shared_experts_gemm_swiglu_interface_has_its_own_size(qwen4):
    """The shared expert is built with shared_expert_intermediate_size (640 in the configuration), not the
    dense intermediate_size (5632): its GEMM + SwiGLU stub says so."""
    row = next(o for o in qwen4.report["opportunities"] if o["id"] == "matmul_swiglu@Qwen2MoeMLP.forward")
    stub = row["interface"]["stub"]
    assert "[2 * intermediate_size=1280, hidden_size=2560]" in stub and "5632" not in stub
