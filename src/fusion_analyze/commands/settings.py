"""Defaults for the command line from the environment and from `[tool.fusion-analyze]` in the pyproject.toml of
the current directory (or the nearest parent that has one): command line > environment > pyproject.toml >
built-in. The environment variables are declared on the options themselves (cli.py, `envvar=`); this module
reads the table and gives it to click as its `default_map`, which click consults after both."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import UserError

TABLE = "fusion-analyze"  # [tool.fusion-analyze]

# key of the table -> the option's parameter name; `path`: a relative path is relative to the pyproject.toml
KEYS = {
    "vllm-root": ("vllm_root", "path"),
    "ascend-root": ("ascend_root", "path"),
    "hf-root": ("hf_root", "path"),
    "patterns": ("patterns", "path"),
    "config": ("config", "path"),
    "device": ("device", None),
    "device-profile": ("device_profile", "path"),
    "tp": ("tp", None),
    "ep": ("ep", None),
    "lang": ("lang", None),
    "backend": ("backend", None),
    "format": ("fmt", None),
    "template": ("template", "path"),
    "workers": ("workers", None),
    "timeout": ("timeout", None),
}

# The environment variables of the options (cli.py passes these as `envvar=`).
ENV = {
    "vllm_root": "FUSION_ANALYZE_VLLM_ROOT",
    "ascend_root": "FUSION_ANALYZE_ASCEND_ROOT",
    "hf_root": "FUSION_ANALYZE_HF_ROOT",
    "patterns": "FUSION_ANALYZE_PATTERNS",
    "device": "FUSION_ANALYZE_DEVICE",
    "device_profile": "FUSION_ANALYZE_DEVICE_PROFILE",
    "tp": "FUSION_ANALYZE_TP",
    "ep": "FUSION_ANALYZE_EP",
    "lang": "FUSION_ANALYZE_LANG",
}


def find_pyproject(start: Path | None = None) -> Path | None:
    """The pyproject.toml of `start` (default: the current directory) or of its nearest parent that has one."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _toml(path: Path) -> dict:
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            text = path.read_text(encoding="utf-8", errors="replace")
            if re.search(rf"^\s*\[tool\.{re.escape(TABLE)}", text, re.M):
                raise UserError(f"{path}: [tool.{TABLE}] needs Python 3.11 (tomllib) or the tomli package to be read")
            return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read it ({exc}); fix or remove it")
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML ({exc}); fix it or run from another folder")


def read_settings(start: Path | None = None) -> tuple[dict, dict, Path | None]:
    """(the table's defaults for every command, per-command defaults `[tool.fusion-analyze.<command>]`, the file)
    as {parameter name: value}; relative paths made absolute against the file's folder."""
    path = find_pyproject(start)
    if path is None:
        return {}, {}, None
    data = _toml(path).get("tool", {}).get(TABLE)
    if data is None:
        return {}, {}, path
    if not isinstance(data, dict):
        raise UserError(f"{path}: [tool.{TABLE}] is not a table")
    common: dict = {}
    per_command: dict = {}
    for key, value in data.items():
        if isinstance(value, dict):  # [tool.fusion-analyze.all]: defaults of one command
            per_command[key] = {name: v for name, v in (_entry(path, f"{key}.{k}", k, v) for k, v in value.items())}
            continue
        name, v = _entry(path, key, key, value)
        common[name] = v
    return common, per_command, path


def _entry(path: Path, where: str, key: str, value) -> tuple[str, object]:
    spec = KEYS.get(key.replace("_", "-"))
    if spec is None:
        raise UserError(f"{path}: [tool.{TABLE}] has an unknown key '{where}'; known: {', '.join(KEYS)}")
    name, kind = spec
    if not isinstance(value, (str, int, float, bool)):
        raise UserError(f"{path}: [tool.{TABLE}] {where} = {value!r}: give a string or a number")
    if kind == "path" and isinstance(value, str) and "==" not in value:
        resolved = (path.parent / Path(value).expanduser())
        if resolved.exists() or key.replace("_", "-") != "config":  # a preset name (config = "Qwen3-8B") stays
            value = str(resolved)
    return name, value


def default_map(commands, start: Path | None = None) -> dict:
    """click's `default_map` for the root context: each command's defaults from the pyproject.toml table."""
    common, per_command, path = read_settings(start)
    unknown = sorted(set(per_command) - set(commands))
    if unknown:
        raise UserError(f"{path}: [tool.{TABLE}.{unknown[0]}]: no such command; commands: {', '.join(sorted(commands))}")
    return {name: {**common, **per_command.get(name, {})} for name in commands} if (common or per_command) else {}
