// Drives ai_utils' AG-UI routes with the real AG-UI client (@ag-ui/client's HttpAgent) and prints a JSON report.
//
//   node ag_ui_client.mjs '{"base": "http://127.0.0.1:PORT", "token": "...", "scenario": "agent" | "session", "modules": {...}}'
//
// "agent": a turn with a tool call that waits for approval, its resume, a run that fails after its first
// event, and a request the server refuses before streaming. "session": the same turn against durable
// session routes, then a fresh client that reconnects to the session's log (connectAgent) from a cursor.
const config = JSON.parse(process.argv[2]);
const { HttpAgent, runHttpRequest, transformHttpEventStream } = await import(config.modules.agui);
const headers = { authorization: `Bearer ${config.token}` };

function recorder() {
  const events = [];
  return { events, subscriber: { onEvent: ({ event }) => { events.push(event); } } };
}

function summary(agent, events) {
  return {
    types: events.map((e) => e.type),
    events,
    pending: agent.pendingInterrupts,
    messages: agent.messages,
  };
}

async function run(agent, input) {
  const { events, subscriber } = recorder();
  try {
    const result = await agent.runAgent(input, subscriber);
    return { ok: true, result: result.result ?? null, ...summary(agent, events) };
  } catch (error) {
    return { ok: false, error: String(error?.message ?? error), status: error?.status ?? null, ...summary(agent, events) };
  }
}

async function agentScenario() {
  const url = `${config.base}/agui`;
  const agent = new HttpAgent({ url, headers, threadId: "thread-agui-1" });
  agent.addMessage({ id: "u1", role: "user", content: "mail Anna about the meeting" });
  const first = await run(agent, {});
  const resume = first.pending.map((i) => ({ interruptId: i.id, status: "resolved", payload: { approved: true } }));
  const second = await run(agent, { resume });

  agent.addMessage({ id: "u2", role: "user", content: "boom" });
  const failing = await run(agent, {});

  const stranger = new HttpAgent({ url, headers: { authorization: "Bearer wrong" }, threadId: "thread-agui-2" });
  stranger.addMessage({ id: "u1", role: "user", content: "hi" });
  const refused = await run(stranger, {});

  const intruder = new HttpAgent({ url, headers: { authorization: "Bearer bob-token" }, threadId: "thread-agui-1" });
  intruder.addMessage({ id: "u9", role: "user", content: "hi" });
  const foreign = await run(intruder, {});
  return { first, second, failing, refused, foreign };
}

class Reconnecting extends HttpAgent {
  // AG-UI's connectAgent() reads a run the client did not start; here: the session's stored log from a cursor.
  constructor(options, cursor) {
    super(options);
    this.cursor = cursor;
  }

  connect() {
    const url = `${config.base}/sessions/${this.threadId}/stream?cursor=${this.cursor}`;
    return transformHttpEventStream(runHttpRequest(() => fetch(url, { headers })), this.debugLogger);
  }
}

async function sessionScenario() {
  const threadId = "s-agui-1";
  const agent = new HttpAgent({ url: `${config.base}/sessions`, headers, threadId });
  agent.addMessage({ id: "m-1", role: "user", content: "mail Anna about the meeting" });
  const first = await run(agent, {});
  const resume = first.pending.map((i) => ({ interruptId: i.id, status: "resolved", payload: { approved: true } }));
  const second = await run(agent, { resume });

  const replays = {};
  for (const cursor of [0, config.cursor]) {
    const fresh = new Reconnecting({ url: `${config.base}/sessions`, headers, threadId }, cursor);
    const { events, subscriber } = recorder();
    await fresh.connectAgent({}, subscriber);
    replays[cursor] = summary(fresh, events);
  }
  return { first, second, replays };
}

const report = config.scenario === "agent" ? await agentScenario() : await sessionScenario();
console.log(JSON.stringify(report));
