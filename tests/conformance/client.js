// The conformance client program: what a model would write to use a server
// it has never seen. It starts the server, lists its tools and calls each
// one with arguments made from its input schema (the schema's default, or
// a plain value of its type), and returns what each call gave. A scenario
// that names the arguments of its calls (the suite's context, which
// client.sh puts before this file as `CONTEXT`) gets those.
const context = typeof CONTEXT === "undefined" ? {} : CONTEXT;
const given = new Map((context.toolCalls ?? []).map((c) => [`mcp__test__${c.name}`, c.arguments]));
const { tools: listed } = (await tools.call("mcp_connect__test", {})).content;
function sample(schema) {
  if (schema === undefined || schema === null) return null;
  if ("default" in schema) return schema.default;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  switch (schema.type) {
    case "number":
    case "integer":
      return 1;
    case "boolean":
      return true;
    case "array":
      return [];
    case "object": {
      const out = {};
      for (const key of schema.required ?? []) out[key] = sample(schema.properties?.[key]);
      return out;
    }
    default:
      return "test";
  }
}
async function inputSchema(name) {
  const found = await tools.search(`^${name}$`, { mode: "regex", limit: 1 });
  return found.content.tools[0]?.input_schema ?? { type: "object" };
}
// An argument whose description asks for another tool's input schema "as
// the client observed it" gets that schema as tool_search shows it.
async function argumentsFor(schema) {
  const args = sample(schema);
  for (const [key, property] of Object.entries(schema.properties ?? {})) {
    // The description names the server's own tool name (no `mcp__` prefix).
    const other = listed.find((t) => property?.description?.includes(`for ${t.name.split("__").pop()},`));
    if (property?.type === "object" && other) args[key] = await inputSchema(other.name);
  }
  return args;
}
const results = [];
for (const tool of listed) {
  const name = tool.name;
  const schema = await inputSchema(name);
  try {
    const result = await tools.call(name, given.has(name) ? given.get(name) : await argumentsFor(schema));
    results.push({ tool: tool.name, ok: true, content: result.content });
  } catch (e) {
    results.push({ tool: tool.name, ok: false, error: String(e.message ?? e) });
  }
}
return results;
