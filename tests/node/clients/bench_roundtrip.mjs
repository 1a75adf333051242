// Benchmark (not a test): `execute_tools` round trips over stdio from the
// official TypeScript SDK v1 client to `codemode mcp serve`, for `return 1`
// and for a program of 10 reads; p50 and p99 in milliseconds.
//
//   node tests/node/clients/bench_roundtrip.mjs [BINARY] [CALLS]
//
// BINARY defaults to target/release/codemode when that build has
// `mcp serve`, else target/debug/codemode (say which in the figures: a
// debug build is much slower). CALLS defaults to 200, after 20 warm-up
// calls of each program. Each program is measured twice: with the default
// journal (each run written to <workspace>/.codemode/runs, its receipt
// saved) and with `--journal off --approve deny`; then the same client
// calls server-everything's `echo` directly, the floor the gateway is
// compared with, and the ratios are given. Results go to
// docs/PERFORMANCE.md by hand.
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
const calls = Number(process.argv[3] ?? 200);
const warmup = 20;

const ws = mkdtempSync(join(tmpdir(), 'codemode-bench-'));
for (let i = 0; i < 10; i++) writeFileSync(join(ws, `f${i}.txt`), `line ${i}\n`.repeat(50));

const programs = {
  'return 1': 'return 1',
  '10 reads': 'let n = 0; for (let i = 0; i < 10; i++) { n += (await tools.read({path: `f${i}.txt`})).metadata.total_lines } return n',
};

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const results = {};
for (const [journal, extra] of [['journal on', []], ['journal off', ['--journal', 'off', '--approve', 'deny']]]) {
  const client = new Client({ name: 'codemode-bench', version: '1.0.0' });
  await client.connect(
    new StdioClientTransport({ command: binary, args: ['mcp', 'serve', '--workspace', ws, ...extra], stderr: 'ignore' }),
  );
  for (const [name, code] of Object.entries(programs)) {
    const times = [];
    for (let i = 0; i < warmup + calls; i++) {
      const start = performance.now();
      const r = await client.callTool({ name: 'execute_tools', arguments: { code } });
      const ms = performance.now() - start;
      if (r.structuredContent?.status !== 'completed') throw new Error(`${name}: ${JSON.stringify(r)}`);
      if (i >= warmup) times.push(ms);
    }
    times.sort((a, b) => a - b);
    results[`${name}, ${journal}`] = { p50_ms: +percentile(times, 50).toFixed(3), p99_ms: +percentile(times, 99).toFixed(3), calls };
  }
  await client.close();
}
// The floor of the same client in the same sitting: a direct call of
// server-everything's `echo` (issue 36's gateway goal compares
// `execute_tools` of `return 1` with it, p50 and p99).
{
  const everything = join(repo, 'tests/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js');
  const client = new Client({ name: 'codemode-bench', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [everything, 'stdio'], stderr: 'ignore' }));
  const times = [];
  for (let i = 0; i < warmup + calls; i++) {
    const start = performance.now();
    const r = await client.callTool({ name: 'echo', arguments: { message: 'hi' } });
    const ms = performance.now() - start;
    if (r.isError) throw new Error(`echo: ${JSON.stringify(r)}`);
    if (i >= warmup) times.push(ms);
  }
  times.sort((a, b) => a - b);
  results['server-everything echo, direct'] = { p50_ms: +percentile(times, 50).toFixed(3), p99_ms: +percentile(times, 99).toFixed(3), calls };
  await client.close();
  const gateway = results['return 1, journal on'];
  const direct = results['server-everything echo, direct'];
  results['ratio, return 1 (journal on) / direct echo'] = {
    p50: +(gateway.p50_ms / direct.p50_ms).toFixed(2),
    p99: +(gateway.p99_ms / direct.p99_ms).toFixed(2),
  };
}
rmSync(ws, { recursive: true, force: true });

console.log(
  JSON.stringify(
    {
      binary,
      build: binary.includes('/release/') ? 'release' : 'debug',
      machine: `${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}`,
      date: new Date().toISOString(),
      results,
    },
    null,
    2,
  ),
);
