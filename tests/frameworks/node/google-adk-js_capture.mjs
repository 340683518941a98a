// Google ADK for TypeScript/JS (@google/adk) LlmAgent + InMemoryRunner with a scripted model (a BaseLlm subclass
// whose generateContentAsync yields canned function calls and usage; no network). ADK's own OpenTelemetry spans
// (tracer "gcp.vertex.agent": invocation, invoke_agent, call_llm, execute_tool <tool>) go to a NodeTracerProvider
// with an InMemorySpanExporter -> spans/google-adk-js.otlp.json. Tool arguments: `gcp.vertex.agent.tool_call_args`,
// on by default (ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS, default "true"). A throwing tool's error goes back to the
// model as {error: ...} (no on_tool_error callback needed).
// Run:  NODE_MODULES_DIR=<folder with @google/adk> node google-adk-js_capture.mjs
import { createRequire } from 'node:module';
import path from 'node:path';
import * as C from './common.mjs';

const NM = process.env.NODE_MODULES_DIR ?? process.cwd();
const require = createRequire(path.join(NM, 'package.json'));
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'support-svc' }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
provider.register();

const adk = require('@google/adk');
const { z } = require('zod');

let n = 0;
class ScriptedLlm extends adk.BaseLlm {
  constructor() { super({ model: C.MODEL }); }
  async *generateContentAsync(_llmRequest) {
    const i = n++;
    const [inp, out] = C.usageOf(i);
    const call = i < C.TURNS.length ? C.TURNS[i] : null;
    const parts = call ? [{ functionCall: { id: `call_${i}`, name: call[0], args: call[1] } }] : [{ text: C.FINAL_TEXT }];
    yield { content: { role: 'model', parts }, finishReason: 'STOP',
      usageMetadata: { promptTokenCount: inp, candidatesTokenCount: out, totalTokenCount: inp + out } };
  }
  async connect() { throw new Error('live not supported'); }
}
const schemas = {
  lookup_order: z.object({ order_id: z.string() }),
  create_claim: z.object({ order_id: z.string(), reason: z.string() }),
  issue_refund: z.object({ order_id: z.string(), amount: z.number() }),
};
const tools = Object.keys(schemas).map((name) => new adk.FunctionTool({ name, description: C.DESCRIPTIONS[name],
  parameters: schemas[name], execute: async (args) => C.impl[name](args) }));
const agent = new adk.LlmAgent({ name: C.AGENT, model: new ScriptedLlm(), instruction: C.SYSTEM_PROMPT, tools });
const runner = new adk.InMemoryRunner({ agent, appName: 'support-app' });
const session = await runner.sessionService.createSession({ appName: 'support-app', userId: 'u1' });
try {
  for await (const ev of runner.runAsync({ userId: 'u1', sessionId: session.id,
    newMessage: { role: 'user', parts: [{ text: C.USER_MESSAGE }] } })) {
    const t = ev.content?.parts?.find((p) => p.text)?.text;
    if (t) console.log('final:', t);
  }
} catch (e) { console.log('RUN RAISED:', e); }
console.log('model calls:', n);
await provider.forceFlush();
await C.writeOtlp(require, exporter.getFinishedSpans(), 'google-adk-js.otlp.json');
console.log(`versions: @google/adk ${C.pkgVersion(NM, '@google/adk')}, @opentelemetry/sdk-trace-node ${C.pkgVersion(NM, '@opentelemetry/sdk-trace-node')}, ` +
  `@opentelemetry/api ${C.pkgVersion(NM, '@opentelemetry/api')}, node ${process.version}`);
await provider.shutdown();
