// sessionwatch OpenCode plugin: written by `sessionwatch hooks install opencode`
// and removed by `sessionwatch hooks uninstall opencode`; a reinstall rewrites it (edit a copy under
// another name). The first line marks the file as sessionwatch's.
//
// Plain JavaScript with no import, no npm package and no build (OpenCode 1.18 loads every .js file in
// its plugins folder; every export must be a plugin function). For each session of this OpenCode
// process, its handlers post OpenCode's own hook arguments to the sessionwatch gateway
// (POST <gateway>/v1/hooks, {"cli":"opencode","event":<hook name>,"input":...}), which decides
// everything (docs/hooks.md):
//   chat.message        adopts the session, records a prompt typed into the TUI as a human turn (the
//                       gateway tells typed prompts from `opencode run`, API, synthetic and sub-agent
//                       ones), and answers the session's pending notices: added to the message as a
//                       synthetic text part after the prompt (the model sees it; the TUI does not).
//   tool.execute.after  pending notices that arrived during the tool call, appended to its output.
//   event               remembers which sessions are sub-agents' (session.created's parentID).
// The gateway: $SESSIONWATCH_URL, else the running gateway's runtime file <data dir>/gateway.json, else
// the address below; the token: $SESSIONWATCH_TOKEN, else <data dir>/token. Each call gives up after
// 1 s and every error is swallowed: a gateway that is down, or this plugin failing, never breaks OpenCode.
const SESSIONWATCH = __CONFIG__

const TIMEOUT_MS = 1000

async function readText(path) {
  try {
    if (typeof Bun !== "undefined") {
      const file = Bun.file(path)
      return (await file.exists()) ? await file.text() : null
    }
    const fs = process.getBuiltinModule && process.getBuiltinModule("node:fs")
    return fs ? fs.readFileSync(path, "utf8") : null
  } catch {
    return null
  }
}

// The runtime file of a gateway that was killed names a pid that is gone: then it is not used.
function isAlive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return e && e.code === "EPERM"
  }
}

async function gatewayUrl() {
  if (process.env.SESSIONWATCH_URL) return process.env.SESSIONWATCH_URL.replace(/\/+$/, "")
  try {
    const runtime = JSON.parse((await readText(SESSIONWATCH.dataDir + "/gateway.json")) || "null")
    if (runtime && typeof runtime.url === "string" && isAlive(runtime.pid)) return runtime.url.replace(/\/+$/, "")
  } catch {}
  return SESSIONWATCH.url
}

async function gatewayToken() {
  if (process.env.SESSIONWATCH_TOKEN) return process.env.SESSIONWATCH_TOKEN
  const text = await readText(SESSIONWATCH.dataDir + "/token")
  return text ? text.trim() : ""
}

// Posts one handler's arguments; resolves to the notices to deliver (or undefined). Never rejects.
async function post(event, input) {
  try {
    const body = { cli: "opencode", event, input }
    if (SESSIONWATCH.agentId) body.agentId = SESSIONWATCH.agentId
    const headers = { "content-type": "application/json" }
    const token = await gatewayToken()
    if (token) headers.authorization = "Bearer " + token
    const res = await fetch((await gatewayUrl()) + "/v1/hooks", {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
    if (!res.ok) return undefined
    const text = (await res.json()).additionalContext
    return typeof text === "string" && text.trim() ? text : undefined
  } catch {
    return undefined
  }
}

// OpenCode orders a message's parts by id: "prt_" + 12 hex digits (the low 48 bits of
// ms-timestamp * 4096 + a counter) + 14 base62 characters. Ours must sort after the prompt's part.
function partIdAfter(parts) {
  const mask = (1n << 48n) - 1n
  let n = (BigInt(Date.now()) * 4096n) & mask
  for (const p of parts) {
    const m = /^prt_([0-9a-f]{12})/.exec((p && p.id) || "")
    if (m && BigInt("0x" + m[1]) >= n) n = BigInt("0x" + m[1])
  }
  const abc = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
  let tail = ""
  for (let i = 0; i < 14; i++) tail += abc[Math.floor(Math.random() * 62)]
  return "prt_" + ((n + 1n) & mask).toString(16).padStart(12, "0") + tail
}

function databasePath() {
  if (process.env.OPENCODE_DB && process.env.OPENCODE_DB.startsWith("/")) return process.env.OPENCODE_DB
  const data = process.env.XDG_DATA_HOME || (process.env.HOME || "") + "/.local/share"
  return data + "/opencode/" + (process.env.OPENCODE_DB || "opencode.db")
}

export const SessionwatchPlugin = async ({ directory }) => {
  const parentOf = new Map() // a sub-agent's session id -> its parent's
  const common = (sessionID) => ({
    sessionID,
    argv: process.argv,
    directory,
    db: databasePath(),
    parentID: parentOf.get(sessionID),
  })
  return {
    event: async ({ event }) => {
      try {
        const info = event && event.properties && event.properties.info
        if (event.type === "session.created" && info && info.parentID) parentOf.set(info.id, info.parentID)
      } catch {}
    },

    "chat.message": async (input, output) => {
      try {
        const notice = await post("chat.message", {
          ...common(input.sessionID),
          messageID: input.messageID,
          agent: input.agent,
          message: output.message,
          parts: output.parts,
        })
        if (!notice) return
        output.parts.push({
          id: partIdAfter(output.parts),
          messageID: output.message.id,
          sessionID: input.sessionID,
          type: "text",
          synthetic: true,
          text: notice,
        })
      } catch {}
    },

    "tool.execute.after": async (input, output) => {
      try {
        const notice = await post("tool.execute.after", {
          ...common(input.sessionID),
          tool: input.tool,
          callID: input.callID,
          // The path a file-writing tool names, for the workspace's files_changed; never its content.
          tool_input: { filePath: typeof input.args?.filePath === "string" ? input.args.filePath : undefined },
        })
        if (notice && typeof output.output === "string") output.output += "\n\n" + notice
      } catch {}
    },
  }
}
