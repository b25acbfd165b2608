// The Vercel AI SDK (`ai` with `@ai-sdk/openai-compatible`) against `llamay serve`, used
// as its docs show: createOpenAICompatible({ baseURL, name, apiKey }), streamText,
// generateText with Output.object, generateObject.
//
// LLAMAY_BASE: the server's OpenAI base URL (http://127.0.0.1:PORT/v1).
// LLAMAY_MODEL: a model name the server knows.
// LLAMAY_NODE_CLIENTS: where scripts/client-compat installed package.json's pins
//   (default ~/.cache/llamay/node-clients); the packages are loaded from there, so the
//   repository holds no node_modules.
// LLAMAY_CLIENTS_REPORT: if set, measured figures are written there as JSON.
//
// Run: LLAMAY_BASE=... LLAMAY_MODEL=... node --test tests/clients/ai-sdk/
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const clients = process.env.LLAMAY_NODE_CLIENTS ?? join(homedir(), '.cache', 'llamay', 'node-clients');
const requireFrom = createRequire(join(clients, 'package.json'));
const load = (name) => import(pathToFileURL(requireFrom.resolve(name)).href);
const { streamText, generateText, generateObject, Output, tool, jsonSchema } = await load('ai');
const { createOpenAICompatible } = await load('@ai-sdk/openai-compatible');

const baseURL = process.env.LLAMAY_BASE;
const modelName = process.env.LLAMAY_MODEL;
assert.ok(baseURL && modelName, 'set LLAMAY_BASE (the /v1 URL) and LLAMAY_MODEL');

const provider = createOpenAICompatible({ baseURL, name: 'llamay', apiKey: 'x' });
const structuredProvider = createOpenAICompatible({
  baseURL,
  name: 'llamay',
  apiKey: 'x',
  supportsStructuredOutputs: true,
});

function figure(name, value) {
  console.log(`[figure] ${name} = ${value}`);
  const dir = process.env.LLAMAY_CLIENTS_REPORT;
  if (!dir) return;
  mkdirSync(join(dir, 'figures'), { recursive: true });
  const file = join(dir, 'figures', `ai-sdk_${name}.json`);
  writeFileSync(file, JSON.stringify({ test: `ai-sdk::${name}`, figures: { [name]: value } }));
}

const weather = tool({
  description: 'Get the current weather in a city.',
  inputSchema: jsonSchema({
    type: 'object',
    properties: { city: { type: 'string', description: 'the city' } },
    required: ['city'],
    additionalProperties: false,
  }),
  execute: async ({ city }) => `It is sunny in ${city}.`,
});

const city = jsonSchema({
  type: 'object',
  properties: { name: { type: 'string' }, country: { type: 'string' } },
  required: ['name', 'country'],
  additionalProperties: false,
});

async function textDeltas(options) {
  const result = streamText({
    model: provider(modelName),
    prompt: 'Write a short story about a cat who likes the sea.',
    maxOutputTokens: 120,
    temperature: 0,
    ...options,
  });
  const deltas = [];
  for await (const part of result.fullStream) {
    if (part.type === 'text-delta' && part.text) deltas.push(part.text);
    if (part.type === 'error') throw part.error;
  }
  return deltas;
}

test('streamText with a tool offered streams the text', async () => {
  const deltas = await textDeltas({ tools: { weather } });
  figure('streamText_text_deltas_with_tool', deltas.length);
  assert.ok(deltas.join('').trim().length > 0, 'no text');
  assert.ok(deltas.length >= 10, `the text came in ${deltas.length} delta(s)`);
});

test('streamText without tools streams the text', async () => {
  const deltas = await textDeltas({});
  figure('streamText_text_deltas_no_tools', deltas.length);
  assert.ok(deltas.length >= 10, `the text came in ${deltas.length} delta(s)`);
});

test('generateText with Output.object (json_schema) returns the object', async () => {
  const { output } = await generateText({
    model: structuredProvider(modelName),
    output: Output.object({ schema: city }),
    prompt: 'Name the city that is the capital of France, and its country.',
    temperature: 0,
    maxOutputTokens: 96,
  });
  assert.equal(typeof output, 'object');
  assert.match(output.name, /paris/i);
  assert.match(output.country, /france/i);
});

test('generateText with Output.object in JSON mode (json_object) returns an object', async () => {
  const { output } = await generateText({
    model: provider(modelName),
    output: Output.object({ schema: city }),
    prompt: 'Which city is the capital of France? Answer in JSON with the keys "name" and "country".',
    temperature: 0,
    maxOutputTokens: 96,
  });
  assert.equal(typeof output, 'object');
  assert.match(output.name, /paris/i);
});

test('generateObject (json_object) returns an object', async () => {
  const { object } = await generateObject({
    model: provider(modelName),
    schema: city,
    prompt: 'Which city is the capital of France? Answer in JSON with the keys "name" and "country".',
    temperature: 0,
    maxOutputTokens: 96,
  });
  assert.equal(typeof object, 'object');
  assert.match(object.name, /paris/i);
});
