//! `geopriv-serve`: the collector (see the crate docs and docs/openapi.yaml).

#![forbid(unsafe_code)]

use clap::{Args, Parser, Subcommand};
use geopriv_server::http::{router, App, Limits, TaskState};
use geopriv_server::store::Store;
use geopriv_server::task::{self, Kind};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// An HTTP collector for geopriv reports: tasks, uploads with report ids
/// (each counted once), a durable SQLite store, the analyst API and a web
/// page.
///
/// `geopriv-serve --db collector.db --listen 127.0.0.1:8080 --tasks
/// tasks.toml --token-file token.txt`
#[derive(Parser, Debug)]
#[command(
    name = "geopriv-serve",
    version,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// SQLite database (created if missing; resumed if present).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Address to listen on (port 0: any free port; the address chosen is
    /// printed as `listening on ADDR`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Tasks file (JSON `{"tasks":[...]}` or TOML `[[tasks]]`).
    #[arg(long)]
    tasks: Option<PathBuf>,
    /// File holding the analysts' bearer token (at least 16 characters).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    max_body_bytes: usize,
    /// Most records per upload.
    #[arg(long, default_value_t = 1000)]
    max_batch: usize,
    /// Requests per second per client address.
    #[arg(long, default_value_t = 2000.0)]
    rate_limit: f64,
    /// Seconds to receive and answer one upload (408 above).
    #[arg(long, default_value_t = 10)]
    timeout: u64,
    /// Seconds for a request's head (request line and headers) to arrive,
    /// also between the requests of a keep-alive connection; a connection
    /// slower than that is closed without an answer (slowloris).
    #[arg(long, default_value_t = 10)]
    header_timeout: u64,
    /// Most connections open at once from one client address; more are
    /// closed at once.
    #[arg(long, default_value_t = 256)]
    max_connections_per_client: usize,
    /// Most reports the collector holds, over its served tasks. The
    /// duplicate check keeps each stored report id in memory, 19 to 39
    /// bytes per report (up to 58 while its table doubles): under 3.9 GB at
    /// the default. An upload that would go past it is answered 503 (nothing
    /// of it stored), as on a full disk.
    #[arg(long, default_value_t = geopriv_server::store::DEFAULT_MAX_REPORTS)]
    max_reports: u64,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Merge partial states (`GET /v1/tasks/{task}/state`) of one task from
    /// several collectors: prints per period one JSON object with the
    /// merged estimate line (value tasks: bit for bit `geopriv aggregate`
    /// on all their reports) or the merged `map` (map tasks: bit for bit
    /// `GET .../map` of one collector with all the reports).
    Merge {
        /// Tasks file (the task's definition must equal the states').
        #[arg(long)]
        tasks: PathBuf,
        /// Task id.
        #[arg(long)]
        task: String,
        /// State files.
        #[arg(required = true)]
        states: Vec<PathBuf>,
    },
    /// Load generator: uploads valid reports of a value task.
    Bench {
        /// Server host:port.
        #[arg(long)]
        addr: String,
        /// Tasks file.
        #[arg(long)]
        tasks: PathBuf,
        /// Task id (a value task).
        #[arg(long)]
        task: String,
        /// Reports per request.
        #[arg(long, default_value_t = 100)]
        batch: usize,
        /// Connections.
        #[arg(long, default_value_t = 8)]
        connections: usize,
        /// Target reports/s (0: as fast as possible).
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
        /// Seconds.
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        /// Retry failed batches with the same ids until acknowledged.
        #[arg(long)]
        retry: bool,
        /// Append acknowledged report ids here.
        #[arg(long)]
        ack_log: Option<PathBuf>,
        /// Send binary frames.
        #[arg(long)]
        binary: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("geopriv-serve: {e}");
            return ExitCode::from(2);
        }
    };
    let res = match cli.command {
        None => rt.block_on(serve(cli.serve)),
        Some(Command::Merge {
            tasks,
            task,
            states,
        }) => merge(&tasks, &task, &states),
        Some(Command::Bench {
            addr,
            tasks,
            task,
            batch,
            connections,
            rate,
            duration,
            retry,
            ack_log,
            binary,
        }) => (|| {
            let t = find(&tasks, &task)?;
            let Kind::Value {
                query, mechanism, ..
            } = t.kind
            else {
                return Err(format!("task {task} is not a value task"));
            };
            let cfg = geopriv_server::bench::BenchConfig {
                addr,
                task,
                query,
                mechanism,
                epsilon: t.def.epsilon,
                delta: t.def.delta,
                batch: batch.max(1),
                connections: connections.max(1),
                rate,
                duration: Duration::from_secs_f64(duration.max(0.0)),
                retry,
                ack_log,
                binary,
            };
            let r = rt.block_on(geopriv_server::bench::run(cfg));
            println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
            Ok(())
        })(),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("geopriv-serve: {e}");
            ExitCode::from(2)
        }
    }
}

fn find(tasks: &std::path::Path, id: &str) -> Result<task::Task, String> {
    task::load(tasks)?
        .into_iter()
        .find(|t| t.def.id == id)
        .ok_or_else(|| format!("no task {id} in {}", tasks.display()))
}

fn merge(tasks: &std::path::Path, id: &str, files: &[PathBuf]) -> Result<(), String> {
    let t = find(tasks, id)?;
    let mut states = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let s: TaskState =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        states.push(s);
    }
    if matches!(t.kind, Kind::Map { .. }) {
        for (start, n, map) in geopriv_server::merge_map_states(&t, &states)? {
            println!(
                "{}",
                serde_json::json!({"start": start, "n": n, "map": map})
            );
        }
        return Ok(());
    }
    for (start, n, line) in geopriv_server::merge_states(&t, &states)? {
        println!(
            "{}",
            serde_json::json!({"start": start, "n": n, "estimate_line": line})
        );
    }
    Ok(())
}

async fn serve(a: ServeArgs) -> Result<(), String> {
    let (Some(db), Some(tasks), Some(token_file)) = (a.db, a.tasks, a.token_file) else {
        return Err("serving needs --db, --tasks and --token-file (see --help)".into());
    };
    let tasks = task::load(&tasks)?;
    let token = std::fs::read_to_string(&token_file)
        .map_err(|e| format!("--token-file {}: {e}", token_file.display()))?
        .trim()
        .to_string();
    if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "--token-file: the token must be at least 16 printable ASCII characters".into(),
        );
    }
    let store = Store::open(&db, tasks, a.max_reports)?;
    let limits = Limits {
        max_body_bytes: a.max_body_bytes,
        max_batch: a.max_batch.max(1),
        rate_per_client: a.rate_limit,
        burst: (2.0 * a.rate_limit).max(1.0),
        timeout: Duration::from_secs(a.timeout.max(1)),
        ..Limits::default()
    };
    let app = router(App::new(store, token, limits));
    let listener = tokio::net::TcpListener::bind(&a.listen)
        .await
        .map_err(|e| format!("--listen {}: {e}", a.listen))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    println!("listening on {local}");
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let conn = geopriv_server::listen::ConnLimits {
        header_timeout: Duration::from_secs(a.header_timeout.max(1)),
        per_client: a.max_connections_per_client.max(1),
    };
    geopriv_server::listen::serve(listener, app, conn, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    .map_err(|e| e.to_string())
}
