//! The peer side: what this binary does when the harness starts it in a [`Role`] (NATS responder
//! or requester, floor echo, relay or client). The bench's `main` (or a test's entry) calls
//! [`run`] before anything else; the roles live here, so the node crate carries no bench code and
//! no extra crate or binary target is needed.

use std::process::ExitCode;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::floor::{self, FloorClient};
use crate::measure::{self, Sample};
use crate::nats::{self, NatsTarget};
use crate::process::{self, Role};

/// Runs `role` to its end on one thread, as `lintel serve`, `lintel worker` and `lintel bench
/// --workers 0` run by default: every system's pieces are deployed alike (on two cores, a pool
/// of threads made NATS's requester and responders slower, not faster).
pub fn run(role: Role) -> ExitCode {
    let name = role.name();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("{name}: cannot start the tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(role)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{name}: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(role: Role) -> Result<(), String> {
    match role {
        Role::NatsResponder { url } => {
            process::exit_when_stdin_closes();
            let responder = nats::responder(&url).await?;
            process::print_ready("");
            responder.await;
            Ok(())
        }
        Role::NatsRequester { url, load } => {
            let client = nats::connect(&url).await?;
            let target = Arc::new(NatsTarget { client });
            let sample = measure::run(&target, &load.load()).await;
            let _ = target.client.drain().await;
            report(&sample)
        }
        Role::FloorEcho => {
            process::exit_when_stdin_closes();
            let listener = bind().await?;
            process::print_ready(&local_addr(&listener)?);
            floor::serve_echo(listener).await;
            Ok(())
        }
        Role::FloorRelay { echo } => {
            process::exit_when_stdin_closes();
            let listener = bind().await?;
            process::print_ready(&local_addr(&listener)?);
            floor::serve_relay(listener, echo).await;
            Ok(())
        }
        Role::FloorClient { targets, load } => {
            let client = FloorClient::connect(&targets)
                .await
                .map_err(|err| format!("cannot connect: {err}"))?;
            let client = Arc::new(client);
            let sample = measure::run(&client, &load.load()).await;
            client.close();
            report(&sample)
        }
    }
}

fn report(sample: &Sample) -> Result<(), String> {
    process::print_result(sample)
}

async fn bind() -> Result<TcpListener, String> {
    TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|err| format!("cannot bind a loopback port: {err}"))
}

fn local_addr(listener: &TcpListener) -> Result<String, String> {
    listener
        .local_addr()
        .map(|addr| addr.to_string())
        .map_err(|err| err.to_string())
}
