#!/usr/bin/env bash
# Fuzzes the RESP decoder + command parser (+ engine) for SECONDS (default 30).
#
# Uses libFuzzer through cargo-fuzz when `cargo fuzz` is installed (stable
# Rust with RUSTC_BOOTSTRAP=1, since cargo-fuzz passes -Z flags); otherwise
# the stable-Rust random mutator in solid_engine (fuzzing::fuzz_for).
# Exits non-zero when a property fails; crashing inputs land in
# fuzz/artifacts/protocol/. Set FUZZ_ENGINE=fallback to force the fallback.
set -euo pipefail
secs="${1:-30}"
case "$secs" in ''|*[!0-9]*) echo "usage: fuzz/run.sh [SECONDS]" >&2; exit 2;; esac
here="$(cd "$(dirname "$0")" && pwd)"

if [ "${FUZZ_ENGINE:-auto}" != fallback ] && cargo fuzz --version >/dev/null 2>&1; then
  cd "$here"
  mkdir -p corpus/protocol
  # The build is bounded separately: it takes about a minute the first time.
  if RUSTC_BOOTSTRAP=1 timeout 900 cargo fuzz build protocol; then
    echo "fuzz: libFuzzer for ${secs}s"
    exec env RUSTC_BOOTSTRAP=1 timeout $((secs + 120)) \
      cargo fuzz run protocol corpus/protocol seeds -- -max_total_time="$secs" -rss_limit_mb=4096
  fi
  echo "fuzz: cargo fuzz build failed; using the stable fallback" >&2
fi

cd "$here/.."
echo "fuzz: stable fallback mutator for ${secs}s"
# Debug profile on purpose: integer overflow checks stay on.
SOLID_FUZZ_SECONDS="$secs" exec timeout $((secs + 900)) \
  cargo test -q -p solid_engine --lib -- --ignored --exact fuzzing::tests::fuzz_long --nocapture
