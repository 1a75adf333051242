// Benchmark (not a test): `execute_tools` round trips over stdio from the
// official TypeScript SDK v1 client to `codemode mcp serve`, for `return 1`
// and for a program of 10 reads, beside a direct call of
// server-everything's `echo` from the same client code; p50 and p99 in
// milliseconds.
//
//   node tests/node/clients/bench_roundtrip.mjs [BINARY] [CALLS]
//
// BINARY defaults to target/release/codemode when that build has
// `mcp serve`, else target/debug/codemode (say which in the figures: a
// debug build is much slower). Three servers are started at once:
// codemode with the default journal (each run written to the state
// folder, its receipt saved), codemode with `--journal off --approve
// deny`, and server-everything. After WARMUP rounds, CALLS rounds each
// time one call of every kind in turn (`return 1` and the 10 reads on
// both codemode servers, then `echo`), so every kind meets the same
// machine and the same state of Node's JIT (measured one kind after
// another, whichever ran first paid for the client's warm-up: about 0.2
// ms a call at first). CALLS defaults to 400. The ratios are the gateway
// goal's (issue 36): `execute_tools` of `return 1`, journal on, over the
// direct `echo`, p50 and p99, and the median of the ratio pair by pair.
// With BENCH_MODE=sequential, each kind's CALLS run back to back after
// the shared warm-up instead (a server called back to back answers
// faster than one called every few milliseconds: both views are worth
// having, and the figures say which).
// Results go to docs/PERFORMANCE.md by hand.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const target = process.env.CARGO_TARGET_DIR ?? join(repo, 'target');

function serves(binary) {
  try {
    execFileSync(binary, ['mcp', 'serve', '--help'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const candidates = process.argv[2] ? [process.argv[2]] : [join(target, 'release/codemode'), join(target, 'debug/codemode')];
const binary = candidates.find((b) => existsSync(b) && serves(b));
if (!binary) {
  console.error(`no codemode binary with \`mcp serve\` among ${candidates.join(', ')}: build one, or give its path`);
  process.exit(2);
}
const calls = Number(process.argv[3] ?? 400);
const warmup = Number(process.env.BENCH_WARMUP ?? 300);
const sequential = process.env.BENCH_MODE === 'sequential';

const ws = mkdtempSync(join(tmpdir(), 'codemode-bench-'));
for (let i = 0; i < 10; i++) writeFileSync(join(ws, `f${i}.txt`), `line ${i}\n`.repeat(50));

const programs = {
  'return 1': 'return 1',
  '10 reads': 'let n = 0; for (let i = 0; i < 10; i++) { n += (await tools.read({path: `f${i}.txt`})).metadata.total_lines } return n',
};

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function connect(command, args) {
  const client = new Client({ name: 'codemode-bench', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command, args, stderr: 'ignore' }));
  return client;
}

const servers = {
  'journal on': await connect(binary, ['mcp', 'serve', '--workspace', ws]),
  'journal off': await connect(binary, ['mcp', 'serve', '--workspace', ws, '--journal', 'off', '--approve', 'deny']),
};
// The floor: server-everything's `echo` (issue 36's gateway goal compares
// `execute_tools` of `return 1` with it, p50 and p99).
const everything = join(repo, 'tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const echoServer = await connect(process.execPath, [everything, 'stdio']);

const kinds = [];
for (const [journal, client] of Object.entries(servers)) {
  for (const [name, code] of Object.entries(programs)) {
    kinds.push({
      key: `${name}, ${journal}`,
      call: async () => {
        const r = await client.callTool({ name: 'execute_tools', arguments: { code } });
        if (r.structuredContent?.status !== 'completed') throw new Error(`${name}: ${JSON.stringify(r)}`);
      },
    });
  }
}
kinds.push({
  key: 'server-everything echo, direct',
  call: async () => {
    const r = await echoServer.callTool({ name: 'echo', arguments: { message: 'hi' } });
    if (r.isError) throw new Error(`echo: ${JSON.stringify(r)}`);
  },
});

const times = Object.fromEntries(kinds.map((k) => [k.key, []]));
for (let i = 0; i < warmup; i++) {
  for (const kind of kinds) await kind.call();
}
if (sequential) {
  // Each kind back to back, after the shared warm-up.
  for (const kind of kinds) {
    for (let i = 0; i < calls; i++) {
      const start = performance.now();
      await kind.call();
      times[kind.key].push(performance.now() - start);
    }
  }
} else {
  for (let i = 0; i < calls; i++) {
    for (const kind of kinds) {
      const start = performance.now();
      await kind.call();
      times[kind.key].push(performance.now() - start);
    }
  }
}
const results = {};
for (const [key, list] of Object.entries(times)) {
  const sorted = [...list].sort((a, b) => a - b);
  results[key] = { p50_ms: +percentile(sorted, 50).toFixed(3), p99_ms: +percentile(sorted, 99).toFixed(3), calls };
}
{
  const gateway = results['return 1, journal on'];
  const direct = results['server-everything echo, direct'];
  const pairs = times['return 1, journal on'].map((t, i) => t / times['server-everything echo, direct'][i]).sort((a, b) => a - b);
  results['ratio, return 1 (journal on) / direct echo'] = {
    p50: +(gateway.p50_ms / direct.p50_ms).toFixed(2),
    p99: +(gateway.p99_ms / direct.p99_ms).toFixed(2),
    // Pairs are calls made one after the other only when interleaved.
    ...(sequential ? {} : { pair_by_pair_median: +percentile(pairs, 50).toFixed(2) }),
  };
}
for (const client of [...Object.values(servers), echoServer]) await client.close();
rmSync(ws, { recursive: true, force: true });

console.log(
  JSON.stringify(
    {
      binary,
      build: binary.includes('/release/') ? 'release' : binary.includes('/debug/') ? 'debug' : 'as given',
      machine: `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}`,
      date: new Date().toISOString(),
      mode: sequential ? 'sequential' : 'interleaved',
      results,
    },
    null,
    2,
  ),
);
