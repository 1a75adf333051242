#!/usr/bin/env bash
# A short fuzzing pass (docs/FUZZING.md): each target for 60 seconds
# (FUZZ_SECONDS to change it), FUZZ_JOBS targets at a time (default: the
# machine's cores), one process each.
#
#   fuzz/smoke.sh                       # every target
#   fuzz/smoke.sh policy mcp_config     # some targets
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz
# --locked`). Builds go to $CARGO_TARGET_DIR (default fuzz/target); inputs
# the fuzzer finds go to $FUZZ_WORK/<target> (default
# $CARGO_TARGET_DIR/corpus), so the seed corpus under fuzz/corpus stays as
# committed. A finding fails the script (after the targets already running
# end) with its input under fuzz/artifacts/<target>/; turn it into a
# regression test (see the doc).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"
seconds="${FUZZ_SECONDS:-60}"
work="${FUZZ_WORK:-$CARGO_TARGET_DIR/corpus}"
jobs="${FUZZ_JOBS:-$(nproc)}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# Instrumentation for coverage only (no sanitizer): the code under test is
# safe Rust apart from QuickJS, which cargo-fuzz's sanitizer flags do not
# reach; without one the targets build and run several times faster.
if [ ${#targets[@]} -eq 1 ]; then
    cargo +nightly fuzz build -s none "${targets[0]}"
else
    cargo +nightly fuzz build -s none
fi
# The binaries `cargo fuzz run` would start, run here directly: it would
# check the build again before each target (seconds each).
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
bin_dir="$CARGO_TARGET_DIR/$host/release"
# The targets' scratch folders (workspaces, trust records: under the
# temporary folder) outlive them, since libFuzzer ends a target without
# running its destructors: they go in one folder, removed at the end, with
# each target's output until it is printed whole.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# One target: its output goes to a file and is printed whole when it ends,
# so targets running at once do not interleave. Returns libFuzzer's status.
run_target() {
    local t="$1" status=0
    mkdir -p "$work/$t" "$here/artifacts/$t"
    TMPDIR="$scratch" "$bin_dir/$t" "$work/$t" "corpus/$t" \
        -artifact_prefix="$here/artifacts/$t/" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$scratch/$t.log" 2>&1 || status=$?
    { echo "== $t: ${seconds} s, exit $status"; cat "$scratch/$t.log"; } >"$scratch/$t.out"
    return "$status"
}

failed=()
running=()
names=()
# Waits for one running target (the oldest) and prints what it said.
reap() {
    local pid="${running[0]}" t="${names[0]}"
    running=("${running[@]:1}")
    names=("${names[@]:1}")
    wait "$pid" || failed+=("$t")
    cat "$scratch/$t.out"
}
for t in "${targets[@]}"; do
    if [ ! -x "$bin_dir/$t" ]; then
        echo "fuzz/smoke.sh: no target $t at $bin_dir/$t (\`cargo +nightly fuzz list\` names them)" >&2
        exit 2
    fi
    if [ ${#running[@]} -ge "$jobs" ]; then reap; fi
    run_target "$t" &
    running+=("$!")
    names+=("$t")
done
while [ ${#running[@]} -gt 0 ]; do reap; done

if [ ${#failed[@]} -gt 0 ]; then
    echo "== FINDING in ${#failed[@]} target(s): ${failed[*]}; inputs under fuzz/artifacts/<target>/" >&2
    exit 1
fi
echo "== no crash in ${#targets[@]} target(s)"
