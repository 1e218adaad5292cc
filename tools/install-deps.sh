#!/usr/bin/env bash
# Installs every Debian package Troupe builds, tests and serves with; idempotent and quiet
# when everything is already there.
set -euo pipefail
pkgs=(build-essential cmake pkg-config
      libcaf-dev libhiredis-dev libmsgpack-cxx-dev libboost-dev libboost-test-dev
      redis-server redis-tools libpcre2-dev libutf8proc-dev nlohmann-json3-dev
      libcli11-dev libopenblas-dev python3-msgpack libtomlplusplus-dev
      haproxy)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
