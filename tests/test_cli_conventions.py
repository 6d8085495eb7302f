"""Issue 37, items 3 and 6: arguments and outputs checked before any work (exit 2, one line), `-o DIR/`, write
errors exit 2 everywhere, Ctrl-C one line and exit 130 (also in `all`: no worker tracebacks), fetch progress and
pip's list of releases; and the conventions: defaults from the environment and `[tool.fusion-analyze]` (command
line > environment > pyproject.toml > built-in), `-q` / `-v` / `--debug`, shell completion, help and choices on
every option, the same common options on the single-model command, `all` and `compare`. Exit codes and stderr
are checked apart from stdout."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import get_args

import pytest
import typer
import yaml
from typer.testing import CliRunner

from fusion_analyze import cli
from fusion_analyze.cli import app

from .conftest import MINI, ROOT

NOWHERE = "/nonexistent/vllm"  # a root never opened: a bad argument is refused before


def _one_error(r, *needles) -> str:
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# -- item 3: arguments and outputs, checked before any work ---------------------------------------------------
def _bad_args(tmp_path):
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    return [
        ("--tp", "0", "--tp 0"), ("--ep", "0", "--ep 0"), ("--device", "gpu9", "unknown device gpu9"),
        ("--device-profile", str(tmp_path / "none.yaml"), "device profile"), ("--config", str(bad), "--config"),
        ("--config", "NoSuchPreset-1B", "--config NoSuchPreset-1B"), ("--patterns", str(tmp_path / "pp"), "--patterns"),
        ("-o", str(afile / "r.md"), "cannot write"), ("--lang", "jp", "--lang jp"), ("--backend", "tpu", "--backend tpu"),
    ]


@pytest.mark.parametrize("i", range(10))
def test_single_model_arguments_are_checked_before_any_tree_is_opened(run, tmp_path, i):
    flag, value, needle = _bad_args(tmp_path)[i]
    line = _one_error(run("qwen3", "--vllm-root", NOWHERE, flag, value), needle)
    assert "nonexistent" not in line


@pytest.mark.parametrize("i", [0, 1, 2, 3, 4, 6, 8, 9])
def test_all_arguments_are_checked_before_any_tree_is_opened(run, tmp_path, i):
    flag, value, needle = _bad_args(tmp_path)[i]
    line = _one_error(run("all", "--vllm-root", NOWHERE, "-o", str(tmp_path / "out"), flag, value), needle)
    assert "nonexistent" not in line and not (tmp_path / "out" / "index.md").exists()


@pytest.mark.parametrize("i", [0, 1, 2, 3, 4, 6, 7, 9])
def test_compare_arguments_are_checked_before_any_tree_is_opened(run, tmp_path, i):
    flag, value, needle = _bad_args(tmp_path)[i]
    line = _one_error(run("compare", "qwen3", "--base", NOWHERE, "--head", NOWHERE, flag, value), needle)
    assert "nonexistent" not in line


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_all_into_a_folder_it_cannot_write_is_exit_2(run, tmp_path, where):
    if where == "proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    (tmp_path / "file.txt").write_text("x")
    out = str(tmp_path / "file.txt" / "out") if where == "under-a-file" else "/proc/fusion-analyze-x"
    _one_error(run("all", "--vllm-root", NOWHERE, "-o", out), "cannot write", "(-o)")


def test_a_stubs_write_error_names_stubs_and_comes_before_the_report(run, tmp_path):
    (tmp_path / "file.txt").write_text("x")
    line = _one_error(run("qwen3", "--vllm-root", str(MINI), "-o", str(tmp_path / "q.md"),
                          "--stubs", str(tmp_path / "file.txt" / "s.py")), "cannot write", "--stubs")
    assert " -o " not in line and "(-o)" not in line
    assert not (tmp_path / "q.md").exists()  # refused before the analysis


def test_a_write_error_of_diff_is_exit_2(run, tmp_path):
    report = tmp_path / "q.json"
    assert run("qwen3", "--vllm-root", str(MINI), "-o", str(report), "--format", "json").exit_code == 0
    (tmp_path / "file.txt").write_text("x")
    _one_error(run("diff", str(report), str(report), "-o", str(tmp_path / "file.txt" / "d.md")), "cannot write")


def test_output_folder_for_diff_and_compare(run, tmp_path):
    report = tmp_path / "q.json"
    run("qwen3", "--vllm-root", str(MINI), "-o", str(report), "--format", "json")
    r = run("diff", str(report), str(report), "-o", f"{tmp_path}/d/")
    assert r.exit_code == 0, r.stderr
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["diff.md"]
    r = run("compare", "qwen3", "--base", str(MINI), "--head", str(MINI), "--ascend-root", str(MINI), "-o",
            f"{tmp_path}/c/", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["Qwen3ForCausalLM.diff.json"]


def test_ctrl_c_is_one_line_and_exit_130(run, tmp_path, monkeypatch):
    from fusion_analyze.commands import batch

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(batch, "run_batch", interrupted)
    r = run("all", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(tmp_path / "out"))
    assert r.exit_code == 130
    assert r.stderr == "interrupted\n" and r.stdout == ""
    monkeypatch.setattr("fusion_analyze.analysis.pipeline.analyze", interrupted)
    r = run("qwen3", "--vllm-root", str(MINI), "-o", str(tmp_path / "q.md"))
    assert (r.exit_code, r.stderr) == (130, "interrupted\n")


def test_an_all_worker_ignores_ctrl_c(tmp_path):
    """Ctrl-C goes to the whole process group: the workers leave it to the parent (which stops them), so none
    prints a traceback of its own."""
    import multiprocessing as mp

    from fusion_analyze.commands.batch import BatchJob, _Slot

    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    slot = _Slot(ctx, BatchJob(str(MINI), str(MINI), None, str(tmp_path / "out"), cache=False))
    try:
        time.sleep(0.5)
        os.kill(slot.proc.pid, signal.SIGINT)
        time.sleep(0.5)
        assert slot.proc.is_alive()
    finally:
        slot.stop()
    assert slot.proc.exitcode == 0


def test_ctrl_c_during_all_on_a_real_tree(real_tree, tmp_path):
    """The issue's case: Ctrl-C in the middle of `all` printed about 290 lines of worker tracebacks."""
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    proc = subprocess.Popen([sys.executable, "-c", "from fusion_analyze.cli import main; main()", "all",
                             "--vllm-root", str(vllm), "--ascend-root", str(ascend), "-o", str(tmp_path / "out"),
                             "--no-cache", "-j", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(8)  # the workers are analyzing by now (a whole run takes a minute or more)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    if proc.returncode in (0, 1) and (tmp_path / "out" / "index.md").is_file():
        pytest.skip("the run finished before the interrupt came")
    assert proc.returncode == 130, err.decode()[-2000:]
    assert err.decode().splitlines()[-1] == "interrupted" and "Traceback" not in err.decode()
    assert len(err.decode().splitlines()) <= 2  # at most a warning before it


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                status = (d / "status").read_text()
            except OSError:
                continue
            if re.search(rf"^PPid:\s+{pid}$", status, flags=re.M):
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return not re.search(r"^State:\s+Z", Path(f"/proc/{pid}/status").read_text(), flags=re.M)
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc")
def test_sigterm_to_all_stops_its_workers(real_tree, tmp_path):
    """Issue 47: SIGTERM to `all` (a CI job cancelled, `timeout`) stops its worker processes too: one line,
    exit 143, no worker left running."""
    vllm, ascend = real_tree("vllm==0.30.0"), real_tree("vllm-ascend==0.30.0rc2")
    proc = subprocess.Popen([sys.executable, "-c", "from fusion_analyze.cli import main; main()", "all",
                             "--vllm-root", str(vllm), "--ascend-root", str(ascend), "-o", str(tmp_path / "out"),
                             "--no-cache", "-j", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers: list[int] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        workers = [c for c in _children(proc.pid) if _alive(c)]
        if len(workers) >= 2:
            break
        time.sleep(0.5)
    if proc.poll() is not None or len(workers) < 2:
        proc.kill()
        pytest.skip("no two workers running to stop")
    time.sleep(1)
    proc.send_signal(signal.SIGTERM)  # to the parent only, as a process manager does
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()[-2000:]
    assert err.decode().splitlines()[-1] == "terminated" and "Traceback" not in err.decode()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.2)
    assert not [w for w in workers if _alive(w)]


def _fake_pip(tmp_path, script: str) -> str:
    fake = tmp_path / "pip"
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    return str(fake)


def test_fetch_says_it_is_fetching_on_stderr(run, tmp_path, monkeypatch):
    # a pip that "unpacks" a tree where pip download leaves it
    monkeypatch.setenv("FUSION_ANALYZE_PIP", _fake_pip(
        tmp_path, 'd="$TMPDIR/pip-download-1/vllm-9.9.9/vllm"; mkdir -p "$d/model_executor"; touch "$d/__init__.py"\n'))
    monkeypatch.setenv("FUSION_ANALYZE_CACHE", str(tmp_path / "cache"))
    r = run("fetch", "--lang", "en", "vllm==9.9.9")
    assert r.exit_code == 0, r.stderr
    tree = tmp_path / "cache" / "trees" / "vllm-9.9.9"
    assert r.stdout == f"{tree}\n"
    assert r.stderr.splitlines() == [f"fetching vllm==9.9.9 with pip into {tree} (once: later runs reuse it) ...",
                                     f"fetched vllm==9.9.9: {tree}"]
    r = run("fetch", "--lang", "en", "vllm==9.9.9")  # cached: nothing to say
    assert r.exit_code == 0 and r.stderr == ""


def test_fetch_is_quiet_under_q(run, tmp_path, monkeypatch):
    monkeypatch.setenv("FUSION_ANALYZE_PIP", _fake_pip(
        tmp_path, 'd="$TMPDIR/pip-download-1/vllm-9.9.8/vllm"; mkdir -p "$d/model_executor"; touch "$d/__init__.py"\n'))
    monkeypatch.setenv("FUSION_ANALYZE_CACHE", str(tmp_path / "cache"))
    r = run("-q", "fetch", "vllm==9.9.8")
    assert r.exit_code == 0 and r.stderr == ""


def test_fetch_of_a_release_that_does_not_exist_names_the_nearest(run, tmp_path, monkeypatch):
    monkeypatch.setenv("FUSION_ANALYZE_PIP", _fake_pip(tmp_path, (
        "echo 'ERROR: Could not find a version that satisfies the requirement vllm-ascend==0.30.0 (from versions: "
        "0.7.3, 0.9.1, 0.13.0, 0.23.0, 0.30.0rc1, 0.30.0rc2)' >&2\n"
        "echo 'ERROR: No matching distribution found for vllm-ascend==0.30.0' >&2\nexit 1\n")))
    monkeypatch.setenv("FUSION_ANALYZE_CACHE", str(tmp_path / "cache"))
    r = run("fetch", "--lang", "en", "vllm-ascend==0.30.0")
    assert r.exit_code == 2 and r.stdout == ""
    error = r.stderr.splitlines()[-1]
    assert error.startswith("error: cannot fetch vllm-ascend==0.30.0: vllm-ascend has no release 0.30.0; "
                            "did you mean vllm-ascend==0.30.0rc2 / vllm-ascend==0.30.0rc1?")
    assert "0.23.0, 0.30.0rc1, 0.30.0rc2" in error  # pip's list, shown


# -- item 6: defaults from the environment and pyproject.toml --------------------------------------------------
def _project(tmp_path, table: str) -> Path:
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n{table}')
    return tmp_path / "proj" / "sub"


def test_pyproject_table_gives_the_roots_and_defaults(run, tmp_path, monkeypatch):
    rel = os.path.relpath(MINI, tmp_path / "proj")  # a relative path is relative to the pyproject.toml
    monkeypatch.chdir(_project(tmp_path, f'[tool.fusion-analyze]\nvllm-root = "{rel}"\nascend-root = "{MINI}"\n'
                                         f'lang = "en"\n\n[tool.fusion-analyze.locate]\nformat = "json"\n'))
    r = run("locate", "--lang", "en", "qwen3")
    assert r.exit_code == 0, r.stderr
    data = json.loads(r.stdout)  # locate's own table: json
    assert data["sources"] == {"vllm": {"version": "0.99.0"}, "vllm_ascend": {"version": "0.99.0rc1"}}
    r = run("qwen3", "-o", str(tmp_path / "q.md"))
    assert r.exit_code == 0 and r.stderr == ""  # the Ascend root came from the table: no warning
    assert (tmp_path / "q.md").read_text().startswith("## Model operator analysis")  # lang = "en"


def test_pyproject_keys_are_the_long_option_names_and_pin_a_deployment(run, tmp_path, monkeypatch):
    """Issue 47: the table's keys are the command line's long names (`tensor-parallel-size`, not only `tp`), the
    deployment's included; a key no option has is refused with the names it may be."""
    monkeypatch.chdir(_project(tmp_path, f'[tool.fusion-analyze]\nvllm-root = "{MINI}"\nascend-root = "{MINI}"\n'
                                         'tensor-parallel-size = 4\nenable-expert-parallel = true\n'
                                         'data-parallel-size = 2\nmax-num-seqs = 64\nenforce-eager = true\n'))
    r = run("qwen3", "--format", "json")
    assert r.exit_code == 0, r.stderr
    dep = json.loads(r.stdout)["deployment"]
    assert (dep["tensor_parallel_size"], dep["data_parallel_size"], dep["enable_expert_parallel"], dep["max_num_seqs"],
            dep["enforce_eager"]) == (4, 2, True, 64, True)
    r = run("qwen3", "--format", "json", "-tp", "2")  # the command line over the table
    assert json.loads(r.stdout)["deployment"]["tensor_parallel_size"] == 2
    monkeypatch.chdir(_project(tmp_path / "b", '[tool.fusion-analyze]\ntensor-paralel-size = 4\n'))
    _one_error(run("qwen3"), "unknown key 'tensor-paralel-size'", "tensor-parallel-size")


def test_command_line_over_environment_over_pyproject(run, tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path, f'[tool.fusion-analyze]\nvllm-root = "{tmp_path}/from-pyproject"\n'))
    _one_error(run("locate", "--lang", "en", "qwen3"), "--vllm-root", "from-pyproject")
    monkeypatch.setenv("FUSION_ANALYZE_VLLM_ROOT", str(tmp_path / "from-env"))
    _one_error(run("locate", "--lang", "en", "qwen3"), "from-env")
    r = run("locate", "--lang", "en", "qwen3", "--vllm-root", str(MINI))
    assert r.exit_code == 0 and r.stdout.startswith("architecture: Qwen3ForCausalLM")


@pytest.mark.parametrize("variable, value, needle", [
    ("FUSION_ANALYZE_ASCEND_ROOT", str(MINI), None), ("FUSION_ANALYZE_LANG", "jp", "--lang jp"),
    ("FUSION_ANALYZE_TP", "0", "--tp 0"), ("FUSION_ANALYZE_DEVICE", "gpu9", "gpu9"),
    ("FUSION_ANALYZE_HF_ROOT", "/nonexistent/hf", "--hf-root"), ("FUSION_ANALYZE_PATTERNS", "/nonexistent/pp", "--patterns"),
])
def test_environment_variables_of_the_options(run, tmp_path, monkeypatch, variable, value, needle):
    monkeypatch.setenv(variable, value)
    r = run("qwen3", "--vllm-root", str(MINI), "-o", str(tmp_path / "q.md"))
    if needle is None:
        assert r.exit_code == 0 and r.stderr == ""  # the Ascend tree from the environment: no warning
    else:
        _one_error(r, needle)


@pytest.mark.parametrize("table, needle", [
    ('[tool.fusion-analyze]\nvllm_rot = "x"\n', "unknown key 'vllm_rot'"),
    ('[tool.fusion-analyze.nosuchcommand]\nlang = "en"\n', "no such command"),
    ('[tool.fusion-analyze\n', "not valid TOML"),
])
def test_a_bad_pyproject_table_is_one_line(run, tmp_path, monkeypatch, table, needle):
    monkeypatch.chdir(_project(tmp_path, table))
    _one_error(run("locate", "--lang", "en", "qwen3", "--vllm-root", str(MINI)), "pyproject.toml", needle)


def test_this_repository_has_no_table(run):
    from fusion_analyze.commands.settings import read_settings

    assert read_settings(ROOT)[:2] == ({}, {})


# -- -q, -v, --debug -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["first", "last"])
def test_quiet_anywhere_silences_warnings(run, tmp_path, where):
    args = ["qwen3", "--vllm-root", str(MINI), "-o", str(tmp_path / "q.md"), "--lang", "en"]
    assert "warning: no vllm-ascend tree" in run(*args).stderr
    r = run("-q", *args) if where == "first" else run(*args, "--quiet")
    assert r.exit_code == 0 and r.stderr == "" and (tmp_path / "q.md").is_file()
    _one_error(run("-q", "qwen9000", "--vllm-root", str(MINI)), "qwen9000")  # errors stay


def test_verbose_says_the_trees_and_how_the_query_resolved(run, tmp_path):
    r = run("Qwen/Qwen3-8B", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(tmp_path / "q.md"), "-v",
            "--lang", "en")
    assert r.exit_code == 0, r.stderr
    assert f"vLLM 0.99.0: {MINI}; vllm-ascend 0.99.0rc1: {MINI}" in r.stderr
    assert "model: 'Qwen/Qwen3-8B' -> Qwen3ForCausalLM (vllm/model_executor/models/qwen3.py L" in r.stderr
    zh = run("Qwen/Qwen3-8B", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "-o", str(tmp_path / "q.md"), "-v")
    assert "模型: 'Qwen/Qwen3-8B' -> Qwen3ForCausalLM (vllm/model_executor/models/qwen3.py L" in zh.stderr  # --lang's
    assert run("locate", "--lang", "en", "qwen3", "--vllm-root", str(MINI), "-v").stderr.count("model: 'qwen3' -> Qwen3ForCausalLM") == 1


def test_debug_is_documented_and_shows_the_traceback(run):
    assert "--debug" in run("--help").stdout
    r = run("qwen9000", "--vllm-root", str(MINI), "--debug")
    assert r.exit_code == 2 and "Traceback" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: unknown model 'qwen9000'")


# -- shell completion, help and choices ------------------------------------------------------------------------
def test_shell_completion_is_enabled(run, monkeypatch):
    top = run("--help").stdout
    assert "--install-completion" in top and "--show-completion" in top
    # typer finds the shell from the process tree (shellingham), not from $SHELL: a runner started from another
    # program (a CI job, a background job) has none it supports; the script asked for here is bash's
    import typer.completion

    monkeypatch.setattr(typer.completion, "_get_shell_name", lambda: "bash")
    r = CliRunner().invoke(app, ["--show-completion", "bash"], prog_name="fusion-analyze", env={"SHELL": "/bin/bash"})
    assert r.exit_code == 0 and "_FUSION_ANALYZE_COMPLETE" in r.stdout, (r.exit_code, r.exception, r.output[-2000:])
    env = {"_FUSION_ANALYZE_COMPLETE": "complete_bash", "COMP_WORDS": "fusion-analyze qwen3 --lang ", "COMP_CWORD": "3"}
    r = CliRunner().invoke(app, [], prog_name="fusion-analyze", env=env)
    assert r.stdout.split() == ["zh", "en"]


COMMANDS = ["locate", "list-models", "fetch", "analyze", "all", "diff", "compare", "calibrate"]


def test_every_option_has_help():
    group = typer.main.get_command(app)
    missing = [f"{name} {p.name}" for name, cmd in [("", group), *group.commands.items()] for p in cmd.params
               if not getattr(p, "hidden", False) and not (getattr(p, "help", None) or "").strip()]
    assert missing == []


@pytest.mark.parametrize("command, shown", [
    ("analyze", ["<md|json|sarif|github>", "<zh|en>", "<ascend|cuda>", "[ascend_a2|ascend_a3|ascend_a5|ID]"]),
    ("all", ["<text|all>", "<zh|en>", "<ascend|cuda>"]),
    ("diff", ["<md|json|sarif|github>", "<regression|any|status|opportunities|ops|none>", "<zh|en>"]),
    ("compare", ["<md|json|sarif|github>", "<regression|any|status|opportunities|ops|none>", "<ascend|cuda>", "<zh|en>"]),
    ("locate", ["<text|json>"]), ("list-models", ["<text|json>"]),
])
def test_help_shows_the_choices(command, shown):
    r = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"})
    assert r.exit_code == 0
    for choice in shown:
        assert choice in r.stdout, (command, choice)


def test_the_choices_are_the_catalogs():
    from fusion_analyze.commands.diff import FAIL_ON

    labels = yaml.safe_load((ROOT / "templates" / "labels.yaml").read_text(encoding="utf-8"))
    assert set(cli.LANGS) == set(labels) - {"texts"}
    assert cli.FAIL_ON == FAIL_ON
    assert get_args(cli.FormatChoice) == cli.FORMATS
    devices = yaml.safe_load((ROOT / "patterns" / "catalog" / "devices.yaml").read_text(encoding="utf-8"))["devices"]
    assert "|".join(devices) in cli.DeviceOpt.metavar


def test_the_same_common_options_on_analyze_all_and_compare():
    group = typer.main.get_command(app)
    common = {"--tp", "--ep", "--device", "--device-profile", "--patterns", "--config", "--hf-root", "--backend"}
    for name in ("analyze", "all", "compare"):
        opts = {o for p in group.commands[name].params for o in getattr(p, "opts", [])}
        assert common <= opts, (name, common - opts)
    for name in ("analyze", "all", "compare", "diff"):  # every command that writes a report or a diff
        lang = [p for p in group.commands[name].params if "--lang" in getattr(p, "opts", [])]
        assert len(lang) == 1 and lang[0].default == "zh" and lang[0].envvar == "FUSION_ANALYZE_LANG", name


def test_all_and_compare_pass_the_common_options_on(run, tmp_path, monkeypatch):
    from fusion_analyze.analysis import pipeline
    from fusion_analyze.commands import batch

    jobs = []
    monkeypatch.setattr(batch, "run_batch", lambda job, archs, **_k: jobs.append(job) or [])
    r = run("all", "--vllm-root", str(MINI), "-o", str(tmp_path / "out"), "--tp", "2", "--ep", "2",
            "--device", "ascend_a3", "--only", "Qwen3ForCausalLM")
    assert r.exit_code == 0, r.stderr
    options = jobs[0].options()
    assert (options.tp, options.ep, options.device) == (2, 2, "ascend_a3")
    seen = []
    real = pipeline.analyze

    def spy(model, vllm_root, ascend_root, backend, patterns_dir=None, options=None, cache=True):
        seen.append((patterns_dir, options))
        return real(model, vllm_root, ascend_root, backend, patterns_dir, options, cache)

    monkeypatch.setattr(pipeline, "analyze", spy)
    patterns = tmp_path / "patterns"
    patterns.mkdir()
    r = run("compare", "qwen3", "--base", str(MINI), "--head", str(MINI), "--ascend-root", str(MINI),
            "--tp", "4", "--device", "ascend_a3", "--patterns", str(patterns), "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert [(p, o.tp, o.device) for p, o in seen] == [(str(patterns), 4, "ascend_a3")] * 2
