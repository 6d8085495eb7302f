"""Defaults for the command line from the environment and from `[tool.fusion-analyze]` in the pyproject.toml of
the current directory (or the nearest parent that has one): command line > environment > pyproject.toml >
built-in. The environment variables are declared on the options themselves (cli.py, `envvar=`); this module
reads the table and gives it to click as its `default_map`, which click consults after both."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import UserError

TABLE = "fusion-analyze"  # [tool.fusion-analyze]

# The table's keys are the commands' own long option names (`tensor-parallel-size`, `enable-expert-parallel`,
# `additional-config`, `tp`, `format`, ...), read from the commands themselves; these parameters take a path,
# relative to the pyproject.toml that names it.
PATHS = {"vllm_root", "ascend_root", "hf_root", "patterns", "config", "device_profile", "template"}
NOT_SETTINGS = {"help", "version", "install_completion", "show_completion", "output", "scaffold", "stubs"}


def option_keys(commands: dict) -> dict[str, dict[str, str]]:
    """{command: {key: parameter name}}: each command's long option names (without the dashes)."""
    out: dict[str, dict[str, str]] = {}
    for name, cmd in commands.items():
        keys: dict[str, str] = {}
        for param in getattr(cmd, "params", []):
            if getattr(param, "param_type_name", "") != "option" or param.name in NOT_SETTINGS:
                continue
            for opt in list(param.opts) + list(getattr(param, "secondary_opts", [])):
                if opt.startswith("--"):
                    keys[opt[2:]] = param.name
        out[name] = keys
    return out


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


def read_settings(start: Path | None = None, commands: dict | None = None) -> tuple[dict, dict, Path | None]:
    """(the table's defaults for every command, per-command defaults `[tool.fusion-analyze.<command>]`, the file)
    as {key: value} (the long option name, dashes or underscores); relative paths made absolute against the
    file's folder. `commands`: {name: click command}, whose options name the keys a table may hold."""
    path = find_pyproject(start)
    if path is None:
        return {}, {}, None
    data = _toml(path).get("tool", {}).get(TABLE)
    if data is None:
        return {}, {}, path
    if not isinstance(data, dict):
        raise UserError(f"{path}: [tool.{TABLE}] is not a table")
    keys = option_keys(commands or {})
    every = {k: v for per in keys.values() for k, v in per.items()}
    common: dict = {}
    per_command: dict = {}
    for key, value in data.items():
        if isinstance(value, dict):  # [tool.fusion-analyze.all]: defaults of one command
            if commands is not None and key not in commands:
                raise UserError(f"{path}: [tool.{TABLE}.{key}]: no such command; commands: {', '.join(sorted(commands))}")
            known = keys.get(key, every)
            per_command[key] = dict(_entry(path, f"{key}.{k}", k, v, known) for k, v in value.items())
            continue
        k, v = _entry(path, key, key, value, every)
        common[k] = v
    return common, per_command, path


def _entry(path: Path, where: str, key: str, value, known: dict[str, str]) -> tuple[str, object]:
    """(the option's long name, the value): a key the options do not name is refused, with the names it may be."""
    key = key.replace("_", "-")
    if known and key not in known:
        near = ", ".join(sorted(known))
        raise UserError(f"{path}: [tool.{TABLE}] has an unknown key '{where}'; keys are the commands' long "
                        f"option names: {near}")
    ok = (str, int, float, bool)
    if not isinstance(value, ok) and not (isinstance(value, list) and all(isinstance(x, ok) for x in value)):
        raise UserError(f"{path}: [tool.{TABLE}] {where} = {value!r}: give a string, a number, true/false or a list")
    if known.get(key) in PATHS and isinstance(value, str) and "==" not in value:
        resolved = (path.parent / Path(value).expanduser())
        if resolved.exists() or known[key] != "config":  # a preset name (config = "Qwen3-8B") stays
            value = str(resolved)
    return key, value


def default_map(commands: dict, start: Path | None = None) -> dict:
    """click's `default_map` for the root context: each command's defaults from the pyproject.toml table, under
    the parameter names of the options the keys name (a key a command has no option for does not reach it)."""
    common, per_command, _ = read_settings(start, commands)
    if not (common or per_command):
        return {}
    keys = option_keys(commands)
    out = {}
    for name in commands:
        merged = {**common, **per_command.get(name, {})}
        out[name] = {keys[name][k]: v for k, v in merged.items() if k in keys[name]}
    return out
