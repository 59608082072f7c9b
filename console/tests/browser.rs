//! The console's page in a real browser (Debian's chromium, driven through chromedriver): three
//! schedulers run a sharded job on the in-memory registry, recording into an execution trace (a
//! SQLite file); the page lists the job and its items with their live status; a click disables
//! an item, the registry shows it, the workers stop running it, and the page shows it disabled.
//! The "Job trace" tab then lists the item runs the workers recorded, filtered to the failed
//! ones on request, and the "History status" tab the fires' states. Screenshots go to
//! `target/console-screenshot.png`, `target/console-trace-screenshot.png` and
//! `target/console-status-screenshot.png`.
//!
//! Needs `chromium` and `chromium-driver` (`scripts/test.sh` installs them); without them the
//! test skips, unless `SHARDCRON_REQUIRE_BROWSER=1`.

#![allow(clippy::unwrap_used)] // a test: a panic is the failure report

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use recorded::Runs;
use serde_json::json;
use shardcron_console::{Console, ConsoleOptions};
use shardcron_core::config::JobConfig;
use shardcron_core::handles::Handles;
use shardcron_core::job::Job;
use shardcron_core::registry::CoordinatorRegistry;
use shardcron_core::runtime::{Scheduler, SchedulerBuilder};
use shardcron_observe::{ObserveExt, Trace, TraceConfig};
use shardcron_registry_mem::{ConnectOptions, MemServer};

const TOKEN: &str = "browser-test-token";
const ITEMS: i32 = 6;
const DISABLED_ITEM: u32 = 2;
/// This item fails every time: the trace shows why.
const FAILING_ITEM: u32 = 5;

/// Which items ran, in order (shared with the job closures).
mod recorded {
    use std::sync::{Arc, Mutex};

    #[derive(Debug, Clone, Default)]
    pub struct Runs(Arc<Mutex<Vec<u32>>>);

    impl Runs {
        pub fn push(&self, item: u32) {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).push(item);
        }
        pub fn len(&self) -> usize {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
        }
        pub fn since(&self, from: usize) -> Vec<u32> {
            self.0.lock().unwrap_or_else(|p| p.into_inner())[from..].to_vec()
        }
    }
}

/// The chromedriver binary, or `None` when the test may skip.
fn chromedriver() -> Option<PathBuf> {
    let found = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var("SHARDCRON_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "SHARDCRON_REQUIRE_BROWSER=1 but chromedriver is missing: apt-get install chromium \
             chromium-driver"
        );
        eprintln!("note: chromedriver not found; skipping the browser test");
    }
    found
}

/// A chromedriver process, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start(binary: &Path) -> Driver {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, url: format!("http://127.0.0.1:{port}") }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &Driver) -> Client {
    let mut capabilities = serde_json::Map::new();
    let mut chrome = json!({
        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--force-device-scale-factor=1"],
    });
    if Path::new("/usr/bin/chromium").exists() {
        chrome["binary"] = json!("/usr/bin/chromium");
    }
    capabilities.insert("goog:chromeOptions".into(), chrome);
    ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("open a browser session")
}

/// Three schedulers on three IPs running `orders`: 6 items, every second, 400 ms each; item
/// [`FAILING_ITEM`] fails. Every run goes into `trace`.
async fn cluster(server: &MemServer, runs: &Runs, trace: &Trace) -> Vec<Scheduler> {
    let config = JobConfig::builder("orders")
        .cron("* * * * * ?")
        .sharding_total_count(ITEMS.unsigned_abs())
        .failover(true)
        .description("nightly order export")
        .sharding_item_parameters("0=Beijing,1=Shanghai,2=Guangzhou,3=Shenzhen")
        .build()
        .unwrap();
    let mut schedulers = Vec::new();
    for (n, ip) in ["10.0.0.1", "10.0.0.2", "10.0.0.3"].into_iter().enumerate() {
        let client = server.connect(ConnectOptions::default().namespace("/browser")).unwrap();
        let scheduler = SchedulerBuilder::new(Arc::new(client))
            .ip(ip)
            .pid(4000 + n as u32)
            .trace(trace)
            .start()
            .await
            .unwrap();
        let runs = runs.clone();
        let job = Job::from_fn(move |ctx| {
            let runs = runs.clone();
            async move {
                runs.push(ctx.item);
                tokio::time::sleep(Duration::from_millis(400)).await;
                if ctx.item == FAILING_ITEM {
                    return Err("the upstream API answered 503".into());
                }
                Ok(())
            }
        });
        scheduler.add_job(config.clone(), job).await.unwrap();
        schedulers.push(scheduler);
    }
    schedulers
}

/// Waits until the page's element `css` has text satisfying `want`; returns the text.
async fn text_becomes(c: &Client, css: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(element) = c.find(Locator::Css(css)).await {
            if let Ok(text) = element.text().await {
                if want(&text) {
                    return text;
                }
                last = text;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{css}: never {what}; last text {last:?}");
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}

/// Saves the page as it is now under `target/NAME`.
async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    let path = target_dir().join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// The texts of the elements `css` matches (read again when the page re-renders them midway).
async fn texts(c: &Client, css: &str) -> Vec<String> {
    let mut attempts = 0;
    'read: loop {
        attempts += 1;
        let mut texts = Vec::new();
        for element in c.find_all(Locator::Css(css)).await.unwrap() {
            match element.text().await {
                Ok(text) => texts.push(text),
                Err(e) if attempts < 20 => {
                    eprintln!("{css}: {e}; reading again");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue 'read;
                }
                Err(e) => panic!("{css}: {e}"),
            }
        }
        return texts;
    }
}

/// Waits until the elements `css` matches have texts satisfying `want`; returns them.
async fn texts_become(
    c: &Client,
    css: &str,
    what: &str,
    want: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = texts(c, css).await;
        if want(&found) {
            return found;
        }
        assert!(Instant::now() < deadline, "{css}: never {what}; last {found:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_cluster_and_disables_an_item() {
    let Some(binary) = chromedriver() else { return };
    let server = MemServer::new(Handles::real());
    let runs = Runs::default();
    let db = target_dir().join("tmp").join(format!("browser-trace-{}.db", std::process::id()));
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let trace = Trace::start(TraceConfig::new(db.to_str().unwrap())).unwrap();
    let schedulers = cluster(&server, &runs, &trace).await;
    let operator = server.connect(ConnectOptions::default().namespace("/browser")).unwrap();
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(operator.clone());
    let options = ConsoleOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: Some(TOKEN.into()),
        read_only: false,
        label: "mem:/browser".into(),
        trace: Some(trace.reader().await.unwrap()),
    };
    let console = Console::bind(registry, options).await.unwrap();
    let page = format!("http://{}/", console.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(console.serve(async move {
        let _ = stopped.await;
    }));

    let driver = Driver::start(&binary);
    let c = browser(&driver).await;
    c.goto(&page).await.unwrap();

    // The job, with its status.
    let status = "#jobs tr[data-job=\"orders\"] td.status";
    text_becomes(&c, status, "OK", |t| t == "OK").await;

    // Log in, open the job: every item listed, each owned by one of the three instances.
    c.find(Locator::Css("#token")).await.unwrap().send_keys(TOKEN).await.unwrap();
    c.find(Locator::Css("#login")).await.unwrap().click().await.unwrap();
    text_becomes(&c, "#who", "logged in", |t| t == "logged in").await;
    c.find(Locator::Css("#jobs tr[data-job=\"orders\"]")).await.unwrap().click().await.unwrap();
    let last = format!("#items tr[data-item=\"{}\"]", ITEMS - 1);
    text_becomes(&c, &last, "listed", |t| t.contains("10.0.0.")).await;
    for item in 0..ITEMS {
        let row = format!("#items tr[data-item=\"{item}\"] td.status");
        let status = c.find(Locator::Css(&row)).await.unwrap().text().await.unwrap();
        assert!(["PENDING", "RUNNING"].contains(&status.as_str()), "item {item}: {status}");
    }
    let config = c.find(Locator::Css("#config")).await.unwrap().prop("value").await.unwrap();
    assert!(config.unwrap_or_default().contains("shardingTotalCount: 6"));

    // A click disables item 2: the registry has it, the workers skip it, the page shows it.
    let button =
        format!("#items tr[data-item=\"{DISABLED_ITEM}\"] button[data-action=\"disable-item\"]");
    c.wait().for_element(Locator::Css(&button)).await.unwrap().click().await.unwrap();
    let node = format!("/orders/sharding/{DISABLED_ITEM}/disabled");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !operator.exists(&node).await.unwrap() {
        assert!(Instant::now() < deadline, "the click did not reach the registry");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = format!("#items tr[data-item=\"{DISABLED_ITEM}\"] td.status");
    text_becomes(&c, &status, "DISABLED", |t| t == "DISABLED").await;
    // A fire already running may still finish item 2; later fires must not start it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let from = runs.len();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let later = runs.since(from);
    assert!(!later.is_empty(), "the job keeps running");
    assert!(
        !later.contains(&DISABLED_ITEM),
        "item {DISABLED_ITEM} ran after it was disabled: {later:?}"
    );

    screenshot(&c, "console-screenshot.png").await;

    // The job's trace, from its card: the item runs the workers recorded, newest first.
    c.find(Locator::Css("#job-trace")).await.unwrap().click().await.unwrap();
    let jobs = texts_become(&c, "#trace tbody td.job", "listed", |t| t.len() >= 6).await;
    assert!(jobs.iter().all(|j| j == "orders"), "{jobs:?}");
    let results = texts(&c, "#trace tbody td.result").await;
    assert!(results.iter().any(|r| r == "SUCCEEDED"), "{results:?}");
    let count = c.find(Locator::Css("#trace-count")).await.unwrap().text().await.unwrap();
    let total: usize = count.split(' ').next().unwrap().parse().unwrap();
    assert!(total >= 6, "{count}");
    screenshot(&c, "console-trace-screenshot.png").await;
    // Only the failures: item 5, with its cause.
    c.find(Locator::Css("#trace-form select[name=isSuccess]"))
        .await
        .unwrap()
        .select_by_value("false")
        .await
        .unwrap();
    c.find(Locator::Css("#trace-form button[type=submit]")).await.unwrap().click().await.unwrap();
    // (As in ElasticJob, a run counts as not successful until it ends well.)
    let results = texts_become(&c, "#trace tbody td.result", "only failures", |t| {
        t.iter().any(|r| r == "FAILED") && t.iter().all(|r| r == "FAILED" || r == "RUNNING")
    })
    .await;
    let items = texts(&c, "#trace tbody td.item").await;
    let causes = texts(&c, "#trace tbody td.cause").await;
    for ((result, item), cause) in results.iter().zip(&items).zip(&causes) {
        if result == "FAILED" {
            assert_eq!(*item, FAILING_ITEM.to_string(), "{items:?} {results:?}");
            assert!(cause.contains("upstream API answered 503"), "{causes:?}");
        }
    }
    // Back to every result, sorted by item (a click on the header), 10 a page.
    c.find(Locator::Css("#trace-form select[name=isSuccess]"))
        .await
        .unwrap()
        .select_by_value("")
        .await
        .unwrap();
    c.find(Locator::Css("#trace th[data-sort=shardingItem]")).await.unwrap().click().await.unwrap();
    c.find(Locator::Css("#trace th[data-sort=shardingItem]")).await.unwrap().click().await.unwrap();
    let items = texts_become(&c, "#trace tbody td.item", "sorted by item", |t| {
        t.len() >= 6 && t.windows(2).all(|w| w[0].parse::<u32>().ok() <= w[1].parse::<u32>().ok())
    })
    .await;
    assert_eq!(items[0], "0", "{items:?}");

    // The fires' states.
    c.find(Locator::Css("#tabs button[data-tab=status]")).await.unwrap().click().await.unwrap();
    let states = texts_become(&c, "#status tbody td.state", "listed", |t| t.len() >= 6).await;
    assert!(states.iter().all(|s| s.starts_with("TASK_")), "{states:?}");
    // The fires that failed, and why.
    c.find(Locator::Css("#status-form select[name=state]"))
        .await
        .unwrap()
        .select_by_value("TASK_ERROR")
        .await
        .unwrap();
    c.find(Locator::Css("#status-form button[type=submit]")).await.unwrap().click().await.unwrap();
    texts_become(&c, "#status tbody td.state", "only errors", |t| {
        !t.is_empty() && t.iter().all(|s| s == "TASK_ERROR")
    })
    .await;
    let messages = texts(&c, "#status tbody td.cause").await;
    assert!(messages.iter().all(|m| m.contains("item 5: ")), "{messages:?}");
    screenshot(&c, "console-status-screenshot.png").await;

    c.close().await.unwrap();
    let _ = stop.send(());
    served.await.unwrap().unwrap();
    for s in schedulers {
        s.shutdown(Duration::from_secs(3600)).await.unwrap();
    }
    trace.shutdown(Duration::from_secs(5)).await;
}
