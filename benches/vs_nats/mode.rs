//! Where each part of a system runs: its middle (lintel's node, nats-server, the floor's relay),
//! its workers (lintel workers, NATS responders, echo servers) and its producer (the lintel
//! producer, the NATS requester, the floor's client). A mode places all three systems alike.

/// The process layout of a run; `all` is what users deploy and the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Every middle, every worker and the producer in processes of their own.
    All,
    /// The middle in its own process; workers and producer together in the harness process.
    Middle,
    /// The producer inside the middle's process, workers in processes of their own: lintel's
    /// node embedded in the harness, dispatching in-process; the floor's client dialling the
    /// echo processes itself. NATS has no embedded server here and is left out.
    Embedded,
    /// Everything that can be in the harness process (nats-server cannot). Diagnostic only.
    Diagnostic,
}

/// Where a system's producer runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Producer {
    /// A process of its own, started for each round.
    OwnProcess,
    /// The harness process, over the network to the middle.
    Harness,
    /// Inside the middle's process, calling it without a network hop.
    InMiddle,
}

impl Mode {
    pub fn key(self) -> &'static str {
        match self {
            Mode::All => "all",
            Mode::Middle => "middle",
            Mode::Embedded => "embedded",
            Mode::Diagnostic => "diagnostic",
        }
    }

    /// What the mode means, for the table, the plot and the JSON.
    pub fn label(self) -> &'static str {
        match self {
            Mode::All => "all separate: middle, workers and producer each in their own processes",
            Mode::Middle => {
                "middle separate: middle in its own process, workers and producer in the harness"
            }
            Mode::Embedded => {
                "embedded: producer in the middle's process, workers in their own processes"
            }
            Mode::Diagnostic => {
                "diagnostic, not for publication: everything in the harness process but nats-server"
            }
        }
    }

    /// Whether figures from this mode may be published. Only `diagnostic` may not.
    pub fn publishable(self) -> bool {
        self != Mode::Diagnostic
    }

    /// The middle runs in a process of its own (nats-server always does).
    pub fn middle_own_process(self) -> bool {
        matches!(self, Mode::All | Mode::Middle)
    }

    /// Each worker runs in a process of its own.
    pub fn workers_own_processes(self) -> bool {
        matches!(self, Mode::All | Mode::Embedded)
    }

    pub fn producer(self) -> Producer {
        match self {
            Mode::All => Producer::OwnProcess,
            Mode::Middle | Mode::Diagnostic => Producer::Harness,
            Mode::Embedded => Producer::InMiddle,
        }
    }

    /// Whether a system has this layout at all.
    pub fn runs(self, kind: crate::kind::Kind) -> bool {
        !(self == Mode::Embedded && kind == crate::kind::Kind::Nats)
    }

    /// Which process each system's pieces run in, by system key.
    pub fn processes(self) -> serde_json::Value {
        use crate::kind::Kind;
        let mut out = serde_json::Map::new();
        for kind in Kind::EVERY {
            let value = if self.runs(kind) {
                serde_json::json!({
                    "middle": self.middle_process(kind),
                    "workers": self.workers_where(kind),
                    "producer": self.producer_where(kind),
                })
            } else {
                serde_json::Value::Null
            };
            out.insert(kind.key().to_owned(), value);
        }
        serde_json::Value::Object(out)
    }

    /// The process whose CPU time is reported as the middle's.
    pub fn middle_process(self, kind: crate::kind::Kind) -> &'static str {
        use crate::kind::Kind;
        match (kind, self.middle_own_process(), self) {
            (Kind::Nats, _, _) => "nats-server",
            (Kind::Lintel | Kind::LintelTls, true, _) => "lintel serve",
            (Kind::Floor, true, _) => "floor relay (vs_nats peer process)",
            (Kind::Lintel | Kind::LintelTls, false, Mode::Embedded) => "harness: node and producer",
            (Kind::Floor, false, Mode::Embedded) => "harness: client, no relay",
            (_, false, _) => "harness: everything",
        }
    }

    fn workers_where(self, kind: crate::kind::Kind) -> &'static str {
        use crate::kind::Kind;
        match (kind, self.workers_own_processes()) {
            (Kind::Lintel | Kind::LintelTls, true) => "one `lintel worker` process each",
            (Kind::Nats, true) => "one responder process each (vs_nats peer)",
            (Kind::Floor, true) => "one echo process each (vs_nats peer)",
            (_, false) => "harness",
        }
    }

    fn producer_where(self, kind: crate::kind::Kind) -> &'static str {
        use crate::kind::Kind;
        match (kind, self.producer()) {
            (Kind::Lintel | Kind::LintelTls, Producer::OwnProcess) => {
                "`lintel bench --workers 0` process, one per round"
            }
            (_, Producer::OwnProcess) => "client process (vs_nats peer), one per round",
            (Kind::Lintel | Kind::LintelTls, Producer::InMiddle) => {
                "harness, through Node::dispatcher()"
            }
            (_, Producer::InMiddle) => "harness, dialling each echo process directly",
            (_, Producer::Harness) => "harness",
        }
    }
}
