// typed_search.ts: the same search-then-read as search_then_read.js, in
// TypeScript. Types are stripped before the program runs (they are not
// checked); the enum and the class with parameter properties are turned
// into JavaScript.
//   cargo run --release -- run examples/typed_search.ts
interface ReadResult {
  content: string;
  metadata: { total_lines: number };
}

enum Match {
  Exact = "exact",
  Nearby = "nearby",
}

class Finder {
  constructor(private readonly word: string, private readonly extension: string) {}

  async best(): Promise<string | undefined> {
    const { content } = await tools.file_search({ query: "limits", extensions: [this.extension] });
    return (content as string[])[0];
  }

  lineOf(file: ReadResult): number | undefined {
    const numbered = file.content.split("\n").filter((l) => /^\s*\d+\t/.test(l));
    const hit = numbered.find((l) => l.includes(this.word));
    return hit ? Number(hit.trim().split("\t")[0]) : undefined;
  }
}

const finder = new Finder("Limits", "rs");
const path = await finder.best();
if (path === undefined) {
  return { found: false };
}
const file = (await tools.read({ path })) as ReadResult;
const found = finder.lineOf(file);
const line = found ?? 1;
const around = (await tools.read({ path, offset: Math.max(1, line - 2), limit: 6 })) as ReadResult;
export default {
  path,
  line,
  match: found !== undefined ? Match.Exact : Match.Nearby,
  excerpt: around.content,
};
