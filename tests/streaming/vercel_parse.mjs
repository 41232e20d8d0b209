// Parses an SSE body the way the AI SDK's DefaultChatTransport does (parseJsonEventStream + uiMessageChunkSchema)
// and builds the message with readUIMessageStream; prints {chunks: [{success, value|error}], message, errors}.
//
//   node vercel_parse.mjs '{"modules": {"ai": "file:///..."}, "body": "data: {...}\n\n..."}'
const config = JSON.parse(process.argv[2]);
const { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } = await import(config.modules.ai);

function bodyStream() {
  return new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(config.body));
      controller.close();
    },
  });
}

const chunks = [];
for await (const result of parseJsonEventStream({ stream: bodyStream(), schema: uiMessageChunkSchema })) {
  chunks.push(result.success ? { success: true, value: result.value } : { success: false, error: String(result.error) });
}
const valid = chunks.filter((c) => c.success).map((c) => c.value);
const errors = [];
let message = null;
const stream = new ReadableStream({
  start(controller) {
    for (const chunk of valid) controller.enqueue(chunk);
    controller.close();
  },
});
for await (const state of readUIMessageStream({ stream, onError: (e) => errors.push(String(e?.message ?? e)) })) {
  message = state;
}
console.log(JSON.stringify({ chunks, message, errors }));
