#!/usr/bin/env bash
# The client command the MCP conformance suite runs: `client.sh URL`.
# It configures one MCP server `test` at URL and runs client.js with
# codemode; the program's receipt goes to stderr, its value to stdout.
# CODEMODE_BIN names the binary (default: the debug build of this tree).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
url=${!#}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '{"mcpServers":{"test":{"type":"http","url":"%s"}}}\n' "$url" >"$work/mcp.json"
bin=${CODEMODE_BIN:-$here/../../target/debug/codemode}
if [ -n "${CODEMODE_CONFORMANCE_LOG:-}" ]; then exec 2> >(tee -a "$CODEMODE_CONFORMANCE_LOG" >&2); fi
exec "$bin" run "$here/client.js" --workspace "$work" --mcp-config "$work/mcp.json" \
  --posture full-access --journal off --approve "${CODEMODE_CONFORMANCE_APPROVE:-allow}"
