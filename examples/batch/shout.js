// One run per input line of messages.jsonl (`input` is the line's JSON
// value): `codemode batch --program examples/batch/shout.js
// examples/batch/messages.jsonl --mcp-config examples/batch/mcp.json
// --config examples/batch/codemode.toml --ordered`.
const echoed = await tools.call("mcp__everything__echo", { message: input.message });
return { message: input.message, echoed: echoed.content, loud: input.message.toUpperCase() };
