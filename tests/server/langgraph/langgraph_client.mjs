// Drives ai_utils' LangGraph API with the real JS client (@langchain/langgraph-sdk's Client) and prints a JSON report.
//
//   node langgraph_client.mjs '{"url": "http://127.0.0.1:PORT", "apiKey": "...", "modules": {"langgraph": "file:///.../index.js"}}'
//
// A thread, a streamed run whose tool call waits for approval (values, updates, messages-tuple), the interrupt
// read as useStream reads it (`values.__interrupt__`), the run resumed with `command: {resume: ...}`, the
// thread's history as useStream fetches it (the resume names the head checkpoint, as useStream does), and a rejoin of the first run (joinStream with lastEventId).
const config = JSON.parse(process.argv[2]);
const { Client } = await import(config.modules.langgraph);
const client = new Client({ apiUrl: config.url, apiKey: config.apiKey });

async function collect(stream) {
  const events = [];
  for await (const { event, data, id } of stream) events.push({ event, data, id: id ?? null });
  return events;
}

let runId = null;
const thread = await client.threads.create({ metadata: { from: "js" } });
const first = await collect(
  client.runs.stream(thread.thread_id, "support", {
    input: { messages: [{ type: "human", content: "refund J-1" }] },
    streamMode: ["values", "updates", "messages-tuple"],
    onRunCreated: (meta) => { runId = meta.run_id; },
  }),
);
const values = first.filter((e) => e.event === "values").map((e) => e.data);
const interrupt = values.at(-1).__interrupt__;
const stateWhileWaiting = await client.threads.getState(thread.thread_id);

// useStream with fetchStateHistory sends the thread head's checkpoint (without thread_id) with every run.
const head = { ...stateWhileWaiting.checkpoint };
delete head.thread_id;
const second = await collect(
  client.runs.stream(thread.thread_id, "support", {
    command: { resume: { decisions: [{ type: "approve" }] } },
    streamMode: ["values", "messages-tuple"],
    checkpoint: head,
    onDisconnect: "cancel",
  }),
);
const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
const lastId = first.find((e) => e.event === "messages")?.id;
const rejoined = await collect(client.runs.joinStream(thread.thread_id, runId, { lastEventId: lastId, streamMode: ["values", "updates", "messages-tuple"] }));

let refused = null;
try {
  await client.runs.wait(thread.thread_id, "nobody", { input: { messages: [{ type: "human", content: "hi" }] } });
} catch (error) {
  refused = { status: error.status ?? null, message: String(error.message ?? error) };
}

console.log(JSON.stringify({
  threadId: thread.thread_id,
  runId,
  firstEvents: first.map((e) => e.event),
  firstIds: first.map((e) => e.id),
  interrupt,
  stateWhileWaiting: { next: stateWhileWaiting.next, tasks: stateWhileWaiting.tasks.map((t) => t.interrupts.length) },
  secondEvents: second.map((e) => e.event),
  finalMessages: second.filter((e) => e.event === "values").at(-1).data.messages,
  tokens: second.filter((e) => e.event === "messages" && e.data[0].type === "AIMessageChunk").map((e) => e.data[0].content),
  historyLength: history.length,
  historyHead: history[0].values.messages.at(-1),
  rejoinedEvents: rejoined.map((e) => e.event),
  rejoinedIds: rejoined.map((e) => e.id),
  refused,
}));
