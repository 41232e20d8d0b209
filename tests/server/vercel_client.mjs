// Drives ai_utils' Vercel AI routes with the real AI SDK client (`ai` 7: the Chat core behind useChat, its
// DefaultChatTransport, readUIMessageStream) and prints a JSON report.
//
//   node vercel_client.mjs '{"base": "http://127.0.0.1:PORT", "token": "...", "api": "/vercel" | "/sessions", "modules": {...}}'
//
// A turn with a tool call that waits for approval, the approval answered through addToolApprovalResponse (the
// Chat sends it on its own: sendAutomaticallyWhen), a turn that fails after its first chunk, a request the
// server refuses, and (sessions) a reconnect read with readUIMessageStream.
const config = JSON.parse(process.argv[2]);
const {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  readUIMessageStream,
} = await import(config.modules.ai);
const headers = { authorization: `Bearer ${config.token}` };
const api = `${config.base}${config.api}`;

class State {
  status = "ready";
  error = undefined;
  messages = [];
  pushMessage = (message) => { this.messages = this.messages.concat(message); };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = (value) => structuredClone(value);
}

class Chat extends AbstractChat {
  constructor(options) {
    super({ ...options, state: new State() });
  }

  get messages() {
    return this.state.messages;
  }
}

function newChat(id, token = config.token) {
  const log = { finished: [], data: [], errors: [] };
  const chat = new Chat({
    id,
    transport: new DefaultChatTransport({ api, headers: { authorization: `Bearer ${token}` } }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onFinish: ({ message, finishReason, isError }) => log.finished.push({ id: message.id, finishReason, isError }),
    onData: (part) => log.data.push(part),
    onError: (error) => log.errors.push(String(error?.message ?? error)),
  });
  return { chat, log };
}

function snapshot({ chat, log }) {
  return structuredClone({ status: chat.status, error: chat.error ? String(chat.error.message) : null, messages: chat.messages, ...log });
}

async function settle(chat, finishedCount, log) {
  const deadline = Date.now() + 30000;
  while ((log.finished.length < finishedCount || chat.status === "submitted" || chat.status === "streaming") && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const report = {};
const session = newChat(config.chatId);
await session.chat.sendMessage({ text: "mail Anna about the meeting" });
report.first = snapshot(session);

const asking = session.chat.messages.at(-1).parts.find((part) => part.state === "approval-requested");
await session.chat.addToolApprovalResponse({ id: asking.approval.id, approved: true });
await settle(session.chat, 2, session.log);
report.second = snapshot(session);

await session.chat.sendMessage({ text: "boom" });
await settle(session.chat, 3, session.log);
report.failing = snapshot(session);

const stranger = newChat(`${config.chatId}-stranger`, "wrong");
await stranger.chat.sendMessage({ text: "hi" });
report.refused = snapshot(stranger);

const intruder = newChat(config.chatId, "bob-token");
await intruder.chat.sendMessage({ text: "hi" });
report.foreign = snapshot(intruder);

if (config.api === "/sessions") {
  // No turn runs now: the AI SDK's reconnect (GET {api}/{id}/stream) gets 204, i.e. nothing to resume.
  const transport = new DefaultChatTransport({ api, headers });
  report.idleReconnect = await transport.reconnectToStream({ chatId: config.chatId });
  // From a cursor: the stored log, read with the SDK's own stream reader.
  const replaying = new DefaultChatTransport({
    api,
    headers,
    prepareReconnectToStreamRequest: ({ id }) => ({ api: `${api}/${id}/stream?cursor=${config.cursor}` }),
  });
  const stream = await replaying.reconnectToStream({ chatId: config.chatId });
  const states = [];
  for await (const message of readUIMessageStream({ stream })) states.push(message);
  report.replay = { count: states.length, message: states.at(-1) };
}
console.log(JSON.stringify(report));
