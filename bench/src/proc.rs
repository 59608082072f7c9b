//! What the operating system says about this process (CPU time, memory, threads) and the
//! machine, and how the bench runs a measurement in a child process of its own binary, so that
//! each scheduler's memory and CPU are its own.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::Error;

/// User plus system CPU time of this process, all threads (getrusage `RUSAGE_SELF`).
pub fn cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(usage) => {
            let micros = |t: nix::sys::time::TimeVal| {
                Duration::from_secs(t.tv_sec().max(0) as u64)
                    + Duration::from_micros(t.tv_usec().max(0) as u64)
            };
            micros(usage.user_time()) + micros(usage.system_time())
        }
        Err(_) => Duration::ZERO,
    }
}

/// CPU time of this process's tokio worker threads (`tokio-rt-worker`: the runtime the
/// scheduler runs its fires on), without the threads of its own that observability starts; from
/// each thread's `/proc/self/task/*/schedstat` (nanoseconds on a CPU). Zero where unreadable.
pub fn runtime_cpu_time() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Duration::ZERO };
    let mut total = Duration::ZERO;
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end() != "tokio-rt-worker" {
            continue;
        }
        let on_cpu_ns = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|ns| ns.parse::<u64>().ok()));
        total += Duration::from_nanos(on_cpu_ns.unwrap_or(0));
    }
    total
}

/// A `kB` field of `/proc/self/status` (`VmHWM`, `VmRSS`), in KiB; 0 if unreadable.
fn status_kib(field: &str) -> u64 {
    status_field(field).and_then(|v| v.trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

fn status_field(field: &str) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':').map(|v| v.trim().to_owned()))
}

/// Peak resident set size (`VmHWM`), KiB.
pub fn peak_rss_kib() -> u64 {
    status_kib("VmHWM")
}

/// Current resident set size (`VmRSS`), KiB.
pub fn rss_kib() -> u64 {
    status_kib("VmRSS")
}

/// Threads of this process.
pub fn threads() -> u64 {
    status_field("Threads").and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The 1-minute load average.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// CPU model, cores, memory, kernel and compiler, for the report's header.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim()))
        .unwrap_or("unknown CPU")
        .to_owned();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let rustc = command_output("rustc", &["--version"]).unwrap_or_else(|| "rustc ?".into());
    format!(
        "{model}, {cores} cores, {mem_gib:.0} GiB, Linux {}, {rustc}, release profile",
        kernel.trim()
    )
}

/// The first line a command prints, if it runs.
pub fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).stderr(Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    out.status.success().then(|| text.lines().next().unwrap_or("").trim().to_owned())
}

/// Runs this binary again with `args` (a hidden child sub-command), waits at most `limit`, and
/// parses the last line it prints as JSON. Its stderr goes to ours, so progress stays visible.
pub fn run_child<T: DeserializeOwned>(args: &[String], limit: Duration) -> Result<T, Error> {
    run_child_on(crate::allocator(), args, limit)
}

/// [`run_child`] in the bench binary built with `allocator` (the one beside this one).
pub fn run_child_on<T: DeserializeOwned>(
    allocator: crate::Allocator,
    args: &[String],
    limit: Duration,
) -> Result<T, Error> {
    let this = std::env::current_exe().map_err(|e| crate::err(format!("current_exe: {e}")))?;
    let exe = match allocator {
        crate::Allocator::System => this.with_file_name("shardcron-bench"),
        crate::Allocator::Mimalloc => this.with_file_name("shardcron-bench-mimalloc"),
    };
    if !exe.exists() {
        return Err(crate::err(format!(
            "{} is missing: build both bench binaries (cargo build --release -p shardcron-bench)",
            exe.display()
        )));
    }
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| crate::err(format!("start the child {args:?}: {e}")))?;
    let mut stdout = child.stdout.take().ok_or_else(|| crate::err("child stdout"))?;
    // Read on a thread: a child that prints much must not block on a full pipe while we wait.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let begin = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| crate::err(e.to_string()))? {
            break status;
        }
        if begin.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(crate::err(format!("child {args:?} ran over its {limit:?} limit")));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(crate::err(format!("child {args:?} failed: {status}")));
    }
    let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
    serde_json::from_str(last)
        .map_err(|e| crate::err(format!("child {args:?} printed {last:?}: {e}")))
}

/// Prints `value` as the one JSON line a child reports to its parent.
pub fn child_reply<T: serde::Serialize>(value: &T) -> Result<(), Error> {
    let line = serde_json::to_string(value).map_err(|e| crate::err(e.to_string()))?;
    println!("{line}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_measurable() {
        assert!(peak_rss_kib() > 0);
        assert!(rss_kib() > 0 && rss_kib() <= peak_rss_kib());
        assert!(threads() >= 1);
    }
}
