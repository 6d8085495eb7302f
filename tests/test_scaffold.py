"""`--scaffold DIR` (issue 38): Triton kernels, custom ops, tests, benchmarks and integrations of the open
opportunities, from the kernel families of templates/kernels/ (docs/generated-kernels.md).

The generated tests run in a subprocess (each folder registers its ops in the `fusion_analyze` namespace once per
process) on the CPU, in Triton's interpreter (TRITON_INTERPRET=1, set by the folder's conftest.py)."""

from __future__ import annotations

import ast
import json
import os
import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fusion_analyze.commands.scaffold import (family_of, kernels_dir, load_families, triton_expression,
                                              write_examples)
from fusion_analyze.match.patterns import load_patterns

from .conftest import FIXTURES, MINI

CONFIG = FIXTURES / "configs" / "qwen3-0.6b.json"


def _triton():
    pytest.importorskip("triton")


def _run_generated_tests(folder: Path, timeout: int = 600) -> str:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(folder)],
                       cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    return r.stdout


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


# -- the families, as data -----------------------------------------------------------------------------------------
def test_every_family_serves_patterns_that_exist_with_their_forms_and_params():
    patterns = {p.id: p for p in load_patterns()}
    for fam in load_families().values():
        assert (kernels_dir() / f"{fam.id}.py.j2").is_file(), fam.id
        assert fam.integration["kind"] in ("patch", "layer", "pass"), fam.id
        assert fam.examples and set(fam.tolerance) == {"float32", "float16", "bfloat16"}, fam.id
        for pid, spec in fam.serves.items():
            assert pid in patterns, f"{fam.id} serves unknown pattern {pid}"
            forms = {f.id for f in patterns[pid].forms}
            assert set(spec.get("forms") or []) <= forms, (fam.id, pid)
            roles = {p["name"].split("|")[-1].rstrip("}") for p in patterns[pid].interface["params"]}
            assert set(spec.get("mutates") or []) <= roles, (fam.id, pid)
            assert set((spec.get("roles") or {}).values()) <= roles, (fam.id, pid)


def test_communication_and_unserved_scenarios_have_no_family():
    assert family_of("allreduce_norm")[0] is None
    assert family_of("router_experts")[0] is None
    fam, why = family_of("matmul_swiglu", "routed_experts")
    assert fam is None and "routed_experts" in why
    assert family_of("matmul_swiglu", "gate_up_then_swiglu")[0].id == "gemm_swiglu"


def test_element_wise_references_become_triton_expressions():
    assert triton_expression("return (x + y) * z\n", ["x", "y", "z"], []) == "((x_v + y_v) * z_v)"
    assert triton_expression("return routed_out * s + shared_out", ["routed_out", "shared_out"], ["s"]) == \
        "((routed_out_v * s) + shared_out_v)"
    assert triton_expression("return torch.sigmoid(gate) * x", ["gate", "x"], []) == "(tl.sigmoid(gate_v) * x_v)"
    assert triton_expression("y = x + 1\nreturn y", ["x"], []) is None  # not one expression
    assert triton_expression("return torch.softmax(x, -1)", ["x"], []) is None  # not element-wise


def test_the_family_examples_are_deterministic_and_compile(tmp_path):
    a = write_examples(str(tmp_path / "a"), load_patterns())
    b = write_examples(str(tmp_path / "b"), load_patterns())
    assert _files(a.out_dir) == _files(b.out_dir)
    served = sorted(pid for fam in load_families().values() for pid in fam.serves)
    assert sorted(k["scenario"] for k in a.kernels) == served
    for name, text in _files(a.out_dir).items():
        if name.endswith(".py"):
            compile(ast.parse(text.decode()), name, "exec")


def test_every_family_kernel_matches_its_reference_on_cpu(tmp_path, torch):
    """Each family at its examples' shapes (float32, float16, bfloat16), its custom op's schema and fake
    implementation (torch.library.opcheck), in Triton's interpreter."""
    _triton()
    res = write_examples(str(tmp_path / "examples"), load_patterns())
    out = _run_generated_tests(res.out_dir)
    assert " passed" in out and "failed" not in out
    # every bench's --smoke runs the kernel, the reference and the deployment's stand-in (`baseline`) once: a
    # stand-in that calls a kernel with another signature fails here, on the CPU
    benches = sorted(p.name for p in res.out_dir.glob("bench_*.py"))
    assert len(benches) == len(res.kernels)
    for name in benches:
        r = subprocess.run([sys.executable, name, "--smoke"], cwd=res.out_dir, env=dict(os.environ, TRITON_INTERPRET="1"),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and "smoke run ok" in r.stdout, (name, r.stdout[-2000:] + r.stderr[-3000:])


# -- the command on the mini tree ------------------------------------------------------------------------------------
def test_scaffold_option_on_the_mini_tree(run, tmp_path):
    folder = tmp_path / "kernels"
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--config", str(CONFIG),
            "-o", str(tmp_path / "r.md"), "--scaffold", str(folder))
    assert r.exit_code == 0, r.output
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    names = {k["name"] for k in manifest["kernels"]}
    assert {"fused_matmul_swiglu", "fused_rope_kvcache"} <= names
    swiglu = next(k for k in manifest["kernels"] if k["name"] == "fused_matmul_swiglu")
    assert swiglu["integration"]["kind"] == "patch"
    patch = (folder / "patch_fused_matmul_swiglu.py").read_text(encoding="utf-8")
    assert "torch.ops.vllm.fused_matmul_swiglu(" in patch and "_original_0(self" in patch
    # the mini tree has no vllm_ascend/compilation: the pass's imports are said to be missing, in the file too
    rope = next(k for k in manifest["kernels"] if k["name"] == "fused_rope_kvcache")
    missing = [i for i in rope["integration"]["imports"] if i["where"].startswith("MISSING")]
    assert missing and "not found in the analysed trees" in (folder / "pass_fused_rope_kvcache.py").read_text()
    for name, text in _files(folder).items():  # the families' test above runs the kernels
        if name.endswith(".py"):
            compile(ast.parse(text.decode()), name, "exec")


PAIR_OF_CACHES = """
import torch, fused_rope_kvcache as m

inputs = m.make_inputs(m.example_dims(0), torch.float32, "cpu")
one = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
q_one = m.IMPL(*m.op_args(one))
pair = dict(inputs, kv_cache=(inputs["kv_cache"][0].clone(), inputs["kv_cache"][1].clone()))
q_pair = m.IMPL(*m.op_args(pair))
torch.testing.assert_close(q_pair, q_one)
torch.testing.assert_close(torch.stack(pair["kv_cache"]), one["kv_cache"])
assert not torch.equal(one["kv_cache"], inputs["kv_cache"])  # something was written
print("ok")
"""


def test_rope_kvcache_writes_vllm_ascends_pair_of_caches(run, tmp_path, torch):
    """vllm-ascend keeps a layer's KV cache as the pair (k_cache, v_cache): the kernel writes it as it writes one
    [2, ...] tensor (the graph pass's layer op hands it either, never raises)."""
    _triton()
    folder = tmp_path / "kernels"
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--config", str(CONFIG),
            "-o", str(tmp_path / "r.md"), "--scaffold", str(folder))
    assert r.exit_code == 0, r.output
    assert "NotImplementedError" not in (folder / "pass_fused_rope_kvcache.py").read_text(encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", PAIR_OF_CACHES], capture_output=True, text=True, timeout=300, cwd=folder,
                         env=dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(folder)))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


WIDE_CHECK = """
import torch, fused_matmul_swiglu as m

torch.manual_seed(0)
for M, N, K in ((256, 192, 64), (200, 128, 96), (130, 64, 128)):  # row, column and K tails of the tiles
    x = torch.randn(M, K, dtype=torch.float16)
    w = (torch.randn(2 * N, K, dtype=torch.float16) / K ** 0.5).to(torch.float16)
    out = torch.empty((M, N), dtype=torch.float16)
    for cfg in m._WIDE:
        out.fill_(float("nan"))
        m._launch_wide(x, w, out, M, N, K, config=dict(cfg.kwargs), sms=3)
        torch.testing.assert_close(out.float(), m.reference(x.float(), w.float()), atol=2e-2, rtol=2e-2)
print("ok")
"""


def test_gemm_swiglu_prefill_kernel_matches_its_reference_in_the_interpreter(run, tmp_path, torch):
    """The GPU's kernel for many tokens (one accumulator over a 3-D TMA load of the gate and up tiles, a flattened
    persistent loop) run by Triton's interpreter with each of its autotuned configs, on shapes with tails."""
    _triton()
    folder = tmp_path / "kernels"
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--config", str(CONFIG),
            "-o", str(tmp_path / "r.md"), "--scaffold", str(folder))
    assert r.exit_code == 0, r.output
    out = subprocess.run([sys.executable, "-c", WIDE_CHECK], capture_output=True, text=True, timeout=600, cwd=folder,
                         env=dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(folder)))
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_scaffold_into_a_file_is_a_user_error(run, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = run("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(tmp_path / "r.md"),
            "--scaffold", str(f))
    assert r.exit_code == 2 and "not a folder" in r.output


# -- released trees: Qwen3-8B, GLM-4.7, Llama-3.1-8B -----------------------------------------------------------------
LLAMA_31_8B = {  # meta-llama/Llama-3.1-8B config.json as published
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
    "vocab_size": 128256,
}

REAL = [("Qwen3-8B", "Qwen3-8B", {"fused_matmul_swiglu", "fused_rope_kvcache"}),
        ("Glm4MoeForCausalLM", "GLM-4.7", {"fused_matmul_swiglu", "fused_rope_kvcache", "fused_moe_combine_add_rmsnorm"}),
        ("LlamaForCausalLM", "llama-3.1-8b.json", {"fused_matmul_swiglu", "fused_rope"})]  # Llama-3's RoPE runs natively


@pytest.mark.parametrize("model,config,kernels", REAL, ids=[r[1] for r in REAL])
def test_scaffold_of_a_released_model(model, config, kernels, real_tree, tmp_path, torch):
    _triton()
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    if config.endswith(".json"):
        path = tmp_path / config
        path.write_text(json.dumps(LLAMA_31_8B, indent=2), encoding="utf-8")
        config = str(path)
    folder = tmp_path / "kernels"
    cmd = [sys.executable, "-c", "from fusion_analyze.cli import main; main()", model, "--vllm-root", str(vllm), "--ascend-root", str(ascend),
           "--config", config, "--lang", "en", "-o", str(tmp_path / "r.md"), "--scaffold", str(folder)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the analysis of {model} ({config}) did not finish in 300 s")
    assert r.returncode == 0, r.stderr[-3000:]
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["sources"] == {"vllm": "0.30.0", "vllm_ascend": "0.30.0rc2"}
    assert kernels <= {k["name"] for k in manifest["kernels"]}
    for k in manifest["kernels"]:
        assert k["config_shapes"], k["name"]  # the tests and the benchmark know the configuration's shapes
        assert k["integration"] is not None, (k["name"], k["integration_notes"])
        missing = [i for i in k["integration"]["imports"] if i["where"].startswith("MISSING")]
        assert not missing, (k["name"], missing)  # every import resolves in the tree the report was made from
        for i in k["integration"]["imports"]:
            rel, line = i["where"].rsplit(":", 1) if ":" in i["where"] else (i["where"], "0")
            root = vllm if rel.startswith("vllm/") else ascend
            assert (root / rel).is_file(), i
    reasons = {r["id"]: r["reason"] for r in manifest["reference_only"]}
    assert all("rejected" in why or "no kernel" in why or "template" in why for why in reasons.values()), reasons
    if config == "GLM-4.7":  # the match holds the unpermute (npu_moe_token_unpermute) the estimate counts, which
        # the element-wise kernel of `routed_out + shared_out` does not compute: no kernel for it
        assert "element-wise kernel does not compute" in reasons["shared_routed@Glm4MoeMLP.forward"], reasons
    _run_generated_tests(folder)
    # the same inputs write the same bytes
    again = tmp_path / "again"
    r = subprocess.run(cmd[:-1] + [str(again)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and _files(folder) == _files(again)


# -- issue 46: integrations that take effect in vllm-ascend, checked statically through the project's index --------
def _where(index, module: str, name: str):
    """`file:line` of what `from module import name` binds in the analysed trees, read through the index."""
    found = index.lookup(module, name)
    return f"{found.module.rel}:{found.line}" if hasattr(found, "line") else None


def _method_where(index, module: str, cls: str, method: str):
    from fusion_analyze.index.modules import Definition

    found = index.lookup(module, cls)
    if not isinstance(found, Definition) or found.kind != "class":
        return None
    node = found.method_alone(method) or next(
        (s for s in found.node.body.body if type(s).__name__ == "FunctionDef" and s.name.value == method), None)
    return f"{found.module.rel}:{found.module.line_of(node)}" if node is not None else None


@pytest.fixture(scope="module")
def integrations(session, tmp_path_factory):
    """GLM-4.7 and Qwen3-8B from the primary pair, written once: (manifest, folder) per model."""
    from fusion_analyze.analysis.pipeline import Options, analyze_in
    from fusion_analyze.commands.scaffold import write_scaffold

    out = {}
    for model, config in (("Glm4MoeForCausalLM", "GLM-4.7"), ("Qwen3ForCausalLM", "Qwen3-8B")):
        folder = tmp_path_factory.mktemp(config)
        write_scaffold(analyze_in(session, model, Options(config=config)), str(folder))
        out[config] = (json.loads((folder / "manifest.json").read_text(encoding="utf-8")), folder)
    return out


def test_every_name_an_integration_imports_or_patches_is_where_the_manifest_says(integrations, session):
    for config, (manifest, folder) in integrations.items():
        assert manifest["sources"] == {"vllm": "0.30.0", "vllm_ascend": "0.30.0rc2"}
        for k in manifest["kernels"]:
            integ = k["integration"]
            assert integ is not None, (config, k["name"], k["integration_notes"])
            modules = {i["name"]: i["module"] for i in integ["imports"]}
            for i in integ["imports"]:
                assert i["where"] == _where(session.index, i["module"], i["name"]), (config, i)
            for patch in integ["patches"]:
                assert patch["where"] == _method_where(session.index, modules[patch["class"]], patch["class"],
                                                       patch["method"]), (config, patch)
            # registered as vllm-ascend registers its own: vLLM's direct_register_custom_op, vllm-ascend's dispatch key
            reg = integ["register"]
            assert reg["where"] == _where(session.index, "vllm.utils.torch_utils", "direct_register_custom_op")
            assert reg["dispatch_key"] == "PrivateUse1" and reg["seen_at"].startswith("vllm_ascend/")
            text = (folder / k["files"]["integration"]).read_text(encoding="utf-8")
            assert f'OP_NAME = "{reg["op_name"]}"' in text and "fake_impl=_op.FAKE" in text
            assert f"torch.ops.vllm.{reg['op_name']}(" in text


def test_glm47_gemm_swiglu_patch_replaces_vllm_ascends_shared_experts_methods(integrations):
    manifest, folder = integrations["GLM-4.7"]
    k = next(k for k in manifest["kernels"] if k["name"] == "fused_matmul_swiglu")
    patched = {(p["class"], p["method"]): p["where"] for p in k["integration"]["patches"]}
    # where the walk found the matched ops (shared_experts.py:189 and :193), and the dense layers' own MLP
    assert patched[("AscendSharedExperts", "part1")].startswith("vllm_ascend/ops/fused_moe/shared_experts.py:")
    assert patched[("AscendSharedExperts", "apply_activation")].startswith("vllm_ascend/ops/fused_moe/shared_experts.py:")
    assert ("Glm4MoeMLP", "forward") in patched
    text = (folder / "patch_fused_matmul_swiglu.py").read_text(encoding="utf-8")
    assert "from vllm_ascend.ops.fused_moe.shared_experts import AscendSharedExperts" in text
    assert "    AscendSharedExperts.part1 = part1_with_fused_matmul_swiglu" in text
    assert "    AscendSharedExperts.apply_activation = apply_activation_with_fused_matmul_swiglu" in text
    assert "torch.ops.vllm.fused_matmul_swiglu(hidden_states, self.layer.gate_up_proj.weight)" in text


def test_qwen3_rope_kvcache_pattern_holds_the_walks_ops(integrations):
    """On A2 vllm-ascend's attention backend keeps forward_includes_kv_cache_update (vllm/v1/attention/backend.py:70):
    the KV-cache write runs inside torch.ops.vllm.unified_attention_with_output, one node of the compiled graph, so
    no pattern claims its torch_npu kernel as a node of the graph, and the notes say where it runs."""
    manifest, folder = integrations["Qwen3-8B"]
    k = next(k for k in manifest["kernels"] if k["name"] == "fused_rope_kvcache")
    for steps in k["integration"]["graph_ops"]:
        assert all(not s["kernel"].startswith("torch_npu.") for s in steps), steps
    notes = " ".join(k["integration_notes"])
    assert "npu_scatter_pa_kv_cache" in notes and "run inside torch.ops.vllm.unified_attention_with_output" in notes
    text = (folder / "pass_fused_rope_kvcache.py").read_text(encoding="utf-8")
    assert "torch_npu.npu_scatter_pa_kv_cache(" not in text
    py_compile.compile(str(folder / "pass_fused_rope_kvcache.py"), doraise=True)


def test_qwen3_rope_kvcache_pattern_over_the_kv_cache_update_op(session, tmp_path):
    """A device with no SoC family (the H100 profile) leaves the attention backend and DeviceOperator undecided:
    the KV-cache write is vLLM's unified_kv_cache_update (where the backend splits it out), which reaches the
    backend's do_kv_cache_update and DeviceOperator.reshape_and_cache's npu_scatter_pa_kv_cache, each family's
    adaptor a candidate under its key. The pattern holds the graph's custom ops with the configuration's scalars
    and the layer's name as vLLM's RopeKVCacheFusionPass holds it; the bench names the deployed scatter kernel."""
    from fusion_analyze.analysis.pipeline import Options, analyze_in
    from fusion_analyze.commands.scaffold import write_scaffold

    folder = tmp_path / "qwen3"
    analysis = analyze_in(session, "Qwen3ForCausalLM", Options(config="Qwen3-8B", device="h100", device_profile=str(H100)))
    attn = next(op for op in analysis.walk.ops if op.kind == "attention")
    scatter = [kk for kk in attn.kernels if kk.name == "torch_npu.npu_scatter_pa_kv_cache"]
    assert any("DeviceAdaptorFamily.STANDARD" in (kk.condition or "") for kk in scatter), [kk.condition for kk in scatter]
    assert any("forward_includes_kv_cache_update" in (kk.condition or "") for kk in scatter)  # through do_kv_cache_update
    assert any(kk.name == "torch_npu._npu_reshape_and_cache" and "COMPATIBILITY" in (kk.condition or "")
               for kk in attn.kernels)  # the 310P adaptor: a candidate, not dropped
    write_scaffold(analysis, str(folder))
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    k = next(k for k in manifest["kernels"] if k["name"] == "fused_rope_kvcache")
    graphs = k["integration"]["graph_ops"]
    assert graphs
    for steps in graphs:
        assert [(s["node"], s["kernel"]) for s in steps] == [("rope", "torch.ops.vllm.npu_rotary_embedding"),
                                                             ("attn", "torch.ops.vllm.unified_kv_cache_update")]
    text = (folder / "pass_fused_rope_kvcache.py").read_text(encoding="utf-8")
    # head size from the configuration, full rotary, NeoX as the layer was built (is_neox_style recorded True)
    assert "torch.ops.vllm.npu_rotary_embedding(positions, q, k, cos_sin_cache, head_dim, head_dim, True)" in text
    assert "torch.ops.vllm.unified_kv_cache_update(k, v, layer_name)" in text
    assert "layer_name = _encode_layer_name(self.layer_name)" in text
    assert "get_layers_from_vllm_config(vllm_config, Attention)" in text
    assert "_, attn_layer, kv_cache, layer_slot_mapping = get_attention_context(layer_name)" in text
    assert "'head_dim': 128" in text
    assert not [i for i in k["integration"]["imports"] if i["where"].startswith("MISSING")]
    py_compile.compile(str(folder / "pass_fused_rope_kvcache.py"), doraise=True)
    bench = (folder / "fused_rope_kvcache.py").read_text(encoding="utf-8")
    deployed = [kk for s in ("decode", "prefill") for o in _module_value(bench, "DEPLOYMENT")[s]["ops"]
                for kk in o["kernels"]]
    assert "torch_npu.npu_scatter_pa_kv_cache" in deployed, deployed


def _module_value(text: str, name: str):
    """A module-level literal of a generated file, read without running it."""
    tree = ast.parse(text)
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == name)
    return ast.literal_eval(node.value)


_GRIDS = """
import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    m = importlib.import_module(name)
    out[name] = {s: m.launch_grids(m.scenario_dims(s)) for s in sorted(m.SCENARIOS)}
print(json.dumps(out))
"""


def test_no_launch_grid_exceeds_triton_ascends_limit_at_the_configuration_shapes(integrations, torch):
    """Triton-Ascend runs at most 65,535 programs in the flattened grid (vllm_ascend/ops/triton/bincount.py): every
    launch of every kernel at each scenario's shapes, recorded on meta tensors. Qwen3-8B's RoPE + KV-cache prefill
    has 4096 tokens x 40 heads = 163,840 (token, head) rows: one program per row would be over it."""
    _triton()
    seen = {}
    for config, (manifest, folder) in integrations.items():
        names = [k["name"] for k in manifest["kernels"]]
        r = subprocess.run([sys.executable, "-c", _GRIDS, *names], cwd=folder, capture_output=True, text=True,
                           env=dict(os.environ, TRITON_INTERPRET="1"), timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        for name, scenarios in json.loads(r.stdout).items():
            assert set(scenarios) == {"decode", "prefill"}, (config, name)
            for scenario, grids in scenarios.items():
                assert grids, (config, name, scenario)
                for grid in grids:
                    programs = 1
                    for g in grid:
                        programs *= g
                    assert 0 < programs <= 65535, (config, name, scenario, grid)
                seen[(config, name, scenario)] = grids
    # RoPE + KV cache: token rows, every head of a token in its program (4096 programs at prefill, not 163,840
    # (token, head) ones); one program per row where they fit
    assert seen[("Qwen3-8B", "fused_rope_kvcache", "prefill")] == [[4096]]
    assert seen[("Qwen3-8B", "fused_rope_kvcache", "decode")] == [[32]]
    # more rows than the cap: 65,535 programs, each looping over its rows
    manifest, folder = integrations["Qwen3-8B"]
    code = ("import json, fused_rope_kvcache as m; d = m.scenario_dims('prefill'); d['num_tokens'] = 200000;"
            "print(json.dumps(m.launch_grids(d)))")
    r = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True, text=True,
                       env=dict(os.environ, TRITON_INTERPRET="1"), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [[65535]]


# -- the benchmark's baseline and its estimate on a device profile (issue 46 items 1 and 2) ------------------------
H100 = Path(__file__).resolve().parents[1] / "docs" / "calibration" / "h100.yaml"
DEPLOYED = {"Qwen3-8B": {"fused_matmul_swiglu": {"torch_npu.npu_swiglu", "torch.ops.vllm.unquantized_gemm"},
                         "fused_rope_kvcache": {"torch.ops.vllm.npu_rotary_embedding", "torch_npu.npu_scatter_pa_kv_cache"}},
            "GLM-4.7": {"fused_matmul_swiglu": {"torch_npu.npu_swiglu"},
                        "fused_moe_combine_add_rmsnorm": {"torch.ops._C_ascend.npu_add_rms_norm_bias"}}}


@pytest.mark.parametrize("model,config", [("Qwen3-8B", "Qwen3-8B"), ("Glm4MoeForCausalLM", "GLM-4.7")],
                         ids=["Qwen3-8B", "GLM-4.7"])
def test_bench_names_the_deployed_kernels_and_recomputes_the_estimate(model, config, real_tree, tmp_path, torch):
    """Each bench carries the ops of its match with the kernels the report lists for them (DEPLOYMENT), runs
    --smoke on the CPU, and its estimate recomputed on the profile the report was made with is the report's."""
    _triton()
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    folder = tmp_path / "kernels"
    cmd = [sys.executable, "-c", "from fusion_analyze.cli import main; main()", model, "--vllm-root", str(vllm),
           "--ascend-root", str(ascend), "--config", config, "--lang", "en", "-o", str(tmp_path / "r.md"),
           "--device-profile", str(H100), "--device", "h100", "--scaffold", str(folder)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(folder))
    code = ("import json, sys, importlib; b = importlib.import_module(sys.argv[1]); p = b.load_profile(sys.argv[2], 'h100');"
            "print(json.dumps({s: [b.recompute(s, b._launch(s), p), b.report_estimate(s), b.m.ESTIMATE[s]['instances']"
            " == 1 and b.m.ESTIMATE[s].get('uniform', True),"
            " sorted(k for o in v['ops'] for k in o['kernels'])] for s, v in b.m.DEPLOYMENT.items()}))")
    for name, wanted in DEPLOYED[config].items():
        out = subprocess.run([sys.executable, "-c", code, f"bench_{name}", str(H100)], capture_output=True, text=True,
                             timeout=300, cwd=folder, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert set(got) == {"decode", "prefill"}, name
        for scenario, (est, rep, one, kernels) in got.items():
            assert wanted <= set(kernels), (name, scenario, kernels)
            # decode in a graph; the prefill eager, its GEMMs keeping the GPU busy while the host launches: queued
            assert est["mode"] == rep["mode"] == {"decode": "graph", "prefill": "queued"}[scenario], (est, rep)
            if one:  # one match a layer, the same in every kind: the recomputed estimate is the report's
                for key in ("before_us", "after_us", "saving_us"):
                    assert abs(est[key] - rep[key]) <= 0.02 + 1e-3 * rep[key], (name, scenario, key, est, rep)
        # as a user types it: no TRITON_INTERPRET in the environment (the bench sets it where no GPU or NPU is)
        plain = {k: v for k, v in env.items() if k != "TRITON_INTERPRET"}
        smoke = subprocess.run([sys.executable, f"bench_{name}.py", "--smoke", "--device-profile", str(H100)],
                               capture_output=True, text=True, timeout=300, cwd=folder, env=plain)
        assert smoke.returncode == 0 and "smoke run ok on cpu" in smoke.stdout, smoke.stderr[-3000:]
        assert all(k in smoke.stdout for k in wanted), smoke.stdout


def test_record_profile_keeps_the_profile_and_the_report_says_where_it_does_not_pay(real_tree, tmp_path, torch):
    """bench --record-profile writes its rows as the profile's `measured` entries (the file's header comment kept,
    an entry of the same name, shape and mode replaced); a report made with that profile then says, next to the
    estimate, that the kernel did not pay at the scenario where it was slower, and does not rank it first."""
    _triton()
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    folder, profile = tmp_path / "kernels", tmp_path / "h100.yaml"
    profile.write_text(H100.read_text(encoding="utf-8"), encoding="utf-8")
    base = [sys.executable, "-c", "from fusion_analyze.cli import main; main()", "Qwen3-8B", "--vllm-root", str(vllm),
            "--ascend-root", str(ascend), "--lang", "en", "--device", "h100"]
    r = subprocess.run(base + ["-o", str(tmp_path / "r.md"), "--device-profile", str(profile), "--scaffold", str(folder)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    # prefill slower as launched eagerly and with the host ahead (queued, how a prefill step pays its launches
    # where the profile has that figure); decode faster in a graph
    rows = [{"num_tokens": 4096, "mode": "eager", "before_us": 1000.0, "after_us": 1100.0, "device": "GPU X"},
            {"num_tokens": 32, "mode": "graph", "before_us": 70.0, "after_us": 60.0, "device": "GPU X"},
            {"num_tokens": 4096, "mode": "queued", "before_us": 1000.0, "after_us": 1100.0, "device": "GPU X"}]
    code = ("import json, sys, bench_fused_matmul_swiglu as b; rows = json.loads(sys.argv[2]);"
            "b.record_profile(sys.argv[1], 'h100', rows); b.record_profile(sys.argv[1], 'h100', rows)")
    out = subprocess.run([sys.executable, "-c", code, str(profile), json.dumps(rows)], capture_output=True, text=True,
                         timeout=300, cwd=folder, env=dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(folder)))
    assert out.returncode == 0, out.stderr[-3000:]
    text = profile.read_text(encoding="utf-8")
    head = [line for line in H100.read_text(encoding="utf-8").splitlines() if line.startswith("#")]
    assert head and text.splitlines()[:len(head)] == head
    import yaml

    measured = yaml.safe_load(text)["devices"]["h100"]["measured"]
    mine = [e for e in measured if e["name"] == "matmul_swiglu" and "GPU X" in e["source"]]
    assert sorted((e["mode"], e["shape"]["num_tokens"]) for e in mine) == [("eager", 4096), ("graph", 32),
                                                                          ("queued", 4096)]  # replaced
    assert {e["shape"]["intermediate_size"] for e in mine} == {12288}
    r = subprocess.run(base + ["-o", str(tmp_path / "r2.md"), "--device-profile", str(profile)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    report = (tmp_path / "r2.md").read_text(encoding="utf-8")
    assert "1100.0 µs against 1000.0 µs unfused" in report and "does not pay yet" in report
    # ranked by the decode saving alone (where it paid); slower at both scenarios: not ranked at all
    ranked = [line for line in report.split("\n### 1.")[0].splitlines() if line.startswith("| ") and "GEMM + SwiGLU" in line]
    first = (tmp_path / "r.md").read_text(encoding="utf-8").split("\n### 1.")[0]
    decode = next(line for line in first.splitlines() if line.startswith("| ") and "GEMM + SwiGLU" in line).split(" | ")[2]
    assert ranked and ranked[0].split(" | ")[2] == decode and "µs" in decode, report[:3000]
    rows[1]["after_us"] = 80.0
    out = subprocess.run([sys.executable, "-c", code, str(profile), json.dumps(rows)], capture_output=True, text=True,
                         timeout=300, cwd=folder, env=dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(folder)))
    assert out.returncode == 0, out.stderr[-3000:]
    r = subprocess.run(base + ["-o", str(tmp_path / "r3.md"), "--device-profile", str(profile)], capture_output=True,
                       text=True, timeout=300)
    report = (tmp_path / "r3.md").read_text(encoding="utf-8")
    top = report.split("\n### 1.")[0]
    assert r.returncode == 0 and "### 0." in top and "GEMM + SwiGLU" not in top and "80.0 µs against 70.0 µs" in report, top


# -- the committed GPU runs: the estimate against the measured baseline (docs/calibration/scaffold-<device>.jsonl,
# measured with the profile docs/calibration/<device>.yaml that `fusion-analyze calibrate` wrote on that machine) ---
CALIBRATION = Path(__file__).resolve().parents[1] / "docs" / "calibration"
MEMORY_BOUND = {"add_rmsnorm", "gated_act", "rope_kvcache", "qknorm_rope", "native_rope", "elementwise"}


def _committed_runs() -> dict[str, list[dict]]:
    """Device id -> the rows of its committed run."""
    runs = {p.stem.removeprefix("scaffold-"): [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()
                                               if line.strip()] for p in sorted(CALIBRATION.glob("scaffold-*.jsonl"))}
    if not runs:
        pytest.skip("no docs/calibration/scaffold-<device>.jsonl committed: no GPU run of the scaffolds yet")
    return runs


def test_committed_gpu_run_is_whole():
    """Each committed run holds, for each of the three models, every kernel its folder had, both scenarios, both
    modes, the kernel checked against the reference on the GPU, the device's profile beside it."""
    for dev, rows in _committed_runs().items():
        assert (CALIBRATION / f"{dev}.yaml").is_file(), dev
        assert {r["model"] for r in rows} >= {"Qwen3ForCausalLM", "Glm4MoeForCausalLM", "LlamaForCausalLM"}, dev
        for r in rows:
            assert r["matches_reference"], (dev, r["model"], r["kernel"], r["scenario"], r["mode"])
            assert dev.upper() in r["device"] and r["stand_in"] and r["before_us"] > 0 and r["after_us"] > 0, r
        keys = {(r["model"], r["kernel"], r["scenario"], r["mode"]) for r in rows}
        for model, kernel in {(r["model"], r["kernel"]) for r in rows}:
            assert {(model, kernel, s, m) for s in ("decode", "prefill") for m in ("eager", "graph")} <= keys, \
                (dev, model, kernel)


def test_committed_gpu_run_estimate_within_1_5x_of_the_measured_baseline(real_tree, tmp_path, torch):
    """For the memory-bound families, per scenario as its step runs: the estimate's before, after and saving,
    recomputed now (the scaffold the tool writes today for the run's model and configuration, its bench's
    `recompute` on the run's device profile, with the launches the scenario's step pays: DEPLOYMENT's `launch`),
    within 1.5x of the measured ones against the deployment's stand-in, measured the same way: decode replayed
    from a graph; a prefill, eager with the host ahead of the GPU (`queued`: its GEMMs keep the GPU busy while the
    host launches), from the rows of that mode, else, where the run has none and the profile no `queued` launch
    figure (the estimate's queued launch is then the graph's), from the graph rows, the GPU's time with no host in
    the way. The eager rows (do_bench, one call at a time) time the host's Python where it is slower than the
    GPU: no step of these models runs so. A change of the cost model is checked against the kernels' measurement."""
    import yaml

    _triton()
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    code = ("import json, sys, importlib; b = importlib.import_module(sys.argv[1]); p = b.load_profile(sys.argv[2], sys.argv[3]);"
            "print(json.dumps({s: [b._launch(s), b.recompute(s, b._launch(s), p)] for s in b.m.DEPLOYMENT}))")
    checked, misses, used = 0, [], set()
    for dev, rows in _committed_runs().items():
        profile = CALIBRATION / f"{dev}.yaml"
        launch = yaml.safe_load(profile.read_text(encoding="utf-8"))["devices"][dev]["launch_us"]
        queued_measured = isinstance(launch, dict) and launch.get("queued") is not None
        rows = [r for r in rows if r["family"] in MEMORY_BOUND]
        estimates: dict = {}
        for model, configuration in sorted({(r["model"], r["configuration"]) for r in rows}):
            preset = re.match(r"preset (\S+) ", configuration).group(1)  # the run's folders were made from presets
            folder = tmp_path / dev / preset
            cmd = [sys.executable, "-c", "from fusion_analyze.cli import main; main()", model, "--vllm-root", str(vllm),
                   "--ascend-root", str(ascend), "--config", preset, "--lang", "en", "-o", str(folder) + ".md",
                   "--device-profile", str(profile), "--device", dev, "--scaffold", str(folder)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-3000:]
            env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(folder))
            for kernel in sorted({r["kernel"] for r in rows if r["model"] == model}):
                out = subprocess.run([sys.executable, "-c", code, f"bench_{kernel}", str(profile), dev],
                                     capture_output=True, text=True, timeout=300, cwd=folder, env=env)
                assert out.returncode == 0, (kernel, out.stderr[-3000:])
                estimates[model, kernel] = json.loads(out.stdout.strip().splitlines()[-1])
        for (model, kernel), per in sorted(estimates.items()):
            for scenario, (mode, est) in sorted(per.items()):
                assert est is not None, (dev, model, kernel, scenario)
                mine = [r for r in rows if (r["model"], r["kernel"], r["scenario"]) == (model, kernel, scenario)]
                measured = [r for r in mine if r["mode"] == mode]
                if not measured and mode == "queued" and not queued_measured:
                    measured = [r for r in mine if r["mode"] == "graph"]
                assert measured, (dev, model, kernel, scenario, mode)
                for row in measured:
                    checked += 1
                    used.add((scenario, mode, row["mode"]))
                    for key in ("before_us", "after_us", "saving_us"):
                        got = row[key]
                        if est[key] <= 0 or got <= 0 or max(est[key], got) / min(est[key], got) > 1.5:
                            misses.append((dev, model, kernel, scenario, row["mode"], key, est[key], got))
    assert checked >= 6, checked
    # decode as its step runs (graph); each prefill's step runs with the host ahead (queued)
    assert {("decode", "graph")} | {("prefill", "queued")} == {(s, m) for s, m, _row in used}, used
    assert not misses, misses
