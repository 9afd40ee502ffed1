//! The systems behind one enum: set each up for a scenario in a [`Mode`], measure it,
//! tear it down.

use crate::floor::Floor;
use crate::kind::Kind;
use crate::lintel::Lintel;
use crate::measure::{Load, Sample};
use crate::mode::Mode;
use crate::nats::{Nats, NatsServers};
use crate::process::Launcher;
use crate::tls::TlsFiles;
use crate::topology::Topology;

/// One system set up for a scenario.
pub enum Running {
    Lintel(Lintel),
    Nats(Nats),
    Floor(Floor),
}

impl Running {
    /// Sets up `kind` with `workers` echo workers, placed as `mode` and `topology` say; NATS
    /// needs running `servers` (two routed ones, cross-node); peer processes start through
    /// `launcher`; lintel over TLS needs `tls`.
    ///
    /// # Errors
    /// Why it could not be set up, as text.
    pub async fn start(
        kind: Kind,
        workers: usize,
        mode: Mode,
        topology: Topology,
        servers: Option<&NatsServers>,
        launcher: &Launcher,
        tls: Option<&TlsFiles>,
    ) -> Result<Self, String> {
        match kind {
            Kind::Lintel => Ok(Running::Lintel(
                Lintel::start(workers, mode, topology, None).await?,
            )),
            Kind::LintelTls => {
                let tls = tls.ok_or("no TLS certificates were made for this run")?;
                Ok(Running::Lintel(
                    Lintel::start(workers, mode, topology, Some(tls)).await?,
                ))
            }
            Kind::Nats => {
                let servers = servers.ok_or("nats-server is not available")?;
                Ok(Running::Nats(
                    Nats::start(servers, workers, mode, launcher).await?,
                ))
            }
            Kind::Floor => Ok(Running::Floor(
                Floor::start(workers, mode, topology, launcher).await?,
            )),
        }
    }

    /// The processes the system's middles run in, whose CPU time is reported.
    pub fn middle_pids(&self) -> Vec<u32> {
        match self {
            Running::Lintel(system) => system.middle_pids(),
            Running::Nats(system) => system.middle_pids(),
            Running::Floor(system) => system.middle_pids(),
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
