"""Fetch a released source tree (`vllm==0.30.0`) with pip into the user cache, once."""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import UserError, note
from ..ir.texts import say

_SPEC_RE = re.compile(r"^(vllm|vllm[-_]ascend|transformers)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")


def is_spec(text: str) -> bool:
    return "==" in text and not Path(text).exists()


def cache_dir() -> Path:
    env = os.environ.get("FUSION_ANALYZE_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fusion-analyze"


def _pip_command() -> list[str]:
    # Overridable so tests can stand in for a registry that says no.
    env = os.environ.get("FUSION_ANALYZE_PIP")
    return shlex.split(env) if env else [sys.executable, "-m", "pip"]


def fetch_spec(spec: str) -> Path:
    """Return the unpacked tree for `spec`, downloading it on first use."""
    m = _SPEC_RE.match(spec.strip())
    if not m:
        raise UserError(f"cannot fetch '{spec}': write it as vllm==VERSION, vllm-ascend==VERSION or transformers==VERSION")
    name = {"vllm": "vllm", "transformers": "transformers"}.get(m.group(1), "vllm-ascend")
    version = m.group(2)
    package = name.replace("-", "_")
    trees = cache_dir() / "trees"
    final = trees / f"{name}-{version}"
    if (final / package).is_dir():
        return final
    trees.mkdir(parents=True, exist_ok=True)
    with open(trees / f".{name}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs fetching the same spec wait for each other
        if (final / package).is_dir():
            return final
        work = Path(tempfile.mkdtemp(prefix=f"fetch-{name}-{version}-", dir=trees))
        note(say("note_fetching", spec=f"{name}=={version}", folder=str(final)))
        try:
            _download(f"{name}=={version}", work)
            unpacked = _find_unpacked(work, package)
            if unpacked is None:
                raise UserError(f"cannot fetch {name}=={version}: pip downloaded nothing usable; pass a local tree instead")
            os.replace(unpacked, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        note(say("note_fetched", spec=f"{name}=={version}", folder=str(final)))
    return final


def _download(spec: str, work: Path) -> None:
    cmd = _pip_command() + [
        "download", "--no-deps", "--no-binary", ":all:", "--no-clean",
        "--no-build-isolation", "--disable-pip-version-check", spec, "-d", str(work / "dl"),
    ]
    env = dict(os.environ, TMPDIR=str(work))
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot fetch {spec}: pip did not run ({exc.__class__.__name__}); pass a local tree instead")
    # pip exits non-zero at "Preparing metadata" for these sdists; the unpacked tree survives.
    if _find_unpacked(work, spec.split("==")[0].replace("-", "_")) is None:
        errors = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip().startswith("ERROR")]
        listed = next((m for m in (re.search(r"\(from versions: ([^)]*)\)", e) for e in errors) if m), None)
        if listed is not None and listed.group(1).strip() != "none":  # no such release: say which exist, nearest first
            raise UserError(_no_such_release(spec, [v.strip() for v in listed.group(1).split(",") if v.strip()]))
        reason = errors[0] if errors else f"pip exited with {proc.returncode}"
        raise UserError(f"cannot fetch {spec}: {reason} (no network, or no such release?); pass a local tree instead")


def _no_such_release(spec: str, versions: list[str]) -> str:
    """One line: the release does not exist; the nearest releases pip lists (0.30.0rc2 for 0.30.0), then the
    latest ones."""
    name, version = spec.split("==", 1)

    def release(v: str) -> tuple:
        return tuple(int(x) for x in re.findall(r"\d+", re.match(r"[\d.]*", v).group(0)))  # type: ignore[union-attr]

    want = release(version)
    same = [v for v in versions if v.startswith(version) or release(v) == want]  # 0.30.0rc1, 0.30.0rc2
    prefix = [v for v in versions if release(v)[:2] == want[:2]]  # the same minor release
    nearest = list(dict.fromkeys(list(reversed(same)) + list(reversed(prefix))))[:3]
    if not nearest:
        import difflib

        nearest = difflib.get_close_matches(version, versions, n=3, cutoff=0.0)
    latest = ", ".join(versions[-8:])
    return (f"cannot fetch {spec}: {name} has no release {version}; did you mean "
            f"{' / '.join(f'{name}=={v}' for v in nearest)}? (pip lists {len(versions)} releases, the latest: {latest})")


def _find_unpacked(work: Path, package: str) -> Path | None:
    for cand in sorted(work.glob("pip-download-*/*")) + sorted(work.glob("pip-*/*")):
        for root in (cand, cand / "src"):  # transformers keeps its package under src/
            if (root / package / "__init__.py").is_file():
                return root
    for archive in sorted((work / "dl").glob("*.tar.gz")) if (work / "dl").is_dir() else []:
        import tarfile

        dest = work / "unpacked"
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(dest)
        for cand in sorted(dest.iterdir()):
            for root in (cand, cand / "src"):
                if (root / package / "__init__.py").is_file():
                    return root
    return None
