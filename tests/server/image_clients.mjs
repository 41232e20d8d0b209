// Sends an image prompt to ai_utils' session (or agent) routes with the real clients and prints a JSON report:
// the AI SDK's Chat (sendMessage with an image file part) and AG-UI's HttpAgent (a user message with an image
// part whose source is base64 data).
//
//   node image_clients.mjs '{"base": "http://127.0.0.1:PORT", "token": "...", "png": "<base64>", "modules": {...}}'
// (optional "paths": {"vercel": "/...", "agui": "/..."}; default: the session test's paths)
const config = JSON.parse(process.argv[2]);
const { AbstractChat, DefaultChatTransport } = await import(config.modules.ai);
const { HttpAgent } = await import(config.modules.agui);
const headers = { authorization: `Bearer ${config.token}` };
const paths = config.paths ?? { vercel: "/vercel-sessions", agui: "/agui-sessions" };

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
}

async function vercel() {
  const chat = new Chat({
    id: "chat-image-1",
    transport: new DefaultChatTransport({ api: `${config.base}${paths.vercel}`, headers }),
  });
  await chat.sendMessage({
    text: "Was ist das (AI SDK)?",
    files: [{ type: "file", mediaType: "image/png", url: `data:image/png;base64,${config.png}` }],
  });
  const last = chat.state.messages.at(-1);
  return {
    status: chat.status,
    error: chat.error ? String(chat.error.message) : null,
    text: (last?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join(""),
  };
}

async function agUi() {
  const agent = new HttpAgent({ url: `${config.base}${paths.agui}`, headers, threadId: "thread-image-1" });
  agent.addMessage({
    id: "u-image-1",
    role: "user",
    content: [
      { type: "text", text: "Was ist das (AG-UI)?" },
      { type: "image", source: { type: "data", value: config.png, mimeType: "image/png" } },
    ],
  });
  const events = [];
  try {
    await agent.runAgent({}, { onEvent: ({ event }) => { events.push(event); } });
  } catch (error) {
    return { ok: false, error: String(error?.message ?? error), types: events.map((e) => e.type) };
  }
  const text = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
  return { ok: true, text, types: events.map((e) => e.type) };
}

console.log(JSON.stringify({ vercel: await vercel(), agui: await agUi() }));
