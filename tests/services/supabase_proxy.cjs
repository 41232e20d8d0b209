// The tests' stand-in for Supabase's API gateway (Kong): forwards `/rest/v1/...` to PostgREST at `/...`.
// Started and stopped by tests/_supabase.py (`start_supabase`); it runs in its own process, as Kong does,
// so it never competes with the measured Python client for the GIL.
//
//   node supabase_proxy.cjs <postgrest port>
//
// Listens on a free 127.0.0.1 port and prints it as the first line of stdout. Request bodies are
// buffered and forwarded with a Content-Length (as the former in-process proxy did); hop-by-hop headers
// are dropped both ways. Upstream connections are kept alive, like Kong's upstream keepalive pool. The
// apikey / Authorization headers pass through unchanged: PostgREST checks the JWT. The proxy exits when
// its stdin closes, so it never outlives the Python process that started it.
"use strict";
const http = require("node:http");

const upstreamPort = Number(process.argv[2]);
if (!Number.isInteger(upstreamPort) || upstreamPort <= 0) {
  console.error("usage: node supabase_proxy.cjs <postgrest port>");
  process.exit(2);
}

const HOP_HEADERS = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "host", "content-length"]);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64, noDelay: true });

function withoutHopHeaders(raw) {
  // Raw [name, value, name, value, ...] keeps repeated headers (e.g. Set-Cookie) and their spelling.
  const out = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (!HOP_HEADERS.has(raw[i].toLowerCase())) out.push([raw[i], raw[i + 1]]);
  }
  return out;
}

function upstreamPath(url) {
  const path = url.startsWith("/rest/v1") ? url.slice("/rest/v1".length) : url;
  return path.startsWith("/") ? path : `/${path}`;
}

const server = http.createServer({ noDelay: true, keepAliveTimeout: 60_000 }, (req, res) => {
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const headers = withoutHopHeaders(req.rawHeaders);
    if (body.length > 0 || !["GET", "HEAD", "DELETE", "OPTIONS"].includes(req.method)) {
      headers.push(["Content-Length", String(body.length)]);
    }
    headers.push(["Host", `127.0.0.1:${upstreamPort}`]);
    const upstream = http.request(
      { host: "127.0.0.1", port: upstreamPort, method: req.method, path: upstreamPath(req.url), headers: headers.flat(), agent },
      (answer) => {
        const parts = [];
        answer.on("data", (chunk) => parts.push(chunk));
        answer.on("end", () => {
          const data = Buffer.concat(parts);
          const out = withoutHopHeaders(answer.rawHeaders);
          out.push(["Content-Length", String(data.length)]);
          res.writeHead(answer.statusCode, answer.statusMessage, out.flat());
          res.end(data);
        });
        answer.on("error", (error) => fail(res, error));
      },
    );
    upstream.on("error", (error) => fail(res, error));
    upstream.end(body);
  });
});

function fail(res, error) {
  if (res.headersSent) {
    res.destroy(error);
    return;
  }
  const data = Buffer.from(JSON.stringify({ message: `supabase proxy: upstream failed: ${error.message}` }));
  res.writeHead(502, { "Content-Type": "application/json", "Content-Length": String(data.length) });
  res.end(data);
}

server.listen({ host: "127.0.0.1", port: 0 }, () => {
  process.stdout.write(`${server.address().port}\n`);
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
process.on("SIGTERM", () => process.exit(0));
