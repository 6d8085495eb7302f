"""Turn a --vllm-root / --ascend-root argument into a checked source tree."""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..ir.texts import say
from .fetch import fetch_spec, is_spec

# package dir name -> (what the tree must contain to be that package, the CLI flag)
_KINDS = {
    "vllm": ("model_executor", "--vllm-root"),
    "vllm_ascend": ("ops", "--ascend-root"),
    "transformers": ("models", "--hf-root"),  # read for the configuration classes' defaults (never imported)
}


@dataclass(frozen=True)
class SourceTree:
    package: str  # "vllm" or "vllm_ascend"
    root: Path  # the directory that contains the package directory
    version: str | None
    spec: str | None = None  # "vllm==0.30.0" when fetched on demand

    @property
    def package_dir(self) -> Path:
        return self.root / self.package

    def rel(self, path: Path) -> str:
        """Path relative to the root, with forward slashes (never absolute in reports)."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return path.name
        except (RuntimeError, OSError):  # a symlink loop: name the link itself
            try:
                return Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(self.root))).as_posix()
            except ValueError:
                return path.name

    def describe(self) -> dict:
        return {"version": self.version}


def open_tree(arg: str | None, package: str, *, required: bool) -> SourceTree | None:
    """Resolve a root argument (path, package dir or pip spec); fall back to an installed package."""
    marker, flag = _KINDS[package]
    if arg is None:
        found = _installed_package_root(package)
        if found is None:
            if required:
                raise UserError(
                    f"no vLLM source tree given and no installed '{package}' package found: "
                    f"pass {flag} PATH (a checkout or unpacked sdist) or {flag} vllm==VERSION"
                )
            return None
        return _checked(found, package, arg_text=str(found))
    spec = None
    if is_spec(arg):
        spec = arg
        path = fetch_spec(arg)
    else:
        path = Path(arg).expanduser()
    return _checked(path, package, arg_text=arg, spec=spec)


def _checked(path: Path, package: str, *, arg_text: str, spec: str | None = None) -> SourceTree:
    marker, flag = _KINDS[package]
    if not path.exists():
        raise UserError(f"{flag} {arg_text}: no such directory; pass the directory that contains '{package}/'")
    if not path.is_dir():
        raise UserError(f"{flag} {arg_text}: not a directory; pass the directory that contains '{package}/'")
    root = path
    if (path / "__init__.py").is_file() and path.name == package:
        root = path.parent  # the package directory itself was given
    pkg = root / package
    if not (pkg / marker).is_dir():
        what = {"vllm": "vLLM", "vllm_ascend": "vllm-ascend"}.get(package, package)
        raise UserError(
            f"{flag} {arg_text}: not a {what} tree (no {package}/{marker}/ inside); "
            f"pass the directory that contains '{package}/'"
        )
    return SourceTree(package=package, root=root.resolve(), version=detect_version(root, package), spec=spec)


def _installed_package_root(package: str) -> Path | None:
    # find_spec on a top-level name locates it without executing the package.
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).parent


_VERSION_RE = re.compile(r"""^(?:__version__|version)\s*(?::\s*str\s*)?=.*?['"]([^'"]+)['"]""", re.M)
_META_RE = re.compile(r"^Version:\s*(\S+)", re.M)


def detect_version(root: Path, package: str) -> str | None:
    """Version from _version.py, then PKG-INFO / egg-info / dist-info metadata."""
    for name in ("_version.py", "__init__.py"):  # transformers states __version__ in its __init__
        vfile = root / package / name
        if vfile.is_file():
            m = _VERSION_RE.search(vfile.read_text(encoding="utf-8", errors="replace"))
            if m:
                return m.group(1)
    dist = package.replace("_", "-")
    candidates = [root / "PKG-INFO", root / f"{package}.egg-info" / "PKG-INFO"]
    candidates += sorted(root.glob(f"{package}-*.dist-info/METADATA"))
    candidates += sorted(root.glob(f"{dist}-*.dist-info/METADATA"))
    for meta in candidates:
        if meta.is_file():
            text = meta.read_text(encoding="utf-8", errors="replace")
            name = re.search(r"^Name:\s*(\S+)", text, re.M)
            if name and name.group(1).lower().replace("_", "-") != dist:
                continue
            m = _META_RE.search(text)
            if m:
                return m.group(1)
    return None


# Where a vllm-ascend tree says which vLLM release it is built and tested against: the vLLM tag its image clones,
# the tag its CI pins, the version its docs install. The first found is the declaration.
_DECLARATIONS = (
    ("Dockerfile", re.compile(r"^[ \t]*ARG[ \t]+VLLM_TAG[ \t]*=[ \t]*v?(\d+\.\d+(?:\.\d+)?)[ \t]*$", re.M)),
    (".github/vllm-release-tag.commit", re.compile(r"^[ \t]*v?(\d+\.\d+(?:\.\d+)?)[ \t]*$", re.M)),
    ("docs/source/conf.py", re.compile(r"""["']pip_vllm_version["']\s*:\s*["'](\d+\.\d+(?:\.\d+)?)["']""")),
)


def declared_vllm(ascend: SourceTree) -> tuple[str, str] | None:
    """(the vLLM version a vllm-ascend tree declares, where: `Dockerfile L34: ARG VLLM_TAG=v0.30.0`), or None
    where it declares none (an installed package carries no Dockerfile)."""
    for rel, pattern in _DECLARATIONS:
        path = ascend.root / rel
        try:
            text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        except OSError:
            continue
        m = pattern.search(text)
        if m:
            line = text.count("\n", 0, m.start()) + 1
            return m.group(1), f"{rel} L{line}: {m.group(0).strip()}"
    return None


def _minor(version: str | None) -> tuple[int, ...] | None:
    m = re.match(r"v?(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def pair_mismatch(vllm: SourceTree, ascend: SourceTree | None) -> str | None:
    """A warning where the vllm-ascend tree declares another vLLM release (major.minor) than the vLLM tree's,
    else None (also where either version is unknown)."""
    if ascend is None:
        return None
    declared = declared_vllm(ascend)
    if declared is None or _minor(vllm.version) is None or _minor(declared[0]) == _minor(vllm.version):
        return None
    return say("warn_pair_mismatch", ascend=ascend.version or say("tree_version_unknown"), declared=declared[0],
               where=declared[1], vllm=vllm.version or "")
