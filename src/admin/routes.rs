//! The admin listener's routes, declared once: the table answers each request and writes the
//! `/endpoints` text; the accept loop and the bearer-token check.

use std::convert::Infallible;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::reply::{json, reply, Body};
use super::{events, health, metrics, pools, status};
use crate::console::{self, Window};
use crate::shared::Shared;

/// The methods the admin listener answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Get,
    Post,
}

/// What a route serves.
#[derive(Debug, Clone, Copy)]
enum Serve {
    Console,
    Metrics,
    Health,
    Ready,
    Linked,
    Status,
    Window,
    Events,
    Pools,
    Endpoints,
    SetPool,
}

/// One row of [`ROUTES`].
struct Route {
    verb: Verb,
    path: &'static str,
    /// Served without the `admin_token`: it holds no data.
    open: bool,
    serve: Serve,
    /// Its line in `/endpoints`.
    about: &'static str,
}

const fn get(path: &'static str, serve: Serve, about: &'static str) -> Route {
    Route {
        verb: Verb::Get,
        path,
        open: false,
        serve,
        about,
    }
}

/// Every route, in the order `/endpoints` lists them. The console's other files are served
/// after these, open like `/`.
const ROUTES: &[Route] = &[
    Route {
        open: true,
        ..get(
            "/",
            Serve::Console,
            "the console: this node, its peers, pools and workers, live",
        )
    },
    get(
        "/metrics",
        Serve::Metrics,
        "Prometheus text, read from the node's state at each scrape",
    ),
    Route {
        open: true,
        ..get(
            "/health",
            Serve::Health,
            "200 while the process serves (a liveness probe)",
        )
    },
    get(
        "/ready",
        Serve::Ready,
        "200 when the node should get traffic (a readiness probe), 503 with the reason otherwise",
    ),
    get(
        "/linked",
        Serve::Linked,
        "200 when ready and linked to every member it knows, synced with each (what a rolling \
         restart waits for); 503 with the reason",
    ),
    get(
        "/status",
        Serve::Status,
        "the node's status as JSON, as `lintel status --json` prints it, with TLS and peer \
         consoles",
    ),
    get(
        "/window",
        Serve::Window,
        "JSON: outcome rates, p50/p99 latency, in flight and waiting, second by second; each \
         pool's outcome rates and push-to-reply p50/p99 over the last ten seconds or so",
    ),
    get(
        "/events",
        Serve::Events,
        "the node's lifecycle events as Server-Sent Events, each `data:` a `lintel watch` line",
    ),
    get(
        "/pools",
        Serve::Pools,
        "JSON: the pools' current deployments, as /status lists them",
    ),
    get("/endpoints", Serve::Endpoints, "this list"),
    Route {
        verb: Verb::Post,
        ..get(
            "/pools",
            Serve::SetPool,
            "JSON {namespace, task_queue, deployment}: sets (or, deployment null, clears) a \
             pool's current deployment on every node of the mesh",
        )
    },
];

/// The answer to `/endpoints`, written from [`ROUTES`].
fn endpoints() -> String {
    let mut text = String::from("lintel admin listener\n");
    for route in ROUTES {
        let label = match route.verb {
            Verb::Get => route.path.to_owned(),
            Verb::Post => format!("POST {}", route.path),
        };
        text.push_str(&format!("{label:<10} {}\n", route.about));
    }
    text
}

/// Serves admin requests on `listener` until `closing` fires.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, closing: CancellationToken) {
    let window = Arc::new(Window::default());
    tokio::spawn(Arc::clone(&window).sample(Arc::clone(&shared), closing.clone()));
    loop {
        let accepted = tokio::select! {
            () = closing.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        let shared = Arc::clone(&shared);
        let window = Arc::clone(&window);
        let closing = closing.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let shared = Arc::clone(&shared);
                let window = Arc::clone(&window);
                async move { Ok::<_, Infallible>(answer(&shared, &window, request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = connection => {}
                () = closing.cancelled() => {}
            }
        });
    }
}

/// The route `request` names, answered; a console file; or why not.
async fn answer(shared: &Shared, window: &Window, request: Request<Incoming>) -> Response<Body> {
    let verb = match *request.method() {
        Method::GET => Verb::Get,
        Method::POST => Verb::Post,
        _ => return not_allowed(),
    };
    let path = request.uri().path();
    let Some(route) = ROUTES
        .iter()
        .find(|route| route.verb == verb && route.path == path)
    else {
        return match (verb, console::asset(path)) {
            (Verb::Get, Some(asset)) => console_file(asset),
            (Verb::Get, None) => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
            (Verb::Post, _) => not_allowed(),
        };
    };
    if !route.open && !authorized(shared, &request) {
        return unauthorized();
    }
    match route.serve {
        Serve::Console => match console::asset(path) {
            Some(asset) => console_file(asset),
            None => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
        },
        Serve::Metrics => match metrics::text(shared) {
            Ok(text) => reply(
                StatusCode::OK,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                text,
            ),
            Err(err) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                err.to_string(),
            ),
        },
        Serve::Health => reply(StatusCode::OK, "text/plain", "ok\n"),
        Serve::Ready => match health::not_ready(shared) {
            None => reply(StatusCode::OK, "text/plain", "ready\n"),
            Some(why) => unavailable(why),
        },
        Serve::Linked => match health::not_linked(shared) {
            None => reply(StatusCode::OK, "text/plain", "linked\n"),
            Some(why) => unavailable(&why),
        },
        Serve::Status => json(status::json(shared)),
        Serve::Window => json(serde_json::to_string(&window.view())),
        Serve::Events => events::stream(shared),
        Serve::Pools => json(pools::current(shared)),
        Serve::Endpoints => reply(StatusCode::OK, "text/plain", endpoints()),
        Serve::SetPool => pools::set(shared, request).await,
    }
}

/// A console file, with the headers that keep it to itself.
fn console_file(asset: console::Asset) -> Response<Body> {
    let mut response = reply(StatusCode::OK, asset.content_type, asset.body);
    let headers = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", console::CONTENT_SECURITY_POLICY),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-cache"),
    ] {
        headers.insert(name, hyper::header::HeaderValue::from_static(value));
    }
    response
}

fn not_allowed() -> Response<Body> {
    reply(
        StatusCode::METHOD_NOT_ALLOWED,
        "text/plain",
        "GET only, but for POST /pools\n",
    )
}

fn unavailable(why: &str) -> Response<Body> {
    reply(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain",
        format!("{why}\n"),
    )
}

fn unauthorized() -> Response<Body> {
    let mut response = reply(
        StatusCode::UNAUTHORIZED,
        "text/plain",
        "this admin listener needs Authorization: Bearer with its admin_token\n",
    );
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer realm=\"lintel admin\""),
    );
    response
}

/// True when the node needs no admin token, or `request` carries it as a bearer token.
fn authorized(shared: &Shared, request: &Request<Incoming>) -> bool {
    let Some(token) = shared
        .config
        .admin_token
        .as_deref()
        .filter(|t| !t.is_empty())
    else {
        return true;
    };
    let presented = request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    bool::from(presented.ct_eq(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::{endpoints, ROUTES};

    #[test]
    fn endpoints_lists_every_route_once() {
        let text = endpoints();
        assert_eq!(text.lines().count(), ROUTES.len() + 1);
        for route in ROUTES {
            assert!(text.contains(route.about), "{text}");
        }
    }
}
