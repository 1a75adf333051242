// A client on the official TypeScript SDK v2 (@modelcontextprotocol/client),
// negotiating the protocol era (`versionNegotiation: auto`: 2026-07-28 when
// the server offers it), running a plan against `codemode mcp serve`
// (plan.mjs). On 2026-07-28, approvals come as `input_required`, which the
// SDK fulfils through the same `elicitation/create` handler and retries.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { readPlan, reply, runPlan, watchWire } from './plan.mjs';

const plan = readPlan();
const capabilities = plan.elicitation ? { elicitation: { form: {} } } : {};
const client = new Client(
  { name: 'codemode-test-v2', version: '1.0.0' },
  { capabilities, versionNegotiation: { mode: plan.era === 'legacy' ? 'legacy' : 'auto' } },
);
const elicitations = [];
if (plan.elicitation) {
  client.setRequestHandler('elicitation/create', async (request) => {
    const asked = elicitations.push(request.params.message) - 1;
    if (plan.elicitation_delay_ms) await new Promise((r) => setTimeout(r, plan.elicitation_delay_ms));
    return reply(plan, asked);
  });
}
const transport = plan.server.url
  ? new StreamableHTTPClientTransport(new URL(plan.server.url))
  : new StdioClientTransport({ command: plan.server.command, args: plan.server.args, cwd: plan.server.cwd, env: plan.server.env, stderr: 'inherit' });
await client.connect(transport);
const wire = watchWire(transport);

await runPlan(
  plan,
  {
    connected: { protocolVersion: client.getNegotiatedProtocolVersion() ?? null },
    list: async () => (await client.listTools()).tools,
    call: async (params, options) => client.callTool(params, { timeout: 120000, ...options }),
  },
  elicitations,
  wire,
);
await client.close();
// A delayed elicitation answer may still be waiting: do not wait for it.
process.exit(0);
