//! Peers found by name: a `--peer` name is a join point at every address it resolves to, and
//! resolved again every `peer_resolve_interval_ms`, so addresses that appear are dialled and
//! those that disappear no longer are (a live link stays). Once with a scripted lookup, in
//! process; once with `lintel serve` processes in network namespaces of their own, where
//! `peers.test` resolves through each host's `/etc/hosts` to three addresses, one of which is
//! then cut off the network (skipped, saying so, without root and `ip netns`, unless
//! `CI_REQUIRE_NETNS` is set).

use lintel_test_support as support;

use lintel_test_support::processes;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lintel::status::{JoinPoint, JoinState, Status};
use lintel::transport::resolve::{Looking, Lookup, Resolver};
use lintel::NodeConfig;
use processes::until;
use support::{cluster_config, up, Netns, Served, TestNode};

/// Answers each name with what the test set last.
#[derive(Default)]
struct Scripted(Mutex<HashMap<String, Vec<SocketAddr>>>);

impl Scripted {
    fn set(&self, name: &str, addresses: &[SocketAddr]) {
        let mut names = self.0.lock().unwrap_or_else(|e| e.into_inner());
        names.insert(name.to_owned(), addresses.to_vec());
    }
}

impl Lookup for Scripted {
    fn lookup<'a>(&'a self, target: &'a str) -> Looking<'a> {
        let names = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let answer = names.get(target).cloned();
        Box::pin(async move { answer.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound)) })
    }
}

/// Each join point's state, by address.
fn states(points: &[JoinPoint]) -> BTreeMap<String, JoinState> {
    points
        .iter()
        .map(|point| (point.address.clone(), point.state))
        .collect()
}

fn expect(rows: &[(SocketAddr, JoinState)]) -> BTreeMap<String, JoinState> {
    rows.iter()
        .map(|(address, state)| (address.to_string(), *state))
        .collect()
}

#[tokio::test]
async fn a_peer_name_is_dialled_at_every_address_it_resolves_to_as_they_come_and_go() {
    let a = TestNode::joined("a", &[]).await;
    let b = TestNode::joined("b", &[]).await;
    let c = TestNode::joined("c", &[]).await;
    let names = Arc::new(Scripted::default());
    names.set("peers.test:7400", &[a.addr, b.addr]);
    let config = NodeConfig {
        peers: vec!["peers.test:7400".into()],
        peer_resolve_interval_ms: 50,
        ..cluster_config("x", &[])
    };
    let x = TestNode::resolving(config, Resolver::with_lookup(names.clone())).await;
    let linked = JoinState::Linked;
    let both = expect(&[(a.addr, linked), (b.addr, linked)]);
    x.wait_join_points("a and b linked through the name", |points| {
        states(points) == both
    })
    .await;
    assert!(x
        .node
        .dispatcher()
        .mesh()
        .join_points()
        .iter()
        .all(|point| point.peer == "peers.test:7400"));

    // b leaves the name, c and x itself join it.
    names.set("peers.test:7400", &[a.addr, c.addr, x.addr]);
    let after = expect(&[
        (a.addr, linked),
        (c.addr, linked),
        (x.addr, JoinState::Myself),
    ]);
    x.wait_join_points("b gone, c linked, x itself", |points| {
        states(points) == after
    })
    .await;
    assert!(
        up(&x.peers(), "b"),
        "a live link is not cut because its address left the name"
    );
}

/// `lintel` in host `index`'s namespace, free of the caller's `LINTEL_*` settings.
fn lintel_in(netns: &Netns, index: usize) -> std::process::Command {
    let mut command = netns.command(index, env!("CARGO_BIN_EXE_lintel"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("LINTEL_") {
            command.env_remove(&name);
        }
    }
    command
}

/// Node `index`'s status, asked with `lintel status --json` from inside its namespace.
async fn status_of(netns: &Netns, index: usize) -> Result<Status, String> {
    let mut command = lintel_in(netns, index);
    let address = format!("{}:7400", netns.host(index).ip);
    command.args(["status", "--json", "--connect", &address]);
    let out = tokio::process::Command::from(command)
        .output()
        .await
        .map_err(|err| err.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|err| err.to_string())
}

/// Waits until node `index`'s join points are `want`, address by address.
async fn wait_join_points(
    netns: &Netns,
    index: usize,
    what: &str,
    want: &BTreeMap<String, JoinState>,
) -> Status {
    until(what, Duration::from_secs(60), async || {
        let status = status_of(netns, index).await?;
        if states(&status.join_points) == *want {
            Ok(status)
        } else {
            Err(format!("{:#?}", status.join_points))
        }
    })
    .await
}

#[tokio::test]
async fn nodes_in_their_own_namespaces_find_each_other_through_one_name_with_three_addresses() {
    let test = "nodes_in_their_own_namespaces_find_each_other_through_one_name";
    let Some(netns) = Netns::create_or_skip(test, 3) else {
        return;
    };
    let ips: Vec<String> = netns
        .hosts()
        .iter()
        .map(|host| host.ip.to_string())
        .collect();
    let named =
        |ips: &[&String]| -> String { ips.iter().map(|ip| format!("{ip} peers.test\n")).collect() };
    let all: Vec<&String> = ips.iter().collect();
    for index in 0..3 {
        netns.write_hosts(index, &named(&all)).expect("hosts");
    }
    // Declared after the namespaces, so dropped (killed) before them.
    let mut nodes = Vec::new();
    for (index, ip) in ips.iter().enumerate() {
        let mut command = lintel_in(&netns, index);
        command
            .args(["serve", "--listen", &format!("{ip}:7400")])
            .args([
                "--node-id",
                &format!("n{index}"),
                "--peer",
                "peers.test:7400",
            ])
            .env("LINTEL_PEER_RESOLVE_INTERVAL_MS", "200")
            .env("LINTEL_PEER_PING_INTERVAL_MS", "200")
            .env("RUST_LOG", "info");
        let mut node = Served::spawn(command);
        node.wait_for("listening");
        nodes.push(node);
    }
    let at = |index: usize| -> String { format!("{}:7400", ips[index]) };
    for index in 0..3 {
        let want: BTreeMap<String, JoinState> = (0..3)
            .map(|other| {
                let state = if other == index {
                    JoinState::Myself
                } else {
                    JoinState::Linked
                };
                (at(other), state)
            })
            .collect();
        let status = wait_join_points(&netns, index, "every address of the name", &want).await;
        assert!(status
            .join_points
            .iter()
            .all(|point| point.peer == "peers.test:7400"));
    }

    // n2 leaves the name as node 0 reads it: no longer dialled there, its link kept.
    netns
        .write_hosts(0, &named(&[&ips[0], &ips[1]]))
        .expect("hosts");
    let fewer = BTreeMap::from([(at(0), JoinState::Myself), (at(1), JoinState::Linked)]);
    let status = wait_join_points(&netns, 0, "n2's address gone from the name", &fewer).await;
    let n2 = status.peers.iter().find(|peer| peer.link.node_id == "n2");
    assert!(
        n2.is_some_and(|peer| peer.link.state == lintel::wire::PeerLinkState::Up),
        "the link to n2 stays: {:#?}",
        status.peers
    );

    // And back: a new address of the name is dialled again.
    netns.write_hosts(0, &named(&all)).expect("hosts");
    let again = BTreeMap::from([
        (at(0), JoinState::Myself),
        (at(1), JoinState::Linked),
        (at(2), JoinState::Linked),
    ]);
    wait_join_points(&netns, 0, "n2's address back in the name", &again).await;

    // n2 cut off the network: its join point is no longer up, wherever its dials stand.
    netns.set_link(2, false).expect("cut n2 off");
    until(
        "n2's join point down",
        Duration::from_secs(60),
        async || {
            let status = status_of(&netns, 0).await?;
            let state = states(&status.join_points).get(&at(2)).copied();
            match state {
                Some(JoinState::Failing | JoinState::Unlinked) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    netns.set_link(2, true).expect("join n2 again");
    wait_join_points(&netns, 0, "n2 linked again", &again).await;
    drop(nodes);
}
