// parallel_reads.js: read several files at once with Promise.all and count
// their lines. The calls run concurrently (up to the in-flight limit).
//   cargo run --release -- run examples/parallel_reads.js
const { content: paths } = await tools.file_search({ query: "*.rs", path: "src", limit: 50 });
const files = await Promise.all(paths.map((path) => tools.read({ path, limit: 1 })));
const counts = files.map((f, i) => ({ path: paths[i], lines: f.metadata.total_lines }));
counts.sort((a, b) => b.lines - a.lines);
return {
  files: counts.length,
  lines: counts.reduce((n, c) => n + c.lines, 0),
  longest: counts.slice(0, 3),
};
