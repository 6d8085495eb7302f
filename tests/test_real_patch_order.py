"""The FalconH1 hand check (vLLM 0.30.0 + vllm-ascend 0.30.0rc2, transformers 5.23.0 defaults), on the real trees:

- vllm-ascend's worker patch rebinds `_cc1d.causal_conv1d_fn / causal_conv1d_update`
  (vllm_ascend/patch/worker/patch_triton.py:57-58), but Mamba2's mixer from-imports both
  (vllm/model_executor/layers/mamba/mamba_mixer2.py:34-37) when vllm-ascend's worker.py is imported
  (worker.py:64 -> vllm/v1/worker/gpu_worker.py:96 -> vllm/v1/worker/utils.py:16), before `NPUWorker.__init__` runs
  `adapt_patch()` (worker.py:141-143): the mixer runs vLLM's Triton kernels. The GDN layers of OLMo-Hybrid,
  Qwen3-Next and Kimi, which vLLM's registry imports when it loads the model, get the patch's functions.
- `mamba_cache_mode` is "none" (vllm/config/cache.py:178) or "align" (vllm/model_executor/models/config.py:622-652):
  `is_mamba_cache_all` is false; `use_replayssm` is False (cache.py:197), so `ring_start` stays None.
- `rearrange(initial_states, ...) if initial_states is not None else None` (ssd_combined.py:116-118) runs under its
  test: the mixer's `initial_states` is None unless `has_initial_states_p is not None and prep_initial_states`."""

from __future__ import annotations

import pytest

from fusion_analyze.analysis.pipeline import Options, analyze_in
from fusion_analyze.ir.conditions import Truth
from fusion_analyze.walk.construction.rebinding import import_closure, patch_triggers, read_first

MIXER = "vllm.model_executor.layers.mamba.mamba_mixer2"
PATCH = "vllm_ascend.patch.worker.patch_triton"


@pytest.fixture(scope="module")
def falcon(session, hf):
    return analyze_in(session, "FalconH1ForCausalLM", Options(hf_root=hf))


def test_the_worker_patches_run_after_the_worker_module_loaded_the_mixer(session):
    index = session.index
    triggers = patch_triggers(index, "vllm_ascend")
    # adapt_patch() in NPUWorker.__init__ (is_global_patch defaults to False: the worker package); the global
    # patches from vllm_ascend/__init__.py's _ensure_global_patch and NPUPlatform.pre_register_and_update
    assert [t for t in triggers if t[0] == "vllm_ascend.patch.worker"] == [
        ("vllm_ascend.patch.worker", "vllm_ascend.worker.worker", True)]
    assert {("vllm_ascend.patch.platform", "vllm_ascend", True),
            ("vllm_ascend.patch.platform", "vllm_ascend.platform", True)} <= set(triggers)
    sure, _ = import_closure(index, "vllm_ascend.worker.worker")
    assert {"vllm.v1.worker.gpu_worker", "vllm.v1.worker.utils", MIXER} <= sure
    assert read_first(index, PATCH, MIXER) is Truth.TRUE
    # the layers models import when vLLM loads them: after the patch
    for reader in ("vllm.model_executor.layers.mamba.gdn.olmo_gdn_linear_attn",
                   "vllm.model_executor.layers.mamba.gdn.qwen_gdn_linear_attn",
                   "vllm.model_executor.layers.mamba.mamba_mixer"):
        assert index.module_path(reader) is not None
        assert read_first(index, PATCH, reader) is Truth.FALSE, reader
    # Kimi-K3's GDN layer is loaded first too: worker.py -> vllm_ascend/worker/model_runner_v1.py ->
    # spec_decode/draft_proposer.py:5 -> spec_decode/llm_base_proposer.py:30 (`from vllm.models.kimi_k3.nvidia.
    # dspark_mla import ...`) -> kimi_k3/nvidia/model.py:40 -> kimi_gdn_linear_attn.py:40 (from-imports both)
    assert "vllm_ascend.spec_decode.llm_base_proposer" in sure
    assert read_first(index, PATCH, "vllm.model_executor.layers.mamba.gdn.kimi_gdn_linear_attn") is Truth.TRUE


def test_falcon_h1_mixer_runs_vllms_causal_conv1d(falcon):
    ops = falcon.walk.ops
    kernels = {op.name for op in ops if op.kind == "kernel"}
    assert {"_causal_conv1d_fwd_kernel", "_causal_conv1d_update_kernel"} <= kernels
    assert not [op for op in ops if op.file == "vllm_ascend/ops/causal_conv1d.py" or op.attrs.get("replaced_by")]
    # nothing of the patch the mixer never reaches is said (its HAS_TRITON test, a "this one is walked" line)
    assert not [a for a in falcon.walk.alternatives if "causal_conv1d" in a["path"]]
    assert falcon.walk.not_followed == []


def test_falcon_h1_mamba_cache_tests_at_vllms_defaults(falcon):
    ops = falcon.walk.ops
    assert not [op.condition for op in ops if op.condition and ("is_mamba_cache_all" in op.condition
                                                                or "ring_start" in op.condition)]
    mixer = "vllm/model_executor/layers/mamba/mamba_mixer2.py"
    # the splits, gathers and state copies of `if is_mamba_cache_all:` (:793-832, :882-885, :1018-1041)
    assert not [op for op in ops if op.file == mixer and op.line in (796, 803, 811, 883, 1036, 1039)]
    assert "_update_replayssm_ring_trackers_kernel" not in {op.name for op in ops}


def test_falcon_h1_rearrange_of_initial_states_keeps_its_test(falcon):
    rearranges = [op for op in falcon.walk.ops if op.file == "vllm/model_executor/layers/mamba/ops/ssd_combined.py"
                  and op.line == 112 and op.condition and "has_prefill" in op.condition]
    assert len(rearranges) == 2
    assert "initial_states" not in rearranges[0].condition  # rearrange(states, ...): always
    assert rearranges[1].condition.endswith("initial_states is not None")
