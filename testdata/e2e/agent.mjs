// An unchanged agent on the official npm clients, pointed at the gateway by
// its base URL only. Usage:
//   node agent.mjs BASE_URL CLIENT STREAM(0|1) CATALOG.json TASKS.json
// CLIENT is openai or ai (Chat Completions), openai-responses or
// ai-responses (the Responses API), anthropic or ai-anthropic (Anthropic's
// Messages API, with extended thinking on).
// It runs every task (executing each tool call with a canned result) and
// prints one JSON line per task: {name, calls, answer, promptTokens}.
import { readFileSync } from "node:fs";
import OpenAI from "openai";
import { generateText, streamText, tool, jsonSchema, stepCountIs } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import Anthropic from "@anthropic-ai/sdk";
import { createAnthropic } from "@ai-sdk/anthropic";

const [baseURL, client, streamFlag, catalogPath, tasksPath] = process.argv.slice(2);
const stream = streamFlag === "1";
const catalog = JSON.parse(readFileSync(catalogPath, "utf8"));
const tasks = JSON.parse(readFileSync(tasksPath, "utf8"));
const apiKey = "sk-node-e2e";
// A model the ai package's Anthropic provider knows (an unknown one draws a
// warning); the scripted upstream answers to any.
const anthropicModel = "claude-sonnet-4-5";

async function withOpenAI(task) {
  const oa = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const messages = [
    { role: "system", content: "You are a helpful agent." },
    { role: "user", content: task.prompt },
  ];
  const calls = [];
  let promptTokens = 0;
  for (let turn = 0; turn < 10; turn++) {
    let msg;
    if (stream) {
      const s = oa.chat.completions.stream({ model: "gpt-test", messages, tools: catalog, stream_options: { include_usage: true } });
      const done = await s.finalChatCompletion();
      msg = done.choices[0].message;
      promptTokens += done.usage?.prompt_tokens ?? 0;
    } else {
      const done = await oa.chat.completions.create({ model: "gpt-test", messages, tools: catalog });
      msg = done.choices[0].message;
      promptTokens += done.usage?.prompt_tokens ?? 0;
    }
    if (!msg.tool_calls || msg.tool_calls.length === 0) {
      return { name: task.name, calls, answer: msg.content, promptTokens };
    }
    messages.push({ role: "assistant", content: msg.content ?? null, tool_calls: msg.tool_calls });
    for (const c of msg.tool_calls) {
      calls.push(c.function.name);
      messages.push({ role: "tool", tool_call_id: c.id, content: '{"ok":true}' });
    }
  }
  throw new Error("agent did not finish in 10 turns");
}

// withOpenAIResponses is withOpenAI on the Responses API: flat tools, the
// output items resent as they came (reasoning included), a
// function_call_output per call.
async function withOpenAIResponses(task) {
  const oa = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const tools = catalog.map((t) => ({ type: "function", name: t.function.name, description: t.function.description, parameters: t.function.parameters ?? { type: "object", properties: {} }, strict: false }));
  const input = [{ role: "user", content: task.prompt }];
  const calls = [];
  let promptTokens = 0;
  for (let turn = 0; turn < 10; turn++) {
    const params = { model: "gpt-test", instructions: "You are a helpful agent.", input, tools };
    const resp = stream ? await oa.responses.stream(params).finalResponse() : await oa.responses.create(params);
    promptTokens += resp.usage?.input_tokens ?? 0;
    const fcs = resp.output.filter((it) => it.type === "function_call");
    if (fcs.length === 0) {
      return { name: task.name, calls, answer: resp.output_text, promptTokens };
    }
    input.push(...resp.output);
    for (const c of fcs) {
      calls.push(c.name);
      input.push({ type: "function_call_output", call_id: c.call_id, output: '{"ok":true}' });
    }
  }
  throw new Error("agent did not finish in 10 turns");
}

// withAnthropic is the agent on Anthropic's own SDK, as its tool-use docs
// write one: tools as {name, description, input_schema}, thinking on, a loop
// while the model stops for tool_use that sends the assistant message back
// as it came (its signed thinking included) and a user message of
// tool_result blocks. The SDK appends /v1/messages to its base URL.
async function withAnthropic(task) {
  const an = new Anthropic({ baseURL: baseURL.replace(/\/v1\/?$/, ""), apiKey, maxRetries: 0 });
  const tools = catalog.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters ?? { type: "object", properties: {} } }));
  const messages = [{ role: "user", content: task.prompt }];
  const calls = [];
  let promptTokens = 0;
  for (let turn = 0; turn < 10; turn++) {
    const params = { model: anthropicModel, max_tokens: 4096, thinking: { type: "enabled", budget_tokens: 1024 }, system: "You are a helpful agent.", messages, tools };
    const msg = stream ? await an.messages.stream(params).finalMessage() : await an.messages.create(params);
    promptTokens += msg.usage?.input_tokens ?? 0;
    if (msg.stop_reason !== "tool_use") {
      const answer = msg.content.filter((b) => b.type === "text").map((b) => b.text).join("");
      return { name: task.name, calls, answer, promptTokens };
    }
    messages.push({ role: "assistant", content: msg.content });
    const results = [];
    for (const b of msg.content) {
      if (b.type !== "tool_use") continue;
      calls.push(b.name);
      results.push({ type: "tool_result", tool_use_id: b.id, content: '{"ok":true}' });
    }
    messages.push({ role: "user", content: results });
  }
  throw new Error("agent did not finish in 10 turns");
}

// withAI is the agent on the ai package, over OpenAI's Chat Completions
// (api "chat") or Responses API ("responses"), or Anthropic's Messages API
// ("anthropic", its base URL ending in /v1, thinking on).
async function withAI(task, api) {
  const provider = api === "anthropic" ? createAnthropic({ baseURL, apiKey }) : createOpenAI({ baseURL, apiKey });
  const calls = [];
  const tools = {};
  for (const t of catalog) {
    const fn = t.function;
    tools[fn.name] = tool({
      description: fn.description,
      inputSchema: jsonSchema(fn.parameters ?? { type: "object", properties: {} }),
      execute: async () => {
        calls.push(fn.name);
        return { ok: true };
      },
    });
  }
  const opts = {
    model: api === "anthropic" ? provider.messages(anthropicModel) : api === "responses" ? provider.responses("gpt-test") : provider.chat("gpt-test"),
    system: "You are a helpful agent.",
    prompt: task.prompt,
    tools,
    stopWhen: stepCountIs(10),
    maxRetries: 0,
  };
  if (api === "anthropic") {
    opts.providerOptions = { anthropic: { thinking: { type: "enabled", budgetTokens: 1024 } } };
  }
  if (stream) {
    const r = streamText(opts);
    let text = "";
    for await (const part of r.textStream) text += part;
    const usage = await r.totalUsage;
    const steps = await r.steps;
    return { name: task.name, calls, answer: steps[steps.length - 1].text, promptTokens: usage.inputTokens ?? 0 };
  }
  const r = await generateText(opts);
  return { name: task.name, calls, answer: r.text, promptTokens: r.totalUsage?.inputTokens ?? 0 };
}

for (const task of tasks) {
  const out =
    client === "ai" ? await withAI(task, "chat")
    : client === "ai-responses" ? await withAI(task, "responses")
    : client === "ai-anthropic" ? await withAI(task, "anthropic")
    : client === "anthropic" ? await withAnthropic(task)
    : client === "openai-responses" ? await withOpenAIResponses(task)
    : client === "openai" ? await withOpenAI(task)
    : (() => { throw new Error(`unknown client ${client}`); })();
  console.log(JSON.stringify(out));
}
