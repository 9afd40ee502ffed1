//! The admin console in a real browser: headless Chromium, driven over WebDriver by
//! chromedriver, loads the console of one node of a two-node cluster with workers and load, and
//! the rendered page (after its scripts ran) names both nodes and the link between them, shows
//! a pool's figures as `/status` gives them and its own outcome rates and latency as `/window`
//! gives them, plots the outcomes, links the peer's console, and shows a hostile worker identity
//! as text; a deployment set and a worker registering and draining while it is open appear in
//! its pools and in its bounded event feed, newest first.
//! A screenshot is saved to the path it prints.
//!
//! Skipped, saying why, when chromium or chromedriver is missing (`scripts/install-chromium.sh`
//! installs them; `.ci/run` does, and sets `CI_REQUIRE_BROWSER=1` so CI cannot skip it).

use lintel_test_support as support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use lintel::sdk::{handler_fn, Client, DispatchOptions, Worker, WorkerConfig};
use lintel::wire::ActivityOutcome;
use lintel::NodeConfig;
use serde_json::{json, Value};
use support::{
    admin_get, admin_post, client, cluster_config, plain, request, sdk_worker, within, RawWorker,
    TestNode, WAIT,
};

/// A worker identity a client chose to be read as markup, were the page careless.
const HOSTILE: &str = "<img src=x onerror=\"window.pwned=1\">";

/// A chromedriver child on a port of its choosing, killed on drop.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The chromium and chromedriver to use, or why there are none.
fn browser_tools() -> Result<(PathBuf, PathBuf), String> {
    let find = |variable: &str, names: &[&str]| -> Option<PathBuf> {
        if let Some(path) = std::env::var_os(variable) {
            return Some(PathBuf::from(path)).filter(|path| path.is_file());
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
            .find(|candidate| candidate.is_file())
    };
    let chromium = find("LINTEL_CHROMIUM", &["chromium", "chromium-browser"])
        .ok_or("no chromium on PATH or at LINTEL_CHROMIUM")?;
    let driver = find("LINTEL_CHROMEDRIVER", &["chromedriver"])
        .ok_or("no chromedriver on PATH or at LINTEL_CHROMEDRIVER")?;
    Ok((chromium, driver))
}

/// Starts chromedriver on a free port and reads which.
fn start_driver(driver: &Path) -> Driver {
    let mut child = Command::new(driver)
        .arg("--port=0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    let port = loop {
        let line = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("chromedriver did not say its port: {seen:?}"));
        if let Some(port) = line
            .split("started successfully on port ")
            .nth(1)
            .and_then(|rest| rest.trim_end_matches('.').trim().parse().ok())
        {
            break port;
        }
        seen.push(line);
    };
    Driver { child, port }
}

/// A headless Chromium session with the flags that work on a closed network.
async fn open_browser(chromium: &Path, driver: &Driver, profile: &Path) -> Browser {
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1200",
    ];
    let mut args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": { "binary": chromium, "args": args },
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!("a JSON object")
    };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    within(
        "a browser session",
        ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", driver.port)),
    )
    .await
    .expect("chromedriver opens a headless Chromium session")
}

/// Dispatches `activity` in `namespace` from a few tasks until `stop`, each loop bounded.
fn load(
    producer: &Client,
    namespace: &'static str,
    activity: &'static str,
    stop: &Arc<AtomicBool>,
) {
    let options = DispatchOptions::default().wait_for_worker(WAIT);
    for _ in 0..4 {
        let producer = producer.clone();
        let options = options.clone();
        let stop = Arc::clone(stop);
        tokio::spawn(async move {
            for i in 0..200_000u32 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let request = request(namespace, activity, &i.to_string());
                if producer
                    .dispatch(&support::dispatch_of(request), &options)
                    .await
                    .is_err()
                {
                    break;
                }
            }
        });
    }
}

/// The feed's bound, as console.js states it.
fn feed_limit() -> usize {
    include_str!("../src/console/assets/console.js")
        .lines()
        .find_map(|line| line.strip_prefix("const FEED_LIMIT = "))
        .and_then(|rest| rest.trim_end_matches(';').parse().ok())
        .expect("console.js states FEED_LIMIT")
}

/// Waits until the page has an element matching `css`, and returns its text.
async fn text_of(browser: &Browser, css: &str) -> String {
    browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|err| panic!("the console shows {css}: {err}"))
        .text()
        .await
        .expect("text")
}

/// Runs `script` in the page and returns what it returns.
async fn eval(browser: &Browser, script: &str) -> Value {
    browser
        .execute(script, Vec::new())
        .await
        .unwrap_or_else(|err| panic!("the page runs {script:?}: {err}"))
}

/// Waits until the page has drawn `times` more refreshes than it had.
async fn refreshed(browser: &Browser, times: u64) {
    let count = |value: Value| {
        value
            .as_str()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let now = count(eval(browser, "return document.body.dataset.refreshes").await);
    let wanted = now + times;
    // Each refresh sets the attribute: wait for the one that reaches the count.
    let selector = format!("body[data-refreshes='{wanted}']");
    browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(&selector))
        .await
        .unwrap_or_else(|err| panic!("the console refreshed {times} more times: {err}"));
}

/// Waits, one refresh at a time, until `script` returns true in the page.
async fn until_shown(browser: &Browser, what: &str, script: &str) {
    within(what, async {
        while eval(browser, script).await != Value::Bool(true) {
            refreshed(browser, 1).await;
        }
    })
    .await;
}

/// The text of `field` in the card of pool `channel`, or null, as a script expression.
fn card_field(channel: &str, field: &str) -> String {
    format!(
        "document.querySelector(\"article[data-channel='{channel}'] [data-field='{field}']\")?.textContent ?? null"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_cluster_its_pools_and_plots_in_a_real_browser() {
    let (chromium, driver_path) = match browser_tools() {
        Ok(tools) => tools,
        Err(why) if std::env::var_os("CI_REQUIRE_BROWSER").is_some() => {
            panic!("CI_REQUIRE_BROWSER is set but {why}")
        }
        Err(why) => {
            let _ = writeln!(
                std::io::stderr(),
                "skipping the console's browser test: {why}; scripts/install-chromium.sh installs it"
            );
            return;
        }
    };

    // Two linked nodes, `a` and `b`, each with an admin listener; b links a's console.
    let (a, admin_a) = TestNode::with_admin(cluster_config("a", &[])).await;
    let (b, admin_b) = TestNode::with_admin(NodeConfig {
        peer_console: format!("http://{{host}}:{}/", admin_a.port()),
        ..cluster_config("b", &[a.addr])
    })
    .await;
    b.wait_linked(&["a"]).await;

    let echo = handler_fn(|request: lintel::sdk::Request| {
        std::future::ready(ActivityOutcome::Success(request.input))
    });
    let slow = handler_fn(|request: lintel::sdk::Request| async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        ActivityOutcome::Success(request.input)
    });
    let _billing = sdk_worker(
        b.addr,
        plain("billing", "echo", 8, "billing-1"),
        echo.clone(),
    )
    .await;
    let _hostile = sdk_worker(b.addr, plain("billing", "echo", 4, HOSTILE), echo).await;
    let _reports = sdk_worker(a.addr, plain("reports", "slow", 16, "reports-1"), slow).await;
    // One worker in two pools: counted once.
    let mut both = plain("audit", "echo", 2, "audit-and-ledger");
    both.namespaces.push("ledger".into());
    let _both = sdk_worker(
        b.addr,
        both,
        handler_fn(|_: lintel::sdk::Request| async {
            ActivityOutcome::Success(bytes::Bytes::new())
        }),
    )
    .await;
    a.wait_announced("b", "aion.dispatch.billing.default").await;
    b.wait_announced("a", "aion.dispatch.reports.default").await;

    let stop = Arc::new(AtomicBool::new(false));
    let producer = client(b.addr).await;
    load(&producer, "billing", "echo", &stop);
    load(&producer, "reports", "slow", &stop);
    let missing = producer
        .dispatch(
            &support::dispatch_of(request("nowhere", "echo", "x")),
            &DispatchOptions::default(),
        )
        .await
        .expect("an outcome");
    assert!(matches!(missing, lintel::wire::DispatchResult::NoWorker(_)));

    let driver = start_driver(&driver_path);
    let profile = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-chromium-profile");
    let _ = std::fs::remove_dir_all(&profile);
    let browser = open_browser(&chromium, &driver, &profile).await;
    browser
        .goto(&format!("http://{admin_b}/"))
        .await
        .expect("the console loads");
    // A few refreshes under load, so the plots have points to draw.
    refreshed(&browser, 4).await;

    // The mesh: this node and its peer, linked.
    let node_id = browser.find(Locator::Id("node-id")).await.expect("node id");
    assert_eq!(node_id.text().await.expect("text"), "b");
    let peer = browser
        .find(Locator::Css("#mesh tr[data-node-id='a']"))
        .await
        .expect("a row for peer a");
    assert_eq!(
        peer.attr("data-link").await.expect("attr").as_deref(),
        Some("up")
    );
    let href = browser
        .find(Locator::Css("#mesh tr[data-node-id='a'] a"))
        .await
        .expect("a link to a's console")
        .attr("href")
        .await
        .expect("href");
    assert_eq!(
        href.as_deref(),
        Some(format!("http://127.0.0.1:{}/", admin_a.port()).as_str())
    );
    assert!(browser
        .find(Locator::Css("#mesh tr.self[data-node-id='b']"))
        .await
        .is_ok());

    // The plots drew the load: a line of completions, and latency.
    let completed = eval(
        &browser,
        "return document.querySelectorAll('#plot-outcomes path.series').length",
    )
    .await;
    assert!(completed.as_u64() >= Some(1), "{completed}");
    let legend = browser
        .find(Locator::Id("legend-outcomes"))
        .await
        .expect("legend")
        .text()
        .await
        .expect("text");
    assert!(legend.contains("completed"), "{legend}");

    // Each pool's card has its own rates and latency: the billing pool under load completes
    // dispatches and says in what time; the audit pool, sent nothing, completes none.
    let billing = "aion.dispatch.billing.default";
    let rate = card_field(billing, "completed-rate");
    let p99 = card_field(billing, "p99");
    until_shown(
        &browser,
        "the billing card's completed rate and p99",
        &format!("const rate = {rate}; const p99 = {p99}; return parseFloat(rate) > 0 && p99 !== null && p99 !== '–'"),
    )
    .await;
    let p50 = eval(&browser, &format!("return {}", card_field(billing, "p50"))).await;
    assert!(
        p50.as_str()
            .is_some_and(|p50| p50.ends_with("µs") || p50.ends_with("ms")),
        "{p50}"
    );
    let audit = "aion.dispatch.audit.default";
    for (field, wanted) in [
        ("completed-rate", "0.0"),
        ("other-rate", "0.0"),
        ("p99", "–"),
    ] {
        let shown = eval(&browser, &format!("return {}", card_field(audit, field))).await;
        assert_eq!(shown, json!(wanted), "the audit pool's {field}");
    }

    // What happens while the page is open. The feed is live once the node has subscribed it,
    // so no event from here on is missed.
    text_of(&browser, "#events-state[data-state='live']").await;
    let (code, body) = admin_post(
        admin_b,
        "/pools",
        r#"{"namespace": "deploys", "deployment": "v2"}"#,
        None,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let config = WorkerConfig::builder()
        .node(b.addr.to_string())
        .namespace("deploys")
        .activity("echo")
        .concurrency(2)
        .identity("deploys-1")
        .deployment("v2")
        .instance_id("pod-7")
        .build()
        .expect("a valid worker config");
    let deployed = Worker::spawn(
        config,
        handler_fn(|request: lintel::sdk::Request| {
            std::future::ready(ActivityOutcome::Success(request.input))
        }),
    );
    let deployed_id = within(
        "the deployed worker's registration",
        deployed.wait_registered(WAIT),
    )
    .await
    .expect("the deployed worker registers");
    let card = "article[data-channel='aion.dispatch.deploys.default']";
    let pill = text_of(&browser, &format!("{card} [data-deployment='v2']")).await;
    assert_eq!(pill, "current deployment v2");
    let row = format!("{card} tr[data-worker-id='{deployed_id}']");
    assert_eq!(
        text_of(&browser, &format!("{row} td.deployment")).await,
        "v2"
    );
    assert_eq!(
        text_of(&browser, &format!("{row} td.instance")).await,
        "pod-7"
    );
    let setting =
        "#deployments tr[data-channel='aion.dispatch.deploys.default'][data-deployment='v2']";
    text_of(&browser, setting).await;
    let cells = eval(
        &browser,
        &format!("return [...document.querySelector(\"{setting}\").cells].slice(0, 3).map(td => td.textContent)"),
    )
    .await;
    assert_eq!(cells, json!(["aion.dispatch.deploys.default", "v2", "b"]));
    let registered = text_of(
        &browser,
        &format!("#events li[data-event='worker_registered'][data-worker-id='{deployed_id}']"),
    )
    .await;
    for part in [
        "registered",
        "deploys-1",
        "aion.dispatch.deploys.default",
        "deployment v2",
        "instance pod-7",
    ] {
        assert!(registered.contains(part), "{part} in {registered:?}");
    }

    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console.png");
    let png = browser.screenshot().await.expect("a screenshot");
    std::fs::write(&screenshot, png).expect("write the screenshot");
    // Past the test harness's capture, so a passing run's log names the file too.
    let _ = writeln!(
        std::io::stderr(),
        "console screenshot: {}",
        screenshot.display()
    );

    // The deployed worker drains: the feed shows why it left, above its registration.
    within(
        "the deployed worker's drain",
        deployed.drain(Duration::from_secs(1)),
    )
    .await;
    let departed = text_of(
        &browser,
        &format!("#events li[data-event='worker_departed'][data-worker-id='{deployed_id}']"),
    )
    .await;
    assert!(departed.contains("reason: drained"), "{departed:?}");
    let order = eval(
        &browser,
        "return [...document.querySelectorAll('#events li')].map(li => li.dataset.event + ' ' + li.dataset.workerId)",
    )
    .await;
    let order: Vec<&str> = order
        .as_array()
        .map(|entries| entries.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let at = |entry: String| {
        order
            .iter()
            .position(|shown| *shown == entry)
            .unwrap_or_else(|| panic!("{entry} in the feed: {order:?}"))
    };
    assert!(
        at(format!("worker_departed {deployed_id}"))
            < at(format!("worker_registered {deployed_id}")),
        "newest first: {order:?}"
    );

    // With the load stopped, the pool's figures settle: the page shows what /status says.
    stop.store(true, Ordering::Relaxed);
    within("the load to drain", async {
        while b.node.dispatcher().active() > 0 || a.node.dispatcher().active() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    refreshed(&browser, 2).await;
    let (code, status) = admin_get(admin_b, "/status").await;
    assert_eq!(code, 200);
    let status: Value = serde_json::from_str(&status).expect("status JSON");
    let pool = status["pools"]
        .as_array()
        .and_then(|pools| {
            pools
                .iter()
                .find(|pool| pool["channel"] == "aion.dispatch.billing.default")
        })
        .expect("the billing pool in /status")
        .clone();
    let workers = pool["workers"].as_array().expect("workers");
    let slots: u64 = workers
        .iter()
        .filter_map(|w| w["max_concurrency"].as_u64())
        .sum();
    let used: u64 = workers.iter().filter_map(|w| w["in_flight"].as_u64()).sum();
    let shown = |field: &str| {
        format!(
            "return document.querySelector(\"article[data-channel='aion.dispatch.billing.default'] [data-field='{field}']\").textContent"
        )
    };
    for (field, wanted) in [
        ("slots", slots),
        ("used", used),
        ("free", slots - used),
        ("workers", workers.len() as u64),
    ] {
        let text = eval(&browser, &shown(field)).await;
        assert_eq!(text, Value::String(wanted.to_string()), "{field}");
    }
    assert_eq!(slots, 12);

    let summary = eval(
        &browser,
        "return document.getElementById('pools-summary').textContent",
    )
    .await;
    assert_eq!(summary, json!("3 pools, 3 workers on this node"));

    // A client's name is text on the page, never markup.
    let identities = eval(
        &browser,
        "return [...document.querySelectorAll('#pools td.identity')].map(td => td.textContent)",
    )
    .await;
    assert!(
        identities
            .as_array()
            .is_some_and(|names| names.iter().any(|name| name == HOSTILE)),
        "{identities}"
    );
    assert_eq!(
        eval(&browser, "return document.querySelectorAll('img').length").await,
        json!(0)
    );
    assert_eq!(
        eval(&browser, "return window.pwned === undefined").await,
        json!(true)
    );

    // More events than the feed keeps: it shows the newest, at most its bound.
    let limit = feed_limit();
    let mut many = Vec::new();
    for i in 0..=limit {
        let identity = format!("many-{i}");
        many.push(RawWorker::start(b.addr, plain("many", "echo", 1, &identity)).await);
    }
    let last = many.last().map(|worker| worker.worker_id).expect("workers");
    text_of(
        &browser,
        &format!("#events li[data-event='worker_registered'][data-worker-id='{last}']"),
    )
    .await;
    assert_eq!(
        eval(
            &browser,
            "return document.querySelectorAll('#events li').length"
        )
        .await,
        json!(limit)
    );
    let first = eval(
        &browser,
        "return document.querySelector('#events li[data-event=\"worker_registered\"] .who').firstChild.textContent",
    )
    .await;
    assert_eq!(first, json!(format!("many-{limit}")), "the newest first");
    drop(many);

    // The link leads to a's console, which names a and shows its pool.
    let href = href.expect("an href");
    browser.goto(&href).await.expect("a's console loads");
    browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(
            "article[data-channel='aion.dispatch.reports.default']",
        ))
        .await
        .expect("a's console shows its reports pool");
    let node_id = browser.find(Locator::Id("node-id")).await.expect("node id");
    assert_eq!(node_id.text().await.expect("text"), "a");

    // A node with an admin token says how to pass it, and takes it from the address.
    let (_c, admin_c) = TestNode::with_admin(NodeConfig {
        admin_token: Some("console-secret".into()),
        ..cluster_config("c", &[])
    })
    .await;
    browser
        .goto(&format!("http://{admin_c}/"))
        .await
        .expect("c's console loads");
    let problem = browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#problem:not([hidden])"))
        .await
        .expect("the console says it cannot read the node")
        .text()
        .await
        .expect("text");
    assert!(
        problem.contains(&format!(
            "open the console as http://{admin_c}/#token=TOKEN"
        )),
        "{problem}"
    );
    let feed = text_of(&browser, "#events-state[data-state='refused']").await;
    assert!(feed.contains("#token=TOKEN"), "{feed}");
    browser
        .goto(&format!("http://{admin_c}/#token=console-secret"))
        .await
        .expect("c's console loads with its token");
    refreshed(&browser, 1).await;
    let node_id = browser.find(Locator::Id("node-id")).await.expect("node id");
    assert_eq!(node_id.text().await.expect("text"), "c");
    text_of(&browser, "#events-state[data-state='live']").await;

    browser.close().await.expect("the browser closes");
    drop(driver);
}
