//! The three systems measured side by side.

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
