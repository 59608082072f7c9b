//! Script jobs with real processes. The test scripts are files run by `/bin/sh <file> args...`
//! (the interpreter as the program, as a user would run a Python or shell script), which also
//! avoids "text file busy" races of executing a freshly written file while other tests fork.
//! Real time, not paused: the runtime waits on process I/O, which paused time would skip over.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let unique = NEXT.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir()
            .join(format!("shardcron-job-{}-{name}-{unique}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// Writes a shell script and returns the `/bin/sh` arguments that run it.
    fn script(&self, body: &str) -> String {
        let path = self.0.join("job.sh");
        std::fs::write(&path, body).unwrap();
        path.to_str().unwrap().to_string()
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn run_script(job: &Job, request: FireRequest) -> FireReport {
    tokio::time::timeout(Duration::from_secs(60), Executor::new(Handles::real()).run(job, request))
        .await
        .expect("the script job did not end")
}

fn script_failure(report: &FireReport, item: u32) -> JobFailure {
    match &report.items[&item] {
        ItemOutcome::Failed(failure) => failure.clone(),
        other => panic!("item {item} did not fail: {other:?}"),
    }
}

#[tokio::test]
async fn the_context_json_is_the_last_argument_and_nothing_is_shell_interpreted() {
    let dir = TempDir::new("args");
    let script = dir.script(
        "out=\"$1\"; shift\n\
         { printf '%s\\n' \"$#\"; for a in \"$@\"; do printf '[%s]\\n' \"$a\"; done; } > \"$out\"\n",
    );
    let out = dir.path("args.txt");
    let tricky = "it's \"quoted\" $(touch pwned) `touch pwned` ; && | > x";
    let job = Job::script("/bin/sh", vec![script, out.clone(), "two words".into(), tricky.into()]);
    assert_eq!(job.kind(), "SCRIPT");
    let mut request = request(&[2], 3, 0);
    request.contexts[0].job_parameter = tricky.into();
    let json = request.contexts[0].to_json().unwrap();

    let report = run_script(&job, request).await;

    assert_eq!(report.items[&2], ItemOutcome::Completed);
    let received = std::fs::read_to_string(&out).unwrap();
    assert_eq!(received, format!("3\n[two words]\n[{tricky}]\n[{json}]\n"));
    assert!(!Path::new(&dir.path("pwned")).exists());
    assert!(!Path::new("pwned").exists());
    let back: ShardingContext = serde_json::from_str(&json).unwrap();
    assert_eq!((back.item, back.job_parameter.as_str()), (2, tricky));
}

#[tokio::test]
async fn items_run_as_separate_processes_each_with_its_own_context() {
    let dir = TempDir::new("items");
    let script = dir.script("printf '%s' \"$2\" > \"$1/out.$$\"\n");
    let job = Job::script("/bin/sh", vec![script, dir.0.to_str().unwrap().to_string()]);
    let report = run_script(&job, request(&[0, 1, 2, 3], 4, 2)).await;
    assert!(report.all_completed(), "{report:?}");

    let mut items = Vec::new();
    for entry in std::fs::read_dir(&dir.0).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_str().unwrap().starts_with("out.") {
            let ctx: ShardingContext =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            assert_eq!(ctx.item_parameter, format!("p{}", ctx.item));
            items.push(ctx.item);
        }
    }
    items.sort_unstable();
    assert_eq!(items, [0, 1, 2, 3]);
}

#[tokio::test]
async fn a_non_zero_exit_fails_with_its_status_and_stderr() {
    let dir = TempDir::new("exit");
    let script = dir.script("echo partial output\necho 'disk full' >&2\nexit 3\n");
    let report = run_script(&Job::script("/bin/sh", vec![script]), request(&[0], 1, 0)).await;
    let failure = script_failure(&report, 0);
    assert_eq!(
        failure,
        JobFailure::Script {
            program: "/bin/sh".into(),
            status: Some(3),
            signal: None,
            stderr_tail: "disk full\n".into(),
        }
    );
    assert_eq!(
        failure.to_string(),
        "script \"/bin/sh\" exited with status 3; stderr tail: \"disk full\\n\""
    );
}

#[tokio::test]
async fn only_the_tail_of_a_long_stderr_is_kept() {
    let dir = TempDir::new("tail");
    let script = dir.script(
        "i=0\nwhile [ $i -lt 2000 ]; do printf 'line %04d\\n' $i >&2; i=$((i+1)); done\nexit 1\n",
    );
    let report = run_script(&Job::script("/bin/sh", vec![script]), request(&[0], 1, 0)).await;
    let JobFailure::Script { stderr_tail, status, .. } = script_failure(&report, 0) else {
        panic!("not a script failure");
    };
    assert_eq!(status, Some(1));
    assert_eq!(stderr_tail.len(), SCRIPT_STDERR_TAIL_BYTES);
    assert!(stderr_tail.ends_with("line 1998\nline 1999\n"), "{stderr_tail:?}");
}

#[tokio::test]
async fn a_script_killed_by_a_signal_reports_the_signal() {
    let dir = TempDir::new("signal");
    let script = dir.script("echo going >&2\nkill -9 $$\n");
    let report = run_script(&Job::script("/bin/sh", vec![script]), request(&[0], 1, 0)).await;
    let failure = script_failure(&report, 0);
    assert!(
        matches!(&failure, JobFailure::Script { status: None, signal: Some(9), stderr_tail, .. }
            if stderr_tail == "going\n"),
        "{failure:?}"
    );
    assert!(failure.to_string().contains("terminated by signal 9"), "{failure}");
}

#[tokio::test]
async fn a_missing_program_fails_with_a_launch_error() {
    let program = "/nonexistent/shardcron-no-such-program";
    let report = run_script(&Job::script(program, vec![]), request(&[0, 1], 2, 0)).await;
    for item in [0, 1] {
        let failure = script_failure(&report, item);
        let JobFailure::ScriptLaunch { program: p, reason } = &failure else {
            panic!("not a launch failure: {failure:?}");
        };
        assert_eq!(p, program);
        assert!(reason.contains("No such file or directory"), "{reason}");
        assert!(failure.to_string().contains("check that the program exists"), "{failure}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_kills_the_running_script() {
    let dir = TempDir::new("cancel");
    let fifo = dir.path("started");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // The script reports its pid through the fifo, then becomes a long sleep.
    let script = dir.script("echo $$ > \"$1\"\nexec sleep 600\n");
    let job = Job::script("/bin/sh", vec![script, fifo.clone()]);
    let request = request(&[0], 1, 0);
    let token = request.contexts[0].cancellation.clone();

    let (pid_sender, pid_receiver) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let pid = std::fs::read_to_string(&fifo).unwrap(); // blocks until the script writes
        let _ = pid_sender.send(pid.trim().to_string());
    });
    let fire = tokio::spawn(async move { run_script(&job, request).await });
    let pid = tokio::time::timeout(Duration::from_secs(60), pid_receiver).await.unwrap().unwrap();
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the script runs");
    token.cancel();

    let report = fire.await.unwrap();
    assert_eq!(report.items[&0], ItemOutcome::Cancelled);
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "the script was killed and reaped");
}
