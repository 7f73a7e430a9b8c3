// A scripted model: an OpenAI-compatible chat-completions endpoint on 127.0.0.1 that answers
// each request with the next step of a script (tool calls, then a final text), and records what
// OpenClaw sent back (the tool results) for the tests to read. Nothing leaves the machine.
import http from "node:http";

/**
 * steps: [{ tools: [{ name, args }] } | { text }]. A step may be a function of the request's
 * messages, called when it is reached (to act between turns, e.g. stop a session).
 */
export async function startScriptedModel() {
  let script = [];
  let requests = [];
  const server = http.createServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    if (req.method === "GET" && req.url.endsWith("/models")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "scripted", object: "model" }] }));
      return;
    }
    if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
      res.writeHead(404).end();
      return;
    }
    const request = JSON.parse(body);
    requests.push(request);
    const turn = (request.messages ?? []).filter((m) => m.role === "assistant").length;
    let step = script[turn] ?? { text: "done" };
    if (typeof step === "function") step = (await step(request.messages)) ?? { text: "done" };
    const id = `chatcmpl-${requests.length}`;
    const toolCalls = (step.tools ?? []).map((t, i) => ({
      index: i,
      id: `c${turn}t${i}`,
      type: "function",
      function: { name: t.name, arguments: JSON.stringify(t.args ?? {}) },
    }));
    const finish = toolCalls.length ? "tool_calls" : "stop";
    const usage = { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 };
    if (request.stream) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      const base = { id, object: "chat.completion.chunk", created: 0, model: request.model };
      if (toolCalls.length) {
        send({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: null, tool_calls: toolCalls }, finish_reason: null }] });
      } else {
        send({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: step.text ?? "" }, finish_reason: null }] });
      }
      send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }], usage });
      res.write("data: [DONE]\n\n");
      res.end();
    } else {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id,
          object: "chat.completion",
          created: 0,
          model: request.model,
          choices: [
            {
              index: 0,
              message: toolCalls.length
                ? { role: "assistant", content: null, tool_calls: toolCalls.map(({ index, ...c }) => c) }
                : { role: "assistant", content: step.text ?? "" },
              finish_reason: finish,
            },
          ],
          usage,
        }),
      );
    }
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    /** Sets the script of the next agent turn and forgets what was recorded. */
    reset(steps) {
      script = steps;
      requests = [];
    },
    get requests() {
      return requests;
    },
    /** The tool names OpenClaw offered in its first request. */
    offeredTools() {
      return (requests[0]?.tools ?? []).map((t) => t.function?.name ?? t.name);
    },
    /** The system prompt of the first request (system or developer messages). */
    systemPrompt() {
      return (requests[0]?.messages ?? [])
        .filter((m) => m.role === "system" || m.role === "developer")
        .map((m) => (typeof m.content === "string" ? m.content : (m.content ?? []).map((c) => c.text ?? "").join("")))
        .join("\n");
    },
    /** Tool results OpenClaw sent back, by call id ("cTURNtINDEX"), as text. */
    toolResults() {
      const out = {};
      for (const r of requests) {
        for (const m of r.messages ?? []) {
          if (m.role !== "tool") continue;
          out[m.tool_call_id] = typeof m.content === "string" ? m.content : (m.content ?? []).map((c) => c.text ?? "").join("");
        }
      }
      return out;
    },
    close: () => new Promise((r) => server.close(r)),
  };
}
