"""Issue 47 item 5: `--lang` on every command and every line it prints. `diff` and `compare` say their Markdown
and their SARIF / annotation messages in zh (the default) or en, from templates/labels.yaml (`<lang>.diff`, the
`texts` sentences, the reports' own `texts` tables); `all` says its stderr and index lines in the report's
language; the single-model command's warnings follow --lang."""

from __future__ import annotations

import json
import re

import pytest

from fusion_analyze.commands.diff import Diffs, diff_model, findings, group_causes, to_markdown
from fusion_analyze.ir.texts import say

from .conftest import MINI
from .test_report_language import english_prose
from .test_sarif import validate_sarif
from .test_sarif import two_sides  # noqa: F401  (a fixture: the two-tree diff of the mini fixture)

CJK = re.compile(r"[\u4e00-\u9fff]")
# what a zh line may keep in Latin letters: the tool's name, code words of the domain (they are names, as in the
# single-model report's zh labels: "Ascend图融合", "kernel"), the scenarios of the estimate, units
# (labels.yaml's zh sentences keep "all-reduce" and `tp_size`), and the op kinds (code)
KEPT = {"fusion", "analyze", "Ascend", "pass", "kernel", "MoE", "vLLM", "vllm", "ascend", "json", "format",
        "decode", "prefill", "npugraph_ex", "open", "fused", "all", "reduce", "tp_size", "matmul", "allreduce"}
STATUS = re.compile(r"\b(?:fused_by_ascend_graph_pass|fused_by_ascend_kernel|fused_in_model|inactive|open)\b")


def _english_words(text: str, names: tuple = ()) -> list[str]:
    """The Latin words of `text` that are no code, id, status, path, model name or kept word: English left."""
    text = re.sub(r"`[^`\n]*`", " ", text)  # code spans: ids, kernels, files, passes
    text = re.sub(r"</?\w+>", " ", text)  # <details>, <summary>, <b>
    text = re.sub(r"\S+\.py(:\d+)?", " ", text)  # paths
    text = re.sub(r"\S+@\S+", " ", text)  # opportunity ids
    text = re.sub(r"\b\w+(?:\.\w+)+\b", " ", text)  # dotted names (modules, kernels) where no backticks mark code
    for name in names:
        text = text.replace(name, " ")
    text = STATUS.sub(" ", text)
    return [w for w in re.findall(r"[A-Za-z][A-Za-z_]{2,}", text) if w not in KEPT]


# --- a diff with every section: causes, other changes, fusers, lists, one side only, deployment -------------------

# the reports' sentences (ir/texts.py), as the status code writes them
PASS_SAID = say("pass_added_in", what=say("pass_pattern", name="MatmulAllReduceAddRMSNormPass", pattern="P", chain="a -> b"),
                where="vllm_ascend/x.py:65")
KERNEL_SAID = say("ev_kernel_in", kernel="torch_npu.npu_swiglu", where="AscendSiluAndMul")
KERNEL2_SAID = say("ev_kernel_in", kernel="torch_npu.npu_other", where="AscendSiluAndMul")
SEPARATE = say("separate_kernels", kernels=["all_reduce", "rms_norm"])
REJECTED = say("rejected_tp1")
PASS = {"file": "vllm_ascend/compilation/passes/ar.py", "line": 134, "what": str(PASS_SAID)}
KERNEL = {"file": "vllm_ascend/ops/activation.py", "line": 37, "what": str(KERNEL_SAID)}
KERNEL2 = {"file": "vllm_ascend/ops/activation.py", "line": 50, "what": str(KERNEL2_SAID)}


def _opp(oid, status, fuser=None, note=None, rejected=None, saves=0.0):
    o = {"id": oid, "scenario": oid.split("@")[0], "status": status, "file": "m.py", "line": 10,
         "title": {"en": oid.split("@")[0].replace("_", " "), "zh": "融合标题"}, "category": "norm",
         "evidence": [fuser] if fuser else [],
         "benefit": {"numbers": {"decode": {"model": {"time_us": saves}}}}}
    if note:
        o["note"] = note
    if rejected:
        o["benefit"]["rejected"] = rejected
    return o


def _doc(arch, opps, ops, side):
    doc = {"model": {"architecture": arch}, "opportunities": opps,
           "ops": [{"id": i, "kind": "matmul", "file": f, "line": 5, "kernels": [{"name": k} for k in ks]}
                   for i, f, ks in ops],
           "passes": {"ascend": [{"name": "MatmulAllReduceAddRMSNormPass"}] if side == "old" else [], "cuda": []},
           "deployment": {"stated": ["-tp 1"] if side == "old" else ["-tp 4"],
                          "moe_comm": [{"class": "AllGatherCommImpl" if side == "old" else "MC2CommImpl",
                                        "paths": ["decode"]}]},
           "estimate": {"steps": {"decode": {"step_us": 2000.0 if side == "old" else 900.0, "mode": "graph"}}},
           "sources": {"vllm": {"version": "0.30.0" if side == "old" else "0.34.0"}}}
    doc["texts"] = {str(t): t.spec for t in (SEPARATE, REJECTED, PASS_SAID, KERNEL_SAID, KERNEL2_SAID)}  # as
    # render/json.py writes it
    return doc


@pytest.fixture
def every_section(tmp_path):
    old = _doc("ModelA", [_opp("allreduce_norm@L.f", "fused_by_ascend_graph_pass", PASS),
                          _opp("swiglu@M.f", "open", note=str(SEPARATE)),
                          _opp("gate@M.f", "fused_by_ascend_kernel", KERNEL),
                          _opp("qk_norm@A.f", "fused_by_ascend_kernel", KERNEL),
                          _opp("matmul_allreduce@M.f", "open", rejected=str(REJECTED)),
                          _opp("gone@M.f", "open")],
               [("m.a:a", "m.py", ["aclnnMatmul"]), ("m.b:b", "m.py", []), ("m.c:c", "m.py", [])], "old")
    new = _doc("ModelA", [_opp("allreduce_norm@L.f", "open", note=str(SEPARATE)),
                          _opp("swiglu@M.f", "fused_by_ascend_kernel", KERNEL),
                          _opp("gate@M.f", "inactive"),
                          _opp("qk_norm@A.f", "fused_by_ascend_kernel", KERNEL2),
                          _opp("matmul_allreduce@M.f", "open", saves=300.0),
                          _opp("added@M.f", "open")],
               [("m.a:a", "m.py", ["torch.ops.vllm.all_reduce"]), ("m.c:c", "other.py", []), ("m.d:d", "m.py", [])],
               "new")
    for side, docs in (("old", [old, dict(old, model={"architecture": "OnlyOld"})]),
                       ("new", [new, dict(new, model={"architecture": "OnlyNew"})])):
        (tmp_path / side).mkdir()
        for doc in docs:
            (tmp_path / side / f"{doc['model']['architecture']}.json").write_text(json.dumps(doc), encoding="utf-8")
    return tmp_path


def test_every_section_of_the_diff_is_said_in_chinese(run, every_section):
    r = run("diff", str(every_section / "old"), str(every_section / "new"), "--fail-on", "none")  # zh: the default
    assert r.exit_code == 0, r.stderr
    md = r.stdout
    assert r.stderr == ""
    heads = [ln for ln in md.splitlines() if ln.startswith("#")]
    assert heads == ["## fusion-analyze 差异", "### ⚠ 按原因分组的回退", "### ✅ 按原因分组的新融合", "### 其他状态变化",
                     "### 两侧都已融合, 但融合方式不同", "### 仅在一侧适用的行 (按决定它们的条件分组)", "### 各路径的MoE通信",
                     "### 出现与消失的kernel", "### 各场景的单步时间与未融合机会的节省", "### 仅在一侧的架构",
                     "### 各模型 (1 个有变化)"]
    assert "**R1. Ascend图融合pass `MatmulAllReduceAddRMSNormPass`**: 已消失: 新源码树中没有该pass; 原因未知" in md
    assert "**F1. Ascend kernel `torch_npu.npu_swiglu`**: 旧侧的其他模型已在使用" in md
    # the reports' own sentences, through their `texts` tables: the note and the reason a row is ruled out
    assert "- 新侧: Ascend路径将其作为多个独立kernel运行: `all_reduce`, `rms_norm`" in md
    assert "**D1. 仅在新侧**: 在旧侧被排除, 原因: tp_size = 1: 没有可融合的all-reduce" in md
    assert "- 旧侧: fused_by_ascend_graph_pass: `vllm_ascend/compilation/passes/ar.py` L134: " \
           "`MatmulAllReduceAddRMSNormPass` (模式 `P`: `a -> b`); 添加于 `vllm_ascend/x.py:65`" in md
    assert "- 仅在旧侧 (1): OnlyOld" in md and "- 仅在新侧 (1): OnlyNew" in md
    assert "| `torch.ops.vllm.all_reduce` | 新增 |" in md and "| ModelA | decode | 2.00 ms → 900.0 µs |" in md
    assert "- 新增的机会 (1):" in md and "- 移除的算子 (1):" in md and "- 移到其他文件的算子 (1):" in md
    assert _english_words(md, ("ModelA", "OnlyOld", "OnlyNew", "AllGatherCommImpl", "MC2CommImpl")) == []
    assert english_prose(md) == []  # the single-model report's check too


def test_every_section_of_the_diff_is_said_in_english(run, every_section):
    r = run("diff", str(every_section / "old"), str(every_section / "new"), "--fail-on", "none", "--lang", "en")
    assert r.exit_code == 0, r.stderr
    md = r.stdout
    assert not CJK.search(md), CJK.findall(md)
    assert "## fusion-analyze diff" in md and "### Other status changes" in md and "### Kernels that come and go" in md
    assert "**R1. Ascend graph pass `MatmulAllReduceAddRMSNormPass`**: gone: the new tree has no such pass" in md
    assert "- new: the Ascend path runs it as separate kernels: `all_reduce`, `rms_norm`" in md
    assert "**D1. only in `new`**: ruled out in `old` because tp_size = 1: there is no all-reduce to fuse" in md
    assert "- only in `old` (1): OnlyOld" in md and "Lines that only moved are not changes." in md
    # the JSON stays language-neutral: the same document in either language, its texts English
    a = json.loads(run("diff", str(every_section / "old"), str(every_section / "new"), "--format", "json",
                       "--lang", "zh").stdout)
    b = json.loads(run("diff", str(every_section / "old"), str(every_section / "new"), "--format", "json",
                       "--lang", "en").stdout)
    assert a == b and a["causes"]["new_fusions"][0]["presence"] == "used by other models of the old side already"
    assert not CJK.search(json.dumps(a["causes"], ensure_ascii=False))


def test_the_markdown_function_speaks_each_language_and_keeps_its_numbers():
    old = {"model": {"architecture": "A"}, "ops": [],
           "opportunities": [_opp("allreduce_norm@L.f", "fused_by_ascend_graph_pass", PASS)]}
    new = {"model": {"architecture": "A"}, "ops": [], "opportunities": [_opp("allreduce_norm@L.f", "open")]}
    diffs = Diffs([diff_model("A", old, new)])
    zh, en = to_markdown(diffs, "o", "n", lang="zh"), to_markdown(diffs, "o", "n", lang="en")
    assert "1 个模型, 其中 1 个有变化; **⚠ 1 个回退** (fused → open), 涉及 1 个模型, 来自 1 个原因" in zh
    assert "1 model, 1 changed; **⚠ 1 regression** (fused → open) in 1 model from 1 cause" in en
    assert to_markdown(diffs, "o", "n") == en  # the function's default: English, as its callers had it
    assert group_causes(diffs, True)[0]["presence"] is None  # no names: nothing said of presence
    (f_zh,), (f_en,) = findings(diffs, lang="zh"), findings(diffs, lang="en")
    assert f_zh["rule"]["title"] == "融合标题" and f_en["rule"]["title"] == "allreduce norm"  # the pattern's own words
    assert f_zh["message"].startswith("1 个模型中的 1 个回退 (fused → open) 来自同一原因: Ascend图融合pass")
    assert f_en["message"].startswith("1 regression (fused → open) in 1 model from one cause: Ascend graph pass")
    assert {k: v for k, v in f_zh.items() if k not in ("message", "title", "rule", "related")} == \
        {k: v for k, v in f_en.items() if k not in ("message", "title", "rule", "related")}


# --- diff / compare on the mini fixture's two trees --------------------------------------------------------------

def test_diff_of_two_trees_in_chinese_and_english(run, two_sides):  # noqa: F811
    old, new = str(two_sides["old"]), str(two_sides["new"])
    zh = run("diff", old, new)
    assert zh.exit_code == 1 and zh.stderr == ""  # the exit code does not depend on the language
    assert zh.stdout == run("diff", old, new, "--lang", "zh").stdout
    assert "**R1. Ascend图融合pass `QKNormRopeFusionPass`**: 新源码树中仍有此pass · 2 个模型中的 4 个场景" in zh.stdout
    assert _english_words(zh.stdout, ("HybridForCausalLM", "Qwen3ForCausalLM", "vLLM 0.99.0", "vllm-ascend 0.99.0rc1",
                                      "QKNormRopeFusionPass", "QKNormRopeFusionPattern")) == []
    assert english_prose(zh.stdout) == []
    en = run("diff", old, new, "--lang", "en")
    assert en.exit_code == 1 and not CJK.search(en.stdout)
    assert "still in the new tree · 4 scenarios in 2 models" in en.stdout
    # the environment variable, as for the other commands
    assert run("diff", old, new, env_lang="en").stdout == en.stdout


@pytest.fixture
def run(run):  # noqa: F811  (conftest's, with FUSION_ANALYZE_LANG when a test asks)
    from typer.testing import CliRunner

    from fusion_analyze.cli import app

    def _run(*args, env_lang=None):
        if env_lang is None:
            return run(*args)
        return CliRunner().invoke(app, list(args), env={"FUSION_ANALYZE_LANG": env_lang})

    return _run


def test_diff_sarif_and_annotations_in_each_language(run, two_sides):  # noqa: F811
    old, new = str(two_sides["old"]), str(two_sides["new"])
    logs = {}
    for lang in ("zh", "en"):
        r = run("diff", old, new, "--format", "sarif", "--lang", lang)
        assert r.exit_code == 1 and r.stderr == ""
        logs[lang] = json.loads(r.stdout)
        validate_sarif(logs[lang])
    (zh,), (en,) = logs["zh"]["runs"][0]["results"], logs["en"]["runs"][0]["results"]
    assert zh["message"]["text"].startswith("2 个模型中的 4 个回退 (fused → open) 来自同一原因: Ascend图融合pass "
                                            "`QKNormRopeFusionPass`; 新源码树中仍有此pass。")
    assert "现在: Ascend路径将其作为多个独立kernel运行" in zh["message"]["text"]
    assert en["message"]["text"].startswith("4 regressions (fused → open) in 2 models from one cause")
    assert " Now: the Ascend path runs it as separate kernels" in en["message"]["text"]
    assert all(x["message"]["text"].startswith("旧源码树: ") for x in zh["relatedLocations"][:1])
    assert (zh["locations"], zh["properties"], zh["partialFingerprints"]) == \
        (en["locations"], en["properties"], en["partialFingerprints"])  # where and what: the same
    gh = run("diff", old, new, "--format", "github", "--fail-on", "none", "--lang", "zh")
    assert gh.exit_code == 0 and "title=Ascend图融合pass `QKNormRopeFusionPass`%3A 2 个模型中的 4 个回退::" in gh.stdout


def test_compare_speaks_the_chosen_language(run, tmp_path):
    args = ["compare", "qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--config", "Qwen3-8B",
            "--base-args", "-tp 1", "--head-args", "-tp 4", "--fail-on", "none"]
    zh = run(*args)
    assert zh.exit_code == 0 and zh.stderr == "", zh.stderr
    assert "### 各场景的单步时间与未融合机会的节省" in zh.stdout and "- 新增的机会 (3):" in zh.stdout
    assert _english_words(zh.stdout, ("Qwen3ForCausalLM", "vLLM 0.99.0", "vllm-ascend 0.99.0rc1", "fixtures/mini",
                                      "MINI", str(MINI))) == []
    assert english_prose(zh.stdout) == []
    en = run(*args, "--lang", "en")
    assert en.exit_code == 0 and not CJK.search(en.stdout)
    assert "### Step time and open savings per scenario" in en.stdout and "- opportunities added (3):" in en.stdout
    bad = run(*args, "--lang", "fr")
    assert bad.exit_code == 2 and bad.stdout == "" and "--lang fr" in bad.stderr


# --- all: stderr and index.md ------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["zh", "en"])
def test_all_says_every_line_in_the_reports_language(run, tmp_path, lang):
    out = tmp_path / "out"
    r = run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(out),
            "--only", "Qwen3ForCausalLM,Broken*", "--allow-fail", "Broken*", "--lang", lang)
    assert r.exit_code == 0, r.stderr
    lines = r.stderr.splitlines()
    index = (out / "index.md").read_text(encoding="utf-8")
    if lang == "zh":
        assert any(ln.startswith("本版本对中未决定的条件: 0 个等待已给出的输入 (目标: 0); ") for ln in lines), lines
        assert "遍历路径上未跟随的替换: 0 个" in lines
        assert "未决定的条件 (status/waits.py): 0 个等待已给出的输入 (目标: 0)" in index
        assert "遍历路径上未跟随的替换 (vllm-ascend 补丁的值无法解析): 0 个" in index
        for said in lines + index.splitlines():  # every line: no English sentence words left
            said = re.sub(r"第 \d+ 行语法错误: .*", "", said)  # but the parser's own words (code)
            assert "BrokenForCausalLM:" not in said or "注册表指向" in said
            assert _english_words(said, ("Qwen3ForCausalLM", "BrokenForCausalLM", "allow-fail", "status/waits",
                                         "not_traced", "layer_index", "tp_size", str(out), "index")) == [], said
    else:
        assert not CJK.search(r.stderr + index)
        assert any(ln.startswith("undecided tests of this release pair: 0 wait on something given (goal: 0); ")
                   for ln in lines)
        assert "replacements not followed on walked paths: 0" in lines
        assert "Undecided tests (status/waits.py): 0 wait on something given (goal: 0)" in index


# --- the single-model command's warnings -------------------------------------------------------------------------

def test_the_warnings_of_one_model_follow_lang(run, tmp_path):
    args = ["qwen3", "--vllm-root", str(MINI), "-o", str(tmp_path / "q.md"), "--serve-args",
            "vllm serve m --gpu-memory-utilization 0.9"]
    zh = run(*args)
    assert zh.exit_code == 0
    warnings = [ln for ln in zh.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 2 and all(ln.startswith("warning: ") for ln in warnings), warnings
    assert any("未给出vllm-ascend树 (--ascend-root)" in ln for ln in warnings)
    assert any("--serve-args: 未读取的选项 (报告未对其建模): --gpu-memory-utilization" in ln for ln in warnings)
    for ln in warnings:
        assert _english_words(ln[len("warning: "):], ("vllm-ascend", "ascend-root", "serve-args", "gpu-memory-utilization",
                                                       "CUDA", "PATH", "VERSION")) == [], ln
    en = run(*args, "--lang", "en")
    assert en.exit_code == 0 and not CJK.search(en.stderr)
    assert "warning: no vllm-ascend tree (--ascend-root): the CUDA backend is walked" in en.stderr
    assert "warning: --serve-args: options not read (the report does not model them): --gpu-memory-utilization" in en.stderr
    assert run(*args, "-q").stderr == ""  # -q silences them in every language


def test_the_memory_fit_warning_follows_lang(run, tmp_path):
    from fusion_analyze.config.reader import read_config

    config = dict(read_config("Qwen3-8B").values)  # the preset, made far too large for one card
    config.update(num_hidden_layers=400, hidden_size=16384, intermediate_size=65536)
    big = tmp_path / "config.json"
    big.write_text(json.dumps(config), encoding="utf-8")
    args = ["qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--config", str(big), "--format", "json"]
    zh, en = run(*args), run(*args, "--lang", "en")
    assert zh.exit_code == en.exit_code == 0
    assert "warning: 部署无法运行: 每个rank仅权重就需" in zh.stderr and "cannot run" not in zh.stderr
    assert "warning: the deployment cannot run: the weights alone are" in en.stderr
    assert json.loads(zh.stdout) == json.loads(en.stdout)  # the JSON report does not depend on the stderr's language
