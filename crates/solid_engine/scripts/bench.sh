#!/usr/bin/env bash
# Runs solid-engine-bench against a fresh solid-engine-server for each
# durability mode. Usage: scripts/bench.sh [extra solid-engine-bench flags]
# e.g. scripts/bench.sh --jobs 1000000 --batch 1000
set -euo pipefail
cd "$(dirname "$0")/../../.."
cargo build --release -q -p solid_engine
bin=target/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for mode in memory balanced strict; do
  sock="$work/$mode.sock"
  args=(--listen "unix://$sock" --durability "$mode")
  [ "$mode" != memory ] && args+=(--data-dir "$work/data-$mode")
  "$bin/solid-engine-server" "${args[@]}" 2>"$work/$mode.log" &
  pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
  echo "== durability=$mode"
  "$bin/solid-engine-bench" --socket "$sock" "$@" || true
  kill -TERM "$pid"
  wait "$pid" || true
done
