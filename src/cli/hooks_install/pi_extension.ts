// sessionwatch extension for Pi (sessionwatch-pi-extension): written by `sessionwatch hooks install pi`, removed by `sessionwatch hooks uninstall pi`.
//
// Pi (@mariozechner/pi-coding-agent 0.73) loads this file at start-up with no build step; its only imports
// are Node built-ins. Every handler calls the sessionwatch gateway (`POST /v1/hooks`, `cli: "pi"`, the
// same body `sessionwatch hook` posts for Claude Code, Codex and Gemini CLI) with a 1 s time limit and
// catches everything: a gateway that is down, slow or refusing never changes what Pi does.
//
//   session_start       adopts the session (`agent:<agent>:pi:<session id>`, as `catalog continue` does);
//                       a new session's file exists only after the first reply, so it is linked then.
//   input               notes whether the prompt was typed by a human: source "interactive" (the TUI,
//                       and `pi -p`: a human at a shell too). "rpc" and "extension" are not.
//   before_agent_start  takes the session's pending notices (acknowledged, as a turn does) and returns
//                       them as a message the model sees after the prompt (customType "sessionwatch",
//                       display false).
//   message_start       (the typed user message) records the human prompt at once; its turn id is the
//                       message's timestamp, which the session file stores as `message.timestamp`, so the
//                       file monitor derives the same dedupe key and the prompt counts once.
//   tool_result         appends notices that arrived during the turn to the tool's result (mid-turn).
//   agent_end           links a new session to its file, now written.
//   session_shutdown    tells the gateway the session ended.
// While Pi waits for its user (TUI, rpc), one live-stream connection (`GET /v1/stream`, unref'd, reconnecting
// with backoff) learns of a new notice; it is taken at once and queued with
// `pi.sendMessage(…, {deliverAs: "nextTurn"})` (shown in the TUI, sent with the next prompt). `pi -p` opens
// no stream.
//
// Where the gateway is: $SESSIONWATCH_URL, else the running gateway's runtime file `<data dir>/gateway.json`,
// else CONFIG.url (resolved at install time). The token: $SESSIONWATCH_TOKEN, else `<data dir>/token`.
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import { join } from "node:path";

const CONFIG: { agentId: string | null; dataDir: string; url: string } = /* sessionwatch:config */ {"agentId":null,"dataDir":"/nonexistent","url":"http://127.0.0.1:7420"};
const CALL_TIMEOUT_MS = 1000;
const STREAM_BACKOFF_MS = [1000, 2000, 5000, 10000, 30000, 60000];

type Reply = { sessionKey?: string; additionalContext?: string | null; recorded?: boolean };

// $SESSIONWATCH_PI_DEBUG names a file that gets one line per gateway call and its outcome.
function debug(what: string, data: unknown) {
  const file = process.env.SESSIONWATCH_PI_DEBUG;
  if (!file) return;
  try { appendFileSync(file, JSON.stringify({ t: Date.now(), what, data }) + "\n"); } catch {}
}

function dataDir(): string {
  return process.env.SESSIONWATCH_DATA_DIR || CONFIG.dataDir;
}

function processAlive(pid: unknown): boolean {
  if (typeof pid !== "number") return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e: any) {
    return e?.code === "EPERM";
  }
}

function gatewayUrl(): string {
  const trim = (u: string) => u.replace(/\/+$/, "");
  if (process.env.SESSIONWATCH_URL) return trim(process.env.SESSIONWATCH_URL);
  try {
    const runtime = JSON.parse(readFileSync(join(dataDir(), "gateway.json"), "utf8"));
    if (typeof runtime.url === "string" && /^https?:\/\//.test(runtime.url) && processAlive(runtime.pid)) {
      return trim(runtime.url);
    }
  } catch {}
  return trim(CONFIG.url);
}

function headers(): Record<string, string> {
  const h: Record<string, string> = {};
  let token = process.env.SESSIONWATCH_TOKEN;
  if (!token) {
    try {
      token = readFileSync(join(dataDir(), "token"), "utf8").trim();
    } catch {}
  }
  if (token) h.authorization = "Bearer " + token;
  return h;
}

// One hook call; resolves to the gateway's answer, or undefined on any failure. Never rejects.
function post(event: string, input: Record<string, unknown>): Promise<Reply | undefined> {
  return new Promise((resolve) => {
    let req: http.ClientRequest | undefined;
    let settled = false;
    const finish = (v: Reply | undefined) => {
      if (settled) return;
      settled = true;
      debug(event, { input, reply: v ?? null });
      clearTimeout(timer);
      resolve(v);
    };
    const timer = setTimeout(() => {
      finish(undefined);
      try { req?.destroy(); } catch {}
    }, CALL_TIMEOUT_MS);
    try {
      const url = new URL(gatewayUrl() + "/v1/hooks");
      const body: Record<string, unknown> = { cli: "pi", event, input: { ...input, hook_event_name: event } };
      if (CONFIG.agentId) body.agentId = CONFIG.agentId;
      const text = JSON.stringify(body);
      const h = { ...headers(), "content-type": "application/json", "content-length": String(Buffer.byteLength(text)) };
      req = (url.protocol === "https:" ? https : http).request(url, { method: "POST", headers: h, agent: false }, (res) => {
        let data = "";
        res.setEncoding("utf8");
        res.on("data", (d) => { data += d; });
        res.on("error", () => finish(undefined));
        res.on("end", () => {
          const ok = (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300;
          try { finish(ok ? JSON.parse(data) : undefined); } catch { finish(undefined); }
        });
      });
      req.on("error", () => finish(undefined));
      req.end(text);
    } catch {
      finish(undefined);
    }
  });
}

// The text of a user message's content (a string, or text blocks).
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((b: any) => b?.type === "text" && typeof b.text === "string").map((b: any) => b.text).join("\n");
}

export default function (pi: any) {
  let sm: any; // the session manager of the current session
  let cwd: string | undefined;
  let hasUI = false;
  let sessionKey: string | undefined;
  let linked = false; // the gateway has the session linked to its file
  let busy = false; // a turn is under way
  // Per prompt not yet seen as a user message, in order: typed by a human? (A prompt typed while Pi works
  // is queued as a steer and becomes a message later.)
  let typed: boolean[] = [];
  let noticeWaiting = false; // the stream announced a notice during a turn
  let stream: { close(): void } | undefined;

  const session = () => {
    const file = sm?.getSessionFile?.();
    const s: Record<string, unknown> = { session_id: sm?.getSessionId?.(), cwd };
    if (typeof file === "string" && existsSync(file)) s.transcript_path = file;
    return s;
  };
  const remember = (ctx: any) => {
    try {
      sm = ctx.sessionManager;
      cwd = ctx.cwd;
      hasUI = !!ctx.hasUI;
    } catch {}
  };

  // Adopts the session; links it once its file exists. Answers nothing, never throws.
  const adopt = async () => {
    if (linked) return;
    const input = session();
    const reply = await post("SessionStart", input);
    if (!reply) return;
    sessionKey = reply.sessionKey ?? sessionKey;
    linked = input.transcript_path !== undefined;
    if (hasUI && sessionKey && !stream) stream = openStream(sessionKey);
  };

  // A notice while Pi waits for its user: take it now and queue it for the next turn.
  const deliverIdle = async () => {
    if (busy) return;
    noticeWaiting = false;
    const reply = await post("BeforeAgent", session());
    const text = reply?.additionalContext;
    if (!text) return;
    try {
      pi.sendMessage({ customType: "sessionwatch", content: text, display: true }, { deliverAs: "nextTurn" });
    } catch {}
  };
  const onNotice = () => {
    if (busy) noticeWaiting = true;
    else void deliverIdle();
  };

  // The gateway's live stream for this session; reconnects with backoff, never keeps Pi alive.
  const openStream = (key: string) => {
    let closed = false;
    let attempt = 0;
    let current: http.ClientRequest | undefined;
    const connect = () => {
      if (closed) return;
      let retried = false;
      const retry = () => {
        if (retried || closed) return;
        retried = true;
        const wait = STREAM_BACKOFF_MS[Math.min(attempt++, STREAM_BACKOFF_MS.length - 1)];
        setTimeout(connect, wait).unref();
      };
      try {
        const url = new URL(gatewayUrl() + "/v1/stream?sessionKey=" + encodeURIComponent(key));
        current = (url.protocol === "https:" ? https : http).get(url, { headers: headers(), agent: false }, (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            res.on("end", retry);
            res.on("error", retry);
            return;
          }
          attempt = 0;
          let buf = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => {
            buf += d.replace(/\r/g, "");
            let end;
            while ((end = buf.indexOf("\n\n")) >= 0) {
              const block = buf.slice(0, end);
              buf = buf.slice(end + 2);
              if (/^event: ?notice$/m.test(block)) onNotice();
            }
            if (buf.length > 1 << 20) buf = "";
          });
          res.on("end", retry);
          res.on("error", retry);
        });
        current.on("socket", (s) => s.unref());
        current.on("error", retry);
      } catch {
        retry();
      }
    };
    connect();
    return { close() { closed = true; try { current?.destroy(); } catch {} } };
  };

  pi.on("session_start", async (_event: any, ctx: any) => {
    try {
      stream?.close();
      stream = undefined;
      sessionKey = undefined;
      linked = false;
      remember(ctx);
      await adopt();
    } catch {}
  });

  pi.on("input", (event: any, ctx: any) => {
    try {
      remember(ctx);
      typed.push(event?.source === "interactive");
    } catch {}
    return { action: "continue" };
  });

  pi.on("before_agent_start", async (_event: any, ctx: any) => {
    try {
      remember(ctx);
      busy = true;
      noticeWaiting = false;
      const reply = await post("BeforeAgent", session());
      const text = reply?.additionalContext;
      if (text) return { message: { customType: "sessionwatch", content: text, display: false } };
    } catch {}
  });

  pi.on("agent_start", () => { busy = true; });

  pi.on("message_start", async (event: any, ctx: any) => {
    try {
      const message = event?.message;
      if (message?.role !== "user" || !typed.shift()) return;
      remember(ctx);
      const prompt = textOf(message.content);
      if (!prompt.trim() || typeof message.timestamp !== "number") return;
      await post("UserPromptSubmit", { ...session(), prompt, turn_id: String(message.timestamp) });
    } catch {}
  });

  pi.on("tool_result", async (event: any, ctx: any) => {
    try {
      remember(ctx);
      noticeWaiting = false;
      // The path a file-writing tool names, for the workspace's files_changed; never its content.
      const path = typeof event?.input?.path === "string" ? event.input.path : undefined;
      const reply = await post("PostToolUse", {
        ...session(),
        tool_name: event?.toolName,
        tool_use_id: event?.toolCallId,
        tool_input: { path },
      });
      const text = reply?.additionalContext;
      if (text) return { content: [...(event?.content ?? []), { type: "text", text }] };
    } catch {}
  });

  pi.on("agent_end", async (_event: any, ctx: any) => {
    try {
      remember(ctx);
      busy = false;
      typed = []; // a prompt an extension handled, or refused, became no message
      await adopt();
      if (noticeWaiting && hasUI) await deliverIdle();
    } catch {}
  });

  pi.on("session_shutdown", async () => {
    try {
      stream?.close();
      stream = undefined;
      if (sm) await post("SessionEnd", session());
    } catch {}
  });
}
