//! Managed servers: starts the target's `launch` command (no shell) with
//! its placeholders filled in, captures its output (redacted) into the
//! run's folder,
//! waits until its readiness path answers 200, records what it says about
//! itself, and stops it (SIGTERM to its process group, SIGKILL after the
//! grace period) when its group of points is done, on Ctrl-C, SIGTERM or
//! SIGHUP, on any error, and if this process dies (PR_SET_PDEATHSIG for the
//! server, a forked watchdog for everything in its process group), so no
//! server or server's child is left behind.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::context::Interrupt;
use crate::error::{LaunchError, LogTail};
use infer_bench_results::redact;
use infer_bench_results::{Outside, ServerInfo};
use infer_bench_spec::plan::PointConfig;

/// A server this process started.
pub struct Launched {
    child: Option<Child>,
    watchdog: Option<Watchdog>,
    /// Why there is no watchdog, when it could not be started.
    watchdog_error: Option<String>,
    spec_dir: PathBuf,
    base_url: String,
    port: u16,
    log: PathBuf,
    info: ServerInfo,
    grace: Duration,
}

/// A free TCP port on 127.0.0.1 (the OS picks it; the listener is closed
/// again, so a server can bind it a moment later).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Values of the launch placeholders for one point.
pub fn placeholder_values(
    cfg: &PointConfig,
    port: u16,
    spec_dir: &Path,
) -> Vec<(String, Option<String>)> {
    let p = cfg.precision.as_ref();
    let spec_dir = std::path::absolute(spec_dir).unwrap_or_else(|_| spec_dir.to_path_buf());
    let dir = spec_dir.display().to_string();
    // `{env.NAME}` reads only the variables the launch block allows.
    let env: Vec<(String, Option<String>)> = cfg
        .target
        .launch
        .iter()
        .flat_map(|l| &l.allow_env)
        .map(|var| (format!("env.{var}"), std::env::var(var).ok()))
        .collect();
    // Paths in the spec (weights, tokenizer) may themselves use {spec.dir}
    // and allowed {env.NAME}; one that cannot be filled stays as written,
    // and the command that uses it says why.
    let path = |v: Option<String>| {
        v.map(|v| {
            let v = v.replace("{spec.dir}", &dir);
            fill(&v, &env, false).unwrap_or(v)
        })
    };
    let mut values = vec![
        ("spec.dir".into(), Some(dir.clone())),
        ("port".into(), Some(port.to_string())),
        ("host".into(), Some("127.0.0.1".into())),
        ("model".into(), Some(cfg.model.name.clone())),
        (
            "model.served_name".into(),
            Some(cfg.served_name().to_string()),
        ),
        (
            "model.weights".into(),
            path(
                p.and_then(|p| p.weights.clone())
                    .or_else(|| cfg.model.weights.clone()),
            ),
        ),
        ("model.tokenizer".into(), path(cfg.model.tokenizer.clone())),
        ("precision".into(), p.map(|p| p.name.clone())),
        ("precision.arg".into(), p.and_then(|p| p.arg.clone())),
        (
            "precision.weights".into(),
            path(
                p.and_then(|p| p.weights.clone())
                    .or_else(|| cfg.model.weights.clone()),
            ),
        ),
        (
            "precision.dtype".into(),
            p.and_then(|p| p.dtype)
                .and_then(|d| serde_json::to_value(d).ok())
                .and_then(|v| v.as_str().map(str::to_string)),
        ),
    ];
    values.extend(env);
    values
}

/// Fills `{...}` placeholders. `redact` replaces `{env.*}` values with a
/// marker, for the command as recorded in results.
pub fn fill(
    template: &str,
    values: &[(String, Option<String>)],
    redact: bool,
) -> Result<String, LaunchError> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return Ok(out);
        };
        let key = &after[..close];
        let value = if let Some(var) = key.strip_prefix("env.") {
            match values.iter().find(|(k, _)| k == key) {
                _ if redact => Some(format!("<${var}>")),
                Some((_, Some(v))) => Some(v.clone()),
                Some((_, None)) => {
                    return Err(LaunchError::EnvUnset {
                        key: key.to_string(),
                        var: var.to_string(),
                    });
                }
                None => {
                    return Err(LaunchError::EnvNotAllowed {
                        key: key.to_string(),
                        var: var.to_string(),
                    });
                }
            }
        } else {
            match values.iter().find(|(k, _)| k == key) {
                Some((_, Some(v))) => Some(v.clone()),
                Some((_, None)) => {
                    return Err(LaunchError::NoValue {
                        key: key.to_string(),
                    });
                }
                None => None,
            }
        };
        match value {
            Some(v) => out.push_str(&v),
            None => {
                out.push('{');
                out.push_str(key);
                out.push('}');
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The marker of where a point's `server_args` go in a launch command.
pub const SERVER_ARGS: &str = "{server_args}";

/// A launch command filled in for `cfg`: each template filled, and the
/// point's `server_args` as argv in place of the argument
/// `{server_args}`, else after the last argument. The flags are spliced
/// in after filling, so a value is never read as a placeholder.
pub fn command(
    templates: &[String],
    cfg: &PointConfig,
    values: &[(String, Option<String>)],
    redact: bool,
) -> Result<Vec<String>, LaunchError> {
    let extra = cfg
        .server_args
        .as_ref()
        .map(|a| a.argv())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(templates.len() + extra.len());
    let mut placed = false;
    for t in templates {
        if t == SERVER_ARGS {
            out.extend(extra.iter().cloned());
            placed = true;
        } else {
            out.push(fill(t, values, redact)?);
        }
    }
    if !placed {
        out.extend(extra);
    }
    Ok(out)
}

fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|s| n.contains(s))
}

/// The command as recorded: values after secret-looking flags redacted.
pub fn redact_command(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for a in args {
        if hide_next {
            out.push("<redacted>".into());
            hide_next = false;
            continue;
        }
        match a.split_once('=') {
            Some((flag, _)) if flag.starts_with('-') && looks_secret(flag) => {
                out.push(format!("{flag}=<redacted>"))
            }
            _ => {
                hide_next = a.starts_with('-') && looks_secret(a);
                out.push(a.clone());
            }
        }
    }
    out
}

/// Copies a server's output into its log, line by line (a line is cut at
/// 64 KiB), each through the process-wide redactor.
fn copy_redacted(from: Box<dyn Read + Send>, to: &Mutex<File>) {
    let mut reader = BufReader::with_capacity(64 * 1024, from);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        match (&mut reader).take(64 * 1024).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let clean = redact::global().text_cow(&text);
                if let Ok(mut f) = to.lock() {
                    let _ = f.write_all(clean.as_bytes());
                }
            }
        }
    }
}

/// The last `n` lines of a log file.
pub fn log_tail(path: &Path, n: usize) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The last 20 lines of a server's log, for an error about the server.
fn tail_of(log: &Path) -> LogTail {
    LogTail {
        path: log.to_path_buf(),
        tail: log_tail(log, 20),
    }
}

/// Where the server of `cfg` logs in `log_dir`: one file per target,
/// model and precision.
pub(super) fn log_path(log_dir: &Path, cfg: &PointConfig) -> std::path::PathBuf {
    let group = format!(
        "{}.{}{}{}",
        cfg.target.name,
        cfg.model.name,
        cfg.precision
            .as_ref()
            .map(|p| format!(".{}", p.name))
            .unwrap_or_default(),
        cfg.server_args
            .as_ref()
            .map(|a| format!(".{}", file_safe(&a.name)))
            .unwrap_or_default()
    );
    log_dir.join(format!("{group}.log"))
}

/// A `server_args` name as part of a file name (its default name holds
/// `=` and `,`).
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Launched {
    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Why the watchdog could not be started, if it could not.
    pub fn watchdog_error(&self) -> Option<&str> {
        self.watchdog_error.as_deref()
    }

    pub fn start(
        cfg: &PointConfig,
        spec_dir: &Path,
        log_dir: &Path,
        handle: &tokio::runtime::Handle,
        interrupt: &Interrupt,
    ) -> Result<Launched, LaunchError> {
        let launch = cfg
            .target
            .launch
            .as_ref()
            .ok_or(LaunchError::NoLaunchBlock)?;
        let port = free_port().map_err(LaunchError::NoFreePort)?;
        let values = placeholder_values(cfg, port, spec_dir);
        let args = command(&launch.command, cfg, &values, false)?;
        let recorded = command(&launch.command, cfg, &values, true)?;
        let base_url = fill(
            cfg.target
                .base_url
                .as_deref()
                .unwrap_or("http://127.0.0.1:{port}/v1"),
            &values,
            false,
        )?;
        infer_bench_results::files::create_dir_all(log_dir).map_err(LaunchError::Log)?;
        let log = log_path(log_dir, cfg);
        let log_file = infer_bench_results::files::create(&log).map_err(LaunchError::Log)?;
        let child = spawn(launch, &args, &values, spec_dir, log_file)?;
        let (watchdog, watchdog_error) =
            match Watchdog::arm(child.id() as libc::pid_t, launch.stop_grace.as_std()) {
                Ok(w) => (Some(w), None),
                Err(e) => (None, Some(e.to_string())),
            };
        let server = Launched {
            child: Some(child),
            watchdog,
            watchdog_error,
            spec_dir: spec_dir.to_path_buf(),
            base_url,
            port,
            log,
            info: ServerInfo {
                command: Some(redact_command(&recorded)),
                ..ServerInfo::default()
            },
            grace: launch.stop_grace.as_std(),
        };
        let client = infer_bench_protocol::client::control_client(Duration::from_secs(2))?;
        let mut server = server.wait_ready(launch, handle, interrupt, &client)?;
        server.info.log = Some(server.log.display().to_string());
        server.identify(handle, &client);
        Ok(server)
    }

    /// Asks the server's ready path until it answers 200, it dies, the
    /// startup timeout passes or the run is interrupted; the server is
    /// stopped on every way out but the first.
    fn wait_ready(
        mut self,
        launch: &infer_bench_spec::Launch,
        handle: &tokio::runtime::Handle,
        interrupt: &Interrupt,
        client: &reqwest::Client,
    ) -> Result<Launched, LaunchError> {
        let ready_url = format!("http://127.0.0.1:{}{}", self.port, launch.ready);
        let deadline = Instant::now() + launch.startup_timeout.as_std();
        loop {
            if interrupt.is_set() {
                self.stop(handle);
                return Err(LaunchError::Interrupted);
            }
            self.check_alive()?;
            let ok = handle.block_on(async {
                client
                    .get(&ready_url)
                    .send()
                    .await
                    .map(|r| r.status().is_success())
                    .unwrap_or(false)
            });
            if ok {
                return Ok(self);
            }
            if Instant::now() >= deadline {
                let e = LaunchError::NotReady {
                    url: ready_url,
                    timeout: launch.startup_timeout,
                    log: tail_of(&self.log),
                };
                self.stop(handle);
                return Err(e);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Asks the server what it is: `/v1/models` (model and owner), the
    /// `Server` header, and `/version` where it exists (vLLM, TGI's /info).
    fn identify(&mut self, handle: &tokio::runtime::Handle, client: &reqwest::Client) {
        let root = format!("http://127.0.0.1:{}", self.port);
        let models = format!("{}/models", self.base_url.trim_end_matches('/'));
        let (model, owner, header) = handle.block_on(async {
            let Ok(r) = client.get(&models).send().await else {
                return (None, None, None);
            };
            let header = r
                .headers()
                .get("server")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let v: serde_json::Value = r.json().await.unwrap_or_default();
            let first = v.get("data").and_then(|d| d.get(0));
            let model = first
                .and_then(|m| m.get("id"))
                .and_then(|x| x.as_str())
                .map(str::to_string);
            let owner = first
                .and_then(|m| m.get("owned_by"))
                .and_then(|x| x.as_str())
                .map(str::to_string);
            (model, owner, header)
        });
        let version = handle.block_on(async {
            for path in ["/version", "/info"] {
                if let Ok(r) = client.get(format!("{root}{path}")).send().await {
                    if r.status().is_success() {
                        if let Ok(v) = r.json::<serde_json::Value>().await {
                            if let Some(s) = v.get("version").and_then(|x| x.as_str()) {
                                return Some(s.to_string());
                            }
                        }
                    }
                }
            }
            None
        });
        self.info.model = model.map(Outside::new);
        self.info.name = header.or(owner).map(Outside::new);
        self.info.version = version.map(Outside::new);
    }

    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    pub fn metrics_url(&self, cfg: &PointConfig) -> Option<String> {
        let values = placeholder_values(cfg, self.port, &self.spec_dir);
        cfg.target
            .metrics_url
            .as_ref()
            .and_then(|m| fill(m, &values, false).ok())
    }

    pub fn info(&self) -> ServerInfo {
        self.info.clone()
    }

    /// An error (with the log's tail) if the process has exited.
    pub fn check_alive(&mut self) -> Result<(), LaunchError> {
        let Some(child) = self.child.as_mut() else {
            return Err(LaunchError::Stopped);
        };
        match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                self.child = None;
                Err(LaunchError::Exited {
                    status,
                    log: tail_of(&self.log),
                })
            }
            Err(e) => Err(LaunchError::Check(e)),
        }
    }

    /// SIGTERM to the process group, SIGKILL after the grace period.
    pub fn stop(mut self, _handle: &tokio::runtime::Handle) {
        self.terminate();
    }

    fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pgid = child.id() as libc::pid_t;
        // SAFETY: signalling a process group we created.
        unsafe {
            libc::killpg(pgid, libc::SIGTERM);
        }
        let deadline = Instant::now() + self.grace;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    // SAFETY: as above.
                    unsafe {
                        libc::killpg(pgid, libc::SIGKILL);
                    }
                    let _ = child.wait();
                    break;
                }
            }
        }
        // Children that outlived the leader still get the group's SIGKILL.
        // SAFETY: as above; ESRCH when the group is gone is fine.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
        if let Some(w) = self.watchdog.take() {
            w.disarm();
        }
    }
}

/// A forked process whose only job is to stop a launched server's process
/// group if this process dies without doing it (SIGKILL, an abort, a
/// second Ctrl-C): PR_SET_PDEATHSIG reaches only the group's leader, not
/// what it forked. It waits on a pipe whose only writer is this process:
/// a byte means "stopped, go away", end-of-file means this process is gone.
struct Watchdog {
    pid: libc::pid_t,
    fd: libc::c_int,
}

impl Watchdog {
    fn arm(pgid: libc::pid_t, grace: Duration) -> std::io::Result<Watchdog> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: a plain pipe2 into a local array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let (read, write) = (fds[0], fds[1]);
        let polls = (grace.as_millis() / 100).max(1);
        // SAFETY: after fork the child calls only async-signal-safe
        // functions (setpgid, sigaction via signal, dup2, close, read,
        // killpg, nanosleep, _exit) and touches no allocator or lock.
        match unsafe { libc::fork() } {
            -1 => {
                let e = std::io::Error::last_os_error();
                // SAFETY: closing the fds we just made.
                unsafe {
                    libc::close(read);
                    libc::close(write);
                }
                Err(e)
            }
            0 => unsafe {
                // Out of the terminal's group: a Ctrl-C meant for
                // infer-bench must not stop the watchdog first.
                libc::setpgid(0, 0);
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                libc::dup2(read, 0);
                // Every other descriptor closed, so no copy of a write end
                // (another watchdog's) keeps this one waiting.
                if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
                    for fd in 1..4096 {
                        libc::close(fd);
                    }
                }
                let mut byte = 0u8;
                loop {
                    let n = libc::read(0, (&raw mut byte).cast(), 1);
                    if n == 1 {
                        libc::_exit(0);
                    }
                    if n == 0 || *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                }
                libc::killpg(pgid, libc::SIGTERM);
                let tick = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 100_000_000,
                };
                for _ in 0..polls {
                    if libc::killpg(pgid, 0) != 0 {
                        libc::_exit(0);
                    }
                    libc::nanosleep(&tick, std::ptr::null_mut());
                }
                libc::killpg(pgid, libc::SIGKILL);
                libc::_exit(0)
            },
            pid => {
                // SAFETY: the child has its copy; ours is not needed.
                unsafe { libc::close(read) };
                Ok(Watchdog { pid, fd: write })
            }
        }
    }

    /// The server was stopped: the watchdog exits without signalling.
    fn disarm(self) {
        // SAFETY: our own pipe's write end and our own child.
        unsafe {
            libc::write(self.fd, b"x".as_ptr().cast(), 1);
            libc::close(self.fd);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Starts the launch command in a process group of its own (killed with
/// this thread), its output copied through the redactor into `log_file`:
/// servers print their arguments and environment (vLLM its --api-key).
fn spawn(
    launch: &infer_bench_spec::Launch,
    args: &[String],
    values: &[(String, Option<String>)],
    spec_dir: &Path,
    log_file: File,
) -> Result<Child, LaunchError> {
    let (program, rest) = args.split_first().ok_or(LaunchError::EmptyCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in &launch.env {
        cmd.env(k, fill(v, values, false)?);
    }
    if let Some(dir) = &launch.cwd {
        cmd.current_dir(spec_dir.join(fill(dir, values, false)?));
    }
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to
    // kill the server if this thread (the run's main thread) dies.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| LaunchError::Spawn {
        program: program.clone(),
        source,
    })?;
    // The server's output reaches its log through the redactor: servers
    // print their arguments and environment (vLLM its --api-key).
    let log_file = Arc::new(Mutex::new(log_file));
    let mut child = child;
    for stream in [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let to = log_file.clone();
        std::thread::Builder::new()
            .name("server-log".into())
            .spawn(move || copy_redacted(stream, &to))
            .map_err(LaunchError::LogWriter)?;
    }
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_placeholders_and_redacts() {
        let values = vec![
            ("port".to_string(), Some("8080".to_string())),
            ("model.weights".to_string(), None),
        ];
        assert_eq!(
            fill("--port={port}", &values, false).unwrap(),
            "--port=8080"
        );
        let e = fill("{model.weights}", &values, false).unwrap_err();
        assert!(matches!(&e, LaunchError::NoValue { key } if key == "model.weights"));
        assert!(e.to_string().contains("{model.weights}"), "{e}");
        assert_eq!(
            fill("{env.HOME_DIR_X}", &values, true).unwrap(),
            "<$HOME_DIR_X>"
        );
        let e = fill("{env.SURELY_NOT_SET_12345}", &values, false).unwrap_err();
        assert!(matches!(e, LaunchError::EnvNotAllowed { .. }));
        assert!(
            e.to_string()
                .contains("`allow_env` does not list SURELY_NOT_SET_12345"),
            "{e}"
        );
        let allowed = vec![("env.SURELY_NOT_SET_12345".to_string(), None)];
        let e = fill("{env.SURELY_NOT_SET_12345}", &allowed, false).unwrap_err();
        assert!(matches!(e, LaunchError::EnvUnset { .. }));
        assert!(e.to_string().contains("is not set"), "{e}");
        let set = vec![("env.X".to_string(), Some("v".to_string()))];
        assert_eq!(fill("a{env.X}b", &set, false).unwrap(), "avb");
        assert_eq!(fill("{{json}}", &values, false).unwrap(), "{{json}}");
        let cmd: Vec<String> = [
            "vllm",
            "--api-key",
            "s3cret",
            "--hf-token=abc",
            "--port",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            redact_command(&cmd),
            vec![
                "vllm",
                "--api-key",
                "<redacted>",
                "--hf-token=<redacted>",
                "--port",
                "1"
            ]
        );
    }
}
