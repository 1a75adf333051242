// search_then_read.js: find files by name, then read the best match around
// a line that mentions a word.
//   cargo run --release -- run examples/search_then_read.js
const word = "Limits";
const { content: hits } = await tools.file_search({ query: "limits", extensions: ["rs"] });
if (hits.length === 0) return { found: false };
const path = hits[0];
const file = await tools.read({ path });
const numbered = file.content.split("\n").filter((l) => /^\s*\d+\t/.test(l));
const first = numbered.find((l) => l.includes(word));
const line = first ? Number(first.trim().split("\t")[0]) : 1;
const around = await tools.read({ path, offset: Math.max(1, line - 2), limit: 6 });
return { path, line, excerpt: around.content };
