//! `deploy/` against the node it runs: the Kubernetes manifests and the systemd unit set only
//! config keys the node knows (each config file loaded by `lintel serve --print-config`, the
//! node's own loader, with the environment the manifests give it), their probes answer on a
//! node run from that config, SIGTERM drains it, each grace outlasts its shutdown, and the
//! ports, names and labels agree. `scripts/check-deploy.sh` checks the same files against
//! Kubernetes' schemas and with `systemd-analyze verify`.

use lintel_test_support as support;

use lintel_test_support::processes;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lintel::NodeConfig;
use processes::{until, NodeProcess};
use serde::Deserialize;
use serde_json::Value;

/// How much longer than `drain_timeout_ms` a node's shutdown may take: the drain and the peer
/// links' farewells share one drain timeout, and closing the connections then waits up to
/// another.
const SHUTDOWN_DRAINS: u64 = 2;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every document of every `deploy/kubernetes/*.yaml`, as JSON.
fn manifests() -> Vec<Value> {
    let dir = root().join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("deploy/kubernetes")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a manifest");
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let value =
                Value::deserialize(doc).unwrap_or_else(|err| panic!("{}: {err}", file.display()));
            docs.push(value);
        }
    }
    docs
}

/// The one resource of `kind` named `name`.
fn resource<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|doc| doc["kind"] == kind && doc["metadata"]["name"] == name)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name} in deploy/kubernetes");
    found[0]
}

fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
}

/// What the manifests deploy: the StatefulSet's one container, its config file and its
/// environment.
struct Kubernetes {
    docs: Vec<Value>,
    statefulset: Value,
    container: Value,
    /// The config file, as the ConfigMap holds it.
    config_text: String,
    /// Where the container reads it.
    config_path: String,
}

impl Kubernetes {
    fn load() -> Self {
        let docs = manifests();
        let statefulset = resource(&docs, "StatefulSet", "lintel").clone();
        let pod = &statefulset["spec"]["template"]["spec"];
        let containers = pod["containers"].as_array().expect("containers");
        assert_eq!(containers.len(), 1, "one container");
        let container = containers[0].clone();
        // The config file: the ConfigMap a volume holds, mounted where --config reads it.
        let mount = container["volumeMounts"]
            .as_array()
            .and_then(|mounts| mounts.iter().find(|m| m["name"] == "config"))
            .expect("a config mount");
        let volume = pod["volumes"]
            .as_array()
            .and_then(|volumes| volumes.iter().find(|v| v["name"] == "config"))
            .expect("a config volume");
        let configmap = resource(&docs, "ConfigMap", text(&volume["configMap"]["name"]));
        let data = configmap["data"].as_object().expect("ConfigMap data");
        assert_eq!(data.len(), 1, "one file in the ConfigMap");
        let (file, config_text) = data.iter().next().expect("a file");
        let config_path = format!("{}/{file}", text(&mount["mountPath"]));
        let args: Vec<&str> = container["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(text)
            .collect();
        assert_eq!(args, ["serve", "--config", config_path.as_str()]);
        Self {
            docs: docs.clone(),
            config_text: text(config_text).to_owned(),
            config_path,
            container,
            statefulset,
        }
    }

    /// The container's `LINTEL_*` and `RUST_LOG` variables as pod `lintel-0` gets them, each
    /// `$(NAME)` expanded from a variable defined before it, as Kubernetes expands them.
    fn env(&self) -> Vec<(String, String)> {
        let mut defined: BTreeMap<String, String> = BTreeMap::new();
        let mut env = Vec::new();
        for var in self.container["env"].as_array().expect("env") {
            let name = text(&var["name"]).to_owned();
            let value = match &var["valueFrom"]["fieldRef"]["fieldPath"] {
                Value::String(field) => {
                    assert_eq!(field, "metadata.name", "only the pod's name is read");
                    "lintel-0".to_owned()
                }
                _ => {
                    let mut value = text(&var["value"]).to_owned();
                    for (known, with) in &defined {
                        value = value.replace(&format!("$({known})"), with);
                    }
                    assert!(
                        !value.contains("$("),
                        "{name}: {value} names an undefined variable"
                    );
                    value
                }
            };
            defined.insert(name.clone(), value.clone());
            if name.starts_with("LINTEL_") || name == "RUST_LOG" {
                env.push((name, value));
            }
        }
        env
    }

    /// The container port named `name`.
    fn port(&self, name: &str) -> u16 {
        let ports = self.container["ports"].as_array().expect("ports");
        let port = ports
            .iter()
            .find(|port| port["name"] == name)
            .unwrap_or_else(|| panic!("no container port {name}"));
        u16::try_from(port["containerPort"].as_u64().expect("a number")).expect("a port")
    }

    /// The pod's labels.
    fn labels(&self) -> &Value {
        &self.statefulset["spec"]["template"]["metadata"]["labels"]
    }
}

/// A file of its own in a directory of its own, removed on drop.
struct Written(PathBuf);

impl Written {
    /// Writes `text` to `name` in a new directory.
    fn new(name: &str, text: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lintel-deploy-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        Self(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Written {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The config `lintel serve --config FILE` makes with `env`, as `--print-config` prints it
/// and read back: every key the file and the variables set must be one the node knows.
fn loaded(config: &Path, env: &[(String, String)]) -> NodeConfig {
    let out = support::lintel()
        .args(["serve", "--config"])
        .arg(config)
        .arg("--print-config")
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .expect("run lintel serve --print-config");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {}",
        config.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    toml::from_str(&printed).unwrap_or_else(|err| panic!("{err}: {printed}"))
}

fn port_of(address: &str) -> u16 {
    address
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {address}"))
}

#[test]
fn the_configmap_is_a_config_the_node_loads_with_the_statefulsets_environment() {
    let k8s = Kubernetes::load();
    let file = Written::new("lintel.toml", &k8s.config_text);
    let config = loaded(file.path(), &k8s.env());
    assert_eq!(
        config.node_id, "lintel-0",
        "each pod is a member of its own"
    );
    assert_eq!(config.advertise, "lintel-0.lintel-peers:7400");
    assert!(!config.peers.is_empty(), "peers are found by name");
    assert!(k8s.config_path.starts_with("/etc/"));
}

#[test]
fn the_manifests_ports_names_and_labels_agree() {
    let k8s = Kubernetes::load();
    let file = Written::new("ports.toml", &k8s.config_text);
    let config = loaded(file.path(), &k8s.env());
    assert_eq!(config.listen.port(), k8s.port("peer"));
    let admin = config
        .admin_listen
        .expect("the probes need the admin listener");
    assert_eq!(admin.port(), k8s.port("admin"));

    // The StatefulSet's headless service, whose name the peers resolve and the pods advertise.
    let service_name = text(&k8s.statefulset["spec"]["serviceName"]);
    let headless = resource(&k8s.docs, "Service", service_name);
    assert_eq!(headless["spec"]["clusterIP"], "None", "headless");
    let service_port = |service: &Value, target: &str| -> u16 {
        let ports = service["spec"]["ports"].as_array().expect("ports");
        let port = ports
            .iter()
            .find(|port| port["targetPort"] == target)
            .unwrap_or_else(|| panic!("no port to {target}"));
        u16::try_from(port["port"].as_u64().expect("a number")).expect("a port")
    };
    let peer_port = service_port(headless, "peer");
    assert_eq!(
        config.peers,
        [format!("{service_name}:{peer_port}")],
        "peers are the headless service"
    );
    assert!(config
        .advertise
        .ends_with(&format!(".{service_name}:{peer_port}")));
    assert_eq!(port_of(&config.advertise), config.listen.port());

    // Every service's target ports are the container's; every selector picks the pods.
    let labels = k8s.labels();
    for doc in &k8s.docs {
        let selector = match doc["kind"].as_str() {
            Some("Service") => {
                for port in doc["spec"]["ports"].as_array().expect("ports") {
                    k8s.port(text(&port["targetPort"]));
                }
                &doc["spec"]["selector"]
            }
            Some("PodDisruptionBudget") => &doc["spec"]["selector"]["matchLabels"],
            Some("StatefulSet") => &doc["spec"]["selector"]["matchLabels"],
            _ => continue,
        };
        let selector = selector.as_object().expect("a selector");
        assert!(!selector.is_empty());
        for (key, value) in selector {
            assert_eq!(&labels[key], value, "{} selects the pods", doc["kind"]);
        }
    }
}

#[tokio::test]
async fn the_probes_answer_and_sigterm_drains_a_node_run_from_the_configmap() {
    let k8s = Kubernetes::load();
    let file = Written::new("probes.toml", &k8s.config_text);
    let drain_ms = loaded(file.path(), &k8s.env()).drain_timeout_ms;
    let env = k8s.env();
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    // On loopback ports (flags beat the file); the peer name resolves to nothing here, as
    // when the first pod of the StatefulSet starts alone.
    let args = ["--config".to_owned(), file.path().display().to_string()];
    let node = NodeProcess::launch(&args, &env).await;
    for (probe, want) in [("readinessProbe", "/ready"), ("livenessProbe", "/health")] {
        let get = &k8s.container[probe]["httpGet"];
        assert_eq!(get["path"], want, "{probe}");
        assert_eq!(get["port"], "admin", "{probe} asks the admin listener");
        let path = text(&get["path"]);
        until(
            &format!("{path} to answer 200"),
            Duration::from_secs(10),
            async || match node.get(path).await {
                (200, _) => Ok(()),
                (code, body) => Err(format!("{code} {body}")),
            },
        )
        .await;
    }

    // The preStop hook drains the node as Ctrl-C does: it sends the node SIGTERM and waits.
    let hook = k8s.container["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .expect("a preStop command");
    let script = text(hook.last().expect("a script"));
    assert!(script.contains("kill -TERM 1"), "{script}");
    let grace = Duration::from_secs(
        k8s.statefulset["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .expect("terminationGracePeriodSeconds"),
    );
    assert!(
        grace > Duration::from_millis(SHUTDOWN_DRAINS * drain_ms),
        "terminationGracePeriodSeconds {grace:?} must outlast the shutdown, {SHUTDOWN_DRAINS} x {drain_ms} ms"
    );
    let (exited, log) = node.stop("TERM", grace).await;
    assert!(exited.success(), "{exited}: {log:#?}");
    for line in ["draining", "node stopped"] {
        assert!(log.iter().any(|l| l.contains(line)), "{line:?} in {log:#?}");
    }
}

/// The unit's `[Service]` settings, each key's last value.
fn unit(text: &str) -> BTreeMap<String, String> {
    let mut section = "";
    let mut keys = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = if name == "Service" { "Service" } else { "" };
            continue;
        }
        if section == "Service" {
            if let Some((key, value)) = line.split_once('=') {
                keys.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    keys
}

#[tokio::test]
async fn the_systemd_unit_stops_the_node_with_sigterm_within_its_timeout() {
    let dir = root().join("deploy/systemd");
    let service = unit(&std::fs::read_to_string(dir.join("lintel.service")).expect("unit"));
    let exec: Vec<&str> = service["ExecStart"].split_whitespace().collect();
    assert_eq!(exec[..3], ["/usr/local/bin/lintel", "serve", "--config"]);
    assert_eq!(exec.len(), 4);
    assert_eq!(service["KillSignal"], "SIGTERM");
    // The config file beside the unit is what it reads once installed.
    let config_file = dir.join("lintel.toml");
    assert_eq!(
        Path::new(exec[3]).file_name(),
        config_file.file_name(),
        "ExecStart reads the config installed from deploy/systemd"
    );
    let config = loaded(&config_file, &[]);
    let timeout = Duration::from_secs(service["TimeoutStopSec"].parse().expect("seconds"));
    assert!(
        timeout > Duration::from_millis(SHUTDOWN_DRAINS * config.drain_timeout_ms),
        "TimeoutStopSec {timeout:?} must outlast the shutdown, {SHUTDOWN_DRAINS} x {} ms",
        config.drain_timeout_ms
    );
    let args = ["--config".to_owned(), config_file.display().to_string()];
    let node = NodeProcess::launch(&args, &[]).await;
    let (exited, log) = node.stop("TERM", timeout).await;
    assert!(exited.success(), "{exited}: {log:#?}");
    assert!(
        log.iter().any(|line| line.contains("node stopped")),
        "{log:#?}"
    );
}
