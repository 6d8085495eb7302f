"""Speed and memory benchmark (not a test): run it on an idle machine and copy its output to the README.

    python benchmarks/bench.py [--vllm vllm==0.30.0] [--ascend vllm-ascend==0.30.0rc2] [--workers 2]

(a) one model (Qwen3ForCausalLM) cold; (b) `all` cold; (c) `all` warm (parse cache filled by (b));
(d) the bare cost of libcst.parse_module over exactly the files (b) read: the floor of a cold run.
Each step runs in its own process so its peak RSS is its own. Targets: (b)/(d) <= 1.5, (c)/(b) <= 0.1,
(a) <= 3 s, peak RSS <= 2 GiB.
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


def _child(code: str, env: dict) -> tuple[float, float, str]:
    """Run python code in a child; return (seconds, peak RSS MiB of that child, stdout)."""
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    dt = time.perf_counter() - t
    peak = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
    return dt, peak, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm", default="vllm==0.30.0")
    ap.add_argument("--ascend", default="vllm-ascend==0.30.0rc2")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    from fusion_analyze.sources.fetch import fetch_spec

    vroot, aroot = str(fetch_spec(args.vllm)), str(fetch_spec(args.ascend))
    work = tempfile.mkdtemp(prefix="fa-bench-")
    env = dict(os.environ, FUSION_ANALYZE_PARSE_CACHE=os.path.join(work, "cache"))
    # (a) is the command a user types, start to exit: `fusion-analyze Qwen3ForCausalLM ... --no-cache`
    one = (f"import sys\nsys.argv = ['fusion-analyze', 'Qwen3ForCausalLM', '--vllm-root', {vroot!r}, '--ascend-root', "
           f"{aroot!r}, '--no-cache', '-o', {os.path.join(work, 'one.md')!r}]\n"
           f"from fusion_analyze.cli import main\ntry:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n")
    every = (f"from fusion_analyze.batch import BatchJob, run_batch\nfrom fusion_analyze.locate.registry import TEXT_TABLE\n"
             f"from fusion_analyze.session import Session\nimport json\n"
             f"s = Session.open({vroot!r}, {aroot!r}, cache=False)\n"
             f"archs = sorted({{e.architecture for e in s.resolver.entries if e.table == TEXT_TABLE}})\n"
             f"r = run_batch(BatchJob({vroot!r}, {aroot!r}, None, OUT), archs, workers={args.workers})\n"
             f"print(json.dumps([x['architecture'] for x in r if not x['ok']]))\n")
    a = _child(one, env)
    b = _child(every.replace("OUT", repr(os.path.join(work, "cold"))), env)
    c = _child(every.replace("OUT", repr(os.path.join(work, "warm"))), env)
    # (d): the files (b) parsed are exactly the cache entries' sources; re-read them by walking both trees
    floor = (f"import hashlib, os, time, libcst\nkeys = set()\n"
             f"for root, _, files in os.walk({env['FUSION_ANALYZE_PARSE_CACHE']!r}):\n"
             f"    keys |= {{f[:-4] for f in files if f.endswith('.pkl')}}\n"
             f"srcs = []\n"
             f"for tree in ({vroot!r}, {aroot!r}):\n"
             f"    for r, _, fs in os.walk(tree):\n"
             f"        for f in fs:\n"
             f"            if f.endswith('.py'):\n"
             f"                b = open(os.path.join(r, f), 'rb').read()\n"
             f"                if hashlib.sha256(b).hexdigest() in keys: srcs.append(b)\n"
             f"t = time.perf_counter()\nfor s in srcs: libcst.parse_module(s)\nd = time.perf_counter() - t\n"
             f"import gc\ngc.disable()\n"  # the same without the cyclic collector, as the tool itself runs
             f"t = time.perf_counter()\nfor s in srcs: libcst.parse_module(s)\n"
             f"print(len(srcs), d, time.perf_counter() - t)\n")
    d_total, d_peak, d_out = _child(floor, env)
    n_files, d, d_nogc = d_out.split()
    d, d_nogc = float(d), float(d_nogc)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"(a) Qwen3ForCausalLM cold: {a[0]:.1f} s, peak RSS {a[1]:.0f} MiB")
    print(f"(b) all cold ({args.workers} workers): {b[0]:.1f} s, peak RSS {b[1]:.0f} MiB, failed: {b[2].strip()}")
    print(f"(c) all warm: {c[0]:.1f} s, peak RSS {c[1]:.0f} MiB")
    print(f"(d) libcst.parse_module over the {n_files} files (b) read, one process: {d:.1f} s "
          f"({d_nogc:.1f} s with the cyclic GC off, as the tool runs)")
    print(f"(b)/(d) = {b[0] / d:.2f} (target <= 1.5; {b[0] / d_nogc:.2f} against the GC-off floor); "
          f"(c)/(b) = {c[0] / b[0]:.2f} (target <= 0.1); (a) target <= 3 s; peak RSS target <= 2048 MiB")
    print(json.dumps({"a": a[0], "b": b[0], "c": c[0], "d": d, "d_nogc": d_nogc}))


if __name__ == "__main__":
    main()
