//! Command-line interface.

mod bench;
mod client;
mod db;
mod demo;
mod doctor;
mod hook;
mod hook_http;
mod hook_outage;
mod hooks_install;
mod mcp;
mod names;
mod node;
mod node_workspaces;
mod serve;
mod setup;
mod upstream;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// `sessionwatch --version`: the package version and the commit it was built from (build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("SESSIONWATCH_COMMIT"), ")");

#[derive(Parser)]
#[command(name = "sessionwatch", version = VERSION, about = "Session state awareness for multi-agent AI gateways")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Serve(serve::ServeArgs),
    /// Tell the demo story on a temporary gateway: a spawn, twenty human turns, one notice, a reconcile.
    Demo {
        /// Print the machine-readable wire shapes only.
        #[arg(long)]
        json: bool,
        /// Keep the demo gateway running afterwards and print a login link to its dashboard (Ctrl-C ends).
        #[arg(long)]
        open: bool,
    },
    /// Serve the session tools over MCP on stdio, as one caller session.
    Mcp(mcp::McpArgs),
    /// Work on a signal-log database directly (no gateway needed).
    Db(db::DbArgs),
    /// List the Claude Code, Codex, OpenCode, Pi and Gemini CLI sessions on this machine (read-only, local); with
    /// --all, those of the running gateway's machine and of every remote node (through the gateway).
    Catalog {
        /// Ask the running gateway: its machine's sessions and its nodes'.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        conn: client::Conn,
    },
    /// Adopt a catalog session through the running gateway (`POST /v1/catalog/continue`).
    Adopt {
        /// claude, codex, opencode or pi.
        catalog: String,
        /// The native session id (see `sessionwatch catalog`).
        thread: String,
        /// The owning agent (default main): the key is `agent:<agent>:<catalog>:<thread>`.
        #[arg(long)]
        agent: Option<String>,
        /// The session lives on this remote node: the key is `agent:<agent>:<catalog>@<node>:<thread>`.
        #[arg(long)]
        node: Option<String>,
        #[command(flatten)]
        conn: client::Conn,
    },
    /// Run one upstream monitor tick on the running gateway now (`POST /v1/monitor/tick`).
    MonitorTick {
        #[command(flatten)]
        conn: client::Conn,
    },
    /// Watch this machine's agent sessions for a central gateway (a remote node; see `nodes add`).
    Node(node::NodeArgs),
    /// Issue, list or revoke remote node tokens on the running gateway.
    #[command(subcommand)]
    Nodes(client::NodesCommand),
    /// Run by Claude Code and Codex hooks: forwards the hook's stdin to the gateway and prints the
    /// answer (notices as additionalContext, a Stop block). Never fails the agent: exit 0 always.
    Hook(hook::HookArgs),
    /// Install, remove or show sessionwatch's hooks in Claude Code's or Codex's settings.
    #[command(subcommand)]
    Hooks(hooks_install::HooksCommand),
    /// Set up this machine: the gateway as a user service, and for every agent CLI found its hooks, its
    /// MCP server, Claude's tool permission and Codex's hook trust (idempotent; --undo removes it all).
    Setup(setup::SetupArgs),
    /// Check the whole chain, one row per check with its fix: gateway, token, database, service, and per
    /// CLI its version, hooks, trust, MCP entry and a synthetic hook round trip. Exit 1 if any fails.
    Doctor(doctor::DoctorArgs),
    /// Benchmarks (kernel, gateway, upstream); one JSON object per figure with --json.
    Bench(bench::BenchArgs),
    /// Talk to a running gateway: tools and host calls.
    #[command(flatten)]
    Client(client::ClientCommand),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let hook = matches!(cli.command, Command::Hook(_));
    // A hook process makes one request and exits: worker threads would only cost it their start.
    let mut builder = if hook {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Demo { json, open } => demo::run(json, open).await,
            Command::Db(args) => db::run(args).await,
            Command::Catalog { all: false, conn } => upstream::catalog(conn.json),
            Command::Catalog { all: true, conn } => upstream::catalog_all(conn).await,
            Command::Adopt { catalog, thread, agent, node, conn } => {
                upstream::adopt(catalog, thread, agent, node, conn).await
            }
            Command::Node(args) => node::run(args).await,
            Command::Nodes(cmd) => client::nodes(cmd).await,
            Command::MonitorTick { conn } => upstream::monitor_tick(conn).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Mcp(args) => mcp::run(args).await,
            Command::Hook(args) => hook::run(args).await,
            Command::Hooks(cmd) => hooks_install::run(cmd),
            Command::Setup(args) => setup::run(args),
            Command::Doctor(args) => doctor::run(args).await,
            Command::Client(c) => client::run(c).await,
        }
    });
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    };
    if hook {
        exit_now(code);
    }
    code
}

/// Ends a hook process as soon as its answer is written. What a normal exit does next is work for a
/// process about to vanish, on the wall time of every prompt and tool call: mimalloc, linked in
/// statically, collects every page it holds at exit (28 `madvise` calls for one hook), and the runtime
/// is torn down.
fn exit_now(code: ExitCode) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: `_exit` ends the process without running exit handlers or destructors; the only buffered
    // output, stdout's, is flushed above, and every file the hook writes is written and closed by now.
    unsafe { libc::_exit(if code == ExitCode::SUCCESS { 0 } else { 1 }) }
}

/// Logs go to stderr (stdout carries results and, for MCP, the protocol).
pub fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SESSIONWATCH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

pub fn default_data_dir() -> PathBuf {
    sessionwatch_server::config::default_data_dir()
}

/// A client's gateway URL and data dir (`discovery::ClientContext`); what it skipped on the way (a stale
/// or malformed runtime file, an unreadable config) is said on stderr, never fatal.
pub fn resolve_gateway(
    context: sessionwatch_server::discovery::ClientContext,
) -> sessionwatch_server::discovery::ClientGateway {
    let found = context.resolve();
    for w in &found.url.warnings {
        eprintln!("warning: {w}");
    }
    tracing::debug!(url = %found.url.url, source = %found.url.source, "gateway URL");
    found
}

/// The connection flags of a client command, as the resolution's input.
pub fn client_context(
    url: Option<String>,
    data_dir: Option<PathBuf>,
) -> sessionwatch_server::discovery::ClientContext {
    sessionwatch_server::discovery::ClientContext {
        flag: url.map(|u| (u, "--url".to_string())),
        data_dir,
        config: None,
    }
}

#[cfg(test)]
mod tests {
    /// Every subcommand's arguments are well formed (clap checks names and flags only when asked).
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
