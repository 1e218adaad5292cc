#!/usr/bin/env bash
# Runs the speed benchmarks of docs/benchmarks.md one after another on the Qwen3-0.6B-shaped random
# checkpoint, each printing its figures as ratios measured in the same run. Run it on an idle
# machine (it refuses to start above a load average of 1.5 unless --force); every figure in
# docs/benchmarks.md comes from one of these commands.
#
#   tools/bench.sh [--force] [--out FILE] [engine quant serving prefix chat peers]   (default: all)
#
# peers: llama.cpp built from source on this machine, on the same model (bench/peers/llama_cpp.sh;
# ~5 minutes of build the first time), so its figures stand beside the engine's from the same run.
#
# Builds the benchmark targets into ${TROUPE_BUILD_DIR:-build} first; makes the model once in
# ${TROUPE_BENCH_MODEL:-/tmp/troupe-qwen3-0.6b}.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TROUPE_BUILD_DIR:-$root/build}"
model="${TROUPE_BENCH_MODEL:-/tmp/troupe-qwen3-0.6b}"
force=0
out=""
parts=()
while (($#)); do
  case "$1" in
    --force) force=1 ;;
    --out) out="$2"; shift ;;
    engine|quant|serving|prefix|chat|peers) parts+=("$1") ;;
    *) echo "tools/bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
((${#parts[@]})) || parts=(engine quant serving prefix chat peers)
[ -n "$out" ] && exec > >(tee "$out") 2>&1

load=$(cut -d' ' -f1 /proc/loadavg)
if ((!force)) && awk -v l="$load" 'BEGIN { exit !(l > 1.5) }'; then
  echo "tools/bench.sh: load average $load: the machine is busy and the timings would mean little (--force runs anyway)" >&2
  exit 1
fi

"$root/tools/build.sh" --target troupe troupe-bench-engine troupe-bench-quant serving_bench troupe-bench-prefix >/dev/null
[ -f "$model/config.json" ] || "$build/tools/troupe/troupe" make-checkpoint --preset qwen3-0.6b --out "$model"

step() { echo; echo "==== $* ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"; }
for p in "${parts[@]}"; do
  case "$p" in
    engine)
      step "troupe-bench-engine --model $model --reps 2 --decode-steps 16"
      "$build/bench/engine/troupe-bench-engine" --model "$model" --reps 2 --decode-steps 16
      # The same with the weights read into 2 MB pages (the page size of the bandwidth ceiling).
      step "troupe-bench-engine --model $model --reps 2 --decode-steps 16 --no-mmap --compute-dtype f32"
      "$build/bench/engine/troupe-bench-engine" --model "$model" --reps 2 --decode-steps 16 --no-mmap --compute-dtype f32 ;;
    quant)
      step "troupe-bench-quant --model $model --reps 2"
      work=$(mktemp -d /tmp/troupe-bench-quant-XXXXXX)
      "$build/bench/quant/troupe-bench-quant" --model "$model" --work-dir "$work/int8" --reps 2
      rm -rf "$work" ;;
    serving)
      step "serving_bench --model $model --scenarios scaling,static,prefill,overhead"
      "$build/bench/serving/serving_bench" --model "$model" --scenarios scaling,static,prefill,overhead ;;
    peers)
      step "bench/peers/llama_cpp.sh $model"
      "$root/bench/peers/llama_cpp.sh" "$model" ;;
    prefix)
      step "troupe-bench-prefix ttft --model $model"
      "$build/bench/prefix/troupe-bench-prefix" ttft --model "$model" ;;
    chat)
      step "serving_bench --model $model --scenarios chat"
      "$build/bench/serving/serving_bench" --model "$model" --scenarios chat ;;
  esac
done
