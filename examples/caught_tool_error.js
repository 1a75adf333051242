// caught_tool_error.js: a failed call is a catchable ToolError; the program
// goes on, and the receipt records the failure.
//   cargo run --release -- run examples/caught_tool_error.js
const wanted = ["README.md", "CHANGELOG.md", "Cargo.toml"];
const report = [];
for (const path of wanted) {
  try {
    const r = await tools.read({ path, limit: 1 });
    report.push({ path, first_line: r.content.split("\n")[0].replace(/^\s*\d+\t/, "") });
  } catch (e) {
    if (!(e instanceof ToolError)) throw e;
    console.warn(`skipping ${path}: ${e.kind} (call ${e.seq})`);
    report.push({ path, error: e.kind, message: e.message });
  }
}
return report;
