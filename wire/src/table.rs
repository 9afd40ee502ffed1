//! The frame kinds, declared once: each message above the wire (a [`Frame`](crate::Frame)
//! variant) and the kinds that carry it, each with its number, name, the version that
//! introduced it, its lane and the feature a peer must list before it is sent.
//!
//! `frame_table!(then)` hands the table to the macro `then`, which generates what it needs
//! from it: `kind` the [`FrameKind`](crate::FrameKind) enum and its properties, `frame` the
//! [`Frame`](crate::Frame) enum and its codec dispatch, `frame_ref` the
//! [`FrameRef`](crate::FrameRef) enum and the hot kinds' dispatch. A new kind is a row here
//! and a codec: a hot view in `hot/`, or a serde body.
//!
//! A message is `Variant(Message) [flags] { kinds }`, its flags in this order: `from`
//! (`From<Message> for Frame`), `boxed` (held in a `Box` to keep [`Frame`](crate::Frame)
//! small), `hot View` (encoded and decoded by hand through `View`, the message borrowed, in
//! `hot/`), `chooses` (the message picks its kind for a connection's version: `kind_at`). A
//! kind is `number Name(Body): version lane feature;`: `Body` is the serde body of a kind that
//! is not the message's own (`body::*`), the feature `-` when none is needed.

/// Hands the frame table to the macro named `$then`.
macro_rules! frame_table {
    ($then:ident) => {
        $then! {
            /// Client to node, first frame of every connection.
            Hello(Hello) [from] { 0 Hello: 1 Control -; }
            /// Node to client: the handshake succeeded.
            Welcome(Welcome) [from boxed chooses] {
                1 Welcome(body::Welcome): 1 Control -;
                30 Welcome3(body::Welcome3): 3 Control -;
            }
            /// Node to client: the handshake failed; the node closes after sending it.
            HelloRefused(Refusal) [] { 2 HelloRefused: 1 Control -; }
            /// Worker to node: join pools.
            Register(Register) [from boxed chooses] {
                3 Register(body::Register): 1 Control -;
                29 Register3: 3 Control -;
            }
            /// Node to worker: the registration was admitted.
            Registered(Registered) [from] { 4 Registered: 1 Control -; }
            /// Node to worker: the registration was refused; the connection stays usable.
            RegisterRefused(Refusal) [] { 5 RegisterRefused: 1 Control -; }
            /// Worker to node: new `max_concurrency`, effective on the next selection.
            CapacityUpdate(CapacityUpdate) [from] { 6 CapacityUpdate: 1 Control -; }
            /// Node to worker: execute this request and reply with the same correlation id.
            Push(Push) [from boxed hot PushRef] {
                7 Push: 1 Bulk -;
                27 Push3: 3 Bulk -;
            }
            /// Worker to node: the answer to a push.
            Reply(Reply) [from hot ReplyRef] { 8 Reply: 1 Control -; }
            /// Producer to node: dispatch a request.
            Submit(Submit) [from boxed hot SubmitRef] {
                9 Submit: 1 Control -;
                26 Submit3: 3 Control -;
            }
            /// Node to a version-1 producer: how a submission ended.
            Outcome(OutcomeFrame) [from hot OutcomeRef] { 10 Outcome: 1 Control -; }
            /// Producer to node, or node to worker: abandon an in-flight request.
            Cancel(Cancel) [from] { 11 Cancel: 1 Control -; }
            /// Either direction: liveness probe.
            Ping(Ping) [from] { 12 Ping: 1 Control -; }
            /// Either direction: answer to a ping, echoing its nonce.
            Pong(Pong) [from] { 13 Pong: 1 Control -; }
            /// Node to worker: finish in-flight work and take no more. Worker to node: stop
            /// selecting me.
            Drain(Drain) [from] { 14 Drain: 1 Control -; }
            /// Worker to node: in-flight work is finished after a drain.
            Drained(Drained) [from] { 15 Drained: 1 Control -; }
            /// Either direction: a clean close follows.
            Goodbye(Goodbye) [from] { 16 Goodbye: 1 Control -; }
            /// Either direction: a protocol violation; the sender closes after it.
            Error(ErrorFrame) [from] { 17 Error: 1 Control -; }
            /// Producer to node: ask for the node's status.
            StatusQuery(StatusQuery) [from] { 18 StatusQuery: 1 Control -; }
            /// Node to a version-1 producer: the answer to a status query.
            Status(StatusReport) [from boxed] { 19 Status: 1 Control -; }
            /// Peer to peer: who the sender is, the members it knows, what it implements.
            PeerHello(PeerHello) [from boxed chooses] {
                20 PeerHello(body::PeerHello): 2 Control -;
                32 PeerHello3: 3 Control -;
            }
            /// Peer to peer: the sender's own pools, a snapshot then deltas.
            Presence(Presence) [from chooses] {
                21 Presence(body::Presence): 2 Control -;
                31 Presence3: 3 Control -;
            }
            /// Peer to peer: run this dispatch on your own workers.
            Relay(Relay) [from boxed hot RelayRef] {
                22 Relay: 2 Bulk -;
                28 Relay3: 3 Bulk -;
            }
            /// Peer to peer: how a relay ended.
            RelayOutcome(RelayOutcome) [from hot RelayOutcomeRef] { 23 RelayOutcome: 2 Control -; }
            /// Node to producer: how a submission ended and which node served it.
            ServedOutcome(ServedOutcome) [from boxed hot ServedOutcomeRef] {
                24 ServedOutcome: 2 Control -;
            }
            /// Node to a version-2 producer: the answer to a status query, with the node's peers.
            ClusterStatus(ClusterStatusReport) [from boxed] { 25 ClusterStatus: 2 Control -; }
            /// Producer to node: send me the node's lifecycle events.
            Subscribe(Subscribe) [from] { 33 Subscribe: 3 Control -; }
            /// Node to subscriber: one lifecycle event.
            Event(Event) [from boxed] { 34 Event: 3 Control -; }
            /// Node to subscriber: the subscription ended.
            SubscriptionEnded(SubscriptionEnded) [from] { 35 SubscriptionEnded: 3 Control -; }
            /// Node to producer: the answer to a status query, as a JSON document.
            StatusDocument(StatusDocument) [from] { 36 StatusDocument: 3 Control -; }
            /// Peer to peer: every relay the sender handled on this link is answered.
            Farewell(Farewell) [from] { 37 Farewell: 3 Control FAREWELL; }
            /// Origin to serving peer: the relay outcomes the origin holds.
            RelayAck(RelayAck) [from] { 38 RelayAck: 3 Control RELAY_RESUME; }
            /// Origin to serving peer: relays still unanswered after a relink.
            Resume(Resume) [from] { 39 Resume: 3 Control RELAY_RESUME; }
            /// Serving peer to origin: what became of the relays named in `Resume`.
            Resumed(Resumed) [from] { 40 Resumed: 3 Control RELAY_RESUME; }
            /// Peer to peer: pools' current deployments.
            PoolSettings(PoolSettings) [from] { 41 PoolSettings: 3 Control POOL_SETTINGS; }
            /// Client to node, right after the welcome: the features of version 4 and later it
            /// understands.
            Features(Features) [from] { 42 Features: 4 Control -; }
            /// Node to worker, right after `Registered`: the session a reconnect resumes.
            Session(Session) [from] { 43 Session: 4 Control WORKER_RESUME; }
            /// Worker to node on a new connection, in place of `Register`: resume a session.
            ResumeSession(ResumeSession) [from] { 44 ResumeSession: 4 Control WORKER_RESUME; }
            /// Node to worker: what became of each push a resuming worker holds.
            SessionResumed(SessionResumed) [from] { 45 SessionResumed: 4 Control WORKER_RESUME; }
            /// Worker to node, node to producer, serving peer to origin: a dispatch still runs.
            Progress(Progress) [from] { 46 Progress: 4 Control PROGRESS; }
        }
    };
}

pub(crate) use frame_table;
