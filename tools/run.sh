#!/usr/bin/env bash
# The README's run command: installs what is missing, builds, and runs Troupe's main job,
# `troupe serve`. With no arguments it serves a demo model that it makes once under
# demo-model/ (random weights, the real Qwen3 tokenizer); any arguments are passed to the
# `troupe` binary instead (e.g. `serve --model DIR`, `generate ...`).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TROUPE_BUILD_DIR:-$root/build}"
"$root/tools/build.sh" --target troupe >/dev/null
troupe="$build/tools/troupe/troupe"
cd "$root"
if (($#)); then
  exec "$troupe" "$@"
fi
exec "$troupe" serve
