"""The graph passes are read in a forked child while the model is walked: same result as reading them in
process, a fallback when the child fails, no child left behind when the analysis fails."""

from __future__ import annotations

import os
import sys

import pytest

from fusion_analyze.analysis.pipeline import analyze_in, render
from fusion_analyze.analysis.session import Session
from fusion_analyze.walk.walker import Walker

from .conftest import MINI

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="passes are read in a child on Linux only")


def _json(passes):
    return [[p.to_json() for p in side] for side in passes]


def _session():
    return Session.open(str(MINI), str(MINI), cache=False)


def test_passes_from_the_child_equal_passes_read_in_process():
    here = _session()
    expected = _json(here._read_passes())
    assert expected[0]  # the mini tree has Ascend passes: the comparison is not between two empty lists
    forked = _session()
    forked.start_passes()
    assert forked._reading is not None
    assert _json(forked.passes()) == expected and forked._reading is None


def test_a_failing_child_falls_back_to_reading_here(monkeypatch):
    parent = os.getpid()
    real = Session._read_passes
    calls = []

    def only_here(self):
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        calls.append(1)
        return real(self)

    monkeypatch.setattr(Session, "_read_passes", only_here)
    s = _session()
    s.start_passes()
    assert _json(s.passes()) and calls == [1]
    a = analyze_in(_session(), "qwen3")
    b = analyze_in(Session.open(str(MINI), str(MINI), cache=False), "qwen3")
    assert render(a, "json") == render(b, "json")


def test_a_failed_analysis_leaves_no_child(monkeypatch):
    def boom(self, cls):
        raise RuntimeError("walker crash")

    monkeypatch.setattr(Walker, "walk_model", boom)
    s = _session()
    with pytest.raises(RuntimeError, match="walker crash"):
        analyze_in(s, "qwen3")
    assert s._reading is None
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child of this process is left, running or not reaped


def test_a_bad_option_after_the_child_started_leaves_no_child():
    from fusion_analyze.errors import UserError
    from fusion_analyze.analysis.pipeline import Options, analyze

    with pytest.raises(UserError, match="--tp 0"):
        analyze("qwen3", str(MINI), str(MINI), None, options=Options(tp=0), cache=False)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_an_unreadable_pass_file_read_in_the_child_is_in_the_report(run, mini):
    broken = mini / "vllm_ascend/compilation/passes/muls_add_pass.py"
    broken.write_bytes(b"class Broken(\n")
    r = run("qwen3", "--vllm-root", str(mini), "--ascend-root", str(mini), "--format", "json", "--no-cache")
    assert r.exit_code == 0, r.output
    import json

    errors = json.loads(r.stdout)["errors"]
    assert [e["file"] for e in errors] == ["vllm_ascend/compilation/passes/muls_add_pass.py"]
    assert errors[0]["reason"].startswith("syntax error")


def test_the_passes_child_goes_on_with_its_helper_work_until_stopped_and_is_reaped(tmp_path):
    s = _session()
    mark = tmp_path / "helper"

    def then(session, stopped):
        mark.write_text("started")
        while not stopped():  # stops only when told
            os.sched_yield()
        mark.write_text("stopped")

    s.start_passes(then)
    assert _json(s.passes())  # the passes come first; the child is not waited for here
    for _ in range(500):
        if mark.exists():
            break
        os.sched_yield() if _ % 2 else __import__("time").sleep(0.01)
    assert mark.read_text() == "started"
    s.stop_helper()
    assert mark.read_text() == "stopped"
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)


def test_the_batch_prefetch_fills_the_parse_cache_with_the_next_models_files_and_stops_when_told(tmp_path, monkeypatch):
    from fusion_analyze.commands.batch import _prefetch

    monkeypatch.setenv("FUSION_ANALYZE_PARSE_CACHE", str(tmp_path / "pc"))
    entries = lambda: {p.name for p in (tmp_path / "pc").rglob("*.pkl")}  # noqa: E731
    archs = ["Qwen2ForCausalLM", "Qwen3ForCausalLM"]  # the first is the parent's own: not prefetched
    _prefetch(archs)(Session.open(str(MINI), str(MINI)), lambda: True)
    assert entries() == set()  # told to stop before the first chunk
    s = Session.open(str(MINI), str(MINI))
    module = s.resolver.by_arch["Qwen3ForCausalLM"].module
    s.resolver = None  # as in the passes' child, forked before the session read the registry
    _prefetch(archs)(s, lambda: False)
    info = s.index.get(module)
    # every function of that file, and of each class its constructor and forward, parsed alone (as the walk reads
    # them); its module-level statements are read by `ast` and parsed only when a binding is asked for
    assert any(c.kind == "class" for c in info.chunks)
    wanted = {c.key for c in info.chunks if c.kind != "class" and c.lazy}
    for c in info.chunks:
        for method in ("__init__", "forward") if c.kind == "class" else ():
            if method in c.lone:
                wanted.add(info.method_chunk(c, method).key)
    assert info.chunks and {f"{k}.pkl" for k in wanted} <= entries()
