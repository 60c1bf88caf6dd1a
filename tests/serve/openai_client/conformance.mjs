// The official OpenAI Node SDK (pinned in package.json) against a running `mosaic serve`: every
// endpoint it has for us, streaming, an abort, and every field the server refuses, each asserted.
//   node conformance.mjs --client-dir .cache/openai-client --base-url http://127.0.0.1:PORT/v1 --model tiny
// Exit 0 when every check passes; each failure is printed.
import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: { "client-dir": { type: "string" }, "base-url": { type: "string" }, model: { type: "string" } },
});
const { default: OpenAI } = await import(pathToFileURL(join(args["client-dir"], "node_modules", "openai", "index.mjs")).href);
const client = new OpenAI({ baseURL: args["base-url"], apiKey: "unused", maxRetries: 0, timeout: 120_000 });
const model = args.model;
const small = { model, max_tokens: 16, steps: 8 };
const chatOf = (content) => [{ role: "user", content }];

const checks = [];
const check = (name, run) => checks.push({ name, run });

async function refusal(request) {
  try {
    await request();
  } catch (error) {
    if (error instanceof OpenAI.APIError) return error;
    throw error;
  }
  assert.fail("the request was accepted");
}

async function metric(name) {
  const text = await (await fetch(args["base-url"].replace(/\/v1$/, "") + "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line ? Number(line.split(" ").pop()) : 0;
}

check("models.list and models.retrieve", async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [model]);
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
  assert.equal(one.object, "model");
  const error = await refusal(() => client.models.retrieve("gpt-4"));
  assert.ok(error instanceof OpenAI.NotFoundError, String(error));
});

check("completions.create", async () => {
  const c = await client.completions.create({ ...small, prompt: "Hello" });
  assert.equal(c.object, "text_completion");
  assert.equal(c.model, model);
  assert.equal(c.choices.length, 1);
  assert.equal(typeof c.choices[0].text, "string");
  assert.ok(["stop", "length"].includes(c.choices[0].finish_reason));
  assert.ok(c.usage.completion_tokens <= 16 && c.usage.prompt_tokens === 5, JSON.stringify(c.usage));
});

check("chat.completions.create with max_completion_tokens", async () => {
  const c = await client.chat.completions.create({ model, messages: chatOf("Hi"), max_completion_tokens: 8, steps: 8 });
  assert.equal(c.object, "chat.completion");
  assert.equal(c.choices[0].message.role, "assistant");
  assert.equal(typeof c.choices[0].message.content, "string");
  assert.equal(c.mosaic.output_ids.length, 8);
  const withNull = await client.chat.completions.create({
    model, messages: [...chatOf("Hi"), { role: "assistant", content: null }, { role: "user", content: "More" }],
    max_tokens: 4, steps: 4,
  });
  assert.equal(withNull.choices.length, 1);
});

check("streamed completions concatenate to the answer", async () => {
  const body = { ...small, prompt: "Stream", max_tokens: 32, steps: 16, block_length: 4 };
  const whole = await client.completions.create(body);
  let text = "";
  let last = null;
  for await (const chunk of await client.completions.create({ ...body, stream: true })) {
    text += chunk.choices[0]?.text ?? "";
    last = chunk;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(last.choices[0].finish_reason, whole.choices[0].finish_reason);
});

check("streamed chat with stream_options.include_usage", async () => {
  const body = { model, messages: chatOf("Stream"), max_tokens: 16, steps: 8 };
  const whole = await client.chat.completions.create(body);
  let text = "";
  const chunks = [];
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } })) {
    text += chunk.choices[0]?.delta?.content ?? "";
    chunks.push(chunk);
  }
  assert.equal(text, whole.choices[0].message.content);
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.deepEqual(usage.usage, whole.usage);
});

check("n, seed, stop, echo, suffix, logprobs", async () => {
  const two = await client.completions.create({ ...small, prompt: "Twice", n: 2, temperature: 0.8, seed: 5 });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  const second = await client.completions.create({ ...small, prompt: "Twice", temperature: 0.8, seed: 6 });
  assert.equal(two.choices[1].text, second.choices[0].text);
  const base = await client.completions.create({ ...small, prompt: "Once", max_tokens: 32, steps: 32, block_length: 4 });
  const text = base.choices[0].text;
  const stop = text.slice(6, 9);
  const cut = await client.completions.create({ ...small, prompt: "Once", max_tokens: 32, steps: 32, block_length: 4, stop });
  assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, "stop");
  const echo = await client.completions.create({ ...small, prompt: "Echo", echo: true });
  assert.ok(echo.choices[0].text.startsWith("Echo"));
  const infill = await client.completions.create({ ...small, prompt: "Start", suffix: " end." });
  assert.equal(infill.usage.prompt_tokens, 5 + 5);
  const lp = await client.completions.create({ ...small, prompt: "Hello", logprobs: 2 });
  assert.equal(lp.choices[0].logprobs.tokens.length, lp.usage.completion_tokens);
  const chat = await client.chat.completions.create({ model, messages: chatOf("Hi"), max_tokens: 8, steps: 8, logprobs: true, top_logprobs: 2 });
  for (const entry of chat.choices[0].logprobs.content) assert.ok(entry.logprob <= 0 && entry.top_logprobs.length <= 2);
});

check("an aborted stream frees its slot", async () => {
  const before = await metric('mosaic_requests_total{outcome="cancelled"}');
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages: chatOf("long"), max_tokens: 2048, steps: 2048, stream: true }, { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const chunk of stream) {
      chunks += 1;
      controller.abort();  // after the first chunk: the request is running
    }
  } catch (error) {
    // the SDK may end the iteration quietly or throw its abort error
    assert.ok(error instanceof OpenAI.APIUserAbortError || error.name === "AbortError", String(error));
  }
  assert.ok(chunks >= 1 && chunks < 2048, `${chunks} chunks before the abort took effect`);
  const deadline = Date.now() + 20_000;
  while ((await metric('mosaic_requests_total{outcome="cancelled"}')) <= before && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 50));
  assert.equal(await metric('mosaic_requests_total{outcome="cancelled"}'), before + 1);
  const after = await client.completions.create({ ...small, prompt: "after" });
  assert.equal(after.choices.length, 1);
});

check("an unknown model is 404 model_not_found", async () => {
  const error = await refusal(() => client.completions.create({ ...small, model: "gpt-4", prompt: "x" }));
  assert.ok(error instanceof OpenAI.NotFoundError, String(error));
  assert.equal(error.code, "model_not_found");
  assert.equal(error.param, "model");
});

// Every field the server refuses: 400 naming it (BadRequestError, error.param).
const refused = [
  ["completions", "logit_bias", { logit_bias: { 50: -100 } }],
  ["chat", "logit_bias", { logit_bias: { 50: 5 } }],
  ["chat", "response_format", { response_format: { type: "json_object" } }],
  ["chat", "response_format", { response_format: { type: "json_schema", json_schema: { name: "x", schema: {} } } }],
  ["chat", "tools", { tools: [{ type: "function", function: { name: "f", parameters: {} } }] }],
  ["chat", "tool_choice", { tool_choice: "required" }],
  ["chat", "functions", { functions: [{ name: "f", parameters: {} }] }],
  ["chat", "function_call", { function_call: "auto" }],
  ["completions", "best_of", { best_of: 2 }],
  ["completions", "presence_penalty", { presence_penalty: 0.5 }],
  ["chat", "frequency_penalty", { frequency_penalty: 1 }],
  ["chat", "audio", { audio: { voice: "alloy", format: "wav" }, modalities: ["text", "audio"] }],
  ["chat", "prediction", { prediction: { type: "content", content: "x" } }],
  ["chat", "reasoning_effort", { reasoning_effort: "high" }],
  ["completions", "logprobs", { logprobs: 5 }],
  ["chat", "top_logprobs", { logprobs: true, top_logprobs: 5 }],
  ["completions", "logprobs", { logprobs: 1, stream: true }],
  ["completions", "echo", { echo: true, logprobs: 1 }],
  ["completions", "stream_options", { stream_options: { include_usage: true } }],
  ["completions", "n", { n: 100 }],
  ["completions", "stop", { stop: ["a", "b", "c", "d", "e"] }],
  ["completions", "steps", { max_tokens: 4, steps: 65536 }],
  ["chat", "messages[0].role", { messages: [{ role: "wizard", content: "hi" }] }],
  ["chat", "messages[1].role", { messages: [...chatOf("hi"), { role: "tool", content: "42", tool_call_id: "1" }] }],
];
for (const [endpoint, param, fields] of refused) {
  check(`refused: ${param} ${JSON.stringify(fields).slice(0, 60)}`, async () => {
    const request = endpoint === "chat"
      ? () => client.chat.completions.create({ model, messages: chatOf("x"), max_tokens: 4, steps: 4, ...fields })
      : () => client.completions.create({ ...small, prompt: "x", ...fields });
    const error = await refusal(request);
    assert.ok(error instanceof OpenAI.BadRequestError, String(error));
    assert.equal(error.status, 400);
    assert.equal(error.param, param, error.message);
  });
}

let failed = 0;
for (const { name, run } of checks) {
  try {
    await run();
    console.log(`PASS  ${name}`);
  } catch (error) {
    failed += 1;
    console.log(`FAIL  ${name}: ${error?.stack ?? error}`);
  }
}
console.log(`${checks.length - failed} of ${checks.length} checks pass`);
process.exit(failed ? 1 : 0);
