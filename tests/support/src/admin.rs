//! A plain HTTP GET against a node's admin listener, as an operator's scraper would send it.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::node::{within, TestNode};

impl TestNode {
    /// A node with `config` and an admin listener on a free loopback port, and that address.
    pub async fn with_admin(config: lintel::NodeConfig) -> (Self, SocketAddr) {
        let admin = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            probe.local_addr().expect("addr")
        };
        let node = Self::with_config(lintel::NodeConfig {
            admin_listen: Some(admin),
            ..config
        })
        .await;
        (node, admin)
    }
}

/// GETs `path` from the admin listener: the status code and the body.
pub async fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let (code, _head, body) = admin_response(admin, path).await;
    (code, body)
}

/// GETs `path` from the admin listener: the status code, the head (lowercase) and the body.
pub async fn admin_response(admin: SocketAddr, path: &str) -> (u16, String, String) {
    within("an admin request", async {
        // The node binds its admin listener as it starts serving: until then, connecting is
        // refused, and the next attempt waits for the node's task to run.
        let mut stream = loop {
            match tokio::net::TcpStream::connect(admin).await {
                Ok(stream) => break stream,
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
                    tokio::task::yield_now().await;
                }
                Err(err) => panic!("connect to the admin listener: {err}"),
            }
        };
        let head = format!("GET {path} HTTP/1.1\r\nHost: lintel\r\nConnection: close\r\n\r\n");
        stream.write_all(head.as_bytes()).await.expect("write");
        read_response(&mut stream).await
    })
    .await
}

/// Reads a whole response: the status code, the head (lowercase) and the body.
async fn read_response(stream: &mut tokio::net::TcpStream) -> (u16, String, String) {
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code");
    (code, head.to_ascii_lowercase(), body.to_owned())
}

/// POSTs `json` to `path` on the admin listener, with `Authorization: Bearer token` when
/// given: the status code and the body.
pub async fn admin_post(
    admin: SocketAddr,
    path: &str,
    json: &str,
    token: Option<&str>,
) -> (u16, String) {
    admin_request(admin, ("POST", path), Some(json), token).await
}

/// Sends `method` `path` with a JSON `body` (if any) and `Authorization: Bearer token` (if
/// any) to the admin listener: the status code and the body.
pub async fn admin_request(
    admin: SocketAddr,
    (method, path): (&str, &str),
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, String) {
    within("an admin request with a token", async {
        let mut stream = tokio::net::TcpStream::connect(admin)
            .await
            .expect("connect to the admin listener");
        let auth = token.map_or(String::new(), |token| {
            format!("Authorization: Bearer {token}\r\n")
        });
        let body = body.unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: lintel\r\nConnection: close\r\n{auth}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        let (code, _head, body) = read_response(&mut stream).await;
        (code, body)
    })
    .await
}
