//! The console's page in a real browser (Debian's chromium, driven through chromedriver): three
//! schedulers run a sharded job on the in-memory registry; the page lists the job and its items
//! with their live status; a click disables an item, the registry shows it, the workers stop
//! running it, and the page shows it disabled. A screenshot goes to
//! `target/console-screenshot.png`.
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
use shardcron_registry_mem::{ConnectOptions, MemServer};

const TOKEN: &str = "browser-test-token";
const ITEMS: i32 = 6;
const DISABLED_ITEM: u32 = 2;

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

/// Three schedulers on three IPs running `orders`: 6 items, every second, 400 ms each.
async fn cluster(server: &MemServer, runs: &Runs) -> Vec<Scheduler> {
    let mut config = JobConfig::new("orders", ITEMS);
    config.cron = Some("* * * * * ?".into());
    config.failover = true;
    config.description = Some("nightly order export".into());
    config.sharding_item_parameters = Some("0=Beijing,1=Shanghai,2=Guangzhou,3=Shenzhen".into());
    let mut schedulers = Vec::new();
    for (n, ip) in ["10.0.0.1", "10.0.0.2", "10.0.0.3"].into_iter().enumerate() {
        let client = server.connect(ConnectOptions::default().namespace("/browser")).unwrap();
        let scheduler = SchedulerBuilder::new(Arc::new(client))
            .ip(ip)
            .pid(4000 + n as u32)
            .start()
            .await
            .unwrap();
        let runs = runs.clone();
        let job = Job::from_fn(move |ctx| {
            let runs = runs.clone();
            async move {
                runs.push(ctx.item);
                tokio::time::sleep(Duration::from_millis(400)).await;
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

fn screenshot_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("console-screenshot.png")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_cluster_and_disables_an_item() {
    let Some(binary) = chromedriver() else { return };
    let server = MemServer::new(Handles::real());
    let runs = Runs::default();
    let schedulers = cluster(&server, &runs).await;
    let operator = server.connect(ConnectOptions::default().namespace("/browser")).unwrap();
    let registry: Arc<dyn CoordinatorRegistry> = Arc::new(operator.clone());
    let options = ConsoleOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: Some(TOKEN.into()),
        read_only: false,
        label: "mem:/browser".into(),
        trace: None,
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

    let png = c.screenshot().await.unwrap();
    let path = screenshot_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());

    c.close().await.unwrap();
    let _ = stop.send(());
    served.await.unwrap().unwrap();
    for s in schedulers {
        s.shutdown().await.unwrap();
    }
}
