// Shared by the TypeScript/JS captures of fw-audit-2026-12-04 (copied from ../shared/reference/capture-scripts/round-3;
// otel-agenteval's CI leg adds the export to `serve` in writeOtlp): the scenario, a scripted OpenAI-compatible server on
// 127.0.0.1 (Chat Completions, streaming or not; Responses API non-streaming), and an OTLP/JSON writer.
//
// Scenario (every framework): user "My order 88120 arrived damaged, please file a claim."; the scripted model
// calls, one tool per turn:
//   0. lookup_order {order_id:"88120"}                    -> ok
//   1. create_claim {order_id:"88120", reason:"damaged"}  -> ok
//   2. create_claim {order_id:"88120", reason:"damaged"}  -> ok (identical: the duplicate write)
//   3. issue_refund {order_id:"88120", amount:25}         -> the tool THROWS
//   4. final text.
// Usage per model call n: 100+10n input, 5+n output (600 / 35 in all). Agent name: support_agent.
import http from 'node:http';
import { mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const AGENT = 'support_agent';
export const MODEL = 'fake-model';
export const SYSTEM_PROMPT = 'You are a support agent for order claims.';
export const USER_MESSAGE = 'My order 88120 arrived damaged, please file a claim.';
export const FINAL_TEXT = 'I filed claim CLM-5531 for order 88120 (damaged); the refund could not be issued.';
export const TURNS = [
  ['lookup_order', { order_id: '88120' }],
  ['create_claim', { order_id: '88120', reason: 'damaged' }],
  ['create_claim', { order_id: '88120', reason: 'damaged' }],
  ['issue_refund', { order_id: '88120', amount: 25 }],
];
export const usageOf = (n) => [100 + 10 * n, 5 + n];

// the tools' bodies (each framework wraps them its own way)
export const impl = {
  lookup_order: async ({ order_id }) => ({ order_id, status: 'delivered', items: ['vase'] }),
  create_claim: async ({ order_id, reason }) => ({ claim_id: 'CLM-5531', order_id, reason }),
  issue_refund: async () => { throw new Error('refund service unavailable'); },
};
export const DESCRIPTIONS = {
  lookup_order: 'Look up an order by its id.',
  create_claim: 'Create a damage claim for an order.',
  issue_refund: 'Issue a refund for an order.',
};

export function startFakeOpenAI() {
  const state = { n: 0, requests: [] };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : {};
      state.requests.push({ path: req.url, body });
      const n = state.n++;
      const call = n < TURNS.length ? TURNS[n] : null;
      const [inp, out] = usageOf(n);
      const model = body.model || MODEL;
      if (req.url.endsWith('/responses')) {
        const output = call
          ? [{ type: 'function_call', id: `fc_${n}`, call_id: `call_${n}`, name: call[0], arguments: JSON.stringify(call[1]), status: 'completed' }]
          : [{ type: 'message', id: `msg_${n}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: FINAL_TEXT, annotations: [] }] }];
        const data = { id: `resp_${n}`, object: 'response', created_at: 0, status: 'completed', model, output,
          usage: { input_tokens: inp, output_tokens: out, total_tokens: inp + out, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
          parallel_tool_calls: true, tool_choice: 'auto', tools: [] };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(data));
        return;
      }
      const usage = { prompt_tokens: inp, completion_tokens: out, total_tokens: inp + out };
      const tcs = call ? [{ id: `call_${n}`, type: 'function', function: { name: call[0], arguments: JSON.stringify(call[1]) } }] : [];
      const finish = call ? 'tool_calls' : 'stop';
      if (body.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = (delta, fr = null, u) => {
          const d = { id: `chatcmpl-${n}`, object: 'chat.completion.chunk', created: 0, model,
            choices: delta === null ? [] : [{ index: 0, delta, finish_reason: fr }] };
          if (u) d.usage = u;
          res.write(`data: ${JSON.stringify(d)}\n\n`);
        };
        chunk({ role: 'assistant', content: call ? null : '' });
        if (!call) chunk({ content: FINAL_TEXT });
        tcs.forEach((tc, i) => chunk({ tool_calls: [{ index: i, ...tc }] }));
        chunk({}, finish);
        chunk(null, null, usage); // usage chunk always (as stream_options.include_usage asks)
        res.end('data: [DONE]\n\n');
        return;
      }
      const msg = { role: 'assistant', content: call ? null : FINAL_TEXT };
      if (tcs.length) msg.tool_calls = tcs;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: `chatcmpl-${n}`, object: 'chat.completion', created: 0, model,
        choices: [{ index: 0, finish_reason: finish, message: msg }], usage }));
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    state.baseURL = `http://127.0.0.1:${server.address().port}/v1`;
    state.close = () => new Promise((r) => server.close(r));
    resolve(state);
  }));
}

// spans (ReadableSpan[], end order) -> one OTLP/JSON ExportTraceServiceRequest (what OTLP/HTTP JSON sends)
export function writeOtlp(require, spans, outName) {
  const { JsonTraceSerializer } = require('@opentelemetry/otlp-transformer');
  const body = JsonTraceSerializer.serializeRequest(spans);
  const dir = process.env.FWAUDIT_SPANS_DIR ?? 'spans';
  mkdirSync(dir, { recursive: true });
  const out = path.join(dir, outName);
  writeFileSync(out, Buffer.from(body).toString('utf8') + '\n');
  console.log(`wrote ${spans.length} spans -> ${out}`);
  // otel-agenteval's CI leg: the same OTLP/HTTP JSON request, sent to a real `serve` on loopback
  const endpoint = process.env.OTEL_AGENTEVAL_OTLP_ENDPOINT;
  if (endpoint) {
    return fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: Buffer.from(body) })
      .then((r) => { console.log(`exported ${spans.length} spans -> ${endpoint}: HTTP ${r.status}`); if (!r.ok) process.exitCode = 1; return out; });
  }
  for (const s of spans) {
    const keys = Object.keys(s.attributes).filter((k) => /^(gen_ai|openinference|tool|llm|input|agent|graph|ai|mastra|adk|gcp)/.test(k));
    console.log(`  ${JSON.stringify(s.name).padEnd(44)} status=${s.status.code} ${keys.join(',').slice(0, 200)}`);
  }
  return out;
}

export function pkgVersion(nodeModulesDir, p) {
  try { return JSON.parse(readFileSync(path.join(nodeModulesDir, 'node_modules', p, 'package.json'), 'utf8')).version; } catch { return '?'; }
}
