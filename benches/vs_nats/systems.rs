//! The three systems side by side: set each up for a scenario, measure them in turn, tear down.

use std::sync::Arc;

use crate::floor::{Floor, FloorClient};
use crate::lintel::{Lintel, LintelTarget};
use crate::measure::{self, Load, Sample};
use crate::nats::{Nats, NatsServer, NatsTarget};

/// Which system, in the order they are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Lintel,
    Nats,
    Floor,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Lintel, Kind::Nats, Kind::Floor];

    pub fn key(self) -> &'static str {
        match self {
            Kind::Lintel => "lintel",
            Kind::Nats => "nats",
            Kind::Floor => "floor",
        }
    }
}

/// One system set up for a scenario.
pub enum Running {
    Lintel(Lintel, Arc<LintelTarget>),
    Nats(Nats, Arc<NatsTarget>),
    Floor(Floor, Arc<FloorClient>),
}

impl Running {
    /// Sets up `kind` with `workers` echo workers; NATS needs a running `server`; lintel's node
    /// runs as a child process when `lintel_child`.
    ///
    /// # Errors
    /// Why it could not be set up, as text.
    pub async fn start(
        kind: Kind,
        workers: usize,
        server: Option<&NatsServer>,
        lintel_child: bool,
    ) -> Result<Self, String> {
        match kind {
            Kind::Lintel => {
                let lintel = Lintel::start(workers, lintel_child).await?;
                let target = lintel.target();
                Ok(Running::Lintel(lintel, target))
            }
            Kind::Nats => {
                let server = server.ok_or("nats-server is not available")?;
                let nats = Nats::start(server, workers).await?;
                let target = nats.target();
                Ok(Running::Nats(nats, target))
            }
            Kind::Floor => {
                let floor = Floor::start(workers)
                    .await
                    .map_err(|err| format!("floor: {err}"))?;
                let target = floor.target();
                Ok(Running::Floor(floor, target))
            }
        }
    }

    pub async fn measure(&self, load: &Load) -> Sample {
        match self {
            Running::Lintel(_, target) => measure::run(target, load).await,
            Running::Nats(_, target) => measure::run(target, load).await,
            Running::Floor(_, target) => measure::run(target, load).await,
        }
    }

    pub async fn stop(self) {
        match self {
            Running::Lintel(system, _) => system.stop().await,
            Running::Nats(system, _) => system.stop().await,
            Running::Floor(system, _) => system.stop().await,
        }
    }
}
