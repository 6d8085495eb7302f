"""The attention backend is the one the platform's own selector returns (issue 45, item 1): vllm-ascend's
`NPUPlatform.get_attn_backend_cls` is run from the tree with the selector configuration vLLM's
`get_attn_backend` builds from the layer's call (`use_mla=True, use_sparse=use_sparse`, read where the layer was
built) and the deployment, and the backend's `get_impl_cls()` names the implementation walked op by op.
DeepSeek-V3.2 (`index_topk` in its configuration) runs AscendSFABackend -> AscendSFAImpl with its indexer, not
AscendMLAImpl; without a configuration the selector's test on `use_sparse` is open and the report lists the
alternatives; where no selector is run (CUDA) the op says the class is the catalog's. A model that passes the
backend itself (MiMo-V2's `attn_backend=backend_enum.get_class()`) runs that backend, no selector; where that
choice is not decided the op and the header say so."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.analysis.session import Session
from fusion_analyze.render.markdown import render_markdown
from fusion_analyze.resources import data_dir

from .conftest import FIXTURES, validate_report


def _v32_config(tmp_path) -> str:
    """DeepSeek-V3.2's config.json as the test states it: DeepSeek-V3's published fields (the preset) with the
    V3.2 architecture and its indexer's fields (index_topk is what vLLM tests: `hasattr(config, "index_topk")`)."""
    presets = yaml.safe_load((data_dir("patterns") / "catalog" / "presets.yaml").read_text())["presets"]
    config = dict(presets["DeepSeek-V3"]["config"], architectures=["DeepseekV32ForCausalLM"],
                  model_type="deepseek_v32", index_topk=2048, index_n_heads=64, index_head_dim=128)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def _attention_ops(a):
    """The ops of the attention implementation walked inside the MLA layer (`inside` it, under its impl)."""
    return [op for op in a.walk.ops if ".mla_attn.impl" in (op.path or "")]


def _chosen(a, kind="mla_attention"):
    """The attention layer's choice: one op per layer kind (DeepSeek's dense and MoE layers are two kinds), the
    same choice in each."""
    layers = list({id(op): op for op in a.walk.ops if op.kind == kind}.values())
    assert layers, kind
    assert len({repr(op.attrs["attention_backend"]) for op in layers}) == 1
    return layers[0].attrs["attention_backend"], layers[0]


def _selector_line(session) -> int:
    src = (session.ascend.root / "vllm_ascend/platform.py").read_text().splitlines()
    return next(n for n, line in enumerate(src, 1) if "def get_attn_backend_cls(" in line)


def test_deepseek_v32_runs_the_sparse_backend_and_its_indexer(session, hf, tmp_path):
    a = analyze_in(session, "DeepseekV32ForCausalLM", Options(config=_v32_config(tmp_path), hf_root=hf))
    chosen, layer = _chosen(a)
    assert chosen["backend"] == "vllm_ascend.attention.sfa_v1.AscendSFABackend"
    assert chosen["impl"] == "AscendSFAImpl" and chosen["decided"]
    assert chosen["selector"] == f"vllm_ascend/platform.py:{_selector_line(session)} NPUPlatform.get_attn_backend_cls"
    assert "use_sparse=True" in chosen["why"] and layer.attrs["runs"] == "AscendSFAImpl.forward"
    ops = _attention_ops(a)
    files = {op.file for op in ops}
    assert "vllm_ascend/attention/mla_v1.py" not in files  # the dense MLA implementation never runs
    assert {"vllm_ascend/attention/sfa_v1.py", "vllm_ascend/attention/indexer.py"} <= files
    assert not any(op.file == "vllm_ascend/attention/mla_v1.py" for op in a.walk.ops)
    kernels = {k.name for op in ops for k in op.kernels}
    assert "torch_npu.npu_lightning_indexer" in kernels  # the indexer's top-k (device_op.py, via DeviceOperator)
    assert {"torch.ops._C_ascend.npu_sparse_flash_attention", "torch_npu.npu_kv_quant_sparse_flash_attention"} & kernels
    # each kernel is cited at a line of the tree that calls it
    for op in ops:
        for k in op.kernels:
            if k.name == "torch_npu.npu_lightning_indexer":
                root = session.ascend.root if k.file.startswith("vllm_ascend/") else session.vllm.root
                assert "npu_lightning_indexer(" in (root / k.file).read_text().splitlines()[k.line - 1]
    validate_report(a.report)
    (att,) = a.report["deployment"]["attention"]
    assert att["impl"] == "AscendSFAImpl" and att["decided"]


def test_deepseek_v32_without_configuration_lists_both_backends(session, hf):
    """No configuration file: whether the model has an indexer (use_sparse, `hasattr(config, "index_topk")`) is
    open, so the selector's table lookup may give the dense or the sparse backend: the report lists both, the
    choice not decided. That holds with transformers' tree too: vLLM's _CONFIG_REGISTRY maps deepseek_v32 to
    DeepseekV3Config (vllm/transformers_utils/config.py, registered over transformers' DeepseekV32Config, whose
    defaults declare index_topk), and DeepseekV3Config's defaults have no index_topk, so only a checkpoint's
    config.json says whether the attribute is there (test_deepseek_v32_runs_the_sparse_backend_and_its_indexer:
    with index_topk the sparse backend is decided)."""
    b = analyze_in(session, "DeepseekV32ForCausalLM", Options(hf_root=hf))
    assert b.report["configuration"]["class"]["class"] == "DeepseekV3Config"
    assert b.report["configuration"]["class"]["registered"]["by"] == "vllm"
    a = analyze_in(session, "DeepseekV32ForCausalLM", Options())
    for r in (a, b):
        chosen, _layer = _chosen(r)
        assert not chosen["decided"] and "use_sparse" in chosen["why"]
        names = {chosen["impl"], *(o["impl"] for o in chosen.get("alternatives", ()))}
        assert {"AscendMLAImpl", "AscendSFAImpl"} <= names
        alts = [x for x in r.walk.alternatives if x["path"].endswith(".mla_attn.impl")]
        assert alts and not alts[0]["decided"]
        assert any("AscendSFAImpl" in o[0] or "AscendMLAImpl" in o[0] for o in alts[0]["others"])
        (att,) = r.report["deployment"]["attention"]
        assert not att["decided"] and att["selector"]


def test_dense_mla_and_plain_attention_keep_their_implementations(session, hf):
    """DeepSeek-V3 (no index_topk in its published configuration): AscendMLABackend -> AscendMLAImpl; Qwen3's
    Attention: AscendAttentionBackend -> AscendAttentionBackendImpl, both decided by the selector."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(config="DeepSeek-V3", hf_root=hf))
    chosen, layer = _chosen(a)
    assert chosen["backend"] == "vllm_ascend.attention.mla_v1.AscendMLABackend" and chosen["decided"]
    assert "use_sparse=False" in chosen["why"] and layer.attrs["runs"] == "AscendMLAImpl.forward"
    files = {op.file for op in _attention_ops(a)}
    assert "vllm_ascend/attention/mla_v1.py" in files and "vllm_ascend/attention/sfa_v1.py" not in files
    q = analyze_in(session, "Qwen3ForCausalLM", Options(config="Qwen3-8B", hf_root=hf))
    chosen, _layer = _chosen(q, "attention")
    assert chosen["backend"] == "vllm_ascend.attention.attention_v1.AscendAttentionBackend"
    assert chosen["impl"] == "AscendAttentionBackendImpl" and chosen["decided"]
    assert re.search(r"use_mla=False", chosen["why"])


@pytest.fixture(scope="module")
def cuda_session(real_tree):
    return Session.open(str(real_tree("vllm==0.30.0")), None, backend="cuda")


def test_cuda_says_its_backend_is_the_catalogs(cuda_session, hf):
    """vLLM's CUDA selector picks by validity and priority across backends, which the tool does not run: the
    catalog's class is used, and the op says so (never silently)."""
    a = analyze_in(cuda_session, "Qwen3ForCausalLM", Options(config="Qwen3-8B", hf_root=hf))
    chosen, _layer = _chosen(a, "attention")
    assert chosen["selector"] is None and not chosen.get("decided")
    assert "catalog" in str(chosen["why"])


def _mimo_config() -> str:
    return str(FIXTURES / "configs" / "mimo-v2-flash.json")


def _tree_line(root, rel: str, needle: str) -> int:
    lines = (root / rel).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if needle in line)


@pytest.fixture(scope="module")
def mimo(session, hf):
    return analyze_in(session, "MiMoV2FlashForCausalLM", Options(config=_mimo_config(), hf_root=hf))


def test_mimo_runs_the_backend_its_construction_passes(mimo, session):
    """MiMoV2Attention's V head dim (128) differs from its Q/K head dim (192): it picks a DiffKV backend itself
    (`backend_enum.get_class()`, FlashAttention's only where `is_supported_on_current_device` says so, which
    needs CUDA, XPU or ROCm) and hands it to Attention as `attn_backend=`, so no selector runs: every layer runs
    AttentionBackendEnum.TRITON_ATTN_DIFFKV's class (the path its value names; no tree registers another for
    it) and its TritonAttentionDiffKVImpl, not vllm-ascend's AscendAttentionBackendImpl."""
    chosen, layer = _chosen(mimo, "attention")
    assert chosen["backend"] == "vllm.v1.attention.backends.triton_attn_diffkv.TritonAttentionDiffKVBackend"
    assert chosen["impl"] == "TritonAttentionDiffKVImpl" and chosen["decided"] and chosen["selector"] is None
    rel = "vllm/model_executor/models/mimo_v2.py"
    line = _tree_line(session.vllm.root, rel, "attn_backend = backend_enum.get_class()")
    assert chosen["passed_by"] == f"{rel}:{line} backend_enum.get_class()"
    assert "AttentionBackendEnum.TRITON_ATTN_DIFFKV" in chosen["why"] and "no platform selector" in chosen["why"]
    kernels = {k.name: k for k in layer.kernels}
    write = "triton:vllm.v1.attention.ops.triton_reshape_and_cache_flash.reshape_and_cache_kernel_flash_diffkv"
    attend = "triton:vllm.v1.attention.ops.triton_unified_attention_diffkv.kernel_unified_attention_diffkv"
    assert {write, attend} <= set(kernels)
    assert not [n for n in kernels if "npu" in n or n.startswith("torch_npu")]  # no Ascend attention kernel
    for name, needle in ((write, "reshape_and_cache_kernel_flash_diffkv["), (attend, "kernel_unified_attention_diffkv[")):
        k = kernels[name]
        assert needle in (session.vllm.root / k.file).read_text().splitlines()[k.line - 1], name
    (att,) = mimo.report["deployment"]["attention"]
    assert att["impl"] == "TritonAttentionDiffKVImpl" and att["decided"] and att["passed_by"] == chosen["passed_by"]
    md = render_markdown(mimo, lang="en")
    header = next(x for x in md.splitlines() if x.startswith("> deployment:"))
    assert f"attention TritonAttentionDiffKVImpl (passed by the model's construction at {rel}:{line}" in header
    assert "AscendAttentionBackendImpl" not in md
    validate_report(mimo.report)


def test_mimo_attention_rows_cite_vllms_triton_kernels(mimo, session):
    rows = {o["id"]: o for o in mimo.report["opportunities"]}
    line = _tree_line(session.vllm.root, "vllm/v1/attention/ops/triton_unified_attention_diffkv.py",
                      "kernel_unified_attention_diffkv[grid](")
    for scenario in ("flash_attention", "mask_softmax", "softmax_matmul"):
        row = rows[f"{scenario}@MiMoV2Attention.forward"]
        assert row["status"] == "fused_by_ascend_kernel", scenario
        ev = row["evidence"][0]
        assert (ev["file"], ev["line"]) == ("vllm/v1/attention/ops/triton_unified_attention_diffkv.py", line)
        assert ev["what"].startswith("vLLM's Triton kernel ") and "TritonAttentionDiffKVImpl" in ev["what"]
        assert "vLLM's own Triton kernel" in row["note"]
    rope = rows["rope_kvcache@MiMoV2Attention.forward"]
    assert rope["status"] == "open"
    write = "triton:vllm.v1.attention.ops.triton_reshape_and_cache_flash.reshape_and_cache_kernel_flash_diffkv"
    assert write in rope["note"] and "npu_scatter_pa_kv_cache" not in rope["note"]
    cited = [e for e in rope["evidence"] if write in e["what"]]
    assert cited and cited[0]["file"] == "vllm/v1/attention/ops/triton_reshape_and_cache_flash.py"
    md = render_markdown(mimo, lang="en")
    line = next(x for x in md.splitlines() if "(`flash_attention@MiMoV2Attention.forward`)" in x)
    assert "vLLM's Triton kernel" in line and "triton_unified_attention_diffkv.py" in line


def test_mimo_without_configuration_says_the_backend_is_open(session, hf):
    """No configuration: whether the V head dim differs (the model's own test) is not known, so which backend
    the construction hands Attention is not either; the report says so on the op and in the header and never
    presents the platform's class as chosen."""
    a = analyze_in(session, "MiMoV2FlashForCausalLM", Options())
    (att,) = a.report["deployment"]["attention"]
    assert not att["decided"] and att.get("open")
    assert "self.attn_backend" in att["why"] and "not decided" in att["why"]
    md = render_markdown(a, lang="en")
    header = next(x for x in md.splitlines() if x.startswith("> deployment:"))
    assert "not decided: the backend the layer holds is not known statically" in header
    assert "selected by the platform's selector" not in header


def test_mimo_on_cuda_leaves_the_flash_attention_test_open(cuda_session, hf):
    """On CUDA FlashAttention's DiffKV backend is usable only where its FA version check (a `try` the tool does
    not run) passes: the model's choice is not decided, and the report says so rather than naming the catalog's
    FlashAttentionImpl as chosen."""
    a = analyze_in(cuda_session, "MiMoV2FlashForCausalLM", Options(config=_mimo_config(), hf_root=hf))
    (att,) = a.report["deployment"]["attention"]
    assert not att["decided"] and att.get("open") and "not decided" in att["why"]
