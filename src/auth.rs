//! Who a connection is and what it may do: the node's credentials, matched at the handshake.
//!
//! With nothing configured every connection may do anything, which suits loopback. The single
//! `auth_token` grants every role and namespace; each entry of `grants` grants its token, or the
//! identity of a verified client certificate, some roles and namespaces (exact names, or
//! prefixes ending in `*`). A hello's token decides when it carries one; without a token, the
//! client certificate's identity does. Peers present the `cluster_secret` when one is set.
//! The `observer` role lets a producer connection read status and the node's events, and
//! nothing more; a grant with both the producer and observer roles does both. What a
//! connection reads is scoped like what it dispatches: [`Grant::sees`]. Secrets are
//! compared in constant time; a refusal names the credential presented, never a secret.
//!
//! A grant also decides how its producers' dispatches share a full pool: under the grant's
//! fairness key (with `fairness_key_source = "grant"`), and with the weights their requests
//! ask for only when it allows them.

use std::collections::HashSet;
use std::sync::Arc;

use lintel_wire::channel::parse_channel_name;
use lintel_wire::{Refusal, RefusalCode, RefusedReason, Role};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;

use crate::registry::fairness::DEFAULT_WEIGHT;
use crate::registry::{Fairness, FairnessRef};

/// Where a producer's dispatches take their fairness key from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FairnessKeySource {
    /// The producer's grant (its `fairness_key`, else its identity, else `grant-N`); a producer
    /// that holds no grant (a node without grants, or the node's `auth_token`) uses its
    /// request's key.
    #[default]
    Grant,
    /// The request's key, whoever sent it.
    Request,
}

/// A role a grant may allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GrantRole {
    Worker,
    Producer,
    Peer,
    /// Connects as a producer to read status; dispatches nothing.
    Observer,
}

impl GrantRole {
    fn of(role: Role) -> Self {
        match role {
            Role::Worker => GrantRole::Worker,
            Role::Producer => GrantRole::Producer,
            Role::Peer => GrantRole::Peer,
        }
    }

    fn name(self) -> &'static str {
        match self {
            GrantRole::Worker => "worker",
            GrantRole::Producer => "producer",
            GrantRole::Peer => "peer",
            GrantRole::Observer => "observer",
        }
    }
}

/// One credential from the config and what it allows.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GrantConfig {
    /// The secret a hello presents as its `auth_token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The identity of a verified client certificate (its first DNS name, else its first URI)
    /// that holds this grant when its hello carries no token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    pub roles: Vec<GrantRole>,
    /// Exact namespaces, or prefixes ending in `*`; `*` alone is every namespace. Needed for
    /// the worker and producer roles; they also scope what status and events show (an observer
    /// naming none sees every namespace).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// The fairness key of this grant's dispatches; default its identity, else `grant-N` for
    /// the Nth grant (from 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness_key: Option<String>,
    /// Whether its producers' requests may set their fairness weight; otherwise the weight a
    /// request asks for is ignored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fairness_weights: bool,
}

/// Why the grants in a config are unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("grant {index}: the token is empty")]
    EmptyToken { index: usize },
    #[error("grant {index}: the identity is empty")]
    EmptyIdentity { index: usize },
    #[error("grant {index}: it names neither a token nor an identity")]
    NoCredential { index: usize },
    #[error("grant {index}: it grants no role")]
    NoRole { index: usize },
    #[error("grant {index}: it grants the worker or producer role but no namespace")]
    NoNamespace { index: usize },
    #[error("grant {index}: the token is also the token of grant {other}")]
    SharedToken { index: usize, other: usize },
    #[error("grant {index}: the identity is also the identity of grant {other}")]
    SharedIdentity { index: usize, other: usize },
    #[error("grant {index}: the fairness key is empty")]
    EmptyFairnessKey { index: usize },
}

/// Checks that every grant can be matched and means something.
///
/// # Errors
/// The first [`GrantError`] found.
pub fn validate(grants: &[GrantConfig]) -> Result<(), GrantError> {
    for (index, grant) in grants.iter().enumerate() {
        match (&grant.token, &grant.identity) {
            (None, None) => return Err(GrantError::NoCredential { index }),
            (Some(token), _) if token.is_empty() => return Err(GrantError::EmptyToken { index }),
            (_, Some(identity)) if identity.is_empty() => {
                return Err(GrantError::EmptyIdentity { index })
            }
            _ => {}
        }
        if grant.roles.is_empty() {
            return Err(GrantError::NoRole { index });
        }
        if grant.fairness_key.as_ref().is_some_and(String::is_empty) {
            return Err(GrantError::EmptyFairnessKey { index });
        }
        let uses_namespaces = grant
            .roles
            .iter()
            .any(|role| matches!(role, GrantRole::Worker | GrantRole::Producer));
        if uses_namespaces && grant.namespaces.is_empty() {
            return Err(GrantError::NoNamespace { index });
        }
        let earlier = || grants.iter().take(index);
        if let Some(other) = grant
            .token
            .as_ref()
            .and_then(|token| earlier().position(|e| e.token.as_ref() == Some(token)))
        {
            return Err(GrantError::SharedToken { index, other });
        }
        if let Some(other) = grant
            .identity
            .as_ref()
            .and_then(|identity| earlier().position(|e| e.identity.as_ref() == Some(identity)))
        {
            return Err(GrantError::SharedIdentity { index, other });
        }
    }
    Ok(())
}

/// A set of namespaces: exact names and prefixes, or every namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Namespaces {
    all: bool,
    exact: HashSet<String>,
    prefixes: Vec<String>,
}

impl Namespaces {
    fn every() -> Self {
        Self {
            all: true,
            ..Self::default()
        }
    }

    /// The namespaces `patterns` name: exact names, prefixes ending in `*`, `*` for all.
    fn of(patterns: &[String]) -> Self {
        let mut namespaces = Self::default();
        for pattern in patterns {
            match pattern.strip_suffix('*') {
                Some("") => namespaces.all = true,
                Some(prefix) => namespaces.prefixes.push(prefix.to_owned()),
                None => {
                    namespaces.exact.insert(pattern.clone());
                }
            }
        }
        namespaces
    }

    #[inline]
    fn contains(&self, namespace: &str) -> bool {
        self.all
            || self.exact.contains(namespace)
            || self
                .prefixes
                .iter()
                .any(|prefix| namespace.starts_with(prefix.as_str()))
    }

    /// The patterns, exact names sorted first.
    fn patterns(&self) -> Vec<String> {
        let mut listed: Vec<String> = self.exact.iter().cloned().collect();
        listed.sort_unstable();
        listed.extend(self.prefixes.iter().map(|prefix| format!("{prefix}*")));
        listed
    }
}

/// The namespaces a connection may use and read, the credential that earned them, and how
/// its dispatches share a full pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Where it may register or dispatch.
    uses: Namespaces,
    /// Whose pools, workers and events it may read.
    sees: Namespaces,
    holder: Holder,
    /// A producer connection that may read status only.
    observer: bool,
    /// It may subscribe to the node's events: its grant has the observer role, or no grant
    /// was needed.
    events: bool,
    /// The key its dispatches run under, whatever their requests say; `None`: the request's.
    fairness_key: Option<Arc<str>>,
    /// Whether the weights its requests ask for count.
    weights: bool,
}

/// The credential a connection presented, as a refusal may name it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holder {
    /// No credential was needed, or the node's auth token or cluster secret was presented.
    Anyone,
    /// The token of the grant at this index.
    Token(usize),
    /// A verified client certificate's identity.
    Identity(String),
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Holder::Anyone => f.write_str("this connection"),
            Holder::Token(_) => f.write_str("the token presented"),
            Holder::Identity(identity) => write!(f, "certificate identity {identity:?}"),
        }
    }
}

impl Grant {
    /// Every namespace, with the fairness key and weight each request asks for.
    pub fn all() -> Self {
        Self {
            uses: Namespaces::every(),
            sees: Namespaces::every(),
            holder: Holder::Anyone,
            observer: false,
            events: true,
            fairness_key: None,
            weights: true,
        }
    }

    fn of(patterns: &[String], holder: Holder) -> Self {
        let namespaces = Namespaces::of(patterns);
        Self {
            uses: namespaces.clone(),
            sees: namespaces,
            holder,
            observer: false,
            events: false,
            fairness_key: None,
            weights: false,
        }
    }

    /// A producer connection's grant that dispatches into no namespace and reads those of
    /// `patterns`, or every namespace when it names none.
    fn observer(patterns: &[String], holder: Holder) -> Self {
        let sees = if patterns.is_empty() {
            Namespaces::every()
        } else {
            Namespaces::of(patterns)
        };
        Self {
            uses: Namespaces::default(),
            sees,
            observer: true,
            events: true,
            ..Self::of(&[], holder)
        }
    }

    /// True when `namespace` is granted.
    #[inline]
    pub fn allows(&self, namespace: &str) -> bool {
        self.uses.contains(namespace)
    }

    /// True when every namespace is granted.
    pub fn is_all(&self) -> bool {
        self.uses.all
    }

    /// True when the connection may read the pools, workers and events of `namespace`.
    pub fn sees(&self, namespace: &str) -> bool {
        self.sees.contains(namespace)
    }

    /// True when the connection may read the pool named `channel`; false for a name that is
    /// not a pool's.
    pub fn sees_channel(&self, channel: &str) -> bool {
        self.sees.all
            || parse_channel_name(channel).is_ok_and(|address| self.sees(&address.namespace))
    }

    /// True when the connection reads every namespace, and with them the node-wide counts.
    pub fn sees_all(&self) -> bool {
        self.sees.all
    }

    /// True when the connection may subscribe to the node's events.
    pub fn may_observe(&self) -> bool {
        self.events
    }

    /// Why a subscription is refused to a connection [`Grant::may_observe`] refused: names
    /// the credential presented, never a secret.
    pub fn observe_refusal(&self) -> String {
        format!(
            "{} is not granted the observer role, which events need",
            self.holder
        )
    }

    /// The fairness a dispatch of this connection runs under, given what its request `asked`:
    /// the grant's key in place of the asked one when it names one, and the asked weight only
    /// when the grant allows weights.
    #[inline]
    pub fn fairness<'a>(&'a self, asked: FairnessRef<'a>) -> FairnessRef<'a> {
        Fairness {
            priority: asked.priority,
            key: self.fairness_key.as_deref().unwrap_or(asked.key),
            weight: if self.weights {
                asked.weight
            } else {
                DEFAULT_WEIGHT
            },
        }
    }

    /// The reason a dispatch [`Grant::allows`] refused ends with: `RoleNotGranted` for an
    /// observer that is not also a producer, `NamespaceNotGranted` otherwise.
    pub fn refused_reason(&self) -> RefusedReason {
        if self.observer {
            RefusedReason::RoleNotGranted
        } else {
            RefusedReason::NamespaceNotGranted
        }
    }

    /// Why `namespace`, which [`Grant::allows`] refused, may not be used: names the
    /// credential presented and the role or namespaces it was granted, never a secret.
    pub fn refusal(&self, namespace: &str) -> String {
        if self.observer {
            return format!(
                "{} is granted the observer role, not the producer role: it may read status, not dispatch",
                self.holder
            );
        }
        // The namespace is the client's, not yet checked against max_name_len: quoted in part.
        let shown: String = namespace.chars().take(QUOTED_NAME_CHARS).collect();
        let cut = if shown.len() < namespace.len() {
            "..."
        } else {
            ""
        };
        format!(
            "namespace {shown:?}{cut} is not granted to {} (granted: {})",
            self.holder,
            self.uses.patterns().join(", ")
        )
    }
}

/// Most characters of a client's namespace a refusal quotes.
const QUOTED_NAME_CHARS: usize = 256;

/// The node's credentials, borrowed from its config.
#[derive(Debug, Clone, Copy, Default)]
pub struct Authenticator<'a> {
    pub auth_token: Option<&'a str>,
    pub cluster_secret: Option<&'a str>,
    pub grants: &'a [GrantConfig],
    pub fairness_key_source: FairnessKeySource,
}

impl Authenticator<'_> {
    /// What a hello in `role` presenting `presented` may do, over a connection whose verified
    /// client certificate names `identity`.
    ///
    /// # Errors
    /// [`RefusalCode::Unauthorized`] for a missing or unknown secret or identity, or one whose
    /// grant does not include `role`.
    pub fn authenticate(
        &self,
        role: Role,
        presented: Option<&str>,
        identity: Option<&str>,
    ) -> Result<Grant, Refusal> {
        let presented = presented.unwrap_or_default();
        let identified = identity.and_then(|identity| {
            self.grants
                .iter()
                .find(|grant| grant.identity.as_deref() == Some(identity))
        });
        if role == Role::Peer {
            if let Some(secret) = self.cluster_secret {
                if token_matches(presented.as_bytes(), secret) {
                    return Ok(Grant::all());
                }
                return match (identified, identity) {
                    (Some(grant), Some(identity)) if presented.is_empty() => {
                        self.grant_for(grant, role, Holder::Identity(identity.to_owned()))
                    }
                    _ => Err(unauthorized("missing or wrong cluster secret")),
                };
            }
        }
        if self.auth_token.is_none() && self.grants.is_empty() {
            return Ok(Grant::all());
        }
        if presented.is_empty() {
            return match (identified, identity) {
                (Some(grant), Some(identity)) => {
                    self.grant_for(grant, role, Holder::Identity(identity.to_owned()))
                }
                (_, Some(identity)) => Err(unauthorized(&format!(
                    "no auth token, and no grant for certificate identity {identity:?}"
                ))),
                (_, None) => Err(unauthorized("missing auth token")),
            };
        }
        let presented = presented.as_bytes();
        if self
            .auth_token
            .as_ref()
            .is_some_and(|token| token_matches(presented, token))
        {
            return Ok(Grant::all());
        }
        // Every grant is compared, so the time taken does not tell which one matched.
        let matched = self
            .grants
            .iter()
            .filter_map(|grant| Some((grant, grant.token.as_deref()?)))
            .map(|(grant, token)| (grant, token_matches(presented, token)))
            .fold(
                None,
                |found, (grant, hit)| if hit { Some(grant) } else { found },
            );
        let Some(grant) = matched else {
            return Err(unauthorized(
                "wrong auth token: the token presented matches no grant",
            ));
        };
        let index = self
            .grants
            .iter()
            .position(|candidate| std::ptr::eq(candidate, grant))
            .unwrap_or_default();
        self.grant_for(grant, role, Holder::Token(index))
    }

    /// What `grant`, matched by the credential `holder` presented, allows a hello in `role`.
    fn grant_for(&self, grant: &GrantConfig, role: Role, holder: Holder) -> Result<Grant, Refusal> {
        let wanted = GrantRole::of(role);
        if !grant.roles.contains(&wanted) {
            return refuse_role(grant, role, holder);
        }
        if role == Role::Peer {
            return Ok(Grant::all());
        }
        let fairness_key = match self.fairness_key_source {
            FairnessKeySource::Request => None,
            FairnessKeySource::Grant => Some(self.fairness_key_of(grant)),
        };
        Ok(Grant {
            fairness_key,
            weights: grant.fairness_weights,
            events: grant.roles.contains(&GrantRole::Observer),
            ..Grant::of(&grant.namespaces, holder)
        })
    }

    /// A grant's fairness key: the one it names, else its identity, else `grant-N`.
    fn fairness_key_of(&self, grant: &GrantConfig) -> Arc<str> {
        if let Some(key) = grant.fairness_key.as_ref().or(grant.identity.as_ref()) {
            return Arc::from(key.as_str());
        }
        let n = self
            .grants
            .iter()
            .position(|candidate| std::ptr::eq(candidate, grant))
            .unwrap_or_default();
        Arc::from(format!("grant-{}", n + 1))
    }
}

/// The refusal of a hello in `role` that `grant` lacks, or the observer's grant for a producer.
fn refuse_role(grant: &GrantConfig, role: Role, holder: Holder) -> Result<Grant, Refusal> {
    let wanted = GrantRole::of(role);
    if role == Role::Producer && grant.roles.contains(&GrantRole::Observer) {
        return Ok(Grant::observer(&grant.namespaces, holder));
    }
    let roles: Vec<&str> = grant.roles.iter().map(|role| role.name()).collect();
    let needs = match role {
        Role::Producer => "the producer role (or observer, to read status)",
        Role::Worker => "the worker role",
        Role::Peer => "the peer role",
    };
    Err(unauthorized(&format!(
        "{holder} is granted {}; connecting as a {} needs {needs}",
        roles.join(", "),
        wanted.name()
    )))
}

/// True when `presented` is `secret`, compared in constant time.
pub(crate) fn token_matches(presented: &[u8], secret: &str) -> bool {
    bool::from(presented.ct_eq(secret.as_bytes()))
}

fn unauthorized(reason: &str) -> Refusal {
    Refusal {
        code: RefusalCode::Unauthorized,
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(token: &str, roles: &[GrantRole], namespaces: &[&str]) -> GrantConfig {
        GrantConfig {
            token: Some(token.into()),
            identity: None,
            roles: roles.to_vec(),
            namespaces: namespaces.iter().map(|ns| (*ns).to_owned()).collect(),
            fairness_key: None,
            fairness_weights: false,
        }
    }

    fn grants() -> Vec<GrantConfig> {
        vec![
            grant("billing", &[GrantRole::Worker], &["billing", "team-a.*"]),
            grant("ops", &[GrantRole::Producer, GrantRole::Peer], &["*"]),
        ]
    }

    fn node(grants: &[GrantConfig]) -> Authenticator<'_> {
        Authenticator {
            auth_token: Some("root"),
            cluster_secret: None,
            grants,
            fairness_key_source: FairnessKeySource::Grant,
        }
    }

    #[test]
    fn nothing_configured_lets_everyone_do_everything() {
        let open = Authenticator::default();
        assert_eq!(
            open.authenticate(Role::Worker, None, None),
            Ok(Grant::all())
        );
    }

    #[test]
    fn the_single_token_grants_every_role_and_namespace() {
        for role in [Role::Worker, Role::Producer, Role::Peer] {
            assert!(node(&grants())
                .authenticate(role, Some("root"), None)
                .unwrap()
                .is_all());
        }
    }

    #[test]
    fn a_grant_allows_its_exact_names_and_prefixes_only() {
        let grants = grants();
        let grant = node(&grants)
            .authenticate(Role::Worker, Some("billing"), None)
            .unwrap();
        assert!(grant.allows("billing"));
        assert!(grant.allows("team-a.jobs"));
        assert!(!grant.allows("billing2"));
        assert!(!grant.allows("team-b"));
    }

    #[test]
    fn a_token_used_in_a_role_it_lacks_or_an_unknown_token_is_unauthorized() {
        for (role, token) in [
            (Role::Producer, Some("billing")),
            (Role::Worker, Some("nope")),
            (Role::Worker, None),
        ] {
            let refused = node(&grants()).authenticate(role, token, None).unwrap_err();
            assert_eq!(
                refused.code,
                RefusalCode::Unauthorized,
                "{role:?} {token:?}"
            );
        }
    }

    #[test]
    fn a_cluster_secret_is_what_peers_present() {
        let grants = grants();
        let node = Authenticator {
            cluster_secret: Some("mesh"),
            ..node(&grants)
        };
        assert!(node.authenticate(Role::Peer, Some("mesh"), None).is_ok());
        assert!(node.authenticate(Role::Peer, Some("root"), None).is_err());
        assert!(node
            .authenticate(Role::Producer, Some("root"), None)
            .is_ok());
    }

    fn identified(identity: &str, roles: &[GrantRole], namespaces: &[&str]) -> GrantConfig {
        GrantConfig {
            token: None,
            identity: Some(identity.into()),
            ..grant("", roles, namespaces)
        }
    }

    #[test]
    fn a_certificate_identity_without_a_token_gets_its_grant() {
        let grants = vec![identified(
            "billing.example",
            &[GrantRole::Worker],
            &["billing"],
        )];
        let node = node(&grants);
        let grant = node
            .authenticate(Role::Worker, None, Some("billing.example"))
            .unwrap();
        assert!(grant.allows("billing") && !grant.allows("payroll"));
        for (role, identity) in [
            (Role::Producer, Some("billing.example")),
            (Role::Worker, Some("other.example")),
            (Role::Worker, None),
        ] {
            let refused = node.authenticate(role, None, identity).unwrap_err();
            assert_eq!(
                refused.code,
                RefusalCode::Unauthorized,
                "{role:?} {identity:?}"
            );
        }
        // A token, when presented, decides instead of the identity.
        assert!(node
            .authenticate(Role::Worker, Some("root"), Some("billing.example"))
            .unwrap()
            .is_all());
        assert!(node
            .authenticate(Role::Worker, Some("wrong"), Some("billing.example"))
            .is_err());
    }

    #[test]
    fn a_peer_certificate_identity_may_stand_for_the_cluster_secret() {
        let grants = vec![identified("node-b.example", &[GrantRole::Peer], &["*"])];
        let node = Authenticator {
            cluster_secret: Some("mesh"),
            ..node(&grants)
        };
        assert!(node
            .authenticate(Role::Peer, None, Some("node-b.example"))
            .is_ok());
        assert!(node
            .authenticate(Role::Peer, None, Some("node-c.example"))
            .is_err());
    }

    #[test]
    fn an_observer_connects_as_a_producer_and_may_dispatch_nowhere() {
        let grants = vec![GrantConfig {
            namespaces: Vec::new(),
            ..grant("look", &[GrantRole::Observer], &[])
        }];
        assert_eq!(validate(&grants), Ok(()), "an observer needs no namespace");
        let node = node(&grants);
        let grant = node
            .authenticate(Role::Producer, Some("look"), None)
            .unwrap();
        assert!(!grant.allows("billing"));
        assert!(grant.refusal("billing").contains("not the producer role"));
        assert_eq!(grant.refused_reason(), RefusedReason::RoleNotGranted);
        let refused = node
            .authenticate(Role::Worker, Some("look"), None)
            .unwrap_err();
        assert!(
            refused.reason.contains("granted observer"),
            "{}",
            refused.reason
        );
    }

    #[test]
    fn a_grant_sees_the_namespaces_it_names_and_an_observer_naming_none_sees_all() {
        let grants = vec![
            grant("team", &[GrantRole::Observer], &["team-*"]),
            grant("look", &[GrantRole::Observer], &[]),
            grant("send", &[GrantRole::Producer], &["billing"]),
        ];
        let node = node(&grants);
        let producer = |token| {
            node.authenticate(Role::Producer, Some(token), None)
                .unwrap()
        };
        let team = producer("team");
        assert!(team.sees("team-red") && !team.sees("billing") && !team.sees_all());
        assert!(team.sees_channel("aion.dispatch.team-red.default"));
        assert!(!team.sees_channel("aion.dispatch.billing.default"));
        assert!(!team.sees_channel("team-red"), "not a pool's name");
        assert!(!team.allows("team-red"), "an observer dispatches nowhere");
        assert!(producer("look").sees_all());
        let send = producer("send");
        assert!(send.sees("billing") && !send.sees("team-red") && !send.sees_all());
        assert!(node
            .authenticate(Role::Producer, Some("root"), None)
            .unwrap()
            .sees_all());
    }

    #[test]
    fn events_need_the_observer_role_unless_no_grant_was_needed() {
        let grants = vec![
            grant("look", &[GrantRole::Observer], &[]),
            grant(
                "both",
                &[GrantRole::Producer, GrantRole::Observer],
                &["billing"],
            ),
            grant("send", &[GrantRole::Producer], &["billing"]),
        ];
        let node = node(&grants);
        let may = |token| {
            node.authenticate(Role::Producer, Some(token), None)
                .unwrap()
                .may_observe()
        };
        assert!(may("look") && may("both") && !may("send"));
        let both = node
            .authenticate(Role::Producer, Some("both"), None)
            .unwrap();
        assert!(
            both.allows("billing"),
            "observer besides producer still dispatches"
        );
        let open = Authenticator::default();
        assert!(open
            .authenticate(Role::Producer, None, None)
            .unwrap()
            .may_observe());
        let sent = node
            .authenticate(Role::Producer, Some("send"), None)
            .unwrap();
        assert!(sent.observe_refusal().contains("observer role"));
    }

    #[test]
    fn refusals_name_the_credential_presented_and_never_the_secret() {
        let grants = vec![
            grant("billing", &[GrantRole::Worker], &["billing", "team-a.*"]),
            identified("payroll.example", &[GrantRole::Worker], &["payroll"]),
        ];
        let node = node(&grants);
        let by_token = node
            .authenticate(Role::Worker, Some("billing"), None)
            .unwrap();
        let said = by_token.refusal("payroll");
        assert_eq!(
            said,
            "namespace \"payroll\" is not granted to the token presented (granted: billing, team-a.*)"
        );
        let by_identity = node
            .authenticate(Role::Worker, None, Some("payroll.example"))
            .unwrap();
        assert!(by_identity
            .refusal("billing")
            .contains("certificate identity \"payroll.example\""));
        let role = node
            .authenticate(Role::Producer, None, Some("payroll.example"))
            .unwrap_err();
        assert!(
            role.reason
                .contains("certificate identity \"payroll.example\" is granted worker"),
            "{}",
            role.reason
        );
        let wrong = node
            .authenticate(Role::Worker, Some("bil1ing"), None)
            .unwrap_err();
        assert!(!wrong.reason.contains("bil1ing"), "{}", wrong.reason);
    }

    #[test]
    fn unusable_grants_are_refused_by_validation() {
        let cases = [
            (grant("", &[GrantRole::Worker], &["a"]), "empty token"),
            (
                identified("", &[GrantRole::Worker], &["a"]),
                "empty identity",
            ),
            (
                GrantConfig {
                    token: None,
                    ..grant("t", &[GrantRole::Worker], &["a"])
                },
                "no credential",
            ),
            (grant("t", &[], &["a"]), "no role"),
            (grant("t", &[GrantRole::Worker], &[]), "no namespace"),
        ];
        for (bad, what) in cases {
            assert!(validate(&[bad]).is_err(), "{what}");
        }
        let twice = [
            grant("t", &[GrantRole::Worker], &["a"]),
            grant("t", &[GrantRole::Producer], &["b"]),
        ];
        assert_eq!(
            validate(&twice),
            Err(GrantError::SharedToken { index: 1, other: 0 })
        );
        let twice = [
            identified("i", &[GrantRole::Worker], &["a"]),
            identified("i", &[GrantRole::Producer], &["b"]),
        ];
        assert_eq!(
            validate(&twice),
            Err(GrantError::SharedIdentity { index: 1, other: 0 })
        );
    }

    #[test]
    fn a_grant_names_its_dispatches_fairness_key_and_decides_their_weight() {
        let asked = Fairness {
            priority: 2,
            key: "asked",
            weight: 5_000,
        };
        let producer = &[GrantRole::Producer];
        let grants = vec![
            grant("plain", producer, &["*"]),
            GrantConfig {
                fairness_key: Some("tenant-b".into()),
                fairness_weights: true,
                ..grant("keyed", producer, &["*"])
            },
            identified("billing.example", producer, &["*"]),
        ];
        let node = node(&grants);
        let fairness = |authenticator: Authenticator<'_>, token, identity| {
            let grant = authenticator
                .authenticate(Role::Producer, token, identity)
                .unwrap();
            let fairness = grant.fairness(asked);
            (fairness.priority, fairness.key.to_owned(), fairness.weight)
        };
        assert_eq!(
            fairness(node, Some("plain"), None),
            (2, "grant-1".to_owned(), DEFAULT_WEIGHT)
        );
        assert_eq!(
            fairness(node, Some("keyed"), None),
            (2, "tenant-b".to_owned(), 5_000)
        );
        assert_eq!(
            fairness(node, None, Some("billing.example")),
            (2, "billing.example".to_owned(), DEFAULT_WEIGHT)
        );
        // The node's own token holds no grant: the request decides.
        assert_eq!(
            fairness(node, Some("root"), None),
            (2, "asked".to_owned(), 5_000)
        );
        let by_request = Authenticator {
            fairness_key_source: FairnessKeySource::Request,
            ..node
        };
        assert_eq!(
            fairness(by_request, Some("plain"), None),
            (2, "asked".to_owned(), DEFAULT_WEIGHT)
        );
        let empty = GrantConfig {
            fairness_key: Some(String::new()),
            ..grant("t", producer, &["a"])
        };
        assert_eq!(
            validate(&[empty]),
            Err(GrantError::EmptyFairnessKey { index: 0 })
        );
    }
}
