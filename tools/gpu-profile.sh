#!/usr/bin/env bash
# Per-kernel device time of one eager decode step of the CUDA forward step (batch 1, Qwen3-0.6B
# shape, f32-widened BF16 then FP8): troupe-bench-cuda-forward --profile under Nsight Compute with
# one metric (gpu__time_duration), summed per kernel name. Run on the GPU machine after
# tools/gpu-carry.sh, from the repo root. Writes $OUT/profile.csv (raw) and prints the table.
set -u
cd "$(dirname "$0")/.."
. tools/gpu-env.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 2; }
timeout 240 "$NCU" --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
  --print-units base "$C/troupe-bench-cuda-forward" --profile > "$OUT/profile.csv" 2> "$OUT/profile.err"
echo "ncu exit $?"; tail -3 "$OUT/profile.err"
python3 - "$OUT/profile.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
head = rows[0]; rows = rows[1:]
ki, vi = head.index("Kernel Name"), head.index("Metric Value")
pid = head.index("ID")
# Two profiled steps (f32, then fp8): IDs restart? split where the kernel sequence restarts at the embedding.
steps, cur = [], []
for r in rows:
    if "embedding" in r[ki] and cur: steps.append(cur); cur = []
    cur.append(r)
steps.append(cur)
for name, st in zip(["f32 (bf16 widened)", "fp8"], steps):
    agg = collections.OrderedDict()
    for r in st:
        k = r[ki].split("(")[0][:60]
        c, t = agg.get(k, (0, 0.0))
        agg[k] = (c + 1, t + float(r[vi].replace(",", "")))
    total = sum(t for _, t in agg.values())
    print(f"\n{name}: {len(st)} kernels, {total/1e3:.1f} us of device time in one decode step")
    for k, (c, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"  {k:60s} {c:5d} x {t/c/1e3:7.2f} us = {t/1e3:8.1f} us ({100*t/total:4.1f}%)")
PY
