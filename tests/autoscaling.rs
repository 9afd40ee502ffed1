//! deploy/autoscaling against a real Prometheus: the KEDA ScaledObject carries
//! `queries.yaml`'s queries, prometheus-adapter's rules yield them for the HPA's selectors, and
//! each query, evaluated by Prometheus scraping a node whose dispatches wait for a worker, reads
//! the backlog's count and age. A pool name the text format must escape reaches Prometheus whole.
//!
//! Skipped, saying why, when `prometheus` is not on PATH (`scripts/install-prometheus.sh`
//! installs it; `.ci/run` does, and sets `CI_REQUIRE_PROMETHEUS=1` so CI cannot skip it).

use lintel_test_support as support;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lintel::sdk::DispatchOptions;
use lintel::NodeConfig;
use serde_json::Value;
use support::{client, request, TestNode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The pool the examples scale on.
const POOL: &str = "aion.dispatch.billing.default";
/// How long Prometheus may take to start, scrape and answer.
const PROMETHEUS_WAIT: Duration = Duration::from_secs(60);

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/autoscaling")
}

fn yaml(file: &str) -> Value {
    let text = std::fs::read_to_string(dir().join(file)).expect("read an example");
    serde_yaml_ng::from_str(&text).unwrap_or_else(|err| panic!("{file}: {err}"))
}

/// `queries.yaml`: each query by name.
fn queries() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir().join("queries.yaml")).expect("queries.yaml");
    serde_yaml_ng::from_str(&text).expect("queries.yaml maps names to queries")
}

#[test]
fn the_manifests_carry_the_queries_of_queries_yaml() {
    let queries = queries();
    assert_eq!(
        queries.keys().collect::<Vec<_>>(),
        ["oldest_wait_seconds", "waiting"]
    );

    let keda = yaml("keda-scaledobject.yaml");
    assert_eq!(keda["kind"], "ScaledObject");
    let triggers = keda["spec"]["triggers"].as_array().expect("triggers");
    let used: Vec<&str> = triggers
        .iter()
        .map(|trigger| {
            assert_eq!(trigger["type"], "prometheus");
            trigger["metadata"]["query"].as_str().expect("a query")
        })
        .collect();
    let mut expected: Vec<&str> = queries.values().map(String::as_str).collect();
    let mut sorted = used.clone();
    sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(sorted, expected, "KEDA scales on queries.yaml's queries");

    // Each HPA metric, through the adapter's rule for its series and its selector's labels,
    // is one of the queries.
    let adapter = yaml("prometheus-adapter.yaml");
    let config: Value = serde_yaml_ng::from_str(
        adapter["data"]["config.yaml"]
            .as_str()
            .expect("the adapter's config"),
    )
    .expect("the adapter's config is YAML");
    let hpa = yaml("hpa.yaml");
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    let metrics = hpa["spec"]["metrics"].as_array().expect("metrics");
    assert_eq!(metrics.len(), 2);
    for metric in metrics {
        let external = &metric["external"]["metric"];
        let name = external["name"].as_str().expect("a metric name");
        let labels = external["selector"]["matchLabels"]
            .as_object()
            .expect("a selector");
        assert_eq!(labels.get("pool").and_then(Value::as_str), Some(POOL));
        let matchers: Vec<String> = labels
            .iter()
            .map(|(key, value)| format!("{key}=\"{}\"", value.as_str().unwrap_or_default()))
            .collect();
        let rule = config["externalRules"]
            .as_array()
            .expect("externalRules")
            .iter()
            .find(|rule| rule["seriesQuery"] == name)
            .unwrap_or_else(|| panic!("no adapter rule serves {name}"));
        let query = rule["metricsQuery"]
            .as_str()
            .expect("metricsQuery")
            .replace("<<.Series>>", name)
            .replace("<<.LabelMatchers>>", &matchers.join(","));
        assert!(
            queries.values().any(|known| *known == query),
            "the HPA's {name} reads {query}, not one of queries.yaml's"
        );
    }
}

/// A Prometheus child scraping one target every second, its storage in a directory of its
/// own; killed and its directory removed on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Prometheus {
    fn start(binary: &Path, target: SocketAddr) -> Self {
        let dir = std::env::temp_dir().join(format!("lintel-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).expect("a temp dir");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: lintel\n    static_configs:\n      - targets: [\"{target}\"]\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write the config");
        let addr = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            probe.local_addr().expect("addr")
        };
        let log = std::fs::File::create(dir.join("prometheus.log")).expect("a log file");
        let child = Command::new(binary)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Self { child, addr, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// GETs `path` (already encoded): the status code and the body, or why not.
    async fn get(&self, path: &str) -> Result<(u16, String), std::io::Error> {
        let mut stream = tokio::net::TcpStream::connect(self.addr).await?;
        // HTTP/1.0: the body ends with the connection, never chunked.
        let head = format!("GET {path} HTTP/1.0\r\nHost: prometheus\r\n\r\n");
        stream.write_all(head.as_bytes()).await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        Ok((code, body.to_owned()))
    }

    /// The instant vector `query` evaluates to now: each series' labels and value.
    async fn query(&self, query: &str) -> Vec<(Value, f64)> {
        let path = format!("/api/v1/query?query={}", encode(query));
        let Ok((200, body)) = self.get(&path).await else {
            return Vec::new();
        };
        let answer: Value = serde_json::from_str(&body).unwrap_or_default();
        answer["data"]["result"]
            .as_array()
            .map(|series| {
                series
                    .iter()
                    .filter_map(|one| {
                        let value = one["value"][1].as_str()?.parse().ok()?;
                        Some((one["metric"].clone(), value))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Polls `query` until `holds` accepts its result, within [`PROMETHEUS_WAIT`]: Prometheus
    /// tells nobody when a scrape lands, so asking again is the only way to hear of it.
    async fn until(
        &self,
        query: &str,
        holds: impl Fn(&[(Value, f64)]) -> bool,
    ) -> Vec<(Value, f64)> {
        let waited = tokio::time::timeout(PROMETHEUS_WAIT, async {
            let mut every = tokio::time::interval(Duration::from_millis(200));
            loop {
                every.tick().await;
                let result = self.query(query).await;
                if holds(&result) {
                    return result;
                }
            }
        })
        .await;
        waited.unwrap_or_else(|_| {
            panic!(
                "Prometheus never answered {query} as expected within {PROMETHEUS_WAIT:?}; its log:\n{}",
                self.log()
            )
        })
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `text` percent-encoded for a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(byte).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// `prometheus` on PATH, or why not.
fn prometheus_binary() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("prometheus"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| "prometheus is not on PATH".to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_reads_the_backlog_count_and_age_the_examples_scale_on() {
    let binary = match prometheus_binary() {
        Ok(binary) => binary,
        Err(why) if std::env::var_os("CI_REQUIRE_PROMETHEUS").is_some() => {
            panic!("CI_REQUIRE_PROMETHEUS is set but {why}")
        }
        Err(why) => {
            let _ = writeln!(
                std::io::stderr(),
                "skipping the autoscaling queries' Prometheus test: {why}; \
                 scripts/install-prometheus.sh installs it"
            );
            return;
        }
    };

    // No worker at all: three dispatches of billing wait for one, as a pool scaled to zero.
    let (node, admin) = TestNode::with_admin(NodeConfig::default()).await;
    let producer = client(node.addr).await;
    let waits = DispatchOptions::default().wait_for_worker(Duration::from_secs(120));
    let weird = "we\"ird\\name\nline";
    let mut waiting = tokio::task::JoinSet::new();
    for (namespace, n) in [("billing", 3), (weird, 1)] {
        for i in 0..n {
            let (producer, waits) = (producer.clone(), waits.clone());
            waiting.spawn(async move {
                producer
                    .dispatch(
                        &support::dispatch_of(request(namespace, "echo", &i.to_string())),
                        &waits,
                    )
                    .await
            });
        }
    }
    node.wait_registry("four dispatches waiting", |r| r.waiting() == 4)
        .await;

    let prometheus = Prometheus::start(&binary, admin);
    let queries = queries();
    let waiting_now = prometheus
        .until(&queries["waiting"], |result| {
            result.first().is_some_and(|(_, n)| *n == 3.0)
        })
        .await;
    assert_eq!(waiting_now.len(), 1);
    // The age grows between scrapes while nothing is served.
    let first = prometheus
        .until(&queries["oldest_wait_seconds"], |result| {
            result.first().is_some_and(|(_, age)| *age > 0.0)
        })
        .await;
    let first_age = first.first().map_or(0.0, |(_, age)| *age);
    prometheus
        .until(&queries["oldest_wait_seconds"], |result| {
            result.first().is_some_and(|(_, age)| *age > first_age)
        })
        .await;

    // The escaped pool name arrives as the node named it.
    let channel = lintel::wire::channel::dispatch_channel_name(weird, "default", None);
    let weird_series = prometheus
        .until(
            "lintel_pool_dispatches_waiting{pool=~\"(?s)aion[.]dispatch[.]we.*\"}",
            |result| !result.is_empty(),
        )
        .await;
    assert_eq!(weird_series.len(), 1);
    assert_eq!(weird_series[0].0["pool"].as_str(), Some(channel.as_str()));
    assert_eq!(weird_series[0].1, 1.0);

    waiting.abort_all();
    node.shutdown().await;
}
