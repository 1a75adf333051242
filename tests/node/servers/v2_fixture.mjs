// A small MCP server on the TypeScript SDK v2 (@modelcontextprotocol/server),
// which speaks protocol 2026-07-28 (and serves 2025-era clients too).
// Test fixture for codemode's MCP client (tests/all/mcp_eras.rs).
//
//   node v2_fixture.mjs            stdio
//   node v2_fixture.mjs --http     streamable HTTP on 127.0.0.1, a free port;
//                                  prints `listening <port>` on stdout
//   node v2_fixture.mjs --modern-only
//                                  stdio, refusing `initialize` (2025-era
//                                  openings get the unsupported-version error)
//
// Tools:
//   envelope    the request's `_meta` envelope as the server received it
//   ask_name    asks the user's name (form elicitation through an
//               input_required result, with `requestState`); answers
//               `hello <name>`, `declined` or `cancelled`
//   open_page   URL-mode elicitation; answers the action
//   roots       asks for the client's roots; answers them as JSON
//   sample      asks for sampling (which a client without a model refuses)
//   forever     answers every round with input_required (a new requestState)
//   half_emoji  answers `a` and half of an emoji: 'a😀' cut after two UTF-16
//               code units, which JSON.stringify writes as "a\ud83d"
import http from 'node:http';
import { McpServer, createMcpHandler, inputRequired, inputResponse } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const STATE = 'asked-once';

function text(value) {
    return { content: [{ type: 'text', text: typeof value === 'string' ? value : JSON.stringify(value) }] };
}

function factory() {
    const server = new McpServer({ name: 'v2-fixture', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.registerTool('envelope', { description: 'The request envelope', inputSchema: z.object({}) }, async (_args, ctx) =>
        text({ envelope: ctx.mcpReq.envelope ?? null })
    );
    server.registerTool('half_emoji', { description: 'Text cut mid-character', inputSchema: z.object({}) }, async () =>
        text('a😀'.slice(0, 2))
    );
    server.registerTool('ask_name', { description: 'Asks the user for a name', inputSchema: z.object({}) }, async (_args, ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'name');
        if (answer.kind === 'missing') {
            return inputRequired({
                inputRequests: {
                    name: inputRequired.elicit({
                        message: 'What is your name?',
                        requestedSchema: {
                            type: 'object',
                            properties: { name: { type: 'string', description: 'Your name', default: 'Ada' } },
                            required: ['name']
                        }
                    })
                },
                requestState: STATE
            });
        }
        if (ctx.mcpReq.requestState() !== STATE) {
            return { ...text(`requestState not echoed: ${ctx.mcpReq.requestState()}`), isError: true };
        }
        if (answer.kind !== 'elicit') return { ...text(`unexpected answer ${answer.kind}`), isError: true };
        if (answer.action === 'accept') return text(`hello ${answer.content?.name}`);
        return text(answer.action === 'decline' ? 'declined' : 'cancelled');
    });
    server.registerTool('open_page', { description: 'Sends the user to a page', inputSchema: z.object({}) }, async (_args, ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'page');
        if (answer.kind === 'missing') {
            return inputRequired({
                inputRequests: { page: inputRequired.elicitUrl({ message: 'Sign in', url: 'https://example.test/sign-in' }) }
            });
        }
        return text(answer.kind === 'elicit' ? answer.action : `unexpected ${answer.kind}`);
    });
    server.registerTool('roots', { description: "The client's roots", inputSchema: z.object({}) }, async (_args, ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'roots');
        if (answer.kind === 'missing') return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
        return text(answer.kind === 'roots' ? answer.roots : `unexpected ${answer.kind}`);
    });
    server.registerTool('sample', { description: 'Asks for sampling', inputSchema: z.object({}) }, async (_args, ctx) => {
        const answer = inputResponse(ctx.mcpReq.inputResponses, 'llm');
        if (answer.kind === 'missing') {
            return inputRequired({
                inputRequests: {
                    llm: inputRequired.createMessage({
                        messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }],
                        maxTokens: 10
                    })
                }
            });
        }
        return text(`sampled: ${answer.kind}`);
    });
    server.registerTool('forever', { description: 'Never completes', inputSchema: z.object({}) }, async (_args, ctx) => {
        const round = Number(ctx.mcpReq.requestState() ?? 0) + 1;
        return inputRequired({ requestState: String(round) });
    });
    return server;
}

if (process.argv.includes('--http')) {
    const handler = createMcpHandler(factory);
    const server = http.createServer(async (req, res) => {
        try {
            const chunks = [];
            for await (const chunk of req) chunks.push(chunk);
            const body = Buffer.concat(chunks);
            const headers = new Headers();
            for (const [key, value] of Object.entries(req.headers)) {
                if (Array.isArray(value)) value.forEach((v) => headers.append(key, v));
                else if (value !== undefined) headers.set(key, value);
            }
            const request = new Request(`http://${req.headers.host}${req.url}`, {
                method: req.method,
                headers,
                body: ['GET', 'HEAD'].includes(req.method) ? undefined : body
            });
            const response = await handler.fetch(request);
            res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
            if (response.body) {
                for await (const chunk of response.body) res.write(chunk);
            }
            res.end();
        } catch (error) {
            process.stderr.write(`fixture error: ${error?.stack ?? error}\n`);
            if (!res.headersSent) res.writeHead(500);
            res.end();
        }
    });
    server.listen(0, '127.0.0.1', () => {
        process.stdout.write(`listening ${server.address().port}\n`);
    });
} else {
    serveStdio(factory, { legacy: process.argv.includes('--modern-only') ? 'reject' : 'serve' });
}
