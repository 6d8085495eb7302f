"""The console entry point (cli.main) exits with os._exit after flushing: the exit code and every byte of the
output must survive it."""

from __future__ import annotations

import json
import subprocess
import sys

from .conftest import MINI


def _main(*args: str) -> subprocess.CompletedProcess:
    code = "from fusion_analyze.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def test_report_on_stdout_is_complete_and_exit_code_zero():
    r = _main("qwen3", "--vllm-root", str(MINI), "--ascend-root", str(MINI), "--format", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model"]  # the whole document arrived: it parses


def test_errors_keep_their_exit_codes():
    r = _main("no-such-model", "--vllm-root", str(MINI), "--no-cache")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1
    v = _main("--version")
    assert v.returncode == 0 and v.stdout.startswith("fusion-analyze ")
