"""Command line: `fusion-analyze MODEL --vllm-root ...` plus subcommands (locate, list-models, fetch, ...)."""

from __future__ import annotations

import json
import gc
import os
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Literal, Optional, get_args

import typer
from typer._click.exceptions import BadParameter, MissingParameter, NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from . import __version__
from .errors import UserError
from .commands.stack import on_large_stack_chunk
from .render.sarif import parse_roots

FORMATS = ("md", "json", "sarif", "github")  # the report formats of the single-model command, diff and compare
EXTENSIONS = {"md": "md", "json": "json", "sarif": "sarif", "github": "txt"}


_ROOT_FLAGS = ("-q", "--quiet", "-v", "--verbose", "--debug")  # root options that may stand anywhere


class _DefaultToAnalyze(TyperGroup):
    """`fusion-analyze qwen3 ...` means `fusion-analyze analyze qwen3 ...`; `-q`, `-v` and `--debug` may stand
    anywhere (`fusion-analyze qwen3 -q ...`); a usage error is one line (exit 2), Ctrl-C one line (exit 130)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:  # ctx: typer's (vendored) click Context
        end = args.index("--") if "--" in args else len(args)
        flags = [a for a in args[:end] if a in _ROOT_FLAGS]
        rest = [a for a in args[:end] if a not in _ROOT_FLAGS] + args[end:]
        if rest and rest[0] not in self.commands and not rest[0].startswith("-"):
            rest = ["analyze", *rest]
        return super().parse_args(ctx, flags + rest)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            _usage_error(exc)
        except UserError as exc:  # one the root raised (a malformed pyproject.toml table)
            _fail(exc)
        except KeyboardInterrupt as exc:
            typer.echo(_interrupted(exc), err=True)
            raise typer.Exit(143 if _interrupted(exc) == "terminated" else 130)


def _interrupted(exc: BaseException) -> str:
    """Ctrl-C is 'interrupted' (exit 130); SIGTERM during `all` is 'terminated' (exit 143)."""
    return "terminated" if type(exc).__name__ == "Terminated" else "interrupted"


def _usage_error(exc) -> None:
    """A usage error (a bad choice, a missing option) as one line on stderr, exit 2; `fusion-analyze` alone
    still shows the help."""
    if isinstance(exc, NoArgsIsHelpError):
        raise exc
    message = exc.format_message()
    param = getattr(exc, "param", None)
    if (isinstance(exc, BadParameter) and param is not None and param.opts
            and not isinstance(exc, MissingParameter)):
        flag = max(param.opts, key=len)
        bad = re.search(r"'([^']*)' is not one of (.*?)\.?$", message)
        message = (f"{flag} {bad.group(1)}: use one of {bad.group(2).replace(chr(39), '')}" if bad
                   else f"{flag}: {re.sub(r'^Invalid value for [^:]*?(?: [(]env var: [^)]*[)])?: (Value error, )?', '', message)}")
    ctx = getattr(exc, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    typer.echo(f"error: {message}{hint}", err=True)
    raise typer.Exit(2)


app = typer.Typer(
    cls=_DefaultToAnalyze,
    add_completion=True,  # --install-completion / --show-completion
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Find fused and still-open operator-fusion scenarios of a vLLM model on Ascend NPUs.\n\n"
    "Run `fusion-analyze MODEL --vllm-root PATH [--ascend-root PATH]` to analyze one model.",
    pretty_exceptions_enable=False,
)


class Fmt(str, Enum):
    text = "text"
    json = "json"


class Backend(str, Enum):
    ascend = "ascend"
    cuda = "cuda"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"fusion-analyze {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True, help="Show the version and exit."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Print errors only: no warnings, progress or summary on stderr (may stand anywhere)."),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Also print details on stderr: the trees used, how the model query resolved (may stand anywhere)."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error (bad input and internal errors alike) to report it."),
) -> None:
    """Defaults: command line > environment (FUSION_ANALYZE_VLLM_ROOT, ...) > [tool.fusion-analyze] in the
    pyproject.toml of this folder or the nearest parent > built-in (docs/configuration.md)."""
    from .commands.settings import default_map
    from .errors import Verbosity

    Verbosity.level = 0 if quiet else 2 if verbose else 1
    Verbosity.debug = debug
    # stderr's language until a command's --lang says it (_speak): a command without the option speaks English,
    # or FUSION_ANALYZE_LANG's language
    env_lang = os.environ.get("FUSION_ANALYZE_LANG")
    Verbosity.lang = env_lang if env_lang in LANGS else "en"
    found = default_map(dict(getattr(ctx.command, "commands", {})))
    if found:
        ctx.default_map = found


VllmRoot = typer.Option(None, "--vllm-root", envvar="FUSION_ANALYZE_VLLM_ROOT",
                        help="Directory containing vllm/ (checkout, sdist, site-packages), or vllm==VERSION.")
AscendRoot = typer.Option(None, "--ascend-root", envvar="FUSION_ANALYZE_ASCEND_ROOT",
                          help="Directory containing vllm_ascend/, or vllm-ascend==VERSION (without one the report is CUDA only).")
HfRoot = typer.Option(None, "--hf-root", envvar="FUSION_ANALYZE_HF_ROOT",
                      help="Directory containing transformers/, or transformers==VERSION: the "
                      "defaults of the model's configuration class (default: an installed transformers).")
# The choices of the choice options (--help lists them, completion offers them); tests/test_cli_conventions.py
# holds them equal to their sources: templates/labels.yaml's languages, FORMATS, commands/diff.py FAIL_ON.
Lang = Literal["zh", "en"]
FormatChoice = Literal["md", "json", "sarif", "github"]
FailOn = Literal["regression", "any", "status", "opportunities", "ops", "none"]
Tables = Literal["text", "all"]
LANGS, FAIL_ON = get_args(Lang), get_args(FailOn)
# The options the single-model command, `all` and `compare` share (help, environment variables)
SarifRootOpt = typer.Option(None, "--sarif-root", help="NAME=PREFIX (repeatable): where a tree lies in the job's "
                            "repository (VLLM, VLLM_ASCEND, TRANSFORMERS), for --format sarif / github: SARIF's "
                            "originalUriBaseIds and the annotations' file paths point there.")
LangOpt = typer.Option("zh", "--lang", envvar="FUSION_ANALYZE_LANG", help="Report language.")
PatternsOpt = typer.Option(None, "--patterns", envvar="FUSION_ANALYZE_PATTERNS",
                           help="A folder of <category>/<id>.yaml patterns adding to or replacing the built-in ones.")
ConfigOpt = typer.Option(None, "--config", help="HF config.json (or a preset name such as Qwen3-0.6B): decides the "
                         "walk's branches and the estimate's shapes.")
TpOpt = typer.Option(None, "--tensor-parallel-size", "-tp", "--tp", envvar="FUSION_ANALYZE_TP",
                     help="vLLM's --tensor-parallel-size: decides the walk's tests on it and the estimate's per-rank "
                     "shapes (not given: vLLM's 1, and the all-reduce rows stay open: communication fusions are "
                     "rejected at 1).")
EpOpt = typer.Option(None, "--ep", envvar="FUSION_ANALYZE_EP", help="Expert-parallel size itself (implies "
                     "--enable-expert-parallel; default: TP × DP with --enable-expert-parallel, else 1).")
# the rest of the deployment, in vLLM's engine-argument names (ir/deployment.py, docs/deployment.md)
DpOpt = typer.Option(None, "--data-parallel-size", "-dp", help="vLLM's --data-parallel-size (default 1).")
EnableEpOpt = typer.Option(False, "--enable-expert-parallel", help="vLLM's --enable-expert-parallel: the experts are "
                           "split over TP × DP ranks; the MoE communication is picked as vllm-ascend picks it.")
QuantOpt = typer.Option(None, "--quantization", help="vLLM's --quantization (default: found in the checkpoint folder "
                        "as vllm-ascend finds it: quant_model_description.json -> ascend).")
AdditionalOpt = typer.Option(None, "--additional-config", help="vllm-ascend's --additional-config JSON "
                             "('{\"enable_fused_mc2\": true}').")
EagerOpt = typer.Option(False, "--enforce-eager", help="vLLM's --enforce-eager: no graph capture, no graph passes.")
MaxSeqsOpt = typer.Option(None, "--max-num-seqs", help="vLLM's --max-num-seqs (default 256): the MC2 token capacity.")
ServeOpt = typer.Option(None, "--serve-args", help="A `vllm serve MODEL ...` command line: its engine arguments "
                        "(the options above, given one by one, win).")
DeviceOpt = typer.Option(None, "--device", envvar="FUSION_ANALYZE_DEVICE", metavar="[ascend_a2|ascend_a3|ascend_a5|ID]",
                         help="Device profile of patterns/catalog/devices.yaml (default ascend_a2), or an id of --device-profile.")
DeviceProfileOpt = typer.Option(None, "--device-profile", envvar="FUSION_ANALYZE_DEVICE_PROFILE",
                                help="A YAML file of device profiles (same keys as patterns/catalog/devices.yaml).")
BackendOpt = typer.Option(None, "--backend", help="Which layer implementations to walk (default: ascend when an Ascend root is given).")
NoCacheOpt = typer.Option(False, "--no-cache", help="Parse every file again (do not read or write the parse cache).")


def _fail(exc: UserError) -> None:
    from .errors import Verbosity, localized

    if Verbosity.debug:
        import traceback

        traceback.print_exc()
    typer.echo(f"error: {localized(exc.message)}", err=True)  # a sentence of ir/texts.py in --lang's language
    raise typer.Exit(exc.code)


@app.command("locate")
def locate_cmd(
    query: str = typer.Argument(..., help="Architecture, model type, marketing name (GLM-4.7), HF repo id "
                                "(Qwen/Qwen3-8B), checkpoint directory or path to config.json."),
    vllm_root: Optional[str] = VllmRoot,
    ascend_root: Optional[str] = AscendRoot,
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text (for people) or json."),
    hf_root: Optional[str] = HfRoot,
    lang: Lang = LangOpt,
) -> None:
    """Resolve a model to its file and class, with the lines that prove it."""
    from .analysis.session import Session, warn_pair

    try:
        _check_choices(lang=lang)
        _speak(lang)
        session = Session.open(vllm_root, ascend_root)
        hf = session.hf_tree(hf_root)
        if hf is not None:  # a model type's causal-LM class, from transformers' auto mapping
            session.index.trees.setdefault("transformers", hf)
        loc = session.resolver.resolve(query)
        warn_pair(session, no_ascend=False)
        _said_resolved(query, loc)
    except UserError as exc:
        _fail(exc)
    if fmt is Fmt.json:
        typer.echo(json.dumps(loc.to_json(), indent=2, sort_keys=True))
        return
    src = loc.sources
    lines = [
        f"architecture: {loc.architecture}",
        f"file:         {loc.file}",
        f"class:        {loc.class_name} (L{loc.line})",
        f"vllm:         {src['vllm']['version'] or 'unknown version'}",
        f"vllm-ascend:  {src['vllm_ascend']['version'] if src['vllm_ascend'] else 'not given (Ascend status unknown)'}",
        "verification:",
    ]
    lines += [f"  {e.file}:{e.line}: {e.text}" for e in loc.verification] or ["  (no line of the file names it)"]
    o = loc.ascend_override
    lines.append(f"ascend override: {o.class_name} ({o.file}:{o.line})" if o else "ascend override: none")
    lines.append("patches:" if loc.patches else "patches: none")
    lines += [f"  {p.file}:{p.line}: {p.target}" for p in loc.patches]
    typer.echo("\n".join(lines))


@app.command("list-models")
def list_models_cmd(
    vllm_root: Optional[str] = VllmRoot,
    ascend_root: Optional[str] = AscendRoot,
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text (for people) or json."),
    lang: Lang = LangOpt,
) -> None:
    """List every architecture of the tree's registry with its file."""
    from .analysis.session import Session, warn_pair

    try:
        _check_choices(lang=lang)
        _speak(lang)
        session = Session.open(vllm_root, ascend_root)
        warn_pair(session, no_ascend=False)
    except UserError as exc:
        _fail(exc)
    rows = []
    for e in session.resolver.entries:
        found = session.index.module_path(e.module)
        rel = session.vllm.rel(found[0]) if found else None
        rows.append({"architecture": e.architecture, "file": rel, "class": e.class_name, "table": e.table})
    rows.sort(key=lambda r: r["architecture"])
    if fmt is Fmt.json:
        typer.echo(json.dumps(rows, indent=2, sort_keys=True))
    else:
        width = max(len(r["architecture"]) for r in rows)
        for r in rows:
            typer.echo(f"{r['architecture']:<{width}}  {r['file'] or '(missing file)'}")


@app.command("fetch")
def fetch_cmd(specs: list[str] = typer.Argument(..., help="vllm==VERSION, vllm-ascend==VERSION or transformers==VERSION."),
              lang: Lang = LangOpt) -> None:
    """Download released source trees into the user cache (once) and print their paths."""
    from .sources.fetch import fetch_spec

    try:
        _check_choices(lang=lang)
    except UserError as exc:
        _fail(exc)
    _speak(lang)
    for spec in specs:
        try:
            typer.echo(str(fetch_spec(spec)))
        except UserError as exc:
            _fail(exc)


@app.command("analyze")
def analyze_cmd(
    model: str = typer.Argument(..., help="Architecture, model type, marketing name (GLM-4.7), HF repo id "
                                "(Qwen/Qwen3-8B), checkpoint directory or path to config.json."),
    vllm_root: Optional[str] = VllmRoot,
    ascend_root: Optional[str] = AscendRoot,
    backend: Optional[Backend] = BackendOpt,
    fmt: FormatChoice = typer.Option("md", "--format", help="md, json, sarif (SARIF 2.1.0: one result per open opportunity) or github (workflow annotations)."),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="Write the report here; -o DIR/ (or an existing folder) writes DIR/<arch>.<ext> (default: stdout when it is not a terminal, else reports/<arch>.md)."),
    patterns: Optional[str] = PatternsOpt,
    config: Optional[str] = ConfigOpt,
    hf_root: Optional[str] = HfRoot,
    tp: Optional[int] = TpOpt,
    ep: Optional[int] = EpOpt,
    dp: Optional[int] = DpOpt,
    enable_expert_parallel: bool = EnableEpOpt,
    quantization: Optional[str] = QuantOpt,
    additional_config: Optional[str] = AdditionalOpt,
    enforce_eager: bool = EagerOpt,
    max_num_seqs: Optional[int] = MaxSeqsOpt,
    serve_args: Optional[str] = ServeOpt,
    device: Optional[str] = DeviceOpt,
    device_profile: Optional[str] = DeviceProfileOpt,
    lang: Lang = LangOpt,
    template: Optional[str] = typer.Option(None, "--template", help="Your own Jinja2 template over the same data."),
    stubs: Optional[str] = typer.Option(None, "--stubs", help="Also write FILE.py: every open opportunity's stub and PyTorch reference."),
    scaffold: Optional[str] = typer.Option(None, "--scaffold", help="Also write DIR/: for each open opportunity with a kernel template, a Triton kernel at the report's shapes, its custom op, a test, a benchmark and an integration module (docs/generated-kernels.md)."),
    sarif_root: Optional[list[str]] = SarifRootOpt,
    no_cache: bool = NoCacheOpt,
) -> None:
    """Analyze one model (the default command: `fusion-analyze MODEL ...`)."""
    from .analysis.pipeline import Options, analyze, write_output, write_stubs
    from .analysis.session import warn_pair
    from .errors import Verbosity
    from .ir.texts import say

    try:
        _check_choices(fmt=fmt or "md", lang=lang)
        _speak(lang)
        roots = parse_roots(sarif_root)
        if template is not None and not Path(template).is_file():
            raise UserError(f"--template {template}: no such file; give a Jinja2 template path")
        _check_before(tp=tp, ep=ep, device=device, device_profile=device_profile, config=config, patterns=patterns,
                      outputs={"-o": output, "--stubs": stubs}, folders={"--scaffold": scaffold})
        engine = _engine_options(dp=dp, enable_expert_parallel=enable_expert_parallel, quantization=quantization,
                                 additional_config=additional_config, enforce_eager=enforce_eager,
                                 max_num_seqs=max_num_seqs, serve_args=serve_args)
        result = analyze(model, vllm_root, ascend_root, backend.value if backend else None, patterns,
                         Options(config=config, tp=tp, ep=ep, device=device, device_profile=device_profile,
                                 hf_root=hf_root, **engine), cache=not no_cache)
        warn_pair(result.session)
        _said_resolved(model, result.location)
        fmt = fmt or "md"
        to_terminal = output is None and sys.stdout.isatty()
        if to_terminal:
            output = f"reports/{result.location.architecture}.{EXTENSIONS[fmt]}"
        output = _report_path(output, result.location.architecture, fmt)
        if fmt in ("sarif", "github"):
            _write_ci(result, fmt, output, roots)
        else:
            write_output(result, fmt, output, template, lang)
        if stubs:
            write_stubs(result, stubs)
        if scaffold:
            from .commands.scaffold import write_scaffold

            written = write_scaffold(result, scaffold)
            if sys.stderr.isatty():
                typer.echo(say("note_scaffold", kernels=str(len(written.kernels)), files=str(len(written.files)),
                               folder=scaffold).in_language(lang), err=True)
        if output not in (None, "-") and (to_terminal or sys.stderr.isatty()) and Verbosity.level >= 1:
            from .render.summary import print_summary

            print_summary(result, output, stubs, to_stdout=to_terminal, lang=lang)
    except UserError as exc:
        _fail(exc)


@app.command("all")
def all_cmd(
    vllm_root: Optional[str] = VllmRoot,
    ascend_root: Optional[str] = AscendRoot,
    output: str = typer.Option(..., "-o", "--output", help="Folder for <arch>.md, <arch>.json and index.md (created)."),
    only: Optional[list[str]] = typer.Option(None, "--only", help="Architectures or globs, or any model query the single-model command takes (Qwen3-8B, qwen3, Qwen/Qwen3-8B); repeat or comma-separate."),
    tables: Tables = typer.Option("text", "--tables", help="text: the text-generation registry table; all: every table."),
    backend: Optional[Backend] = BackendOpt,
    workers: int = typer.Option(2, "--workers", "-j", help="Worker processes."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds one model may take before it is recorded as timed out."),
    patterns: Optional[str] = PatternsOpt,
    config: Optional[str] = ConfigOpt,
    hf_root: Optional[str] = HfRoot,
    tp: Optional[int] = TpOpt,
    ep: Optional[int] = EpOpt,
    device: Optional[str] = DeviceOpt,
    device_profile: Optional[str] = DeviceProfileOpt,
    lang: Lang = LangOpt,
    no_cache: bool = NoCacheOpt,
    allow_fail: Optional[list[str]] = typer.Option(None, "--allow-fail", help="Architectures or globs (repeat or comma-separate) whose failure is recorded but does not make the exit code 1."),
    max_failures: int = typer.Option(0, "--max-failures", help="Exit 1 only when more than N architectures (not allowed by --allow-fail) failed."),
) -> None:
    """Analyze every architecture of the registry: one report per architecture plus index.md."""
    from .commands.batch import BatchJob, counted_failures, run_batch, select
    from .locate.registry import TEXT_TABLE, served_text_model
    from .analysis.session import Session, warn_pair

    try:
        _check_choices(lang=lang)
        _speak(lang)
        if tables not in ("text", "all"):
            raise UserError(f"--tables {tables}: use text or all")
        if max_failures < 0:
            raise UserError(f"--max-failures {max_failures}: give a count of 0 or more")
        _check_before(tp=tp, ep=ep, device=device, device_profile=device_profile, config=config, patterns=patterns,
                      folders={"-o": output})
        session = Session.open(vllm_root, ascend_root, backend.value if backend else None, patterns, cache=not no_cache)
        archs = [e.architecture for e in session.resolver.entries
                 if tables == "all" or e.table == TEXT_TABLE or served_text_model(e)]
        skipped: list[str] = []
        archs = select(sorted(set(archs)), only, resolve=lambda q: session.resolver.resolve(q).architecture,
                       skipped=skipped)
        out = Path(output)
        if out.exists() and not out.is_dir():
            raise UserError(f"-o {output}: exists and is not a folder; give a folder for the reports")
        job = BatchJob(vllm_root=str(session.vllm.root), ascend_root=str(session.ascend.root) if session.ascend else None,
                       backend=session.backend, out_dir=str(out), patterns=patterns, config=config, tp=tp, lang=lang,
                       cache=not no_cache, hf_root=_hf_path(session, hf_root), ep=ep, device=device,
                       device_profile=device_profile)
    except UserError as exc:
        _fail(exc)
    warn_pair(session)  # before the run: it takes minutes
    if skipped:
        from .errors import note
        from .render.markdown import labels

        note(labels(lang)["all_only_skipped"].format(names=", ".join(skipped)))
    progress = None
    bar = None
    if sys.stderr.isatty():
        from rich.progress import Progress

        bar = Progress(transient=True)
        task = bar.add_task("analyzing", total=len(archs))
        bar.start()
        progress = lambda arch, r: bar.advance(task)  # noqa: E731
    try:
        results = run_batch(job, archs, workers=workers, timeout=timeout, progress=progress, session=session)
    finally:
        if bar is not None:
            bar.stop()
    failed = [r for r in results if not r["ok"]]
    counted = counted_failures(failed, allow_fail)
    from .errors import note
    from .render.markdown import labels

    L = labels(lang)
    allowed = L["all_allowed"].format(n=len(failed) - len(counted)) if len(counted) < len(failed) else ""
    note(L["all_done"].format(ok=len(results) - len(failed), failed=len(failed), allowed=allowed, index=out / "index.md"))
    from .commands.batch import not_followed, undecided_line, undecided_totals
    from .ir.texts import Texts

    said = Texts(None, lang, md=False)  # a sentence of ir/texts.py (why a model failed, why a value is unresolved)
    note(L["all_undecided"].format(line=undecided_line(undecided_totals(results), lang)))
    unresolved = not_followed(results)
    note(L["all_not_followed"].format(n=len(unresolved)))
    for (file, line, target), nf in unresolved.items():
        typer.echo(L["all_not_followed_item"].format(file=file, line=line, target=target, n=len(nf["architectures"]),
                                                     reason=said(nf["reason"])), err=True)
    for r in failed:
        typer.echo(f"  {r['architecture']}{'' if r in counted else L['all_allowed_one']}: {said(r['error'])}", err=True)
    raise typer.Exit(1 if len(counted) > max_failures else 0)


@app.command("diff")
def diff_cmd(
    old: str = typer.Argument(..., help="Old JSON report or batch folder."),
    new: str = typer.Argument(..., help="New JSON report or batch folder."),
    fmt: FormatChoice = typer.Option("md", "--format", help="md (fits a PR comment), json, sarif (one result per regression) or github (annotations)."),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="Write the diff here (default: stdout)."),
    fail_on: FailOn = typer.Option("regression", "--fail-on", help="Which changes exit 1: regression (default), any, status, opportunities, ops, none."),
    different_models: bool = typer.Option(False, "--different-models", help="Compare two single reports of different architectures (refused otherwise)."),
    sarif_root: Optional[list[str]] = SarifRootOpt,
    lang: Lang = LangOpt,
) -> None:
    """What changed between two reports or `all` folders, regressions grouped by cause. Exit 1: a change of the
    kind --fail-on names (default: a regression); 0: none; 2: bad input."""
    from .commands.diff import diff_paths

    try:
        _check_choices(fmt=fmt, fail_on=fail_on, lang=lang)
        _speak(lang)
        roots = parse_roots(sarif_root)
        diffs = diff_paths(old, new, different_models=different_models)
        code = _write_diff(diffs, old, new, fmt, _report_path(output, "diff", fmt), fail_on, roots, lang)
    except UserError as exc:
        _fail(exc)
    raise typer.Exit(code)


def _write_diff(diffs, old: str, new: str, fmt: str, output: str | None, fail_on: str,
                roots: dict | None = None, lang: str = "zh") -> int:
    from .commands.diff import exit_code, findings, to_json, to_markdown
    from .analysis.pipeline import write_text

    code = exit_code(diffs, fail_on)
    if fmt in ("sarif", "github"):
        from .render.sarif import to_annotations, to_sarif

        found = findings(diffs, lang=lang)
        sides = getattr(diffs, "sources", None) or {}
        text = to_sarif(found, {"old": old, "new": new, "releases": sides}, roots=roots, sources=sides.get("new")) \
            if fmt == "sarif" else to_annotations(found, roots)
    else:
        text = to_markdown(diffs, old, new, lang=lang) if fmt == "md" else to_json(diffs, old, new)
    write_text(text, output)
    return code


@app.command("compare")
def compare_cmd(
    model: str = typer.Argument(..., help="The model to analyze on both sides."),
    base: Optional[str] = typer.Option(None, "--base", help="vLLM tree or spec of the base side (vllm==0.33.0; default: --vllm-root)."),
    head: Optional[str] = typer.Option(None, "--head", help="vLLM tree or spec of the head side (default: --vllm-root)."),
    vllm_root: Optional[str] = VllmRoot,
    base_args: Optional[str] = typer.Option(None, "--base-args", help="Engine arguments of the base side, as for `vllm serve` "
                                            "('--tensor-parallel-size 8'): compare two deployments of one tree."),
    head_args: Optional[str] = typer.Option(None, "--head-args", help="Engine arguments of the head side "
                                            "('--data-parallel-size 16 --enable-expert-parallel')."),
    ascend_root: Optional[str] = typer.Option(None, "--ascend-root", envvar="FUSION_ANALYZE_ASCEND_ROOT", help="vllm-ascend tree for both sides."),
    base_ascend: Optional[str] = typer.Option(None, "--base-ascend", help="vllm-ascend tree of the base side."),
    head_ascend: Optional[str] = typer.Option(None, "--head-ascend", help="vllm-ascend tree of the head side."),
    backend: Optional[Backend] = BackendOpt,
    fmt: FormatChoice = typer.Option("md", "--format", help="md, json, sarif or github, as for diff."),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="Write the diff here (default: stdout)."),
    fail_on: FailOn = typer.Option("regression", "--fail-on", help="Which changes exit 1: regression (default), any, status, opportunities, ops, none."),
    hf_root: Optional[str] = HfRoot,
    config: Optional[str] = typer.Option(None, "--config", help="HF config.json (or a preset name) for both sides: decides the walk's branches."),
    patterns: Optional[str] = PatternsOpt,
    tp: Optional[int] = TpOpt,
    ep: Optional[int] = EpOpt,
    device: Optional[str] = DeviceOpt,
    device_profile: Optional[str] = DeviceProfileOpt,
    sarif_root: Optional[list[str]] = SarifRootOpt,
    lang: Lang = LangOpt,
) -> None:
    """Analyze MODEL on two trees, or two deployments of one tree (--base-args / --head-args), and diff the reports."""
    import tempfile
    from dataclasses import replace

    from .commands.diff import diff_paths
    from .analysis.pipeline import Options, analyze, render, write_text
    from .analysis.session import warn_pair

    try:
        _check_choices(fmt=fmt, fail_on=fail_on, lang=lang)
        _speak(lang)
        roots = parse_roots(sarif_root)
        _check_before(tp=tp, ep=ep, device=device, device_profile=device_profile, config=config, patterns=patterns,
                      outputs={"-o": output})
        base, head = base or vllm_root, head or vllm_root
        if base is None or head is None:
            raise UserError("compare: give --base and --head (two vLLM trees), or --vllm-root with --base-args / "
                            "--head-args (two deployments of one tree)")
        for given in (base_args, head_args):  # each side's engine arguments, checked before any work
            if given:
                _engine_options(serve_args=given)
        options = Options(config=config, tp=tp, ep=ep, device=device, device_profile=device_profile, hf_root=hf_root)
        base_name = f"{base} [{base_args}]" if base_args else base
        head_name = f"{head} [{head_args}]" if head_args else head
        with tempfile.TemporaryDirectory(prefix="fusion-analyze-") as tmp:
            paths = []
            for side, root, asc, args in (("base", base, base_ascend or ascend_root, base_args),
                                          ("head", head, head_ascend or ascend_root, head_args)):
                a = analyze(model, root, asc, backend.value if backend else None, patterns,
                            options=replace(options, serve_args=args))
                warn_pair(a.session)
                path = Path(tmp) / side / f"{a.location.architecture}.json"
                write_text(render(a, "json"), str(path))
                paths.append(path)
            diffs = diff_paths(str(paths[0]), str(paths[1]))
        code = _write_diff(diffs, base_name, head_name, fmt, _report_path(output, f"{a.location.architecture}.diff", fmt),
                           fail_on, roots, lang)
    except UserError as exc:
        _fail(exc)
    raise typer.Exit(code)


@app.command("calibrate")
def calibrate_cmd(
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Write the profile here (default: stdout)."),
    name: Optional[str] = typer.Option(None, "--name", help="The device's id in the file (default: from its name)."),
    quick: bool = typer.Option(False, "--quick", help="Smaller sizes, fewer repeats: seconds, rougher numbers."),
    cpu: bool = typer.Option(False, "--cpu", hidden=True, help="Run on the CPU at tiny sizes (tests)."),
    lang: Lang = LangOpt,
) -> None:
    """Measure this machine's NPU or GPU into a device profile for --device-profile (needs PyTorch and Triton)."""
    from .commands.calibrate import calibrate

    try:
        _check_choices(lang=lang)
        _speak(lang)
        text = calibrate(out, name, quick, cpu, say=lambda message: typer.echo(message, err=True), lang=lang)
    except UserError as exc:
        _fail(exc)
    if out in (None, "-"):
        typer.echo(text, nl=False)


def _engine_options(**given) -> dict:
    """The deployment's engine arguments of a command (ir/deployment.py), checked before any work."""
    from .ir.deployment import build, parse_additional_config, parse_serve_args

    parse_additional_config(given.get("additional_config"))
    if given.get("serve_args"):
        parse_serve_args(given["serve_args"])
    build(dp=given.get("dp"), max_num_seqs=given.get("max_num_seqs"))  # the sizes
    return given


def _check_choices(fmt: str | None = None, lang: str | None = None, fail_on: str | None = None) -> None:
    """The choice options, checked before any work (a bad one is exit 2 before a tree is opened)."""
    if fmt is not None and fmt not in FORMATS:
        raise UserError(f"--format {fmt}: use one of {', '.join(FORMATS)}")
    if lang is not None:
        from .render.markdown import labels

        labels(lang)  # one line naming the languages there are
    if fail_on is not None:
        from .commands.diff import FAIL_ON

        if fail_on not in FAIL_ON:
            raise UserError(f"--fail-on {fail_on}: use one of {', '.join(FAIL_ON)}")


def _speak(lang: str) -> None:
    """The command's warnings and notes on stderr in `lang` (a checked --lang) from here on."""
    from .errors import Verbosity

    Verbosity.lang = lang


def _check_before(tp: int | None = None, ep: int | None = None, device: str | None = None,
                  device_profile: str | None = None, config: str | None = None, patterns: str | None = None,
                  outputs: dict | None = None, folders: dict | None = None) -> None:
    """The arguments and the places to write, checked before any tree is opened or fetched: a bad one is one line
    and exit 2 at once, never after minutes of analysis. `outputs`: flag -> a file to write (or -o DIR/);
    `folders`: flag -> a folder to write into (created here)."""
    if tp is not None and tp < 1:
        raise UserError(f"--tp {tp}: the tensor-parallel size is a positive integer")
    if ep is not None and ep < 1:
        raise UserError(f"--ep {ep}: the expert-parallel size is a positive integer")
    if device is not None or device_profile is not None:
        from .estimate.benefit import device_profile as profile

        profile(device, device_profile)  # an unknown device or an unreadable profile file
    if config is not None:
        from .config.reader import read_config

        read_config(config)  # not a file or a preset, not JSON
    if patterns is not None and not Path(patterns).is_dir():
        raise UserError(f"--patterns {patterns}: not a directory; give a folder with <category>/<id>.yaml files")
    for flag, path in (outputs or {}).items():
        if path not in (None, "-"):
            folder = path.endswith(("/", os.sep)) or Path(path).is_dir()
            _writable(flag, path, Path(path) if folder else Path(path).parent)
    for flag, path in (folders or {}).items():
        if path is not None:
            _writable(flag, path, Path(path))


def _writable(flag: str, given: str, folder: Path) -> None:
    """`folder` exists (made here) and takes a file, or one line naming the flag and exit 2."""
    import tempfile

    try:
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(20, "exists and is not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".fusion-analyze-"):
            pass
    except OSError as exc:
        raise UserError(f"cannot write {given} ({flag}): {exc.strerror or exc}; choose a writable {flag} path")


def _said_resolved(query: str, loc) -> None:
    """With -v: how the model query resolved, on stderr."""
    from .errors import note
    from .ir.texts import say

    config = say("note_resolved_config", path=str(loc.config_path)) if loc.config_path else ""
    note(say("note_resolved", query=query, arch=loc.architecture, file=loc.file, line=str(loc.line), how=str(loc.how),
             config=config), level=2)


def _write_ci(result, fmt: str, output: str | None, roots: dict | None = None) -> None:
    """The single-model report as SARIF (one result per open opportunity) or GitHub annotations."""
    from .analysis.pipeline import render, write_text
    from .render.sarif import analysis_findings, to_annotations, to_sarif

    doc = json.loads(render(result, "json"))
    found = analysis_findings(doc)
    write_text(to_sarif(found, roots=roots, sources=doc.get("sources")) if fmt == "sarif"
               else to_annotations(found, roots), output)


def _report_path(output: str | None, architecture: str, fmt: str) -> str | None:
    """`-o DIR/` (or an existing folder) is a folder: the report is DIR/<arch>.<md|json> in it (diff: DIR/diff.<ext>,
    compare: DIR/<arch>.diff.<ext>)."""
    if output is None or output == "-":
        return output
    if output.endswith(("/", os.sep)) or Path(output).is_dir():
        return str(Path(output) / f"{architecture}.{EXTENSIONS.get(fmt, 'md')}")
    return output


def _hf_path(session, hf_root: str | None) -> str | None:
    """The transformers tree as a path (fetched once here, not by every worker), or None."""
    tree = session.hf_tree(hf_root)
    return str(tree.root) if tree is not None else None


def main() -> None:
    debug = "--debug" in sys.argv[1:]  # also an option of the root (documented there); here for internal errors
    # A run builds millions of small, acyclic libcst nodes: the cyclic collector only rescans them (a third of
    # a cold run, and seconds at exit). One command is short-lived, so it runs without it.
    gc.disable()
    try:
        on_large_stack_chunk(app, standalone_mode=True)
        code = 0
    except KeyboardInterrupt as exc:
        typer.echo(_interrupted(exc), err=True)
        code = 143 if _interrupted(exc) == "terminated" else 130
    except SystemExit as exc:
        code = exc.code
    except UserError as exc:  # one no command caught: a malformed catalog file, read when a module is imported
        typer.echo(f"error: {exc.message}", err=True)
        code = exc.code
    except Exception as exc:  # an internal error: one line, the traceback only with --debug
        if debug:
            raise
        typer.echo(f"internal error: {exc.__class__.__name__}: {exc}; rerun with --debug and report it", err=True)
        code = 3
    _exit(code)


def _exit(code) -> None:
    """Exit without tearing the heap down: freeing millions of libcst nodes one by one at interpreter exit
    costs about a third of a second, and every file this command wrote is closed by now."""
    if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe (| head): nothing more to say
        pass
    os._exit(code or 0)


if __name__ == "__main__":
    main()
