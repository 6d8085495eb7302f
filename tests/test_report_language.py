"""One language per report (issue 35): the Chinese report has no English prose left outside code, the English one
no Chinese; every sentence code writes (ir/texts.py, templates/labels.yaml `texts`) and every pattern's words
exist in both languages; a report rendered from its JSON says the same as the one rendered in the run."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest

from fusion_analyze.ir.texts import Said, Texts, say, sentences, table
from fusion_analyze.match.patterns import load_patterns
from fusion_analyze.render.markdown import labels, render_data

from .conftest import FIXTURES, MINI, ROOT

CONFIG = FIXTURES / "configs" / "qwen3-0.6b.json"
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
# words that make a run of English words a sentence, not a term (GEMM, RMSNorm, KV cache, decode, kernel)
STOP = {"a", "an", "the", "is", "are", "be", "not", "no", "and", "or", "but", "of", "to", "in", "on", "at", "by",
        "for", "with", "from", "as", "when", "where", "which", "what", "it", "its", "this", "that", "runs", "run",
        "has", "have", "would", "does", "cannot", "only", "here", "one", "if", "than", "each", "per"}
# code outside backticks: dotted, snake_case or call-like names, paths, numbers, `x=y`
_CODE_TOKEN = re.compile(r"\S*(?:[_/=<>\[\]{}*@#]|\w\.\w|\w\(\))\S*|\d\S*")
_RUN = re.compile(r"[A-Za-z][A-Za-z'-]*(?:[ ,;:()]+[A-Za-z][A-Za-z'-]*)*")
# The estimate's own sentences (estimate/benefit.py, being rewritten in issue 35): a rejected row's reason and
# the symbolic formula. Said through ir/texts.py `say` (and `_benefit_text` through `Texts`), they leave this list.
NOT_YET = re.compile(r"$^")  # nothing left untranslated


def english_prose(md: str) -> list[str]:
    """Runs of three or more English words, one of them a STOP word, outside code blocks, code spans, URLs and
    code tokens: what a Chinese report must not say in English."""
    text = re.sub(r"```.*?```", " ", md, flags=re.S)  # the op sequence, the stubs: code
    text = re.sub(r"``.+?``|`[^`\n]*`", " ", text)
    text = re.sub(r"https?://\S+", " ", text)
    found = []
    for line in text.splitlines():
        line = _CODE_TOKEN.sub("\0", line)
        for run in _RUN.findall(line):
            words = re.findall(r"[A-Za-z][A-Za-z'-]*", run)
            if len(words) >= 3 and any(w.lower() in STOP for w in words) and not NOT_YET.search(run):
                found.append(run.strip(" ,;:()"))
    return found


def test_the_check_finds_english_prose_and_leaves_code_and_terms():
    assert english_prose("未融合; the Ascend path runs it as separate kernels: `a`") == [
        "the Ascend path runs it as separate kernels"]
    assert english_prose("未融合 (`x.py` L3); Ascend路径将其作为多个独立kernel运行: `torch_npu.npu_swiglu`\n"
                         "```\nif built when not x\n```\nMatMul + SwiGLU; RoPE与KV Cache写入; decode (32 tokens, 图模式)\n"
                         "- 条件: `self.tp_size > 1`; gate_up_proj (MergedColumnParallelLinear)") == []


def _render(run, tmp_path, *args, lang="zh", name="r.md"):
    out = tmp_path / name
    r = run(*args, "-o", str(out), "--lang", lang)
    assert r.exit_code == 0, r.output
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("args", [
    ("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--config", str(CONFIG)),
    ("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI)),  # undecided tests: conditional rows
    ("qwen3", "--vllm-root", str(MINI)),  # no Ascend tree
    ("DeepseekV3ForCausalLM", "--vllm-root", str(MINI), "--ascend-root", str(MINI)),  # MoE, MLA: more notes
], ids=["config", "no-config", "cuda-only", "deepseek"])
def test_the_chinese_report_is_chinese_and_the_english_one_english(run, tmp_path, args):
    zh = _render(run, tmp_path, *args, lang="zh", name="zh.md")
    assert zh.startswith("## 模型算子分析报告") and not english_prose(zh), english_prose(zh)
    en = _render(run, tmp_path, *args, lang="en", name="en.md")
    assert en.startswith("## Model operator analysis") and not CJK.findall(en), sorted(set(
        line for line in en.splitlines() if CJK.search(line)))[:5]


def test_a_report_rendered_from_its_json_says_the_same(run, tmp_path):
    """`texts` carries every sentence's key and arguments, so the JSON alone renders the report in either
    language (the reports `all` caches, a report read back by another tool)."""
    args = ("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI))
    data = json.loads(_render(run, tmp_path, *args, "--format", "json", name="r.json"))
    assert data["texts"] and all(isinstance(k, str) for k in data["texts"])
    for lang in ("zh", "en"):
        assert render_data(data, lang=lang) == _render(run, tmp_path, *args, lang=lang, name=f"{lang}.md")


def test_every_sentence_and_label_has_both_languages():
    for key, s in sentences().items():
        assert set(s) == {"zh", "en"}, key
        fields = [{f[1].split(":")[0] for f in string.Formatter().parse(s[lang]) if f[1]} for lang in ("zh", "en")]
        assert fields[0] == fields[1], f"labels.yaml texts.{key}: zh and en have other arguments"
        assert not CJK.search(s["en"]), key
        assert CJK.search(s["zh"]) or not re.search(r"[A-Za-z]{3} [a-z]{2,} [a-z]{2,}", s["zh"]), key

    def plural(v) -> bool:  # a count said in English's two forms ({one, many}; labels.yaml `diff`): one label
        return isinstance(v, dict) and set(v) == {"one", "many"} and all("{n}" in x for x in v.values())

    def keys(d, prefix=""):
        return {prefix + k for k, v in d.items()} | {x for k, v in d.items() if isinstance(v, dict) and not plural(v)
                                                    for x in keys(v, f"{prefix}{k}.")}
    assert keys(labels("zh")) == keys(labels("en"))
    diff = labels("zh")["diff"]
    assert not [k for k, v in labels("en")["diff"].items() if plural(v) and not (isinstance(diff[k], str) and "{n}" in diff[k])]


def test_every_sentence_code_says_is_in_labels_yaml():
    src = ROOT / "src" / "fusion_analyze"
    used = {m for p in src.rglob("*.py") for m in re.findall(r"\bsay\(\s*\"(\w+)\"", p.read_text(encoding="utf-8"))}
    used |= {f"side_{s}" for s in ("left", "right")}  # said as say(f"side_{side}")
    assert used and not used - set(sentences()), sorted(used - set(sentences()))


def test_every_pattern_says_its_message_and_forms_in_both_languages():
    for p in load_patterns():
        assert set(p.message) == {"zh", "en"} and all(p.message.values()), p.file
        assert CJK.search(p.message["zh"]) and not CJK.search(p.message["en"]), p.file
        assert set(p.title) == {"zh", "en"} and set(p.target) == {"zh", "en"}, p.file
        for form in p.forms + p.inactive:
            for words in (form.fused_in_model, form.when):
                assert words is None or isinstance(words, Said) and {"zh", "en"} <= set(words.spec), (p.file, form.id)
    gate_up = next(p for p in load_patterns() if p.id == "gate_up_merge")
    assert "Down" not in gate_up.title["zh"] and "down" not in gate_up.title["zh"].lower()


def test_a_said_text_is_its_english_and_renders_in_either_language():
    s = say("ev_kernel_in_paths", kernel="torch_npu.npu_fused_infer_attention_score", where="Attention",
            paths=["decode", "prefill"])
    assert s == "torch_npu.npu_fused_infer_attention_score (in Attention; decode and prefill paths)"
    t = table({"a": [{"what": s}]})
    assert Texts(t, "zh")(str(s)) == "`torch_npu.npu_fused_infer_attention_score` (位于 `Attention`; decode和prefill路径)"
    assert Texts(t, "en")(str(s)).startswith("`torch_npu.npu_fused_infer_attention_score` (in `Attention`;")
    assert Texts(t, "zh")("plain code") == "plain code"
