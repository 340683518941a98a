// LangGraph.js createReactAgent (@langchain/langgraph) + ChatOpenAI (@langchain/openai) against the scripted
// OpenAI-compatible server on 127.0.0.1 (common.mjs), traced by OpenInference's LangChain.js instrumentation
// (@arizeai/openinference-instrumentation-langchain, manuallyInstrument of @langchain/core/callbacks/manager) on a
// NodeTracerProvider with an InMemorySpanExporter; written as OTLP/JSON to spans/langgraphjs-openinference.otlp.json.
// Arguments: OpenInference records tool inputs by default (hideInputs / OPENINFERENCE_HIDE_INPUTS turn them off).
// Run from a folder with the packages (see package.json):  NODE_MODULES_DIR=<that folder> node langgraphjs_capture.mjs
import { createRequire } from 'node:module';
import path from 'node:path';
import * as C from './common.mjs';

const NM = process.env.NODE_MODULES_DIR ?? process.cwd();
const require = createRequire(path.join(NM, 'package.json'));
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { LangChainInstrumentation } = require('@arizeai/openinference-instrumentation-langchain');
const CallbackManagerModule = require('@langchain/core/callbacks/manager');

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'support-svc' }),
  spanProcessors: [new SimpleSpanProcessor(exporter)],
});
provider.register();
const inst = new LangChainInstrumentation({ tracerProvider: provider });
inst.manuallyInstrument(CallbackManagerModule);

const { tool } = require('@langchain/core/tools');
const { ChatOpenAI } = require('@langchain/openai');
const { createReactAgent } = require('@langchain/langgraph/prebuilt');
const { z } = require('zod');

const srv = await C.startFakeOpenAI();
const schemas = {
  lookup_order: z.object({ order_id: z.string() }),
  create_claim: z.object({ order_id: z.string(), reason: z.string() }),
  issue_refund: z.object({ order_id: z.string(), amount: z.number() }),
};
const tools = Object.keys(schemas).map((name) => tool(async (args) => JSON.stringify(await C.impl[name](args)),
  { name, description: C.DESCRIPTIONS[name], schema: schemas[name] }));
const llm = new ChatOpenAI({ model: C.MODEL, apiKey: 'x', configuration: { baseURL: srv.baseURL }, maxRetries: 0, streamUsage: true });
const agent = createReactAgent({ llm, tools, name: C.AGENT, prompt: C.SYSTEM_PROMPT });
try {
  const r = await agent.invoke({ messages: [{ role: 'user', content: C.USER_MESSAGE }] });
  console.log('final:', r.messages.at(-1).content);
} catch (e) { console.log('RUN RAISED:', e); }
await srv.close();
console.log('model calls:', srv.n);
await provider.forceFlush();
await C.writeOtlp(require, exporter.getFinishedSpans(), 'langgraphjs-openinference.otlp.json');
console.log(`versions: @langchain/langgraph ${C.pkgVersion(NM, '@langchain/langgraph')}, @langchain/core ${C.pkgVersion(NM, '@langchain/core')}, ` +
  `@langchain/openai ${C.pkgVersion(NM, '@langchain/openai')}, @arizeai/openinference-instrumentation-langchain ${C.pkgVersion(NM, '@arizeai/openinference-instrumentation-langchain')}, ` +
  `@opentelemetry/sdk-trace-node ${C.pkgVersion(NM, '@opentelemetry/sdk-trace-node')}, node ${process.version}`);
await provider.shutdown();
