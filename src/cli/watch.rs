//! `lintel watch`: a node's lifecycle events, one JSON object per line, until stopped.

use std::io::Write;
use std::process::ExitCode;

use futures_util::StreamExt;
use lintel::events::lines;
use lintel_client::SubscriptionError;
use lintel_wire::{EventTopic, RefusalCode};

use super::exit::fail;
use super::signal::shutdown_signal;

/// A topic `--topic` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Topic {
    /// Workers registering, excluded, restored, departing.
    Workers,
    /// Peer links up and down.
    Peers,
}

#[derive(Debug, clap::Args)]
#[command(override_usage = "lintel watch [OPTIONS]")]
pub(super) struct Args {
    /// Only this topic's events; repeat for more. Every topic when absent.
    #[arg(long = "topic", value_enum)]
    topics: Vec<Topic>,
    #[command(flatten)]
    target: super::connect::NodeArgs,
}

pub(super) async fn run(args: Args) -> ExitCode {
    let client = match args.target.producer("lintel-watch").await {
        Ok(client) => client,
        Err(code) => return code,
    };
    let topics: Vec<EventTopic> = args
        .topics
        .iter()
        .map(|topic| match topic {
            Topic::Workers => EventTopic::Workers,
            Topic::Peers => EventTopic::Peers,
        })
        .collect();
    let mut subscription = match client.subscribe(&topics).await {
        Ok(subscription) => subscription,
        Err(err) => return fail(format!("no events: {err}")),
    };
    eprintln!("watching node {}", client.node_info().node_id);
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        let next = tokio::select! {
            () = &mut stop => {
                client.close().await;
                return ExitCode::SUCCESS;
            }
            next = subscription.next() => next,
        };
        match next {
            Some(Ok(event)) => {
                let mut stdout = std::io::stdout().lock();
                for line in lines(event.seq, event.at_unix_ms, &event.event) {
                    // A closed stdout (the reader went away) ends the watch.
                    if writeln!(stdout, "{line}")
                        .and_then(|()| stdout.flush())
                        .is_err()
                    {
                        return ExitCode::SUCCESS;
                    }
                }
            }
            Some(Err(SubscriptionError::Ended { code, reason })) => {
                return if code == RefusalCode::Draining {
                    eprintln!("the node ended the watch: {reason}");
                    ExitCode::SUCCESS
                } else {
                    fail(format!("the node ended the watch ({code:?}): {reason}"))
                };
            }
            Some(Err(SubscriptionError::Closed)) | None => {
                return fail("the connection to the node closed");
            }
            Some(Err(other)) => return fail(format!("the watch ended: {other}")),
        }
    }
}
