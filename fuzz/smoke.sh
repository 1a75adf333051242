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
# committed. Every target runs; a finding in any fails the script at the
# end (exit 1), naming the targets, with its input under
# fuzz/artifacts/<target>/; turn it into a regression test (see the doc).
# A name that is not a target, or a FUZZ_JOBS that is not a positive
# number, exits 2 before anything runs.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/target}"
seconds="${FUZZ_SECONDS:-60}"
work="${FUZZ_WORK:-$CARGO_TARGET_DIR/corpus}"
jobs="${FUZZ_JOBS:-$(nproc)}"
if ! [[ "$jobs" =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz/smoke.sh: FUZZ_JOBS must be a positive whole number, not \`$jobs\`" >&2
    exit 2
fi
mapfile -t known < <(cargo +nightly fuzz list)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=("${known[@]}")
fi
for t in "${targets[@]}"; do
    if ! printf '%s\n' "${known[@]}" | grep -qxF -- "$t"; then
        echo "fuzz/smoke.sh: \`$t\` is not a fuzz target; the targets: ${known[*]}" >&2
        exit 2
    fi
done

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
for t in "${targets[@]}"; do
    if [ ! -x "$bin_dir/$t" ]; then
        echo "fuzz/smoke.sh: the build left no $bin_dir/$t" >&2
        exit 2
    fi
done
# The targets' scratch folders (workspaces, trust records: under the
# temporary folder) outlive them, since libFuzzer ends a target without
# running its destructors: they go in one folder, removed at the end, with
# each target's output until it is printed whole.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# One target, in the background: its output goes to a file, printed whole
# when it ends, so targets running at once do not mix their lines. Always
# leaves `<target>.out` and exits with libFuzzer's status (or 1 when the
# target could not be started).
run_target() {
    local t="$1" status=0
    {
        mkdir -p "$work/$t" "$here/artifacts/$t" &&
            TMPDIR="$scratch" "$bin_dir/$t" "$work/$t" "corpus/$t" \
                -artifact_prefix="$here/artifacts/$t/" \
                -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    } >"$scratch/$t.log" 2>&1 || status=$?
    {
        echo "== $t: done, exit $status"
        cat "$scratch/$t.log"
        if [ "$status" != 0 ]; then
            echo "== $t: FINDING; reproduce: (cd fuzz && cargo +nightly fuzz run -s none $t artifacts/$t/<file>)"
        fi
    } >"$scratch/$t.out" 2>&1
    return "$status"
}

failed=()
declare -A name_of=()
# Waits for whichever running target ends first and prints what it said.
reap() {
    local pid status=0
    wait -n -p pid "${!name_of[@]}" || status=$?
    local t="${name_of[$pid]}"
    unset "name_of[$pid]"
    if [ "$status" != 0 ]; then failed+=("$t"); fi
    cat "$scratch/$t.out" 2>/dev/null || echo "== $t: exit $status, no output kept"
}
for t in "${targets[@]}"; do
    if [ ${#name_of[@]} -ge "$jobs" ]; then reap; fi
    echo "== $t: ${seconds} s, started"
    run_target "$t" &
    name_of[$!]="$t"
done
while [ ${#name_of[@]} -gt 0 ]; do reap; done

if [ ${#failed[@]} -gt 0 ]; then
    echo "== FINDING in ${#failed[@]} target(s): ${failed[*]}; inputs under fuzz/artifacts/<target>/" >&2
    exit 1
fi
echo "== no crash in ${#targets[@]} target(s)"
