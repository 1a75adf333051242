// hello.js: read the workspace's Markdown files through tools and
// summarise them. Run from the repository root:
//   cargo run --release -- run examples/hello.js
const found = await tools.file_search({ query: "*.md", limit: 20 });
console.log(`found ${found.content.length} Markdown files`);

const summaries = [];
for (const path of found.content) {
  const file = await tools.read({ path, limit: 400 });
  const lines = file.content.split("\n").filter((l) => /^\s*\d+\t/.test(l));
  const title = lines
    .map((l) => l.replace(/^\s*\d+\t/, ""))
    .find((l) => l.startsWith("# "));
  summaries.push({
    path,
    title: title ? title.slice(2) : null,
    lines: file.metadata.total_lines,
  });
}
summaries.sort((a, b) => b.lines - a.lines);
return {
  files: summaries.length,
  total_lines: summaries.reduce((n, s) => n + s.lines, 0),
  largest: summaries.slice(0, 5),
};
