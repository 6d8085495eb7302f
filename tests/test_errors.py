"""Reliability: every row of the error matrix is one line + exit 2 (no traceback); per-file faults are
reported and the analysis continues; nothing is ever written into the trees; mutated sources never crash."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import MINI


def _one_line_error(r, *needles):
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    for n in needles:
        assert n in lines[0], (n, lines[0])


def _matrix(tmp_path: Path, mini: Path):
    notpkg = tmp_path / "empty"
    notpkg.mkdir()
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    no_arch = tmp_path / "noarch.json"
    no_arch.write_text('{"model_type": "qwen3"}')
    reg = mini / "vllm/model_executor/models/registry.py"
    bad_reg = tmp_path / "badreg"
    shutil.copytree(MINI, bad_reg)
    (bad_reg / "vllm/model_executor/models/registry.py").write_text("_TEXT_GENERATION_MODELS = {\n")
    assert reg.exists()
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    return [
        ("missing root", ["qwen3", "--vllm-root", str(tmp_path / "nope")], ["nope"]),
        ("root is a file", ["qwen3", "--vllm-root", str(afile)], ["file.txt"]),
        ("not a vLLM tree", ["qwen3", "--vllm-root", str(notpkg)], ["vllm"]),
        ("ascend root not vllm-ascend", ["qwen3", "--vllm-root", str(MINI), "--ascend-root", str(notpkg)], ["vllm_ascend"]),
        ("registry not understood", ["qwen3", "--vllm-root", str(bad_reg)], ["registry"]),
        ("unknown model", ["qwen9000", "--vllm-root", str(MINI)], ["qwen9000"]),
        ("ambiguous model", ["foo", "--vllm-root", str(MINI)], ["FooBa"]),
        ("config not JSON", [str(bad_json), "--vllm-root", str(MINI)], ["not valid JSON"]),
        ("config without architectures", [str(no_arch), "--vllm-root", str(MINI)], ["architectures"]),
        ("--config not JSON", ["qwen3", "--vllm-root", str(MINI), "--config", str(bad_json), "-o", str(tmp_path / "o.md")], ["--config"]),
        ("unwritable output", ["qwen3", "--vllm-root", str(MINI), "-o", str(afile / "r.md")], ["cannot write"]),
        ("bad --format", ["qwen3", "--vllm-root", str(MINI), "--format", "xml", "-o", str(tmp_path / "o.md")], ["--format xml"]),
        ("bad --tp", ["qwen3", "--vllm-root", str(MINI), "--tp", "0", "-o", str(tmp_path / "o.md")], ["--tp 0"]),
        ("unknown device", ["qwen3", "--vllm-root", str(MINI), "--device", "gpu9", "-o", str(tmp_path / "o.md")], ["gpu9"]),
        ("missing template", ["qwen3", "--vllm-root", str(MINI), "--template", str(tmp_path / "t.j2"), "-o", str(tmp_path / "o.md")], ["--template"]),
        ("patterns dir missing", ["qwen3", "--vllm-root", str(MINI), "--patterns", str(tmp_path / "pp"), "-o", str(tmp_path / "o.md")], ["--patterns"]),
    ]


ROWS = ["missing root", "root is a file", "not a vLLM tree", "ascend root not vllm-ascend", "registry not understood",
        "unknown model", "ambiguous model", "config not JSON", "config without architectures", "--config not JSON",
        "unwritable output", "bad --format", "bad --tp", "unknown device", "missing template", "patterns dir missing"]


@pytest.mark.parametrize("row", ROWS)
def test_error_matrix(run, tmp_path, mini, row):
    cases = {name: (args, needles) for name, args, needles in _matrix(tmp_path, mini)}
    args, needles = cases[row]
    r = run(*args)
    _one_line_error(r, *needles)
    assert not (tmp_path / "o.md").exists()


def test_interrupted_write_leaves_no_partial_file(tmp_path, monkeypatch):
    from fusion_analyze.analysis.pipeline import write_text

    def interrupted(self, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text("report", str(tmp_path / "r.md"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fault,content", [
    ("syntax", b"class BrokenMLP(nn.Module)\n    pass\n"),
    ("encoding", b"# -*- coding: utf-8 -*-\nx = '\xff\xfe'\n"),
    ("recursion", b"x = " + b"(" * 3000 + b"1" + b")" * 3000 + b"\n"),
    ("huge", b"x = 1\n" * 800_000),
    ("symlink loop", None),
])
def test_per_file_faults_are_reported_and_the_walk_goes_on(run, mini, fault, content):
    target = mini / "vllm/model_executor/layers/broken_layer.py"
    if content is None:
        target.unlink()
        os.symlink(target, target)  # a link to itself
    else:
        target.write_bytes(content)
    r = run("UsesBrokenForCausalLM", "--vllm-root", str(mini), "--format", "json")
    assert r.exit_code == 0, r.output
    import json

    doc = json.loads(r.stdout)
    assert [e["file"] for e in doc["errors"]] == ["vllm/model_executor/layers/broken_layer.py"], doc["errors"]
    assert any(op["kind"] == "unknown" for op in doc["ops"])


def _snapshot(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        st_ = p.lstat()
        out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None, st_.st_mtime_ns)
    return out


def test_the_trees_are_never_written(run, mini, tmp_path):
    before = _snapshot(mini)
    for p in [mini, *mini.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode & 0o555)
    try:
        out = tmp_path / "out"
        assert run("qwen3", "--vllm-root", str(mini), "--ascend-root", str(mini), "-o", str(out / "r.md"),
                   "--stubs", str(out / "s.py")).exit_code == 0
        assert run("qwen3", "--vllm-root", str(mini), "--ascend-root", str(mini), "--format", "json",
                   "-o", str(out / "r.json")).exit_code == 0
        assert run("all", "--vllm-root", str(mini), "--ascend-root", str(mini), "-o", str(out / "all"),
                   "--only", "Qwen*").exit_code == 0
    finally:
        for p in [mini, *mini.rglob("*")]:
            if not p.is_symlink():
                p.chmod(p.stat().st_mode | 0o200)
    assert _snapshot(mini) == before


MUTABLE = ["vllm/model_executor/models/qwen3.py", "vllm/model_executor/models/qwen2.py",
           "vllm/model_executor/layers/layernorm.py", "vllm_ascend/ops/layernorm.py"]


def _mutate(text: str, op: str, a: int, b: int) -> str:
    lines = text.splitlines(keepends=True)
    n = len(lines)
    i, j = a % n, b % n
    if op == "delete":
        del lines[i]
    elif op == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    elif op == "truncate":
        lines = lines[:i]
    elif op == "syntax":
        lines.insert(i, "def broken(:\n")
    elif op == "rename":
        return text.replace("class Qwen3", "class Qwen9").replace("class Qwen2", "class Qwen8")
    elif op == "indent":
        lines[i] = "        " + lines[i]
    return "".join(lines)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(file=st.sampled_from(MUTABLE), op=st.sampled_from(["delete", "swap", "truncate", "syntax", "rename", "indent"]),
       a=st.integers(0, 400), b=st.integers(0, 400))
def test_mutated_sources_give_a_report_or_a_clear_error(run, tmp_path_factory, file, op, a, b):
    root = tmp_path_factory.mktemp("fuzz") / "mini"
    shutil.copytree(MINI, root)
    path = root / file
    path.write_text(_mutate(path.read_text(encoding="utf-8"), op, a, b), encoding="utf-8")
    r = run("qwen3", "--vllm-root", str(root), "--ascend-root", str(root), "--format", "json")
    assert r.exit_code in (0, 2), (r.exit_code, r.output[-2000:], r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
