"""`diff` / `compare` (issue 37, item 4): line moves are no change, regressions and new fusions grouped by
cause across models, a summary that fits a PR comment with per-model <details>, `--fail-on regression` by
default; and `all --allow-fail` / `--max-failures` (item 5). Exit codes and stderr are checked apart."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from fusion_analyze.commands.diff import MAX_MD, diff_model, group_causes, to_markdown

from .conftest import MINI


def _ok(r, code: int = 0) -> None:
    assert r.exit_code == code, (r.exit_code, r.stdout, r.stderr)
    assert r.stderr == "", r.stderr


def _one_error(r, needle: str) -> None:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert r.stdout == "" and "Traceback" not in r.stderr


def _copy(tmp_path, name):
    dest = tmp_path / name
    shutil.copytree(MINI, dest)
    return dest


def _edit(path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


QWEN3 = "vllm/model_executor/models/qwen3.py"
QKNORM_PASS = "vllm_ascend/compilation/passes/qknorm_rope_fusion_pass.py"


@pytest.fixture
def moved(tmp_path, run):
    """Two `all` folders of the mini tree; the second has a comment inserted at the top of qwen3.py and of the
    Ascend pass: every line below moved, nothing else changed."""
    out = {}
    v2 = _copy(tmp_path, "v2")
    for rel in (QWEN3, QKNORM_PASS):
        p = v2 / rel
        p.write_text("# a comment that moves every line below\n" + p.read_text(encoding="utf-8"), encoding="utf-8")
    for name, root in (("old", MINI), ("new", v2)):
        r = run("all", "--vllm-root", str(root), "--ascend-root", str(root), "-o", str(tmp_path / name),
                "--only", "Qwen2*,Qwen3ForCausalLM,Hybrid*", "--lang", "en")
        assert r.exit_code == 0, r.stderr
        out[name] = tmp_path / name
    return out


def test_a_pure_line_move_is_not_a_change(run, moved):
    old, new = str(moved["old"]), str(moved["new"])
    ops = [op for op in json.loads((moved["new"] / "Qwen3ForCausalLM.json").read_text())["ops"]
           if op["file"] == QWEN3]
    before = {op["id"]: op["line"] for op in json.loads((moved["old"] / "Qwen3ForCausalLM.json").read_text())["ops"]}
    assert any(before.get(op["id"]) not in (None, op["line"]) for op in ops)  # lines did move
    for fail_on in ("any", "regression", "ops", "opportunities", "status"):
        r = run("diff", old, new, "--fail-on", fail_on)
        _ok(r, 0)
    r = run("diff", old, new, "--lang", "en")
    assert "3 models, 0 changed" in r.stdout and "<details>" not in r.stdout and "moved" not in r.stdout.split("are not changes.", 1)[1]
    doc = json.loads(run("diff", old, new, "--format", "json").stdout)
    assert doc["models"] == [] and doc["summary"]["changed"] == 0
    # the line moves are still counted where the JSON has every model
    d = diff_model("Qwen3ForCausalLM", json.loads((moved["old"] / "Qwen3ForCausalLM.json").read_text()),
                   json.loads((moved["new"] / "Qwen3ForCausalLM.json").read_text()))
    assert d.line_moves > 0 and not d.changed()


@pytest.fixture
def broken_pass(tmp_path, run):
    """`all` over three models; the new side moves lines, drops Qwen3's o_proj, and breaks the Ascend
    QK-norm + RoPE pass's pattern, which fused the q/k norm + rope of Qwen3 and of the hybrid model."""
    v2 = _copy(tmp_path, "v2")
    _edit(v2 / QWEN3, "    def forward(self, positions, hidden_states):\n",
          "    # a comment that moves every line below\n    def forward(self, positions, hidden_states):\n")
    _edit(v2 / QWEN3, "        output, _ = self.o_proj(attn_output)\n        return output\n", "        return attn_output\n")
    _edit(v2 / QKNORM_PASS, "torch.ops.vllm.npu_rotary_embedding(", "torch.ops.npu.npu_apply_rotary_pos_emb(")
    out = {}
    for name, root in (("old", MINI), ("new", v2)):
        r = run("all", "--vllm-root", str(root), "--ascend-root", str(root), "-o", str(tmp_path / name),
                "--only", "Qwen2*,Qwen3ForCausalLM,Hybrid*", "--lang", "en")
        assert r.exit_code == 0, r.stderr
        out[name] = str(tmp_path / name)
    return out


def test_regressions_are_grouped_by_the_pass_that_no_longer_fuses_them(run, broken_pass):
    r = run("diff", broken_pass["old"], broken_pass["new"], "--lang", "en")
    _ok(r, 1)  # --fail-on regression is the default
    md = r.stdout
    assert md.count("**R1. Ascend graph pass `QKNormRopeFusionPass`**") == 1  # one cause, said once
    assert "**R2." not in md
    cause = md.split("**R1.", 1)[1].split("\n\n", 1)[0]
    assert "still in the new tree" in cause and "4 scenarios in 2 models" in cause
    assert f"- old: fused_by_ascend_graph_pass: `{QKNORM_PASS}` L" in cause
    assert "- scenarios: `qknorm_rope` (2), `qkv_split_norm_rope` (2)" in cause
    assert "- models: HybridForCausalLM, Qwen3ForCausalLM" in cause
    # the regressions are listed once in the summary, then per model in collapsible blocks
    assert md.count("fused_by_ascend_graph_pass → open") == 4
    block = md.split("<details><summary><b>Qwen3ForCausalLM</b>", 1)[1].split("</details>", 1)[0]
    assert "2 regressions" in block and "ops removed (2)" in block
    assert "- ⚠ `qknorm_rope@Qwen3Attention.forward`: fused_by_ascend_graph_pass → open (cause R1)" in block
    assert "`model.layers.self_attn.o_proj:o_proj` matmul at" in block
    assert "model.layers.self_attn.qkv_proj:qkv_proj" not in md  # it only moved a line
    assert md.count("<details>") == md.count("</details>")
    # exit codes: each --fail-on apart
    _ok(run("diff", broken_pass["old"], broken_pass["new"], "--fail-on", "none"), 0)
    _ok(run("diff", broken_pass["old"], broken_pass["new"], "--fail-on", "ops"), 1)
    _ok(run("diff", broken_pass["old"], broken_pass["old"], "--fail-on", "any"), 0)
    doc = json.loads(run("diff", broken_pass["old"], broken_pass["new"], "--format", "json").stdout)
    (c,) = doc["causes"]["regressions"]
    assert (c["kind"], c["subject"], c["models"]) == ("pass", "QKNormRopeFusionPass",
                                                      ["HybridForCausalLM", "Qwen3ForCausalLM"])
    assert doc["summary"]["regressions"] == 4 and doc["summary"]["regression_causes"] == 1


def test_diff_bad_input_is_one_line_on_stderr_and_exit_2(run, broken_pass, tmp_path):
    _one_error(run("diff", broken_pass["old"], str(tmp_path / "missing.json")), "no such report")
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    _one_error(run("diff", broken_pass["old"], str(bad)), "not a fusion-analyze JSON report")
    _one_error(run("diff", broken_pass["old"], broken_pass["new"], "--fail-on", "sometimes"), "--fail-on sometimes")


def _opp(oid, status, fuser=None, note=None, file="m.py", line=10):
    o = {"id": oid, "scenario": oid.split("@")[0], "status": status, "file": file, "line": line,
         "title": {"en": oid.split("@")[0].replace("_", " "), "zh": "标题"}, "category": "norm",
         "evidence": [fuser] if fuser else []}
    if note:
        o["note"] = note
    return o


def _report(arch, opps, ops=(), passes=()):
    return {"model": {"architecture": arch}, "opportunities": list(opps),
            "ops": [{"id": i, "kind": "matmul", "file": f, "line": n, "kernels": []} for i, f, n in ops],
            "passes": {"ascend": [{"name": p} for p in passes], "cuda": []}}


PASS = {"file": "vllm_ascend/compilation/passes/ar.py", "line": 134,
        "what": "MatmulAllReduceAddRMSNormPass (pattern P: a -> b); added in vllm_ascend/x.py:65"}
PASS_MOVED = dict(PASS, line=99, what="MatmulAllReduceAddRMSNormPass (pattern Q: a -> b); added in vllm_ascend/x.py:70")
KERNEL = {"file": "vllm_ascend/ops/layernorm.py", "line": 73,
          "what": "torch.ops._C_ascend.npu_add_rms_norm_bias (in AscendRMSNorm)"}


def test_causes_are_grouped_across_models_each_once_with_old_and_new_evidence():
    olds, news = {}, {}
    for i, arch in enumerate(["A", "B", "C"]):
        olds[arch] = _report(arch, [_opp(f"allreduce_norm@{arch}Layer.forward", "fused_by_ascend_graph_pass",
                                         PASS_MOVED if i else PASS),
                                    _opp(f"add_rmsnorm@{arch}Layer.forward", "fused_by_ascend_kernel", KERNEL),
                                    _opp(f"silu_mul@{arch}MLP.forward", "open", note="separate kernels: x, y")],
                             passes=["MatmulAllReduceAddRMSNormPass"])
        news[arch] = _report(arch, [_opp(f"allreduce_norm@{arch}Layer.forward", "open",
                                         note="the Ascend path runs it as separate kernels: all_reduce, rms"),
                                    _opp(f"add_rmsnorm@{arch}Layer.forward",
                                         "open" if arch == "C" else "fused_by_ascend_kernel", None if arch == "C"
                                         else dict(KERNEL, line=94)),
                                    _opp(f"silu_mul@{arch}MLP.forward", "fused_by_ascend_kernel",
                                         {"file": "vllm_ascend/ops/activation.py", "line": 37,
                                          "what": "torch_npu.npu_swiglu (in AscendSiluAndMul)"})])
    diffs = [diff_model(a, olds[a], news[a]) for a in olds]
    reg = group_causes(diffs, True)
    assert [(c["kind"], c["subject"], c["models"]) for c in reg] == [
        ("pass", "MatmulAllReduceAddRMSNormPass", ["A", "B", "C"]),
        ("kernel", "torch.ops._C_ascend.npu_add_rms_norm_bias", ["C"])]
    assert len(reg[0]["evidence"]) == 2  # pattern P and pattern Q: the same pass, two texts (lines ignored)
    fus = group_causes(diffs, False)
    assert [(c["kind"], c["subject"], len(c["opportunities"])) for c in fus] == [("kernel", "torch_npu.npu_swiglu", 3)]
    md = to_markdown(diffs, "old", "new")
    assert md.count("Ascend graph pass `MatmulAllReduceAddRMSNormPass`") == 1
    assert "**R2. Ascend kernel `torch.ops._C_ascend.npu_add_rms_norm_bias`**" in md
    assert "**F1. Ascend kernel `torch_npu.npu_swiglu`**" in md
    r1 = md.split("**R1.", 1)[1].split("\n\n", 1)[0]
    assert "- new: the Ascend path runs it as separate kernels: all_reduce, rms" in r1
    assert "- models: A, B, C" in r1 and "3 scenarios in 3 models" in r1
    f1 = md.split("**F1.", 1)[1].split("\n\n", 1)[0]
    assert "- old: separate kernels: x, y" in f1 and "- new: fused_by_ascend_kernel: `vllm_ascend/ops/activation.py` L37" in f1
    # A and B keep add_rmsnorm fused by the same kernel at another line: no change at all
    assert not any(d.fuser_changed for d in diffs)


def test_a_pass_gone_from_the_new_tree_is_said_gone(tmp_path, run):
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old_dir.mkdir()
    new_dir.mkdir()
    (old_dir / "A.json").write_text(json.dumps(_report("A", [_opp("allreduce_norm@L.f", "fused_by_ascend_graph_pass", PASS)],
                                                       passes=["MatmulAllReduceAddRMSNormPass"])))
    (new_dir / "A.json").write_text(json.dumps(_report("A", [_opp("allreduce_norm@L.f", "open")], passes=["Other"])))
    r = run("diff", str(old_dir), str(new_dir), "--lang", "en")
    _ok(r, 1)
    assert "**R1. Ascend graph pass `MatmulAllReduceAddRMSNormPass`**: gone: the new tree has no such pass" in r.stdout


def test_the_scenario_changed_to_its_fused_form_is_one_transition_and_a_new_fusion():
    old = _report("Qwen3VL", [_opp("qknorm_rope@Qwen3Attention.forward", "open"), _opp("gate_act_mul@MLP.forward", "open")],
                  [("a", "m.py", 10), ("b", "m.py", 20)])
    new = _report("Qwen3VL", [_opp("qknorm_rope@patch_qwen3vl.forward", "fused_by_ascend_kernel",
                                   {"file": "vllm_ascend/patch/worker/patch_qwen3vl.py", "line": 40,
                                    "what": "triton_split_qkv_rmsnorm_mrope (in patch)"}),
                              _opp("gate_act_mul@MLP.forward", "open"), _opp("add_rmsnorm@Layer.forward", "open")],
                  [("a", "m.py", 11), ("b", "m.py", 21)])
    d = diff_model("Qwen3VL", old, new)
    (c,) = d.status_changed
    assert (c["id"], c["was"], c["old"], c["new"]) == ("qknorm_rope@patch_qwen3vl.forward",
                                                       "qknorm_rope@Qwen3Attention.forward", "open", "fused_by_ascend_kernel")
    assert d.opps_removed == [] and d.opps_added == [{"id": "add_rmsnorm@Layer.forward", "status": "open"}]
    assert d.ops_moved == [] and d.line_moves == 2
    md = to_markdown([d], "old", "new")
    assert "**F1. kernel of a vllm-ascend patch `triton_split_qkv_rmsnorm_mrope`**" in md
    assert "- ✅ `qknorm_rope@patch_qwen3vl.forward` (was `qknorm_rope@Qwen3Attention.forward`): open → " \
           "fused_by_ascend_kernel (cause F1)" in md


def test_a_fused_scenario_fused_by_something_else_is_a_change_but_not_a_regression():
    old = _report("M", [_opp("gate_topk@Moe.forward", "fused_by_ascend_kernel",
                             {"file": "vllm_ascend/device/device_op.py", "line": 147,
                              "what": "torch.ops._C_ascend.moe_gating_top_k (in AscendFusedMoE)"})])
    new = _report("M", [_opp("gate_topk@Moe.forward", "fused_by_ascend_kernel",
                             {"file": "vllm_ascend/device/device_op.py", "line": 272,
                              "what": "torch.ops._C_ascend.moe_gating_top_k (in AscendFusedTopKRouter)"})])
    d = diff_model("M", old, new)
    assert d.changed() and not d.regressions and len(d.fuser_changed) == 1
    md = to_markdown([d], "o", "n")
    assert "### Fused on both sides, by something else" in md and "(in AscendFusedTopKRouter)" in md


def _big_release(n_models: int = 220):
    """A release diff as large as a real one: every model loses two pass fusions, a third of them a kernel one,
    some gain one, each adds and removes many ops."""
    diffs = []
    for i in range(n_models):
        arch = f"Model{i:03d}ForCausalLM"
        o_opps = [_opp(f"allreduce_norm@Layer{i}.forward", "fused_by_ascend_graph_pass", PASS),
                  _opp(f"matmul_allreduce@Attn{i}.forward", "fused_by_ascend_graph_pass", PASS),
                  _opp(f"add_rmsnorm@Layer{i}.forward", "fused_by_ascend_kernel" if i % 3 == 0 else "open",
                       KERNEL if i % 3 == 0 else None),
                  _opp(f"silu_mul@MLP{i}.forward", "open")]
        n_opps = [_opp(o["id"], "open") for o in o_opps[:3]] + [
            _opp(f"silu_mul@MLP{i}.forward", "fused_by_ascend_kernel" if i % 5 == 0 else "open",
                 {"file": f"vllm_ascend/ops/act{i % 4}.py", "line": 3, "what": f"torch_npu.kernel_{i % 4} (in X)"}
                 if i % 5 == 0 else None)]
        o_ops = [(f"model.layers.block_{k}:very_long_operator_name_{k}", f"vllm/model_executor/models/m{i}.py", k)
                 for k in range(40)]
        n_ops = [(f"model.layers.block_{k}:very_long_operator_name_{k}", f"vllm/model_executor/models/m{i}.py", k + 3)
                 for k in range(20, 70)]
        diffs.append(diff_model(arch, _report(arch, o_opps, o_ops), _report(arch, n_opps, n_ops)))
    return diffs


def test_a_release_sized_diff_fits_a_pr_comment_with_every_cause_once():
    diffs = _big_release()
    md = to_markdown(diffs, "vllm==0.23.0", "vllm==0.30.0")
    assert len(md) <= MAX_MD
    heads = re.findall(r"^\*\*([RF]\d+)\. ", md, flags=re.M)
    assert heads == ["R1", "R2", "F1", "F2", "F3", "F4"]  # each cause once
    assert md.count("`MatmulAllReduceAddRMSNormPass`") == 1
    assert md.count("<details>") == md.count("</details>") > 0
    assert "more changed models left out to fit 65,536 characters" in md  # what did not fit is named
    summary = md.split("### ⚠", 1)[0]
    assert "**⚠ 514 regressions** (fused → open) in 220 models from 2 causes" in summary
    tiny = to_markdown(diffs, "a", "b", limit=600)
    assert len(tiny) <= 600 and "truncated" in tiny and tiny.count("<details>") == tiny.count("</details>")


def test_default_fail_on_is_regression_and_any_still_counts_other_changes(tmp_path, run):
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old_dir.mkdir()
    new_dir.mkdir()
    (old_dir / "A.json").write_text(json.dumps(_report("A", [_opp("x@A.f", "open")])))
    (new_dir / "A.json").write_text(json.dumps(_report("A", [_opp("x@A.f", "open"), _opp("y@A.f", "open")])))
    _ok(run("diff", str(old_dir), str(new_dir)), 0)  # an opportunity added is no regression
    _ok(run("diff", str(old_dir), str(new_dir), "--fail-on", "any"), 1)
    _ok(run("diff", str(old_dir), str(new_dir), "--fail-on", "opportunities"), 1)
    _ok(run("diff", str(old_dir), str(new_dir), "--fail-on", "ops"), 0)


# --- all: --allow-fail / --max-failures ------------------------------------------------------------------------

def _all(run, tmp_path, *extra):
    return run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(tmp_path / "out"),
               "--only", "Qwen3ForCausalLM,Broken*", "--lang", "en", *extra)


def test_all_fails_on_a_failed_architecture_unless_it_is_allowed(run, tmp_path):
    r = _all(run, tmp_path)
    assert r.exit_code == 1 and r.stdout == ""
    assert "1 analyzed, 1 failed; index:" in r.stderr and "  BrokenForCausalLM: " in r.stderr
    r = _all(run, tmp_path, "--allow-fail", "Broken*")
    assert r.exit_code == 0, r.stderr
    assert "1 analyzed, 1 failed (1 allowed by --allow-fail)" in r.stderr
    assert "  BrokenForCausalLM (allowed): " in r.stderr
    r = _all(run, tmp_path, "--allow-fail", "Other,BrokenForCausalLM")
    assert r.exit_code == 0, r.stderr
    r = _all(run, tmp_path, "--max-failures", "1")
    assert r.exit_code == 0 and "1 failed;" in r.stderr
    r = _all(run, tmp_path, "--allow-fail", "Broken*", "--lang", "zh")  # the last line in the report's language
    assert "已分析 1 个，失败 1 个（其中 1 个为 --allow-fail 所允许）；索引：" in r.stderr and "analyzed" not in r.stderr
    r = _all(run, tmp_path, "--allow-fail", "Qwen*")  # allows the one that did not fail: still exit 1
    assert r.exit_code == 1
    _one_error(_all(run, tmp_path, "--max-failures", "-1"), "--max-failures -1")


# --- the CI workflow example -----------------------------------------------------------------------------------

def test_the_example_workflow_installs_from_the_repository_and_keeps_exit_2_an_error():
    yaml = pytest.importorskip("yaml")
    from .conftest import ROOT

    text = (ROOT / "examples" / "fusion-diff.yml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    steps = doc["jobs"]["diff"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "|| true" not in text and "continue-on-error" not in text
    assert not re.search(r"pip install\s+fusion-analyze\b", runs)  # not on PyPI
    assert re.search(r"pip install (\.|\"?git\+https://)", runs)
    assert "--allow-fail" in runs or "--max-failures" in runs
    assert "--fail-on regression" in runs and "--format sarif" in runs
    # the diff's exit code: 1 (a regression) fails the job only when asked, anything else (2, 3) always
    assert re.search(r'"\$code" -eq 1', runs) and "exit \"$code\"" in runs


def test_ci_findings_are_one_per_cause_largest_first():
    from fusion_analyze.commands.diff import findings

    a = diff_model("A", _report("A", [_opp("allreduce_norm@A.f", "fused_by_ascend_graph_pass", PASS),
                                      _opp("matmul_allreduce@A.f", "fused_by_ascend_graph_pass", PASS)]),
                   _report("A", [_opp("allreduce_norm@A.f", "open"), _opp("matmul_allreduce@A.f", "open")]))
    b = diff_model("B", _report("B", [_opp("add_rmsnorm@B.f", "fused_by_ascend_kernel", KERNEL)]),
                   _report("B", [_opp("add_rmsnorm@B.f", "open")]))
    found = findings([a, b])
    assert [f["properties"]["opportunities"] for f in found] == [["A:allreduce_norm@A.f", "A:matmul_allreduce@A.f"],
                                                                  ["B:add_rmsnorm@B.f"]]
    assert [f["properties"]["models"] for f in found] == [["A"], ["B"]]
    assert found[0]["rule"]["id"].startswith("regression-") and found[1]["rule"]["id"] == "add_rmsnorm"
