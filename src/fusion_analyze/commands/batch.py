"""`fusion-analyze all`: every architecture of the registry, one report each, isolated worker processes.

Each worker keeps one Session (so files shared by many models are parsed once per worker) and writes its
reports itself; the parent only schedules, enforces the per-model time limit and records crashes. A model
that raises, times out or kills its worker is recorded in index.md and the run goes on.

Where processes fork, the parent first reads what every model needs (registry, Ascend overrides and
patches, graph passes) and analyzes the first architecture (the layers nearly every model uses), and the
workers inherit it, so that part is parsed and walked once, not once per worker. That first analysis is
best effort: one that raises or runs over the time limit is left to a worker, which records it. With
the cache on, finished reports are cached per architecture (commands/report_cache.py): a warm run over
unchanged trees only copies them.
"""

from __future__ import annotations

import fnmatch
import gc
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from .schedule import Affinity, features
from ..ir.states import STATUSES
from ..ir.texts import Texts, say

STATUS_COLUMNS = list(STATUSES)


@dataclass
class BatchJob:
    vllm_root: str | None
    ascend_root: str | None
    backend: str | None
    out_dir: str
    patterns: str | None = None
    config: str | None = None
    tp: int | None = None
    lang: str = "zh"
    cache: bool = True
    hf_root: str | None = None  # a transformers tree: the configuration classes' defaults
    ep: int | None = None
    device: str | None = None  # a device profile id (patterns/catalog/devices.yaml or device_profile's)
    device_profile: str | None = None  # a YAML file of device profiles

    def options(self):
        """The analysis options of every model of the job."""
        from ..analysis.pipeline import Options

        return Options(config=self.config, tp=self.tp, ep=self.ep, device=self.device,
                       device_profile=self.device_profile, hf_root=self.hf_root)


def select(architectures: list[str], only: list[str] | None, resolve=None,
           skipped: list[str] | None = None) -> list[str]:
    """The architectures `--only` names: globs over the registry's architectures, and any query the single-model
    command takes (a model type, a marketing name, an HF repo id: `resolve(query)` gives its architecture).
    A query this tree does not resolve is an error when it is the only one, or when no item of the list selects
    anything; beside items that do select, it is left out and appended to `skipped` (`--only` with one list over
    two releases, each lacking an architecture the other has: the release diff of tests/test_diff_release.py)."""
    if not only:
        return sorted(architectures)
    wanted = [w.strip() for item in only for w in item.split(",") if w.strip()]
    out = set()
    errors: list[tuple[str, str]] = []
    for w in wanted:
        hits = {a for a in architectures if fnmatch.fnmatchcase(a, w)}
        if not hits and resolve is not None and not any(ch in w for ch in "*?["):
            try:
                arch = resolve(w)
            except UserError as exc:
                errors.append((w, f"--only {w}: {exc.message}"))
                continue
            hits = {arch} & set(architectures)
            if not hits:
                errors.append((w, f"--only {w}: resolves to {arch}, which is not among the architectures `all` "
                                  f"runs here (--tables all runs every table)"))
                continue
        out |= hits
    if errors and (len(wanted) == 1 or not out):
        raise UserError(errors[0][1])
    if skipped is not None:
        skipped.extend(w for w, _ in errors)
    if not out:
        raise UserError(f"--only {','.join(wanted)}: matches no architecture of the registry; see `fusion-analyze list-models`")
    return sorted(out)


def counted_failures(failed: list[dict], allow: list[str] | None) -> list[dict]:
    """The failed results that count towards `all`'s exit code: those not named by `--allow-fail` (architectures
    or globs, repeated or comma-separated)."""
    wanted = [w.strip() for item in allow or () for w in item.split(",") if w.strip()]
    return [r for r in failed if not any(fnmatch.fnmatchcase(r["architecture"], w) for w in wanted)]


_INHERITED: dict = {}  # set in the parent just before forking: the warmed session and the report cache


def _open_session(job: BatchJob, first: str | None = None, reports=None, limit: float = 60.0, session=None):
    """The session every model shares: registry, Ascend overrides and patches, graph passes (read in a child
    meanwhile). With `first`, that architecture is analyzed here too (see _first); the session, and its row
    or None. `session`: one opened already (by _start_session), to finish."""
    session = session or _start_session(job)
    session.resolver.overrides, session.resolver.patches
    row = _first(session, job, first, reports, limit) if first is not None else None
    session.passes()
    session.index.save_lines()  # stored here once, not by every worker that inherits them
    return session, row


def _start_session(job: BatchJob, then=None):
    """Open the session; its child starts reading the graph passes at once (then does `then`)."""
    from ..analysis.session import Session

    return Session.open(job.vllm_root, job.ascend_root, job.backend, job.patterns, job.cache, read_passes=True,
                        then=then)


def _prefetch(architectures: list[str]):
    """What the passes' child does once the passes are read, while the parent analyzes the first architecture
    and the other core would idle: parse the model files of the next architectures, in order, into the parse
    cache (of a class, its constructor and forward, which the walk reads alone), so that the workers load them
    (a third of the cost of a parse) instead of parsing them. Stopped between two chunks when the workers
    start. Without a parse cache there is nothing to hand on."""
    def run(session, stopped) -> None:
        index = session.index
        if index.cache is None:
            return
        from ..locate.resolve import Resolver

        resolver = session.resolver or Resolver(index)  # forked before the session's own was read
        module_of = {e.architecture: e.module for e in resolver.entries}
        for name in dict.fromkeys(module_of[a] for a in architectures[1:] if a in module_of):
            info = index.get(name)
            for chunk in info.chunks if info is not None else ():
                if stopped():
                    return
                if chunk.kind == "class":  # the walk reads most classes' constructor and forward alone
                    for method in ("__init__", "forward"):
                        sub = info.method_chunk(chunk, method)
                        if sub is not None:
                            index.save_chunk(sub)
                    continue
                if chunk.lazy:  # a run is parsed with its file where the name index needs it, else rarely asked for
                    info.chunk_tree(chunk)
                    index.save_chunk(chunk)
    return run


def _first(session, job: BatchJob, arch: str, reports, limit: float) -> dict | None:
    """Analyze one architecture in the parent, before the workers fork: what nearly every model reads (linear,
    norm, activation, rope and attention layers, their Ascend replacements and kernels) is then parsed and
    walked once, not once per worker, and while the passes' child runs. Best effort: if it raises or runs
    over `limit`, None, and a worker analyzes it again, with the worker's isolation and time limit."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        return None

    def stop(_sig, _frame):
        raise TimeoutError

    before = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return _analyze_one(session, job, arch, reports, job.options())
    except BaseException as exc:  # noqa: BLE001 - the worker records it
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def _report_cache(job: BatchJob):
    """The per-architecture report cache for this job's inputs; it needs the trees' files, not their analysis."""
    if not job.cache:
        return None
    from ..index.parse_cache import default_cache
    from .report_cache import ReportCache, files_fingerprint, tree_fingerprint
    from ..resources import data_dir
    from ..analysis.session import backend_for
    from ..sources.trees import open_tree

    cache = default_cache()
    if cache is None:
        return None
    vllm = open_tree(job.vllm_root, "vllm", required=True)
    ascend = open_tree(job.ascend_root, "vllm_ascend", required=False)
    roots = [(t.package, t.package_dir) for t in (vllm, ascend) if t is not None]
    package = Path(__file__).resolve().parents[1]  # every module of the tool, not only commands/
    tool = tree_fingerprint([("code", package), ("patterns", data_dir("patterns")),
                             ("templates", data_dir("templates"))], suffixes=(".py", ".yaml", ".j2"))
    patterns = Path(job.patterns) if job.patterns else None
    inputs = {"trees": tree_fingerprint(roots), "tool": tool, "backend": backend_for(job.backend, ascend),
              "lang": job.lang, "tp": job.tp, "ep": job.ep, "device": job.device,
              "device_profile": files_fingerprint([Path(job.device_profile)]) if job.device_profile else None,
              "patterns": files_fingerprint(sorted(patterns.rglob("*.yaml"))) if patterns else None,
              "config": files_fingerprint([Path(job.config)]) if job.config else None,
              "hf": _hf_fingerprint(job.hf_root)}
    return ReportCache(cache.base / "reports", inputs)


def _hf_fingerprint(root: str | None) -> str | None:
    """The transformers files the walk reads: configuration classes and the auto mappings."""
    from .report_cache import files_fingerprint

    if root is None:
        return None
    pkg = Path(root) / "transformers"
    files = sorted(pkg.glob("models/*/configuration_*.py")) + [pkg / "configuration_utils.py",
                                                                pkg / "models" / "auto" / "modeling_auto.py"]
    return files_fingerprint([f for f in files if f.is_file()])


def _worker(job: BatchJob, conn) -> None:
    import signal

    from ..analysis.pipeline import write_text

    # Ctrl-C reaches the whole process group: the parent stops the workers and says so in one line; a worker
    # that took it too would print its own traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    # libcst trees are acyclic and long-lived: keep the cyclic collector off them (it would rescan millions of
    # nodes again and again). What one model leaves in reference cycles (its walk's closures and scopes, about
    # 1 MB) is not collected either: collecting it scans everything the model parsed, 4 % of a batch's time,
    # for 50 MiB of peak memory over a whole registry.
    gc.disable()
    session = _INHERITED.get("session")
    reports = _INHERITED.get("reports")
    if "reports" not in _INHERITED:  # spawned, not forked: nothing to inherit
        reports = _report_cache(job)
    gc.freeze()
    options = job.options()
    parent = os.getppid()
    while True:
        # a forked worker holds the parent's end of the pipe too, so the parent's death closes nothing: it looks
        # for its parent between waits and ends with it (a SIGKILL to `all` leaves no worker behind)
        while not conn.poll(1.0):
            if os.getppid() != parent:
                return
        arch = conn.recv()
        if arch is None:
            return
        try:
            cached = reports.load(arch) if reports is not None else None
            if cached is not None:
                write_text(cached["md"], os.path.join(job.out_dir, f"{arch}.md"))
                write_text(cached["json"], os.path.join(job.out_dir, f"{arch}.json"))
                conn.send(cached["row"])
                continue
            if session is None:
                session = _open_session(job)[0]
            conn.send(_analyze_one(session, job, arch, reports, options))
        except UserError as exc:
            conn.send({"architecture": arch, "ok": False, "error": exc.message})
        except Exception as exc:  # an internal error of this model only: recorded, the batch goes on
            last = traceback.extract_tb(exc.__traceback__)[-1]
            conn.send({"architecture": arch, "ok": False,
                       "error": say("internal_error", error=f"{exc.__class__.__name__}: {exc}",
                                    where=f"{Path(last.filename).name}:{last.lineno}")})


def _analyze_one(session, job: BatchJob, arch: str, reports, options) -> dict:
    """Analyze one architecture (not in the report cache) and write its reports, storing them in the cache;
    its row of index.md."""
    from ..analysis.pipeline import analyze_in, render, write_text

    md_path, json_path = os.path.join(job.out_dir, f"{arch}.md"), os.path.join(job.out_dir, f"{arch}.json")
    a = analyze_in(session, arch, options)
    md, js = render(a, "md", lang=job.lang), render(a, "json")
    write_text(md, md_path)
    write_text(js, json_path)
    counts = {s: 0 for s in STATUS_COLUMNS}
    for o in a.opportunities:
        counts[str(o.status)] += 1
    opens = [o for o in a.opportunities if o.status == "open" and not a.benefits[o.id].rejected]
    opens.sort(key=lambda o: (-a.benefits[o.id].priority, not o.cuda_only, o.id))
    from ..status.waits import counts as waits_counts

    doc = json.loads(js)
    undecided = doc.get("undecided") or []
    row = {"architecture": arch, "ok": True, "file": a.location.file, "counts": counts,
           "top_open": opens[0].id if opens else None, "undecided": waits_counts(undecided),
           "undecided_given": [f"{e['waits_on']}: {e['test']}" for e in undecided if e["given"] is True],
           # replacements on its walked path the walk could not resolve (the sweep's count, index.md)
           "not_followed": [{k: r[k] for k in ("target", "file", "line", "reason")} for r in a.walk.not_followed],
           # kernels its walked path surely calls that the backend's install does not have (the path fails there)
           "unavailable": [g["kernel"] for g in doc.get("unavailable_kernels") or () if g["fails"]]}
    if reports is not None:
        reports.store(arch, md, js, row)
    return row


class _Slot:
    def __init__(self, ctx, job: BatchJob):
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(job, child), daemon=True)
        import signal
        import threading

        main = threading.current_thread() is threading.main_thread()
        before = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None  # the worker starts with Ctrl-C ignored
        try:
            self.proc.start()
        finally:
            if main:
                signal.signal(signal.SIGINT, before)
        self.task: str | None = None
        self.started = 0.0

    def give(self, arch: str) -> None:
        self.task, self.started = arch, time.monotonic()
        self.parent.send(arch)

    def stop(self) -> None:
        if self.proc.is_alive():
            try:
                self.parent.send(None)
            except (BrokenPipeError, OSError):
                pass
            self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


class Terminated(KeyboardInterrupt):
    """SIGTERM during `all`: unwinds like Ctrl-C, so that the workers are stopped on the way out."""


def _on_sigterm(signum, frame):
    raise Terminated()


def run_batch(job: BatchJob, architectures: list[str], workers: int = 2, timeout: float = 300.0,
              progress=None, session=None) -> list[dict]:
    """Analyze each architecture; returns one result per architecture, in the given order. `session`: one
    opened for this job already (the command listed the architectures with it), used instead of another.
    SIGTERM, like SIGINT, stops the workers before the command ends (exit 143)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _run_batch(job, architectures, workers, timeout, progress, session)
    before = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _run_batch(job, architectures, workers, timeout, progress, session)
    finally:
        signal.signal(signal.SIGTERM, before)


def _run_batch(job: BatchJob, architectures: list[str], workers: int, timeout: float, progress, session) -> list[dict]:
    Path(job.out_dir).mkdir(parents=True, exist_ok=True)
    fork = "fork" in mp.get_all_start_methods()
    ctx = mp.get_context("fork" if fork else "spawn")
    pending = list(architectures)
    results: dict[str, dict] = {}
    was_enabled = gc.isenabled()
    gc.disable()
    opened = None
    if pending and fork:  # opened first: the passes' child reads while the report cache hashes the trees
        try:
            prefetch = _prefetch(pending)
            opened = session or _start_session(job, prefetch)
            opened.start_passes(prefetch)  # (a session opened here has started already)
        except Exception:  # noqa: BLE001 - each worker then opens its own and records the error per model
            opened = None
    try:
        reports = _report_cache(job)
    except Exception:  # noqa: BLE001 - unreadable roots: each model records the error
        reports = None
    if reports is not None:  # what the cache holds is copied here: no session, no worker
        from ..analysis.pipeline import write_text

        for arch in list(pending):
            cached = reports.load(arch)
            if cached is not None:
                write_text(cached["md"], os.path.join(job.out_dir, f"{arch}.md"))
                write_text(cached["json"], os.path.join(job.out_dir, f"{arch}.json"))
                results[arch] = cached["row"]
                pending.remove(arch)
                if progress is not None:
                    progress(arch, results[arch])
    row = None
    try:
        if pending and opened is not None:  # read the shared part once here; the workers inherit it
            session, row = _open_session(job, pending[0], reports, limit=timeout, session=opened)
            _INHERITED.update(session=session, reports=reports)
        elif opened is not None:  # every report was cached
            opened.stop_passes()
    except Exception:  # noqa: BLE001 - each worker then opens its own and records the error per model
        _INHERITED.clear()
        opened.stop_passes()  # type: ignore[union-attr]  # (opened is not None: only its use can raise)
    finally:
        if was_enabled:
            gc.enable()
        if opened is not None:  # the workers have the cores now
            opened.stop_helper()
    if row is not None:  # the architecture the parent analyzed while warming the session
        arch = pending.pop(0)
        results[arch] = row
        if progress is not None:
            progress(arch, row)
    warmed = _INHERITED.get("session")
    order = Affinity(features(warmed, pending) if warmed is not None else {})
    slots = [_Slot(ctx, job) for _ in range(min(max(1, workers), len(pending)))]
    try:
        while pending or any(s.task for s in slots):
            for i, s in enumerate(slots):
                if s.task is None and pending:
                    s.give(order.take(pending, i))
            busy = [s for s in slots if s.task]
            ready = mp.connection.wait([s.parent for s in busy] + [s.proc.sentinel for s in busy], timeout=0.5)
            for i, s in enumerate(slots):
                if s.task is None:
                    continue
                arch = s.task
                got = None
                if s.parent in ready or s.proc.sentinel in ready:
                    try:
                        got = s.parent.recv() if s.parent.poll() else None
                    except (EOFError, OSError):
                        got = None
                if got is not None:
                    results[arch] = got
                    s.task = None
                elif not s.proc.is_alive() or s.proc.sentinel in ready:
                    s.proc.join(5)
                    code = s.proc.exitcode
                    results[arch] = {"architecture": arch, "ok": False, "error": say("worker_died", code=code)}
                    slots[i] = _Slot(ctx, job)
                    order.forget(i)
                elif time.monotonic() - s.started > timeout:
                    s.proc.kill()
                    s.proc.join()
                    results[arch] = {"architecture": arch, "ok": False, "error": say("timed_out", seconds=f"{timeout:.0f}")}
                    slots[i] = _Slot(ctx, job)
                    order.forget(i)
                else:
                    continue
                if progress is not None:
                    progress(arch, results[arch])
    finally:
        for s in slots:
            s.stop()
        _INHERITED.clear()
    out = [results[a] for a in architectures]
    _write_index(job.out_dir, out, job.lang)
    return out


def not_followed(results: list[dict]) -> dict[tuple, dict]:
    """The replacements on walked paths the walk could not resolve, over a sweep: (file, line, target) -> the
    replacement with the architectures that met it."""
    out: dict[tuple, dict] = {}
    for r in results:
        for nf in r.get("not_followed", ()) if r.get("ok") else ():
            key = (nf["file"], nf["line"], nf["target"])
            out.setdefault(key, {**nf, "architectures": []})["architectures"].append(r["architecture"])
    return dict(sorted(out.items()))


def not_followed_lines(results: list[dict], L: dict, lang: str) -> list[str]:
    found = not_followed(results)
    lines = ["", L["index_not_followed"].format(n=len(found))]
    if found:
        lines.append("")
    for (file, line, target), nf in found.items():
        archs = ", ".join(nf["architectures"][:6]) + (f" (+{len(nf['architectures']) - 6})" if len(nf["architectures"]) > 6 else "")
        lines.append(f"- `{file}` L{line} `{target}`: {Texts(None, lang)(nf['reason'])} ({archs})")
    return lines


def _write_index(out_dir: str, results: list[dict], lang: str = "zh") -> None:
    from ..analysis.pipeline import write_text
    from ..render.markdown import labels

    L = labels(lang)
    cols = L["index_columns"]
    lines = [f"## {L['index_title']}", "",
             L["index_counts"].format(ok=sum(r['ok'] for r in results), failed=sum(not r['ok'] for r in results)), "",
             f"| {cols['architecture']} | {cols['file']} | " + " | ".join(L["status"].get(s, s) for s in STATUS_COLUMNS)
             + f" | {cols['top_open']} |",
             "|---|---|" + "---|" * len(STATUS_COLUMNS) + "---|"]
    for r in results:
        if r["ok"]:
            counts = " | ".join(str(r["counts"][s]) for s in STATUS_COLUMNS)
            top = f"`{r['top_open']}`" if r["top_open"] else "-"
            lines.append(f"| [{r['architecture']}]({r['architecture']}.md) | `{r['file']}` | {counts} | {top} |")
        else:
            cells = " | ".join("-" for _ in STATUS_COLUMNS)
            err = Texts(None, lang)(r["error"]).replace("|", "\\|")  # a sentence of ir/texts.py, in `lang`
            lines.append(f"| {r['architecture']} | **{L['index_failed']}**: {err} | {cells} | - |")
    total = undecided_totals(results)
    given = [f"- {r['architecture']}: {t}" for r in results if r["ok"] for t in r.get("undecided_given") or ()]
    lines += ["", L["index_undecided"].format(line=undecided_line(total, lang))]
    lines += (["", L["index_undecided_given"], *given] if given else [])
    lines += not_followed_lines(results, L, lang)
    failing = [r for r in results if r.get("ok") and r.get("unavailable")]
    lines += ["", L["index_unavailable"].format(n=len(failing))]
    lines += ([""] if failing else []) + [f"- {r['architecture']}: " + ", ".join(f"`{k}`" for k in r["unavailable"])
                                          for r in failing]
    write_text("\n".join(lines) + "\n", os.path.join(out_dir, "index.md"))
    write_text(json.dumps(results, indent=2, sort_keys=True, ensure_ascii=False) + "\n", os.path.join(out_dir, "index.json"))


def undecided_totals(results: list[dict]) -> dict:
    """The undecided tests of the reports of one `all` run (one release pair), summed by what they wait on."""
    total: dict = {}
    for r in results:
        for k, n in (r.get("undecided") or {}).items() if r.get("ok") else ():
            total[k] = total.get(k, 0) + n
    return total


def undecided_line(total: dict, lang: str = "en") -> str:
    """One line: how many undecided tests wait on something given (goal: 0), on runtime values, on an input not
    given, or were not traced; each with its categories (code: as they are); in `lang` (labels.yaml
    `undecided_parts`)."""
    from ..render.markdown import labels

    said = labels(lang)["undecided_parts"]

    def part(b: str) -> str:
        cats = sorted((k.split(":", 1)[1], n) for k, n in total.items() if k.startswith(b + ":"))
        inner = ", ".join(f"{c} {n}" for c, n in cats)
        return said[b].format(n=total.get(b, 0)) + (f" ({inner})" if inner else "")

    return "; ".join(part(b) for b in ("given", "runtime", "open", "not_traced"))
