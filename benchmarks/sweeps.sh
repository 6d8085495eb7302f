#!/usr/bin/env bash
# The five sweeps every refactor is checked against: `all` over whole releases, reports written to OUT/<name>/.
# Usage: benchmarks/sweeps.sh OUT        then  diff -r OUT_before OUT_after   (byte-identical = no change)
set -uo pipefail
out=${1:?usage: benchmarks/sweeps.sh OUT}
hf=transformers==5.23.0
run() {  # name, then the roots
  local name=$1; shift
  fusion-analyze all "$@" --hf-root "$hf" -o "$out/$name" -j 2 >"$out/$name.log" 2>&1
  echo "$name: exit $? ($(ls "$out/$name" | wc -l) files)"
}
mkdir -p "$out"
run v030 --vllm-root vllm==0.30.0 --ascend-root vllm-ascend==0.30.0rc2
run v034 --vllm-root vllm==0.34.0 --ascend-root vllm-ascend==0.30.0rc2
run v023 --vllm-root vllm==0.23.0 --ascend-root vllm-ascend==0.23.0
run v013 --vllm-root vllm==0.13.0 --ascend-root vllm-ascend==0.13.0
run cuda030 --vllm-root vllm==0.30.0 --backend cuda
