"""`all` (batch isolation, index, determinism across worker counts); `diff` is tested in test_diff.py."""

from __future__ import annotations

import json
import os
import time

from fusion_analyze.commands.batch import BatchJob, run_batch
from fusion_analyze.walk.walker import Walker

from fusion_analyze.commands import batch

from .conftest import MINI, validate_report

QWENS = ["Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM"]


def test_all_writes_reports_and_index_and_records_failures(run, tmp_path):
    out = tmp_path / "out"
    r = run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(out), "--only", "Qwen3*,Broken*")
    assert r.exit_code == 1  # BrokenForCausalLM cannot be read: recorded, the others still analyzed
    index = (out / "index.md").read_text(encoding="utf-8")
    assert "| [Qwen3ForCausalLM](Qwen3ForCausalLM.md) | `vllm/model_executor/models/qwen3.py` |" in index
    assert "| BrokenForCausalLM | **失败**:" in index and index.startswith("## fusion-analyze: 全部架构")
    for arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
        validate_report(json.loads((out / f"{arch}.json").read_text(encoding="utf-8")))
        assert (out / f"{arch}.md").read_text(encoding="utf-8").startswith("## 模型算子分析报告")
    en = tmp_path / "en"  # --lang en: the index in English too
    run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(en), "--only", "Broken*", "--lang", "en")
    assert "| BrokenForCausalLM | **failed**:" in (en / "index.md").read_text(encoding="utf-8")
    r = run("all", "--vllm-root", str(MINI), "-o", str(out), "--only", "Nope*")
    assert r.exit_code == 2 and "matches no architecture" in r.output


def _job(tmp_path, name, root=MINI, cache=True):
    return BatchJob(str(root), str(root), None, str(tmp_path / name), cache=cache)


def test_a_crashing_or_dying_or_hanging_model_does_not_stop_the_batch(tmp_path, monkeypatch):
    real = Walker.walk_model

    def flaky(self, model_cls):
        if model_cls.name == "Qwen2ForCausalLM":
            raise RuntimeError("walker bug")
        if model_cls.name == "Qwen3MoeForCausalLM":
            os._exit(9)  # a worker killed mid-model (segfault, OOM killer)
        if model_cls.name == "Qwen3ForCausalLM":
            time.sleep(60)
        return real(self, model_cls)

    monkeypatch.setattr(Walker, "walk_model", flaky)  # inherited by the forked workers
    # no cache: a report cached by an earlier run would be served without walking
    results = run_batch(_job(tmp_path, "out", cache=False), QWENS + ["DeepseekV3ForCausalLM"], workers=2, timeout=5)
    by = {r["architecture"]: r for r in results}
    assert "internal error: RuntimeError: walker bug" in by["Qwen2ForCausalLM"]["error"]
    assert "worker died (exit code 9)" in by["Qwen3MoeForCausalLM"]["error"]
    assert "timed out after 5 s" in by["Qwen3ForCausalLM"]["error"]
    assert by["DeepseekV3ForCausalLM"]["ok"]
    assert "walker bug" in (tmp_path / "out" / "index.md").read_text(encoding="utf-8")


def test_the_first_model_the_parent_analyzes_before_forking_is_left_to_a_worker_when_it_hangs(tmp_path, monkeypatch):
    real = Walker.walk_model
    where = []

    def slow(self, model_cls):
        where.append(os.getpid())
        if model_cls.name == "Qwen3ForCausalLM":
            time.sleep(60)
        return real(self, model_cls)

    monkeypatch.setattr(Walker, "walk_model", slow)
    results = run_batch(_job(tmp_path, "out", cache=False), ["Qwen3ForCausalLM", "Qwen2ForCausalLM"], workers=2, timeout=3)
    by = {r["architecture"]: r for r in results}
    assert "timed out after 3 s" in by["Qwen3ForCausalLM"]["error"]  # the worker's limit, recorded as such
    assert by["Qwen2ForCausalLM"]["ok"]
    assert where[0] == os.getpid()  # the parent tried it first; the workers' walks are not seen here


def test_reports_are_byte_identical_across_worker_counts_and_runs(tmp_path):
    run_batch(_job(tmp_path, "one"), QWENS, workers=1)
    run_batch(_job(tmp_path, "two"), QWENS, workers=2)
    run_batch(_job(tmp_path, "again"), QWENS, workers=2)
    names = sorted(os.listdir(tmp_path / "one"))
    assert names == sorted(os.listdir(tmp_path / "two")) and len(names) == 2 * len(QWENS) + 2
    for n in names:
        a = (tmp_path / "one" / n).read_bytes()
        assert a == (tmp_path / "two" / n).read_bytes() == (tmp_path / "again" / n).read_bytes(), n
    assert b"/tmp/" not in (tmp_path / "one" / "Qwen3ForCausalLM.json").read_bytes()


def test_warm_all_serves_cached_reports_and_an_edit_invalidates_them(tmp_path, monkeypatch, mini):
    monkeypatch.setenv("FUSION_ANALYZE_PARSE_CACHE", str(tmp_path / "pc"))
    cold = run_batch(_job(tmp_path, "cold", mini), QWENS, workers=2)
    assert all(r["ok"] for r in cold)

    def no_walk(self, model_cls):
        raise RuntimeError("walked although cached")

    real = Walker.walk_model
    monkeypatch.setattr(Walker, "walk_model", no_walk)  # inherited by the forked workers
    opened = []
    real_open = batch._open_session
    monkeypatch.setattr(batch, "_open_session", lambda job: opened.append(job) or real_open(job))
    warm = run_batch(_job(tmp_path, "warm", mini), QWENS, workers=2)
    assert warm == cold
    assert opened == []  # every report was cached: the trees were fingerprinted, not analyzed
    for n in sorted(os.listdir(tmp_path / "cold")):
        assert (tmp_path / "cold" / n).read_bytes() == (tmp_path / "warm" / n).read_bytes(), n
    # any edit of the trees changes their fingerprint: every model is analyzed again
    q = mini / "vllm/model_executor/models/qwen2.py"
    q.write_text("# moved\n" + q.read_text(encoding="utf-8"), encoding="utf-8")
    edited = run_batch(_job(tmp_path, "edited", mini), QWENS, workers=2)
    assert all("walked although cached" in r["error"] for r in edited)
    monkeypatch.setattr(Walker, "walk_model", real)
    again = run_batch(_job(tmp_path, "again", mini), QWENS, workers=2)
    assert all(r["ok"] for r in again)
    assert (tmp_path / "again" / "Qwen2ForCausalLM.json").read_bytes() != (tmp_path / "cold" / "Qwen2ForCausalLM.json").read_bytes()


def test_workers_take_models_close_to_what_they_read_and_far_from_the_others(tmp_path):
    """schedule.py: a model is described by its model module's imports (relative ones made absolute); a worker
    takes the pending model that brings it the fewest modules another worker read, then the one closest to
    its own; each model is taken once, and a replaced worker starts afresh."""
    from fusion_analyze.commands.schedule import Affinity, features
    from fusion_analyze.analysis.session import Session

    session = Session.open(str(MINI), str(MINI), cache=False)
    feats = features(session, ["Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "NotAnArchitecture"])
    assert "vllm.model_executor.models.qwen3" in feats["Qwen3ForCausalLM"]
    assert "vllm.model_executor.layers.layernorm" in feats["Qwen3ForCausalLM"]  # from ..layers.layernorm import
    assert "NotAnArchitecture" not in feats

    order = Affinity({"dense1": frozenset("ab"), "dense2": frozenset("abc"), "moe1": frozenset("xy"),
                      "moe2": frozenset("xyz"), "other": frozenset("q")})
    pending = ["dense1", "moe1", "dense2", "moe2", "other"]
    assert order.take(pending, 0) == "dense1"  # nothing read yet: the first in order
    assert order.take(pending, 1) == "moe1"  # nothing worker 0 read, and first among those
    assert order.take(pending, 0) == "dense2"  # shares a and b with worker 0's
    assert order.take(pending, 1) == "moe2"
    order.forget(1)
    assert order.take(pending, 1) == "other" and pending == []


def test_only_takes_the_queries_the_single_model_command_takes(run, tmp_path):
    """Issue 47: `all --only` resolves a model type / name / HF repo id as `fusion-analyze MODEL` does."""
    out = tmp_path / "one"
    r = run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(out), "--only", "qwen3", "--lang", "en")
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in out.glob("*.md")) == ["Qwen3ForCausalLM.md", "index.md"]
    out = tmp_path / "by-name"  # a marketing name (patterns/catalog/aliases.yaml), as `fusion-analyze Qwen3-8B`
    r = run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(out), "--only", "Qwen3-8B", "--lang", "en")
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in out.glob("*.json")) == ["Qwen3ForCausalLM.json", "index.json"]
    r = run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(tmp_path / "none"),
            "--only", "qwen3-not-a-model")
    assert r.exit_code == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and "--only qwen3-not-a-model" in r.stderr


def test_only_leaves_out_a_name_this_release_lacks_beside_names_it_has(run, tmp_path):
    """One `--only` list over two releases (the release diff, tests/test_diff_release.py): a name one tree's
    registry lacks is left out there, said once on stderr, while the list's other names run; alone, or with no
    other item selecting anything, it is the one-line error."""
    out = tmp_path / "two"
    r = run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(out),
            "--only", "Qwen3ForCausalLM,NanbeigeForCausalLM", "--lang", "en")
    assert r.exit_code == 0, r.stderr
    assert sorted(p.name for p in out.glob("*.json")) == ["Qwen3ForCausalLM.json", "index.json"]
    assert "--only names not in this release pair's registry, not run: NanbeigeForCausalLM" in r.stderr
    r = run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(tmp_path / "none"),
            "--only", "Nope*,NanbeigeForCausalLM")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--only NanbeigeForCausalLM" in r.stderr
