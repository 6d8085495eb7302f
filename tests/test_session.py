"""The graph passes are read in a forked child while the model is walked: same result as reading them in
process, a fallback when the child fails, no child left behind when the analysis fails."""

from __future__ import annotations

import os
import sys

import pytest

from fusion_analyze.pipeline import analyze_in, render
from fusion_analyze.session import Session
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
    from fusion_analyze.pipeline import Options, analyze

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
