//! Lookups held for the operator (`approvals = "ask"`). corral's resolver
//! does not refuse a lookup of a name its profile's allowlist does not
//! list. It holds the lookup, records a request in the bridge's gateway
//! directory (`approvals/<id>.json`) and waits for a decision
//! (`approvals/<id>.decision`) until the profile's `approval_timeout`.
//! Both files are root's, in a directory only root enters, so the request
//! and the decision are the contract between the resolver and whoever
//! decides (`corral approvals`, `corral approve`, `corral deny`), as the
//! resolver's record is between the apply and the resolver.
//!
//! Approved once, the held lookup is answered, and the same sandbox's
//! lookups of that name are answered for [`GRANT_WINDOW`] after the
//! decision. That window covers a client that gave up waiting and asks
//! again. The addresses open to the asking sandbox alone, for their TTL,
//! on every port. Denied, or with no decision in time, the lookup is
//! refused with the reason.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use corral_state_files::StateDir;
use serde::{Deserialize, Serialize};

/// The subdirectory of a gateway directory holding its requests.
pub const APPROVALS_DIR: &str = "approvals";

/// How long after an approval the same sandbox's lookups of the name are
/// answered without asking again.
pub const GRANT_WINDOW: Duration = Duration::from_secs(60);

/// Lookups held at once on one bridge; beyond it a lookup is refused at
/// once (sandboxes cannot fill the operator's queue or the host's disk).
pub const MAX_HELD: usize = 64;

/// Lookups one sandbox address may have held at once: a sandbox asking
/// random names (a tunnel) fills its own share, not its siblings'.
pub const MAX_HELD_PER_ASKER: usize = 4;

/// How often a held lookup looks for its decision.
const POLL: Duration = Duration::from_millis(100);

/// One held lookup, as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Its id (16 hex digits): what `corral approve` takes.
    pub id: String,
    /// The profile whose allowlist does not list the name.
    pub profile: String,
    /// The bridge the lookup came in on.
    pub bridge: String,
    /// The sandbox address that asked.
    pub asker: IpAddr,
    /// The name, lower case, in DNS presentation form.
    pub name: String,
    /// When it was asked (seconds since the epoch).
    pub asked_at: u64,
    /// When the lookup stops waiting (seconds since the epoch).
    pub expires_at: u64,
}

/// What the operator decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Answer this lookup (and the same sandbox's lookups of the name for
    /// [`GRANT_WINDOW`]).
    Once,
    /// Refuse it.
    Deny,
}

/// A decision that could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// No held lookup has this id.
    #[error(
        "no lookup waits for approval `{id}` (it may have been decided or timed out): `corral approvals` lists those waiting"
    )]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The decision file could not be written.
    #[error("recording the decision on approval `{id}`: {source}")]
    Write {
        /// The request.
        id: String,
        /// The cause.
        #[source]
        source: corral_state_files::StateFileError,
    },
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn request_file(id: &str) -> String {
    format!("{id}.json")
}

fn decision_file(id: &str) -> String {
    format!("{id}.decision")
}

/// Whether `id` is one a resolver made (16 lower-case hex digits): nothing
/// else names a file here.
fn is_id(id: &str) -> bool {
    id.len() == 16
        && id
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn new_id() -> String {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        // No entropy source is a broken host; the clock still tells ids
        // apart.
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b = t.to_be_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The approvals directories under `state_dir`, one per gateway that has
/// one.
fn approval_dirs(state_dir: &Path) -> Vec<StateDir> {
    let Some(root) = crate::paths::open_gateway_root(state_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for bridge in root.names().unwrap_or_default() {
        if let Some(dir) = root
            .subdir_existing(&bridge)
            .ok()
            .flatten()
            .and_then(|g| g.subdir_existing(APPROVALS_DIR).ok().flatten())
        {
            out.push(dir);
        }
    }
    out
}

fn read_request(dir: &StateDir, id: &str) -> Option<Request> {
    let bytes = dir.read(&request_file(id)).ok().flatten()?;
    serde_json::from_slice(&bytes).ok()
}

/// Every lookup waiting for the operator under `state_dir`, oldest first.
pub fn pending(state_dir: &Path) -> Vec<Request> {
    let now = now_secs();
    let mut out: Vec<Request> = approval_dirs(state_dir)
        .iter()
        .flat_map(|dir| {
            dir.names()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.strip_suffix(".json").map(str::to_owned))
                .filter(|id| is_id(id) && dir.read(&decision_file(id)).ok().flatten().is_none())
                .filter_map(|id| read_request(dir, &id))
                .collect::<Vec<_>>()
        })
        .filter(|r| r.expires_at >= now)
        .collect();
    out.sort_by(|a, b| (a.asked_at, &a.id).cmp(&(b.asked_at, &b.id)));
    out
}

/// Records `decision` on the held lookup `id` under `state_dir`; the
/// resolver holding it acts on it within [`POLL`].
pub fn decide(state_dir: &Path, id: &str, decision: Decision) -> Result<Request, ApprovalError> {
    let not_found = || ApprovalError::NotFound { id: id.to_owned() };
    if !is_id(id) {
        return Err(not_found());
    }
    for dir in approval_dirs(state_dir) {
        let Some(request) = read_request(&dir, id) else {
            continue;
        };
        let text = serde_json::to_vec(&decision).unwrap_or_default();
        dir.write(&decision_file(id), &text)
            .map_err(|source| ApprovalError::Write {
                id: id.to_owned(),
                source,
            })?;
        return Ok(request);
    }
    Err(not_found())
}

/// What became of a held lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// Approved: answer it.
    Granted,
    /// Denied by the operator.
    Denied {
        /// The request.
        id: String,
    },
    /// No decision in time.
    Unanswered {
        /// The request.
        id: String,
        /// How long it waited.
        waited: Duration,
    },
    /// Not held: too many lookups wait already, or the request could not
    /// be recorded.
    NotHeld(String),
}

/// One lookup being held, shared by the same sandbox's lookups of the
/// same name while it waits.
#[derive(Debug)]
struct Waiting {
    id: String,
    deadline: Instant,
    /// The decision once read, and when the file was last read: however
    /// many lookups wait on it, the file is read at most once a [`POLL`].
    decided: Mutex<(Option<Decision>, Option<Instant>)>,
}

/// One bridge's held lookups, in its resolver.
#[derive(Debug)]
pub struct Approvals {
    dir: StateDir,
    profile: String,
    bridge: String,
    timeout: Duration,
    waiting: Mutex<HashMap<(IpAddr, String), Arc<Waiting>>>,
    granted: Mutex<HashMap<(IpAddr, String), Instant>>,
}

impl Approvals {
    /// Held lookups of `profile` on `bridge`, recorded under `gateway_dir`
    /// (the bridge's gateway directory), each waiting up to `timeout`.
    /// Requests an earlier resolver left are removed: nothing waits on
    /// them.
    pub fn open(
        gateway_dir: &StateDir,
        profile: &str,
        bridge: &str,
        timeout: Duration,
    ) -> Result<Self, corral_state_files::StateFileError> {
        let dir = gateway_dir.subdir(APPROVALS_DIR)?;
        for f in dir.names().unwrap_or_default() {
            let _ = dir.remove(&f);
        }
        Ok(Self {
            dir,
            profile: profile.to_owned(),
            bridge: bridge.to_owned(),
            timeout,
            waiting: Mutex::new(HashMap::new()),
            granted: Mutex::new(HashMap::new()),
        })
    }

    /// How long a lookup waits.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Holds `asker`'s lookup of `name` until the operator decides or the
    /// timeout passes.
    pub async fn hold(&self, asker: IpAddr, name: &str) -> Held {
        let key = (asker, name.to_owned());
        if lock(&self.granted)
            .get(&key)
            .is_some_and(|until| *until > Instant::now())
        {
            return Held::Granted;
        }
        let waiting = match self.waiting_for(&key) {
            Ok(w) => w,
            Err(why) => return Held::NotHeld(why),
        };
        let started = Instant::now();
        let outcome = loop {
            if let Some(d) = self.decision(&waiting) {
                break Some(d);
            }
            if Instant::now() >= waiting.deadline {
                break None;
            }
            tokio::time::sleep(POLL).await;
        };
        self.settle(&key, &waiting, outcome);
        match outcome {
            Some(Decision::Once) => Held::Granted,
            Some(Decision::Deny) => Held::Denied {
                id: waiting.id.clone(),
            },
            None => Held::Unanswered {
                id: waiting.id.clone(),
                waited: started.elapsed(),
            },
        }
    }

    /// The request `key` waits on: the one already made, or a new one.
    fn waiting_for(&self, key: &(IpAddr, String)) -> Result<Arc<Waiting>, String> {
        let mut waiting = lock(&self.waiting);
        if let Some(w) = waiting.get(key) {
            return Ok(Arc::clone(w));
        }
        if waiting.keys().filter(|(a, _)| *a == key.0).count() >= MAX_HELD_PER_ASKER {
            return Err(format!(
                "{MAX_HELD_PER_ASKER} lookups of this sandbox already wait for the operator"
            ));
        }
        if waiting.len() >= MAX_HELD {
            return Err(format!(
                "{MAX_HELD} lookups on this bridge already wait for the operator"
            ));
        }
        let id = new_id();
        let asked_at = now_secs();
        let request = Request {
            id: id.clone(),
            profile: self.profile.clone(),
            bridge: self.bridge.clone(),
            asker: key.0,
            name: key.1.clone(),
            asked_at,
            expires_at: asked_at + self.timeout.as_secs(),
        };
        let text = serde_json::to_vec_pretty(&request).map_err(|e| e.to_string())?;
        self.dir
            .write(&request_file(&id), &text)
            .map_err(|e| format!("the request could not be recorded: {e}"))?;
        let w = Arc::new(Waiting {
            id,
            deadline: Instant::now() + self.timeout,
            decided: Mutex::new((None, None)),
        });
        waiting.insert(key.clone(), Arc::clone(&w));
        Ok(w)
    }

    /// The decision on `w`, from a lookup that already read it or from its
    /// file.
    fn decision(&self, w: &Waiting) -> Option<Decision> {
        let mut held = lock(&w.decided);
        let (decided, read) = &mut *held;
        let due = read.is_none_or(|at| at.elapsed() >= POLL);
        if decided.is_none() && due {
            *read = Some(Instant::now());
            *decided = self
                .dir
                .read(&decision_file(&w.id))
                .ok()
                .flatten()
                .and_then(|b| serde_json::from_slice(&b).ok());
        }
        *decided
    }

    /// Once decided or timed out: the files go, and an approval opens the
    /// grant window.
    fn settle(&self, key: &(IpAddr, String), w: &Waiting, outcome: Option<Decision>) {
        let mut waiting = lock(&self.waiting);
        if waiting.get(key).is_some_and(|cur| cur.id == w.id) {
            waiting.remove(key);
            let _ = self.dir.remove(&request_file(&w.id));
            let _ = self.dir.remove(&decision_file(&w.id));
        }
        if outcome == Some(Decision::Once) {
            let mut granted = lock(&self.granted);
            let now = Instant::now();
            granted.retain(|_, until| *until > now);
            granted.insert(key.clone(), now + GRANT_WINDOW);
        }
    }
}

/// A poisoned lock only means a lookup panicked while holding it; the maps
/// stay consistent (every change is one insert or remove).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> (tempfile::TempDir, StateDir) {
        let t = tempfile::tempdir().unwrap();
        let root = StateDir::open(t.path()).unwrap();
        let gw = root
            .subdir(crate::paths::GATEWAY_DIR)
            .unwrap()
            .subdir("cb-dev")
            .unwrap();
        (t, gw)
    }

    #[tokio::test]
    async fn a_held_lookup_is_listed_decided_and_gone() {
        let (t, gw) = state();
        let a = Arc::new(Approvals::open(&gw, "dev", "cb-dev", Duration::from_secs(5)).unwrap());
        let asker: IpAddr = "10.90.0.5".parse().unwrap();
        let held = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.hold(asker, "pypi.org").await })
        };
        let request = loop {
            if let Some(r) = pending(t.path()).pop() {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(
            (
                request.profile.as_str(),
                request.bridge.as_str(),
                request.asker,
                request.name.as_str()
            ),
            ("dev", "cb-dev", asker, "pypi.org")
        );
        // The same sandbox asking again waits on the same request.
        let again = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.hold(asker, "pypi.org").await })
        };
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(pending(t.path()).len(), 1);
        decide(t.path(), &request.id, Decision::Once).unwrap();
        assert_eq!(held.await.unwrap(), Held::Granted);
        assert_eq!(again.await.unwrap(), Held::Granted);
        assert!(pending(t.path()).is_empty());
        // Within the window, no new request.
        assert_eq!(a.hold(asker, "pypi.org").await, Held::Granted);
        assert!(matches!(
            decide(t.path(), &request.id, Decision::Deny),
            Err(ApprovalError::NotFound { .. })
        ));
        // Another sandbox's lookup of the same name is its own request.
        let other: IpAddr = "10.90.0.6".parse().unwrap();
        let denied = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.hold(other, "pypi.org").await })
        };
        let r = loop {
            if let Some(r) = pending(t.path()).pop() {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(r.asker, other);
        decide(t.path(), &r.id, Decision::Deny).unwrap();
        assert_eq!(denied.await.unwrap(), Held::Denied { id: r.id });
    }

    #[tokio::test]
    async fn one_sandbox_holds_no_more_than_its_share() {
        let (t, gw) = state();
        let a = Arc::new(Approvals::open(&gw, "dev", "cb-dev", Duration::from_secs(5)).unwrap());
        let tunnel: IpAddr = "10.90.0.5".parse().unwrap();
        let mut held = Vec::new();
        for i in 0..MAX_HELD_PER_ASKER {
            let a = Arc::clone(&a);
            held.push(tokio::spawn(async move {
                a.hold(tunnel, &format!("{i}.c2.example")).await
            }));
        }
        while pending(t.path()).len() < MAX_HELD_PER_ASKER {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let over = a.hold(tunnel, "more.c2.example").await;
        assert!(
            matches!(&over, Held::NotHeld(why) if why.contains("of this sandbox")),
            "{over:?}"
        );
        // A sibling still gets its lookup put to the operator.
        let sibling: IpAddr = "10.90.0.6".parse().unwrap();
        let mine = {
            let a = Arc::clone(&a);
            tokio::spawn(async move { a.hold(sibling, "pypi.org").await })
        };
        let r = loop {
            if let Some(r) = pending(t.path()).into_iter().find(|r| r.asker == sibling) {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        decide(t.path(), &r.id, Decision::Once).unwrap();
        assert_eq!(mine.await.unwrap(), Held::Granted);
        for h in held {
            h.abort();
        }
    }

    #[tokio::test]
    async fn an_undecided_lookup_times_out_and_ids_name_nothing_else() {
        let (t, gw) = state();
        let a = Approvals::open(&gw, "dev", "cb-dev", Duration::from_millis(300)).unwrap();
        let held = a.hold("10.90.0.5".parse().unwrap(), "x.example").await;
        assert!(matches!(held, Held::Unanswered { .. }), "{held:?}");
        assert!(pending(t.path()).is_empty());
        for bad in ["../../etc/passwd", "ABCDEF0123456789", "0123"] {
            assert!(matches!(
                decide(t.path(), bad, Decision::Once),
                Err(ApprovalError::NotFound { .. })
            ));
        }
    }
}
