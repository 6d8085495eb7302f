"""Every claim decided where the code decides it, and said where it does not (issue 34), on the 0.30 pair."""

from __future__ import annotations

import json

from fusion_analyze.analysis.pipeline import Options, analyze_in, render

from .conditions_check import problems, terms
from .conftest import validate_report
from .layers import after_first


def _text(session, file: str, line: int) -> str:
    root = session.vllm.root if file.startswith("vllm/") else session.ascend.root
    return (root / file).read_text().splitlines()[line - 1]


def test_deepseek_v3_walks_the_attention_its_construction_chose(session):
    """Without a configuration DeepseekV2DecoderLayer builds MLA attention when not use_mha (the default
    choice) and tests `if self.use_mha:` in forward, the attribute __init__ sets from that local: the forward's
    test is decided by the construction, so DeepseekAttention is not walked on the MLA layer and no condition
    reads `self.use_mha and built when not (use_mha)`."""
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options())
    attn = [op for op in a.walk.ops if op.path.startswith("model.layers.self_attn") and op.steady]
    assert attn and not [op for op in attn if op.scope.startswith("DeepseekAttention.")]
    assert [op for op in attn if op.kind == "mla_attention"]
    for op in a.walk.ops:
        assert not problems(op.condition or ""), (op.id, op.condition)
    (mla,) = [op for op in attn if op.kind == "mla_attention"]
    assert ("use_mha", False) in terms(mla.condition or "")  # the choice is still said on the ops


def test_the_kv_cache_write_is_where_the_backend_does_it(session, hf):
    """`Attention.forward` calls unified_kv_cache_update only when `not self.attn_backend.
    forward_includes_kv_cache_update`; the runtime's backend on Ascend is AscendAttentionBackend, which inherits
    True from AttentionBackend (a class attribute read through the MRO): the cache is written inside the
    backend's forward (npu_scatter_pa_kv_cache), and rope_kvcache names that kernel, not the custom op."""
    a = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf))
    (attn,) = [op for op in after_first(a.walk.ops) if op.kind == "attention"]
    names = [k.name for k in attn.kernels]
    assert "torch.ops.vllm.unified_kv_cache_update" not in names
    writes = [k for k in attn.kernels if "scatter_pa_kv_cache" in k.name]
    assert writes and all(k.file == "vllm_ascend/device/device_op.py" for k in writes)
    assert all("npu_scatter_pa_kv_cache(" in _text(session, k.file, k.line) for k in writes)
    (row,) = [o for o in a.opportunities if o.scenario == "rope_kvcache"]
    assert row.status.value == "open" and "npu_scatter_pa_kv_cache" in (row.note or "")
    assert "unified_kv_cache_update" not in json.dumps([row.evidence, row.note, row.conditions])


def test_a_row_resting_on_an_undecided_test_says_so(session):
    """Qwen2 without a configuration: q_norm / k_norm exist only when qk_norm is true, so the q/k norm + RoPE
    row is conditional: the table says "if `...qk_norm...`", the row ranks after the decided rows of its state,
    the JSON marks it, and the terminal summary counts it apart."""
    a = analyze_in(session, "Qwen2ForCausalLM", Options())
    (row,) = [o for o in a.opportunities if o.scenario == "qknorm_rope"]
    assert row.conditional and any("qk_norm" in c for c in row.when)
    doc = row.to_json()
    assert doc["conditional"]["when"] == row.when
    md = render(a, "md", lang="en")
    table = md.split("### 3.", 1)[1].split("### 4.", 1)[0]  # the opportunity table (section 0 ranks open rows too)
    lines = [ln for ln in table.splitlines() if ln.startswith("| ") and "@" in ln]
    at = {o.id: next(i for i, ln in enumerate(lines) if f"`{o.id}`" in ln) for o in a.opportunities}
    assert " — if `" in lines[at[row.id]] and "qk_norm" in lines[at[row.id]]
    for status in {o.status for o in a.opportunities}:  # within a state, the decided rows come first
        mine = [o for o in a.opportunities if o.status == status]
        decided = [at[o.id] for o in mine if not o.conditional]
        conditional = [at[o.id] for o in mine if o.conditional]
        assert not decided or not conditional or max(decided) < min(conditional), status
    assert any(o.conditional for o in a.opportunities) and any(not o.conditional for o in a.opportunities)
    assert "conditional rows" in md
    validate_report(a.report)


def test_no_printed_condition_is_contradictory_or_literal(run, tmp_path, real_tree, hf):
    """The sweep of the 0.30 pair: no condition a report prints (an op's, a row's) holds a test and its
    negation, or a literal test."""
    out = tmp_path / "all"
    r = run("all", "--vllm-root", str(real_tree("vllm==0.30.0")), "--ascend-root",
            str(real_tree("vllm-ascend==0.30.0rc2")), "--hf-root", hf, "-o", str(out), "-j", "2")
    assert r.exit_code in (0, 1), r.output
    bad, seen = [], 0
    for f in sorted(out.glob("*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            continue
        texts = [op.get("condition") or "" for op in doc["ops"]]
        texts += [c for o in doc["opportunities"] for c in o["conditions"]]
        seen += len(texts)
        bad += [(f.stem, p, t[:160]) for t in texts for p in problems(t)]
    assert seen > 1000 and not bad, bad[:10]


def test_a_graph_pass_does_not_fit_where_the_pattern_matcher_would_not_replace(session, hf):
    """Granite scales the embeddings (granite.py:372) and the first layer adds the residual after attention:
    MulsAddPattern's `x * scale + y` fits the two ops, but torch's pattern matcher (which vllm-ascend's passes
    register through) does not replace them: attention runs between them (vLLM compiles piecewise, split at
    attention) and the scaled embeddings also feed input_layernorm (an intermediate with other users, the
    pattern returning one value). Both reasons are named; and since the add's other operand is computed from
    the scaled embeddings through attention, the two ops are no element-wise chain at all: no row holds them."""
    from fusion_analyze.match.matcher import Graph, match_pattern
    from fusion_analyze.status.derive import _apart, _matcher_misfit

    a = analyze_in(session, "GraniteForCausalLM", Options(hf_root=hf))
    embed_scale = next(op for op in a.walk.ops if op.section == "prologue" and op.kind == "mul")
    assert "embedding_multiplier" in _text(session, embed_scale.file, embed_scale.line)
    assert not [o for o in a.opportunities if embed_scale.id in o.ops]
    graph = Graph(a.walk.ops)
    chain = next(p for p in session.patterns if p.id == "vector_elementwise_chain")
    (m,) = [m for m in match_pattern(graph, chain) if embed_scale in m.op_list]
    assert _apart(m, graph)
    muls_add = next(pat for p in a.passes["ascend"] if p.name == "MulsAddFusionPass" for pat in p.patterns)
    reasons = " ".join(_matcher_misfit(m, muls_add, graph))
    assert "runs between them" in reasons and "split at attention" in reasons
    assert "is also read by input_layernorm" in reasons


def test_the_cuda_column_names_every_fusing_router_kernel_and_needs_the_optional_norm(session, hf):
    """GLM-4.5's router on CUDA is GroupedTopKRouter: with a valid grouping it runs `_moe_C.grouped_topk`
    (through the local `grouped_topk_impl = grouped_topk`), else fused_topk's kernels; each is named with its
    test. vLLM's q/k-norm + RoPE + KV-cache pass needs a q/k norm next to the RoPE: GLM-4.5 has none, so that
    pass is not its CUDA column (Qwen3, which has one, keeps it)."""
    a = analyze_in(session, "Glm4MoeForCausalLM", Options(hf_root=hf))
    (gate,) = [o for o in a.opportunities if o.scenario == "gate_topk"]
    assert gate.cuda["status"] == "fused_by_kernel" and gate.cuda["kernels"][0] == "torch.ops._moe_C.grouped_topk"
    assert any(c.startswith("torch.ops._moe_C.grouped_topk runs when") and "valid_grouping()" in c
               for c in gate.cuda["conditions"])
    (rk,) = [o for o in a.opportunities if o.scenario == "rope_kvcache"]
    assert rk.cuda.get("pass") != "QkNormRopeKvCacheFusionPass"
    q3 = analyze_in(session, "Qwen3ForCausalLM", Options(hf_root=hf))
    (rk3,) = [o for o in q3.opportunities if o.scenario == "rope_kvcache"]
    assert rk3.cuda.get("pass") == "QkNormRopeKvCacheFusionPass"


def test_inductor_fuses_a_model_add_with_a_norm_layer_on_cuda(session, hf):
    """Granite adds the scaled residual itself and then calls post_attention_layernorm (an RMSNorm CustomOp):
    under vLLM's default compilation the norm runs its native forward and Inductor fuses the add into it."""
    a = analyze_in(session, "GraniteForCausalLM", Options(hf_root=hf))
    (row,) = [o for o in a.opportunities if o.id == "add_rmsnorm@GraniteDecoderLayer.forward"]
    assert row.cuda["status"] == "fused_by_inductor"
    norm = next(op for op in a.walk.ops if op.id in row.ops and op.kind == "rmsnorm")
    assert norm.attrs.get("custom_op") is True


def test_a_norm_width_is_compared_as_code_when_its_value_is_not_known(session):
    """OLMoE without --hf-root: q_norm is RMSNorm(self.total_num_heads * self.head_dim) and RoPE's head size is
    self.head_dim (followed up get_rope's parameters): a norm over the whole projection whatever the
    configuration, so the per-head QKNormRoPE pass does not fit, said with both widths; Qwen3's per-head
    q_norm (RMSNorm(self.head_dim)) still fits it without a configuration."""
    a = analyze_in(session, "OlmoeForCausalLM", Options())
    q_norm = next(op for op in a.walk.ops if op.name == "q_norm")
    assert q_norm.attrs["values"]["hidden_size_code"] == "self.total_num_heads * self.head_dim"
    (row,) = [o for o in a.opportunities if o.scenario == "qknorm_rope"]
    assert row.status.value == "open"
    assert "normalises self.total_num_heads * self.head_dim values, the rotary head size is self.head_dim" in row.note
    q3 = analyze_in(session, "Qwen3ForCausalLM", Options())
    (fit,) = [o for o in q3.opportunities if o.scenario == "qknorm_rope"]
    assert fit.status.value == "fused_by_ascend_graph_pass"
    assert not any("normalise per head" in c for c in fit.state_if)


def test_a_text_model_reads_its_text_sub_configuration(session, hf):
    """Qwen3_5ForCausalLM's model type qwen3_5 is a multimodal wrapper (Qwen3_5Config, whose vision
    sub-configuration shares the type): the text model reads vLLM's hf_text_config, so the defaults and the
    model type that decide the walk are Qwen3_5TextConfig's, and the header says so."""
    a = analyze_in(session, "Qwen3_5ForCausalLM", Options(hf_root=hf))
    conf = a.report["configuration"]
    assert conf["class"]["class"] == "Qwen3_5TextConfig" and conf["class"]["text_config_of"] == "Qwen3_5Config"
    assert conf["model_type"] == "qwen3_5_text"
    assert "Qwen3_5TextConfig (the text_config of Qwen3_5Config)" in conf["decided_by"]
    md = render(a, "md", lang="en")
    assert "`Qwen3_5TextConfig` (the text_config of `Qwen3_5Config`)" in "\n".join(md.splitlines()[:30])
    validate_report(a.report)


def test_the_terminal_summary_fits_80_columns_and_counts_what_it_lists(session, capsys, monkeypatch):
    """Issue 47: every line of the summary fits 80 columns with each listed id whole; the open count says how
    many rows are not costed (those are not listed), and the listing says how many it shows of how many."""
    import re
    import unicodedata

    from fusion_analyze.render.summary import print_summary

    monkeypatch.setenv("COLUMNS", "80")
    a = analyze_in(session, "DeepseekV3ForCausalLM", Options(config="DeepSeek-V3"))
    print_summary(a, "reports/x.md", None, to_stdout=True, lang="en")
    out = capsys.readouterr().out

    def cells(line: str) -> int:
        return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)

    assert all(cells(line) <= 80 for line in out.splitlines()), out
    opens = [o for o in a.opportunities if o.status.value == "open"]
    costed = [o for o in opens if not a.benefits[o.id].rejected]
    m = re.search(r"\((\d+) of (\d+) costed\)", out)
    assert m and int(m.group(2)) == len(costed) and int(m.group(1)) == min(5, len(costed))
    listed = re.findall(r"^ ?\d+\. \S+\s+\S+\s+(\S+)$", out, flags=re.M)
    assert len(listed) == int(m.group(1)) and all(i in {o.id for o in costed} for i in listed)
    if len(costed) < len(opens):
        assert f"{len(opens) - len(costed)} not costed" in out


def test_deepseek_v3_at_vllm_defaults_decides_what_was_given(session):
    """DeepSeek-V3 with its preset and no engine arguments (vLLM's defaults: TP 1, no EP, no speculative config):
    EAGLE-3's aux-state capture (`if layer_id not in self.aux_hidden_state_layers: return`, the layers set only
    for a speculative config) runs nothing, so no op or row rests on it; `use_sequence_parallel_moe` (it needs
    expert parallelism, vllm_ascend/patch/platform/patch_parallel_config.py) and `model_config.use_mla`
    (ModelConfig.use_mla run from vLLM's code with the preset's model type and kv_lora_rank) are decided;
    `is_moe_layer` waits on the layer's index only. Every undecided test says what it waits on."""
    from fusion_analyze.status.waits import counts

    a = analyze_in(session, "DeepSeek-V3", Options())
    assert a.report["configuration"]["decided_by"].startswith("preset DeepSeek-V3")
    aux = [op for op in a.walk.ops if "_capture_aux_hidden_state" in op.id or "_capture_aux_hidden_state" in op.scope]
    assert not aux, [op.id for op in aux]
    assert not [o.id for o in a.opportunities if "_capture_aux_hidden_state" in o.id]
    printed = [op.condition or "" for op in a.walk.ops] + [c for o in a.opportunities for c in o.conditions]
    for name in ("use_sequence_parallel_moe", "model_config.use_mla"):
        assert not [t for t in printed if name in t], name
    assert any(op.kind == "mla_attention" for op in a.walk.ops)  # decided true: the MLA layer is walked
    undecided = a.report["undecided"]
    assert undecided and all(e["waits_on"] and e["why"] for e in undecided)
    # `is_moe_layer` tests the layer's index: with the preset, each layer is built with its own index and the
    # layers fall into kinds (dense 0-2, MoE 3-60, the first layer walked apart), so it is decided, not an open test
    assert not [e for e in undecided if "is_moe_layer" in e["test"]]
    assert [k["count"] for k in a.report["layer_kinds"]] == [1, 2, 58]
    by = {e["test"]: e for e in undecided}
    assert by["has_prefill"]["waits_on"] == "runtime_path" and by["has_decode"]["waits_on"] == "runtime_path"
    assert by["self.tp_size > 1"]["waits_on"] == "tp_size" and by["self.tp_size > 1"]["given"] is False
    c = counts(undecided)
    assert c["runtime"] > 0 and c["given"] == sum(e["given"] is True for e in undecided)
    validate_report(a.report)
    doc = json.loads(render(a, "json"))
    assert doc["undecided"] == undecided


def test_a_stated_tp_decides_the_linear_all_reduce(session):
    """`-tp 4`: AscendRowParallelLinear sets `self.custom_op, self.tp_rank, self.tp_size = get_parallel_op(
    disable_tp, prefix, self, "row")` (vllm_ascend/ops/linear.py:327); with vllm-ascend's default finegrained TP
    off, get_parallel_op returns `None, get_tp_group().rank_in_group, get_tp_group().world_size`
    (vllm_ascend/ops/linear_op.py:468): its third item is the stated 4 though the rank is not known, so
    RowParallelLinear.forward's `self.reduce_results and self.tp_size > 1` holds (vllm/model_executor/layers/
    linear.py:1775) and the o_proj / down_proj all-reduces are unconditional, on Qwen3-8B and DeepSeek-V3 alike.
    At `-tp 1` they do not run; with TP unstated the test stays open, waiting on --tensor-parallel-size."""
    for model in ("Qwen3-8B", "DeepSeek-V3"):
        a = analyze_in(session, model, Options(tp=4))
        reduces = [op for op in a.walk.ops if op.kind == "allreduce" and op.id.endswith("o_proj.allreduce")]
        assert reduces and all(op.condition is None for op in reduces), [(op.id, op.condition) for op in reduces]
        # (the ops' conditions: a kernel test inside GroupCoordinator, `self.world_size == 1` of the group
        # `get_tp_group()` returns, read with no construction call, is still the tool's debt)
        printed = " ".join(op["condition"] or "" for op in a.report["ops"])
        assert not [e for e in a.report["undecided"] if e["waits_on"] == "tp_size" and e["test"] in printed], model
        assert not [e for e in a.report["undecided"] if "use_sequence_parallel_moe" in e["test"]]
    one = analyze_in(session, "Qwen3-8B", Options(tp=1))
    assert not [op for op in one.walk.ops if op.kind == "allreduce" and op.id.endswith("o_proj.allreduce")]
    unstated = analyze_in(session, "Qwen3-8B", Options())
    tp = [e for e in unstated.report["undecided"] if e["test"] == "self.tp_size > 1"]
    assert tp and tp[0]["waits_on"] == "tp_size" and tp[0]["given"] is False


def test_no_kv_transfer_config_means_no_kv_transfer_group(session):
    """has_kv_transfer_group() is `_KV_CONNECTOR_AGENT is not None` (vllm/distributed/kv_transfer/
    kv_transfer_state.py:27); the global is set only by ensure_kv_transfer_initialized under `kv_transfer_config
    is not None and ...` (:75), which the report's deployment (no KV-transfer config) fails: the connector's
    save / wait-for-load calls of vllm-ascend's MLA layer never run, and no test waits on it."""
    a = analyze_in(session, "DeepSeek-V3", Options())
    assert not [op.id for op in a.walk.ops if "kv_transfer_group" in (op.condition or "")]
    assert not [op.id for op in a.walk.ops if op.id.endswith(("connector.save_kv_layer", "connector.wait_for_layer_load"))]
    assert not [e for e in a.report["undecided"] if "kv_transfer" in e["test"]]


def test_decided_parts_of_a_test_and_a_loop_layer_flag_are_not_printed(session):
    """`if not self.is_sequence_parallel and self.tp_size > 1 and fused_moe_out_is_tuple:` (vllm_ascend/models/
    deepseek_v4/model.py:438) with `self.is_sequence_parallel = parallel_config.use_sequence_parallel_moe` (:290,
    False without expert parallelism) prints only what is left of it; MiniMax-M3's decoder loop reads
    `layer.use_sequence_parallel` of the layer it walks (vllm_ascend/models/minimax_m3/minimax_m3.py:1195), the
    same property: decided too. No undecided test of either model reads a sequence-parallel flag."""
    for model in ("DeepseekV4ForCausalLM", "MiniMaxM3SparseForCausalLM"):
        a = analyze_in(session, model, Options())
        # (of the ops' conditions: the MoE runner's kernel test `not self.moe_config.is_sequence_parallel`,
        # vllm_ascend/ops/fused_moe/fused_moe.py:353, a property of the runner's FusedMoEConfig, is still the
        # tool's debt)
        printed = " ".join(op["condition"] or "" for op in a.report["ops"])
        flags = [e["test"] for e in a.report["undecided"] if e["test"] in printed
                 and "sequence_parallel" in e["test"] and "input_is_sequence_parallel" not in e["test"]]
        assert not flags, (model, flags)
    v4 = analyze_in(session, "DeepseekV4ForCausalLM", Options())
    tails = [op.condition for op in v4.walk.ops if op.scope == "DeepseekV4MoE.forward" and op.line == 441]
    assert tails and all("is_sequence_parallel" not in (c or "") for c in tails)
    assert any("self.tp_size > 1" in (c or "") for c in tails)


def test_the_sweep_line_counts_what_undecided_tests_wait_on():
    """`all` sums the reports' counts (status/waits.py) and says them on one line, given inputs first."""
    from fusion_analyze.commands.batch import undecided_line, undecided_totals
    from fusion_analyze.status.waits import counts

    one = counts([{"test": "has_prefill", "waits_on": "runtime_path", "given": False, "why": "", "count": 2},
                  {"test": "x.dtype == torch.float16", "waits_on": "dtype", "given": True, "why": "", "count": 1},
                  {"test": "self.tp_size > 1", "waits_on": "tp_size", "given": False, "why": "", "count": 1}])
    total = undecided_totals([{"ok": True, "undecided": one}, {"ok": True, "undecided": one}, {"ok": False}])
    assert total["given"] == 2 and total["runtime"] == 2 and total["open"] == 2
    line = undecided_line(total, "en")
    assert line.startswith("2 wait on something given (goal: 0) (dtype 2); 2 on runtime values (runtime_path 2)")
    assert "2 on an input not given (tp_size 2)" in line
    zh = undecided_line(total, "zh")
    assert zh.startswith("2 个等待已给出的输入 (目标: 0) (dtype 2)") and "(tp_size 2)" in zh
