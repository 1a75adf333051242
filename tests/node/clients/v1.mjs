// A client on the official TypeScript SDK v1 (@modelcontextprotocol/sdk),
// MCP 2025-11-25, running a plan against `codemode mcp serve` (plan.mjs).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { readPlan, reply, runPlan, watchWire } from './plan.mjs';

const plan = readPlan();
const capabilities = plan.elicitation ? { elicitation: { form: {} } } : {};
const client = new Client({ name: 'codemode-test-v1', version: '1.0.0' }, { capabilities });
const elicitations = [];
// The questions (by index) the server cancelled before they were answered.
const withdrawn = [];
if (plan.elicitation) {
  client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
    const asked = elicitations.push(request.params.message) - 1;
    extra.signal.addEventListener('abort', () => withdrawn.push(asked));
    const { delay_ms: delay = plan.elicitation_delay_ms, ...answer } = reply(plan, asked);
    if (delay) await new Promise((r) => setTimeout(r, delay));
    return answer;
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
    connected: { era: 'legacy', protocolVersion: transport.protocolVersion ?? client.getNegotiatedProtocolVersion?.() ?? null },
    list: async () => (await client.listTools()).tools,
    call: async (params, options, raw) =>
      raw
        ? client.request({ method: 'tools/call', params }, CallToolResultSchema, { timeout: 120000, ...options })
        : client.callTool(params, undefined, { timeout: 120000, ...options }),
  },
  elicitations,
  wire,
  withdrawn,
);
await client.close();
// A delayed elicitation answer may still be waiting: do not wait for it.
process.exit(0);
