"""The choice options are checked before any work, and `-o DIR/` names a folder (issue 37, item 3)."""

from __future__ import annotations

import pytest

from .conftest import MINI


def _one_line(r, needle: str) -> None:
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert "Traceback" not in r.output
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and needle in err[0], r.stderr
    assert r.stdout == ""


# Each command is given a root that does not exist: the choice must be refused first, before a tree is opened.
@pytest.mark.parametrize("args, needle", [
    (["qwen3", "--vllm-root", "/nonexistent/vllm", "--lang", "jp"], "--lang jp"),
    (["qwen3", "--vllm-root", "/nonexistent/vllm", "--format", "xml"], "--format xml"),
    (["all", "--vllm-root", "/nonexistent/vllm", "--lang", "jp", "-o", "/nonexistent/out"], "--lang jp"),
    (["all", "--vllm-root", "/nonexistent/vllm", "--tables", "some", "-o", "/nonexistent/out"], "--tables some"),
    (["diff", "/nonexistent/a.json", "/nonexistent/b.json", "--format", "html"], "--format html"),
    (["diff", "/nonexistent/a.json", "/nonexistent/b.json", "--fail-on", "always"], "--fail-on always"),
    (["compare", "qwen3", "--base", "/nonexistent/a", "--head", "/nonexistent/b", "--format", "txt"], "--format txt"),
    (["compare", "qwen3", "--base", "/nonexistent/a", "--head", "/nonexistent/b", "--fail-on", "x"], "--fail-on x"),
])
def test_a_bad_choice_is_refused_before_any_tree_is_opened(run, args, needle):
    r = run(*args)
    _one_line(r, needle)
    assert "nonexistent" not in r.stderr  # the root was never looked at


def test_a_language_that_exists_is_accepted(run, tmp_path):
    r = run("qwen3", "--vllm-root", str(MINI), "--lang", "en", "-o", str(tmp_path / "q.md"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "q.md").is_file()


@pytest.mark.parametrize("fmt, ext", [("md", "md"), ("json", "json")])
def test_output_ending_in_a_slash_is_a_folder_for_the_report(run, tmp_path, fmt, ext):
    out = tmp_path / "reports"
    r = run("qwen3", "--vllm-root", str(MINI), "--format", fmt, "-o", f"{out}/")
    assert r.exit_code == 0, r.output
    assert [p.name for p in out.iterdir()] == [f"Qwen3ForCausalLM.{ext}"]
    assert not (tmp_path / "reports.md").exists()


def test_output_naming_an_existing_folder_writes_into_it(run, tmp_path):
    out = tmp_path / "existing"
    out.mkdir()
    r = run("qwen3", "--vllm-root", str(MINI), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert (out / "Qwen3ForCausalLM.md").is_file()
