//! Pool settings: each pool's current deployment, the one a dispatch naming none requires,
//! set on any node and learned by every node of the mesh.
//!
//! The latest word wins, by `(set_at_unix_ms, set_by)`, whichever node hears it first; a
//! cleared setting stays as the latest word (its current deployment `None`). At most
//! [`MAX_SETTINGS`] pools are held. Each change takes a sequence number, so a peer link sends
//! only what changed since it last sent. A std mutex guards the map, never held across an
//! `.await`; a dispatch reads one atomic flag while no pool has a current deployment.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use lintel_wire::channel::{dispatch_channel_name, parse_channel_name};
use lintel_wire::PoolSetting;

use crate::epoch::Epoch;
use crate::idmap::KeyedMap;
use crate::registry::normalize_task_queue;

/// Most pools with a setting a node holds.
pub const MAX_SETTINGS: usize = 4096;

/// Why a setting was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error("channel {0:?} is not a canonical pool channel name")]
    BadChannel(String),
    #[error("{what} is empty or longer than {max} bytes")]
    BadName { what: &'static str, max: usize },
    #[error("this node holds settings for {MAX_SETTINGS} pools already")]
    Full,
}

#[derive(Debug)]
struct Held {
    setting: PoolSetting,
    current: Option<Arc<str>>,
    /// The change that last replaced it.
    seq: u64,
}

#[derive(Debug, Default)]
struct State {
    /// namespace -> task queue -> setting.
    pools: KeyedMap<String, KeyedMap<String, Held>>,
    count: usize,
    /// Settings with a current deployment.
    current: usize,
    seq: u64,
}

/// Every pool setting this node knows. Share it as `Arc<Settings>`.
#[derive(Debug)]
pub struct Settings {
    state: Mutex<State>,
    /// True while some pool has a current deployment: read on every dispatch.
    any: AtomicBool,
    changes: Epoch,
    max_name_len: usize,
}

impl Settings {
    /// No settings; names (deployment, setter) of at most `max_name_len` bytes.
    pub fn new(max_name_len: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::default(),
            any: AtomicBool::new(false),
            changes: Epoch::default(),
            max_name_len,
        })
    }

    /// Touched on each change taken.
    pub fn changes(&self) -> &Epoch {
        &self.changes
    }

    /// The current deployment of the pool `(namespace, task_queue)`, if it has one.
    #[inline]
    pub fn current(&self, namespace: &str, task_queue: &str) -> Option<Arc<str>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let state = self.lock();
        let held = state
            .pools
            .get(namespace)?
            .get(normalize_task_queue(task_queue))?;
        held.current.clone()
    }

    /// Takes `setting` when it is later than the pool's, by `(set_at_unix_ms, set_by)`;
    /// true when it was.
    ///
    /// # Errors
    /// A [`SettingError`] for a setting that breaks a bound; nothing changes.
    pub fn apply(&self, setting: PoolSetting) -> Result<bool, SettingError> {
        let max = self.max_name_len;
        let bad = |what| SettingError::BadName { what, max };
        if let Some(deployment) = &setting.current_deployment {
            if deployment.is_empty() || deployment.len() > max {
                return Err(bad("deployment"));
            }
        }
        if setting.set_by.is_empty() || setting.set_by.len() > max {
            return Err(bad("set_by"));
        }
        let address = parse_channel_name(&setting.channel)
            .ok()
            .filter(|address| address.node.is_none())
            .ok_or_else(|| SettingError::BadChannel(setting.channel.clone()))?;
        let mut state = self.lock();
        let State {
            pools,
            count,
            current,
            seq,
        } = &mut *state;
        let by_queue = pools.get(&address.namespace);
        let before = by_queue.and_then(|by_queue| by_queue.get(&address.task_queue));
        let later = |old: &PoolSetting| {
            (setting.set_at_unix_ms, &setting.set_by) > (old.set_at_unix_ms, &old.set_by)
        };
        match before {
            Some(held) if !later(&held.setting) => return Ok(false),
            None if *count >= MAX_SETTINGS => return Err(SettingError::Full),
            _ => {}
        }
        *seq += 1;
        let held = Held {
            current: setting.current_deployment.as_deref().map(Arc::from),
            setting,
            seq: *seq,
        };
        *current += usize::from(held.current.is_some());
        let replaced = pools
            .entry(address.namespace)
            .or_default()
            .insert(address.task_queue, held);
        match replaced {
            Some(old) => *current -= usize::from(old.current.is_some()),
            None => *count += 1,
        }
        self.any.store(*current > 0, Ordering::Release);
        drop(state);
        self.changes.touch();
        Ok(true)
    }

    /// Sets the current deployment of `(namespace, task_queue)` as node `set_by` at
    /// `set_at_unix_ms`; `None` clears it.
    ///
    /// # Errors
    /// As [`Settings::apply`].
    pub fn set(
        &self,
        (namespace, task_queue): (&str, &str),
        deployment: Option<&str>,
        (set_at_unix_ms, set_by): (u64, &str),
    ) -> Result<PoolSetting, SettingError> {
        let task_queue = normalize_task_queue(task_queue);
        let setting = PoolSetting {
            channel: dispatch_channel_name(namespace, task_queue, None),
            current_deployment: deployment.map(str::to_owned),
            set_at_unix_ms,
            set_by: set_by.to_owned(),
        };
        self.apply(setting.clone())?;
        Ok(setting)
    }

    /// Settings changed after change `after` (0: all of them), sorted by channel, and the
    /// latest change number.
    pub fn since(&self, after: u64) -> (Vec<PoolSetting>, u64) {
        let state = self.lock();
        let mut settings: Vec<PoolSetting> = state
            .pools
            .values()
            .flat_map(KeyedMap::values)
            .filter(|held| held.seq > after)
            .map(|held| held.setting.clone())
            .collect();
        settings.sort_by(|a, b| a.channel.cmp(&b.channel));
        (settings, state.seq)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the state consistent before anything that could panic.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(deployment: Option<&str>, at: u64, by: &str) -> PoolSetting {
        PoolSetting {
            channel: dispatch_channel_name("ns", "default", None),
            current_deployment: deployment.map(str::to_owned),
            set_at_unix_ms: at,
            set_by: by.into(),
        }
    }

    #[test]
    fn the_latest_writer_wins_by_time_then_setter() {
        let settings = Settings::new(64);
        assert_eq!(settings.current("ns", ""), None);
        assert_eq!(settings.apply(setting(Some("v1"), 10, "b")), Ok(true));
        assert_eq!(settings.apply(setting(Some("v0"), 9, "z")), Ok(false));
        assert_eq!(settings.apply(setting(Some("v0"), 10, "a")), Ok(false));
        assert_eq!(settings.apply(setting(Some("v2"), 10, "c")), Ok(true));
        assert_eq!(settings.current("ns", "").as_deref(), Some("v2"));
        assert_eq!(settings.current("ns", "default").as_deref(), Some("v2"));
        assert_eq!(settings.apply(setting(None, 11, "a")), Ok(true));
        assert_eq!(settings.current("ns", ""), None);
        assert!(!settings.any.load(Ordering::Acquire), "none is current");
        let (all, seq) = settings.since(0);
        assert_eq!((all.len(), seq), (1, 3));
        assert!(settings.since(seq).0.is_empty());
    }

    #[test]
    fn hostile_settings_are_refused_and_the_count_is_bounded() {
        let settings = Settings::new(8);
        let mut bad = setting(Some("v1"), 1, "a");
        bad.channel = "nope".into();
        assert!(matches!(
            settings.apply(bad),
            Err(SettingError::BadChannel(_))
        ));
        let long = setting(Some("123456789"), 1, "a");
        assert!(matches!(
            settings.apply(long),
            Err(SettingError::BadName { .. })
        ));
        for n in 0..MAX_SETTINGS {
            let name = format!("q{n}");
            settings
                .set(("ns", &name), Some("v1"), (1, "a"))
                .expect("within the bound");
        }
        assert_eq!(
            settings.set(("ns", "one-more"), Some("v1"), (1, "a")),
            Err(SettingError::Full)
        );
        assert!(settings.set(("ns", "q0"), Some("v2"), (2, "a")).is_ok());
    }
}
