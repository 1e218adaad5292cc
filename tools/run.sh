#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and runs Troupe's main job.
# With no arguments it makes a demo model once (random weights, real Qwen3 tokenizer) under
# demo-model/ and generates from it; any arguments are passed to the `troupe` binary instead.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TROUPE_BUILD_DIR:-$root/build}"
"$root/tools/build.sh" --target troupe >/dev/null
troupe="$build/tools/troupe/troupe"
if (($#)); then
  exec "$troupe" "$@"
fi
demo="$root/demo-model"
if [ ! -f "$demo/config.json" ]; then
  echo "run: making a demo model in $demo (random weights: its text is gibberish by design)"
  "$troupe" make-checkpoint --preset tiny --out "$demo" --seed 0
fi
echo "run: troupe generate --model $demo --prompt 'Hello, Troupe!' --max-tokens 24 --temperature 0"
exec "$troupe" generate --model "$demo" --prompt "Hello, Troupe!" --max-tokens 24 --temperature 0
