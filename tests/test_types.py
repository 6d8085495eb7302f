"""Typed checks of src/ (issue 32): basedpyright in pyright's basic mode, against a recorded baseline that only goes down.

The checker's settings are `[tool.pyright]` in pyproject.toml; the counts it may not exceed are in
tests/pyright_baseline.json: the total of errors and the errors of each rule. Per-file counts are kept there too,
not enforced (src/ moves code between files), only shown when a count rises, to tell where.

When the errors fall below the baseline the test passes and warns; lower the baseline with

    python tests/test_types.py --update

which refuses to raise any count unless given --allow-increase (for a deliberate change, such as a new checker
version). The test reads no released tree: the offline lane runs it (it carries no `realtree` mark).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "pyright_baseline.json"
CHECKER = "basedpyright"
UPDATE = "python tests/test_types.py --update"
NO_RULE = "(no rule)"


def _run_checker() -> dict:
    """The checker's report over the project (pyproject.toml's [tool.pyright]), resolving imports through the
    interpreter running this test."""
    proc = subprocess.run(
        [sys.executable, "-m", CHECKER, "--outputjson", "--pythonpath", sys.executable, "--project", str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"{CHECKER} gave no JSON report (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return report


def _counts(report: dict) -> dict:
    """The error counts of a report: total, per rule and per file (relative to the repository)."""
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    by_rule = Counter(d.get("rule") or NO_RULE for d in errors)
    by_file = Counter(Path(d["file"]).resolve().relative_to(ROOT).as_posix() for d in errors)
    return {
        "checker": CHECKER,
        "version": report["version"],
        "errors": len(errors),
        "by_rule": dict(sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))),
        "by_file": dict(sorted(by_file.items())),
    }


def _rises(base: dict, now: dict) -> list[str]:
    """What rose above the baseline: the total, and each rule."""
    rises = []
    if now["errors"] > base["errors"]:
        rises.append(f"total: {base['errors']} -> {now['errors']}")
    for rule, n in now["by_rule"].items():
        if n > base["by_rule"].get(rule, 0):
            rises.append(f"{rule}: {base['by_rule'].get(rule, 0)} -> {n}")
    return rises


def _file_rises(base: dict, now: dict) -> list[str]:
    return [
        f"  {path}: {base['by_file'].get(path, 0)} -> {n}"
        for path, n in now["by_file"].items()
        if n > base["by_file"].get(path, 0)
    ]


def _falls(base: dict, now: dict) -> bool:
    return now["errors"] < base["errors"] or any(n > now["by_rule"].get(r, 0) for r, n in base["by_rule"].items())


def test_src_type_errors_do_not_rise_above_the_baseline():
    import pytest

    if importlib.util.find_spec(CHECKER) is None:
        pytest.skip(f"{CHECKER} is not installed: pip install -e '.[test]' (the test extra pins it)")
    base = json.loads(BASELINE.read_text(encoding="utf-8"))
    now = _counts(_run_checker())
    assert now["version"] == base["version"], (
        f"{BASELINE.name} was recorded with {CHECKER} {base['version']}, this is {now['version']}: install the "
        f"pinned one (pip install -e '.[test]'), or after changing the pin rerun `{UPDATE} --allow-increase`"
    )
    rises = _rises(base, now)
    assert not rises, (
        f"{CHECKER} ({now['version']}, basic mode) finds more errors in src/ than {BASELINE.name} allows:\n  "
        + "\n  ".join(rises)
        + "\nfiles with more errors than recorded:\n"
        + ("\n".join(_file_rises(base, now)) or "  (none: errors moved between files)")
        + f"\nsee them with: python -m {CHECKER}"
    )
    if _falls(base, now):
        warnings.warn(
            f"{CHECKER}: {now['errors']} errors in src/, baseline {base['errors']}: lower the baseline with `{UPDATE}`",
            stacklevel=1,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Record {CHECKER}'s error counts over src/ in {BASELINE.name}.")
    parser.add_argument("--update", action="store_true", help="write the current counts as the baseline")
    parser.add_argument("--allow-increase", action="store_true", help="write them even where a count rose")
    args = parser.parse_args(argv)
    if importlib.util.find_spec(CHECKER) is None:
        print(f"{CHECKER} is not installed: pip install -e '.[test]'", file=sys.stderr)
        return 2
    now = _counts(_run_checker())
    base = json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.exists() else None
    print(f"{CHECKER} {now['version']}: {now['errors']} errors in src/" + (f" (baseline {base['errors']})" if base else ""))
    for rule, n in now["by_rule"].items():
        print(f"  {n:5d} {rule}" + (f" (baseline {base['by_rule'].get(rule, 0)})" if base else ""))
    if not args.update:
        return 0
    rises = _rises(base, now) if base and base.get("version") == now["version"] else []
    if base and base.get("version") != now["version"] and not args.allow_increase:
        print(f"the baseline is of {CHECKER} {base.get('version')}: pass --allow-increase to rerecord it", file=sys.stderr)
        return 1
    if rises and not args.allow_increase:
        print("not written: the baseline only goes down; these rose:\n  " + "\n  ".join(rises), file=sys.stderr)
        return 1
    BASELINE.write_text(json.dumps(now, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {BASELINE.relative_to(ROOT).as_posix()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
