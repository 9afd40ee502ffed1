//! The three systems behind one enum: set each up for a scenario in a [`Mode`], measure it,
//! tear it down.

use crate::floor::Floor;
use crate::kind::Kind;
use crate::lintel::Lintel;
use crate::measure::{Load, Sample};
use crate::mode::Mode;
use crate::nats::{Nats, NatsServer};
use crate::process::Launcher;

/// One system set up for a scenario.
pub enum Running {
    Lintel(Lintel),
    Nats(Nats),
    Floor(Floor),
}

impl Running {
    /// Sets up `kind` with `workers` echo workers, placed as `mode` says; NATS needs a running
    /// `server`; peer processes start through `launcher`.
    ///
    /// # Errors
    /// Why it could not be set up, as text.
    pub async fn start(
        kind: Kind,
        workers: usize,
        mode: Mode,
        server: Option<&NatsServer>,
        launcher: &Launcher,
    ) -> Result<Self, String> {
        match kind {
            Kind::Lintel => Ok(Running::Lintel(Lintel::start(workers, mode).await?)),
            Kind::Nats => {
                let server = server.ok_or("nats-server is not available")?;
                Ok(Running::Nats(
                    Nats::start(server, workers, mode, launcher).await?,
                ))
            }
            Kind::Floor => Ok(Running::Floor(Floor::start(workers, mode, launcher).await?)),
        }
    }

    /// The process the system's middle runs in, whose CPU time is reported.
    pub fn middle_pid(&self) -> u32 {
        match self {
            Running::Lintel(system) => system.middle_pid(),
            Running::Nats(system) => system.middle_pid(),
            Running::Floor(system) => system.middle_pid(),
        }
    }

    pub async fn measure(&self, load: &Load) -> Sample {
        match self {
            Running::Lintel(system) => system.measure(load).await,
            Running::Nats(system) => system.measure(load).await,
            Running::Floor(system) => system.measure(load).await,
        }
    }

    pub async fn stop(self) {
        match self {
            Running::Lintel(system) => system.stop().await,
            Running::Nats(system) => system.stop().await,
            Running::Floor(system) => system.stop().await,
        }
    }
}
