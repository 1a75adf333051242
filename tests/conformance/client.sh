#!/usr/bin/env bash
# The client command the MCP conformance suite runs: `client.sh URL`.
# It configures one MCP server `test` at URL and runs client.js with
# codemode; the program's receipt goes to stderr, its value to stdout.
# CODEMODE_BIN names the binary (default: the debug build in
# $CARGO_TARGET_DIR, else in this tree's target/).
# The suite's MCP_CONFORMANCE_CONTEXT (JSON), when set, is put before
# client.js as `const CONTEXT = ...;` (the arguments of the scenario's calls).
#
# Authorization scenarios (MCP_CONFORMANCE_SCENARIO `auth/...`): first
# `codemode mcp login test`, with BROWSER set to a script that fetches the
# authorization URL and follows its redirect to codemode's loopback
# listener, as a browser would (the suite's authorization server grants at
# once); the login is kept in a temporary config folder. The run gets
# `--login`, so a server that asks for more scope (403 insufficient_scope)
# or refuses the login (a new authorization server) is re-authorized the
# same way during the run. The server's
# `oauth.clientMetadataUrl` is the client ID metadata document URL the
# suite expects (used only where the authorization server supports them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
url=${!#}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=${CODEMODE_BIN:-${CARGO_TARGET_DIR:-$here/../../target}/debug/codemode}
if [ -n "${CODEMODE_CONFORMANCE_LOG:-}" ]; then exec 2> >(tee -a "$CODEMODE_CONFORMANCE_LOG" >&2); fi
case "${MCP_CONFORMANCE_SCENARIO:-}" in
auth/pre-registration)
  # The suite hands the pre-registered client in MCP_CONFORMANCE_CONTEXT;
  # the secret goes in through the environment, as a user would give it.
  client_id=$(node -e 'process.stdout.write(JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT).client_id)')
  CONFORMANCE_CLIENT_SECRET=$(node -e 'process.stdout.write(JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT).client_secret)')
  export CONFORMANCE_CLIENT_SECRET
  oauth=',"oauth":{"clientId":"'"$client_id"'","clientSecret":"${CONFORMANCE_CLIENT_SECRET}"}'
  export XDG_CONFIG_HOME="$work/config"
  printf '#!/bin/sh\nexec curl -sSL -o /dev/null "$1"\n' >"$work/browser"
  chmod +x "$work/browser"
  ;;
auth/*)
  oauth=',"oauth":{"clientMetadataUrl":"https://conformance-test.local/client-metadata.json"}'
  export XDG_CONFIG_HOME="$work/config"
  printf '#!/bin/sh\nexec curl -sSL -o /dev/null "$1"\n' >"$work/browser"
  chmod +x "$work/browser"
  ;;
*) oauth='' ;;
esac
login=()
printf '{"mcpServers":{"test":{"type":"http","url":"%s"%s}}}\n' "$url" "$oauth" >"$work/mcp.json"
if [ -n "$oauth" ]; then
  login=(--login)
  export BROWSER="$work/browser"
  "$bin" mcp login test --mcp-config "$work/mcp.json" --workspace "$work" --timeout 20
fi
program="$here/client.js"
if [ -n "${MCP_CONFORMANCE_CONTEXT:-}" ]; then
  program="$work/client.js"
  { printf 'const CONTEXT = %s;\n' "$MCP_CONFORMANCE_CONTEXT"; cat "$here/client.js"; } >"$program"
fi
"$bin" run "$program" --workspace "$work" --mcp-config "$work/mcp.json" \
  --posture full-access --journal off --approve "${CODEMODE_CONFORMANCE_APPROVE:-allow}" ${login[@]+"${login[@]}"}
