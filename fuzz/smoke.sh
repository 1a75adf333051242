#!/usr/bin/env bash
# A short fuzzing pass (docs/FUZZING.md): each target for 60 seconds
# (FUZZ_SECONDS to change it), one after another, one process each.
#
#   fuzz/smoke.sh                       # every target
#   fuzz/smoke.sh policy mcp_config     # some targets
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz
# --locked`). Builds go to $CARGO_TARGET_DIR (default fuzz/target); inputs
# the fuzzer finds go to $FUZZ_WORK/<target> (default
# $CARGO_TARGET_DIR/corpus), so the seed corpus under fuzz/corpus stays as
# committed. A crash stops the script with its input under
# fuzz/artifacts/<target>/; turn it into a regression test (see the doc).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"
seconds="${FUZZ_SECONDS:-60}"
work="${FUZZ_WORK:-$CARGO_TARGET_DIR/corpus}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# Instrumentation for coverage only (no sanitizer): the code under test is
# safe Rust apart from QuickJS, which cargo-fuzz's sanitizer flags do not
# reach; without one the targets build and run several times faster.
cargo +nightly fuzz build -s none
# The targets' scratch folders (workspaces, trust records: under the
# temporary folder) outlive them, since libFuzzer ends a target without
# running its destructors: they go in one folder, removed at the end.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do
    mkdir -p "$work/$t"
    echo "== $t: ${seconds} s"
    TMPDIR="$scratch" cargo +nightly fuzz run -s none "$t" "$work/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
done
echo "== no crash in ${#targets[@]} target(s)"
