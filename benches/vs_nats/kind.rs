//! The systems measured side by side.

/// Which system, in the order they are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Lintel,
    Nats,
    Floor,
    /// lintel with TLS between every piece and its node (`--tls`), beside plaintext lintel.
    LintelTls,
}

impl Kind {
    /// The three systems every run compares.
    pub const ALL: [Kind; 3] = [Kind::Lintel, Kind::Nats, Kind::Floor];

    /// [`Kind::ALL`] and lintel over TLS, which runs only when asked for.
    pub const EVERY: [Kind; 4] = [Kind::Lintel, Kind::Nats, Kind::Floor, Kind::LintelTls];

    pub fn key(self) -> &'static str {
        match self {
            Kind::Lintel => "lintel",
            Kind::Nats => "nats",
            Kind::Floor => "floor",
            Kind::LintelTls => "lintel-tls",
        }
    }
}
