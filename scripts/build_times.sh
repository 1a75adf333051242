#!/usr/bin/env bash
# Release build times of one commit (docs/PERFORMANCE.md, "Build times"):
# a clean build, then a rebuild after a comment line is appended to each
# given file (restored afterwards). Prints wall, user and system seconds.
#
#   scripts/build_times.sh <commit> <file>...
#   scripts/build_times.sh HEAD src/cli/run.rs \
#       crates/codemode/src/gate/rules.rs crates/codemode/src/vm/host_call.rs
#
# The commit is checked out in a temporary worktree with a target folder of
# its own, both removed at the end.
set -euo pipefail
commit=${1:?usage: scripts/build_times.sh <commit> <file>...}
shift
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$repo" worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$repo" worktree add -q --detach "$work/tree" "$commit"
cd "$work/tree"
timed() { # label
  /usr/bin/time -o "$work/time" -f "$1: wall %e s, user %U s, system %S s" \
    cargo build --release --target-dir "$work/target" >/dev/null 2>&1
  cat "$work/time"
}
timed "$commit clean"
for f in "$@"; do
  echo "// one-line change for a rebuild measurement" >> "$f"
  timed "$commit rebuild after $f"
  git checkout -q -- "$f"
done
