"""Speed and memory benchmark (not a test): run it on an idle machine and copy its output to docs/caching-and-performance.md.

    python benchmarks/bench.py [--vllm vllm==0.30.0] [--ascend vllm-ascend==0.30.0rc2] [--workers 2]

(a) one model (Qwen3ForCausalLM) cold; (b) `fusion-analyze all` cold; (c) the same warm (caches filled by (b));
(a), (b) and (c) run the command as a user types it, start to exit; (a) the median of --repeat cold runs;
(d) the bare cost of libcst.parse_module over exactly the files (b) read: the floor of a cold run that parses
whole files. (The tool parses a file's classes, functions and methods only when asked for, and without
libcst's per-node validation, so it can go under it; the parse of exactly the chunks (b) parsed is printed
too, by libcst.parse_module and as the tool parses them.)
Each step runs in its own process so its peak RSS is its own. Targets: (b)/(d) <= 1.0, (c)/(b) <= 0.1,
(a) <= 2 s (issue 45), peak RSS <= 2 GiB. The tool's modules are compiled before the steps, as an install compiles them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time


def _child(code: str, env: dict, ok=(0,)) -> tuple[float, float, str]:
    """Run python code in a child; return (seconds, peak RSS MiB of that child, stdout)."""
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if run.returncode not in ok:
        raise SystemExit(f"benchmark step failed ({run.returncode}): {run.stderr.strip()[-2000:]}")
    out = run.stdout
    dt = time.perf_counter() - t
    peak = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
    return dt, peak, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm", default="vllm==0.30.0")
    ap.add_argument("--ascend", default="vllm-ascend==0.30.0rc2")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5, help="runs of (a), each cold; the median is reported")
    args = ap.parse_args()
    from fusion_analyze.sources.fetch import fetch_spec

    vroot, aroot = str(fetch_spec(args.vllm)), str(fetch_spec(args.ascend))
    work = tempfile.mkdtemp(prefix="fa-bench-")
    env = dict(os.environ, FUSION_ANALYZE_PARSE_CACHE=os.path.join(work, "cache"))
    # the tool's modules compiled once, as `pip install .` compiles them at install time: a machine that sets
    # PYTHONDONTWRITEBYTECODE would otherwise compile them again in every step (about 0.2 s)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
    _child("import compileall, os, fusion_analyze\n"
           "compileall.compile_dir(os.path.dirname(fusion_analyze.__file__), quiet=1)", env)
    # (a) is the command a user types, start to exit: `fusion-analyze Qwen3ForCausalLM ... --no-cache`
    one = (f"import sys\nsys.argv = ['fusion-analyze', 'Qwen3ForCausalLM', '--vllm-root', {vroot!r}, '--ascend-root', "
           f"{aroot!r}, '--no-cache', '-o', {os.path.join(work, 'one.md')!r}]\n"
           f"from fusion_analyze.cli import main\ntry:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n")
    # (b) and (c) are the command a user types too, over the registry's text-generation architectures (the
    # Transformers backend's ones need --hf-root, which the bench does not pass)
    from fusion_analyze.locate.registry import TEXT_TABLE
    from fusion_analyze.analysis.session import Session

    listing = Session.open(vroot, aroot, cache=False)
    archs = ",".join(sorted({e.architecture for e in listing.resolver.entries if e.table == TEXT_TABLE}))
    every = (f"import sys\nsys.argv = ['fusion-analyze', 'all', '--vllm-root', {vroot!r}, '--ascend-root', {aroot!r}, "
             f"'-o', OUT, '-j', '{args.workers}', '--only', {archs!r}]\n"
             f"from fusion_analyze.cli import main\nmain()\n")
    runs = sorted((_child(one, env) for _ in range(max(1, args.repeat))), key=lambda r: r[0])
    a = runs[len(runs) // 2]  # a shared 2-core machine's load comes and goes: the median of cold runs
    log = os.path.join(work, "read")
    os.makedirs(log)
    b = _child(every.replace("OUT", repr(os.path.join(work, "cold"))), dict(env, FUSION_ANALYZE_READ_LOG=log), ok=(0, 1))
    c = _child(every.replace("OUT", repr(os.path.join(work, "warm"))), env, ok=(0, 1))
    failed = [r["architecture"] for r in json.load(open(os.path.join(work, "cold", "index.json"))) if not r["ok"]]
    # (d): the files (b) read (each of its processes lists them: FUSION_ANALYZE_READ_LOG), each distinct content
    # once, as the tool reads them. Also the parse of exactly the chunks (b) parsed (the cache's entries among
    # those files' chunks, their methods alone and their skeletons), for comparison.
    floor = (f"import hashlib, os, time, libcst, gc\nfrom fusion_analyze.index.modules import split_chunks\n"
             f"from fusion_analyze.index.chunks import method_text, skeleton_text\n"
             f"from fusion_analyze.index.trusted_parse import parse_module as trusted\nkeys = set()\n"
             f"for root, _, files in os.walk({env['FUSION_ANALYZE_PARSE_CACHE']!r}):\n"
             f"    keys |= {{f[:-4] for f in files if f.endswith('.pkl')}}\n"
             f"read = set()\n"
             f"for log in os.listdir({log!r}):\n"
             f"    read |= set(open(os.path.join({log!r}, log), encoding='utf-8').read().split('\\n')) - {{''}}\n"
             f"srcs, chunks = {{}}, {{}}\n"
             f"for path in sorted(read):\n"
             f"    b = open(path, 'rb').read()\n"
             f"    srcs[hashlib.sha256(b).hexdigest()] = b\n"
             f"    split = split_chunks(b)[0]\n"
             f"    cs = [c.text for c in split]\n"
             f"    for c in split:\n"  # a class's methods parsed alone, and its fields alone
             f"        cs += [method_text(c, name)[0] for name in c.lone]\n"
             f"        m = skeleton_text(c)\n"
             f"        if m is not None and m != c.text:\n"
             f"            cs.append(m)\n"
             f"    chunks.update((k, t) for k, t in ((hashlib.sha256(t).hexdigest(), t) for t in cs) if k in keys)\n"
             f"srcs, chunks = list(srcs.values()), list(chunks.values())\n"
             f"t = time.perf_counter()\nfor s in srcs: libcst.parse_module(s)\nd = time.perf_counter() - t\n"
             f"gc.disable()\n"  # the same without the cyclic collector, as the tool itself runs
             f"t = time.perf_counter()\nfor s in srcs: libcst.parse_module(s)\nd_nogc = time.perf_counter() - t\n"
             f"t = time.perf_counter()\nfor s in chunks: libcst.parse_module(s)\nd_chunks = time.perf_counter() - t\n"
             f"t = time.perf_counter()\nfor s in chunks: trusted(s)\nd_trusted = time.perf_counter() - t\n"
             f"print(len(srcs), d, d_nogc, sum(map(len, srcs)), len(chunks), sum(map(len, chunks)), d_chunks, d_trusted)\n")
    d_total, d_peak, d_out = _child(floor, env)
    n_files, d, d_nogc, n_bytes, n_chunks, c_bytes, d_chunks, d_trusted = d_out.split()
    d, d_nogc, d_chunks, d_trusted = float(d), float(d_nogc), float(d_chunks), float(d_trusted)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"(a) Qwen3ForCausalLM cold: {a[0]:.1f} s (median of {len(runs)}: {', '.join(f'{r[0]:.1f}' for r in runs)}), "
          f"peak RSS {a[1]:.0f} MiB")
    print(f"(b) all cold ({args.workers} workers): {b[0]:.1f} s, peak RSS {b[1]:.0f} MiB, failed: {failed}")
    print(f"(c) all warm: {c[0]:.1f} s, peak RSS {c[1]:.0f} MiB")
    print(f"(d) libcst.parse_module over the {n_files} files (b) read ({int(n_bytes) / 1e6:.1f} MB), one process: "
          f"{d:.1f} s ({d_nogc:.1f} s with the cyclic GC off, as the tool runs)")
    print(f"    of which (b) parsed {n_chunks} chunks ({int(c_bytes) / 1e6:.1f} MB): {d_chunks:.1f} s to parse them, GC off; "
          f"{d_trusted:.1f} s as the tool parses them (no per-node validation)")
    if int(n_files) == 0:  # code from before the read log (FUSION_ANALYZE_READ_LOG): (d) cannot be found
        print("(b)/(d) not measured: the code under test lists no files it reads")
        d = d_nogc = float("nan")
    else:
        print(f"(b)/(d) = {b[0] / d:.2f} (target <= 1.0; {b[0] / d_nogc:.2f} against the GC-off floor); ", end="")
    print(f"(c)/(b) = {c[0] / b[0]:.2f} (target <= 0.1); (a) target <= 2 s; peak RSS target <= 2048 MiB")
    print(json.dumps({"a": a[0], "a_runs": [r[0] for r in runs], "b": b[0], "c": c[0], "d": d, "d_nogc": d_nogc, "d_chunks": d_chunks,
                      "d_trusted": d_trusted}))


if __name__ == "__main__":
    main()
