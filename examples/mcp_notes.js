// Composes two real MCP servers (examples/mcp.json; installed by
// `npm ci --prefix tests/node`): the filesystem server lists and reads this
// repository's docs, the memory server keeps one entity per document with
// its title, and a search of the knowledge graph finds the documents about
// TypeScript. Both servers start on their first call, after the gate
// allowed `mcp_connect__files` and `mcp_connect__memory`.
//
//   cargo run --release -- run examples/mcp_notes.js --mcp-config examples/mcp.json --posture full-access
//
// (It writes to the memory server's file, so under the default posture `ask`
// its writes wait for an approval; `--approve prompt` asks on the terminal.)

const allowed = await tools.mcp__files__list_allowed_directories({});
const allowedRoot = allowed.content.content.split("\n").find((line) => line.startsWith("/"));
// codemode declares MCP roots (the workspace), which the filesystem server
// takes in place of the folder on its command line: the docs are then a
// folder below its root.
const root = allowedRoot.endsWith("/docs") ? allowedRoot : `${allowedRoot}/docs`;
const listing = await tools.mcp__files__list_directory({ path: root });
const names = listing.content.content
  .split("\n")
  .filter((line) => line.startsWith("[FILE]") && line.endsWith(".md"))
  .map((line) => line.slice("[FILE] ".length));

const docs = await Promise.all(
  names.map(async (name) => {
    const file = await tools.mcp__files__read_text_file({ path: `${root}/${name}`, head: 5 });
    const title = file.content.content.split("\n").find((l) => l.startsWith("# ")) ?? name;
    return { name, title: title.replace(/^# /, "") };
  }),
);

// Start from a clean graph so the example gives the same answer every run.
const before = await tools.mcp__memory__read_graph({});
const stale = before.content.entities.map((e) => e.name);
if (stale.length > 0) await tools.mcp__memory__delete_entities({ entityNames: stale });

await tools.mcp__memory__create_entities({
  entities: docs.map((d) => ({ name: d.name, entityType: "document", observations: [d.title] })),
});
const found = await tools.mcp__memory__search_nodes({ query: "TypeScript" });

return {
  documents: docs.length,
  about_typescript: found.content.entities.map((e) => e.name).sort(),
};
