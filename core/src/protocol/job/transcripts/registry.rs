//! The registry the transcripts run against: a small synchronous model of the contract (nodes
//! with versions and ephemeral owners, all-or-nothing transactions, the typed errors), so that
//! a transcript's requests get the replies a real registry would give, races included: a write
//! the view has not seen yet makes a versioned transaction fail as it would on a server.

use std::collections::BTreeMap;

use crate::registry::{CreateMode, Node, Op, RegistryError, TxnOp, TxnResult, Version, WatchEvent};

/// A stored node: its data, version, and the session owning it when ephemeral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub data: Vec<u8>,
    pub version: Version,
    pub owner: Option<String>,
}

impl Entry {
    pub fn node(&self) -> Node {
        Node { data: self.data.clone(), version: self.version, ephemeral: self.owner.is_some() }
    }
}

/// The registry's nodes; `/` always exists.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    nodes: BTreeMap<String, Entry>,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

impl Registry {
    pub fn exists(&self, path: &str) -> bool {
        path == "/" || self.nodes.contains_key(path)
    }

    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.nodes.get(path)
    }

    pub fn nodes(&self) -> &BTreeMap<String, Entry> {
        &self.nodes
    }

    pub fn has_children(&self, path: &str) -> bool {
        let prefix = format!("{path}/");
        self.nodes.range(prefix.clone()..).next().is_some_and(|(p, _)| p.starts_with(&prefix))
    }

    /// The names of `path`'s direct children, sorted.
    pub fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" { "/".to_owned() } else { format!("{path}/") };
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(p, _)| p.starts_with(&prefix))
            .filter_map(|(p, _)| {
                let rest = &p[prefix.len()..];
                (!rest.contains('/')).then(|| rest.to_owned())
            })
            .collect()
    }

    /// The whole namespace, as a watch resync shows it.
    pub fn snapshot(&self) -> BTreeMap<String, Node> {
        self.nodes.iter().map(|(p, e)| (p.clone(), e.node())).collect()
    }

    fn check(&self, op: Op, path: &str, expected: Option<Version>) -> Result<(), RegistryError> {
        let entry = self
            .nodes
            .get(path)
            .ok_or_else(|| RegistryError::NoNode { op, path: path.to_owned() })?;
        match expected {
            Some(v) if v != entry.version => {
                Err(RegistryError::BadVersion { op, path: path.to_owned(), expected: v })
            }
            _ => Ok(()),
        }
    }

    /// Creates `path` under an existing parent.
    pub fn create(
        &mut self,
        path: &str,
        data: &[u8],
        owner: Option<String>,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(), RegistryError> {
        let err = |make: fn(Op, String) -> RegistryError| Err(make(Op::Create, path.to_owned()));
        if self.nodes.contains_key(path) {
            return err(|op, path| RegistryError::NodeExists { op, path });
        }
        let parent = parent(path);
        if !self.exists(parent) {
            return err(|op, path| RegistryError::NoNode { op, path });
        }
        if self.nodes.get(parent).is_some_and(|p| p.owner.is_some()) {
            return err(|op, path| RegistryError::EphemeralParent { op, path });
        }
        let entry = Entry { data: data.to_vec(), version: 0, owner };
        events.push(WatchEvent::Created { path: path.to_owned(), node: entry.node() });
        self.nodes.insert(path.to_owned(), entry);
        Ok(())
    }

    /// Creates the missing ancestors of `path` as empty persistent nodes.
    pub fn create_parents(
        &mut self,
        path: &str,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(), RegistryError> {
        let mut missing = Vec::new();
        let mut at = parent(path);
        while !self.exists(at) {
            missing.push(at.to_owned());
            at = parent(at);
        }
        for ancestor in missing.iter().rev() {
            self.create(ancestor, b"", None, events)?;
        }
        Ok(())
    }

    pub fn set(
        &mut self,
        path: &str,
        data: &[u8],
        expected: Option<Version>,
        events: &mut Vec<WatchEvent>,
    ) -> Result<Version, RegistryError> {
        self.check(Op::Set, path, expected)?;
        let entry = self
            .nodes
            .get_mut(path)
            .ok_or_else(|| RegistryError::NoNode { op: Op::Set, path: path.to_owned() })?;
        entry.data = data.to_vec();
        entry.version += 1;
        events.push(WatchEvent::Changed { path: path.to_owned(), node: entry.node() });
        Ok(entry.version)
    }

    pub fn delete(
        &mut self,
        path: &str,
        expected: Option<Version>,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(), RegistryError> {
        self.check(Op::Delete, path, expected)?;
        if self.has_children(path) {
            return Err(RegistryError::NotEmpty { op: Op::Delete, path: path.to_owned() });
        }
        self.nodes.remove(path);
        events.push(WatchEvent::Deleted { path: path.to_owned() });
        Ok(())
    }

    /// Deletes `path` and everything below it, deepest first.
    pub fn delete_tree(&mut self, path: &str, events: &mut Vec<WatchEvent>) {
        let prefix = format!("{path}/");
        let doomed: Vec<String> =
            self.nodes.keys().filter(|p| *p == path || p.starts_with(&prefix)).cloned().collect();
        for p in doomed.iter().rev() {
            self.nodes.remove(p);
            events.push(WatchEvent::Deleted { path: p.clone() });
        }
    }

    /// Ends the session `owner`: its ephemeral nodes go.
    pub fn expire(&mut self, owner: &str, events: &mut Vec<WatchEvent>) {
        let doomed: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, e)| e.owner.as_deref() == Some(owner))
            .map(|(p, _)| p.clone())
            .collect();
        for p in doomed {
            self.nodes.remove(&p);
            events.push(WatchEvent::Deleted { path: p });
        }
    }

    /// Applies `ops` all or nothing, creating ephemerals for `owner`.
    pub fn transaction(
        &mut self,
        ops: &[TxnOp],
        owner: &str,
        events: &mut Vec<WatchEvent>,
    ) -> Result<Vec<TxnResult>, RegistryError> {
        let mut scratch = self.clone();
        let mut changes = Vec::new();
        let mut results = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            let result = match op {
                TxnOp::Check { path, version } => {
                    scratch.check(Op::Check, path, *version).map(|()| TxnResult::Checked)
                }
                TxnOp::Absent { path } if scratch.nodes.contains_key(path) => {
                    Err(RegistryError::NodeExists { op: Op::Check, path: path.clone() })
                }
                TxnOp::Absent { .. } => Ok(TxnResult::Checked),
                TxnOp::Create { path, data, mode } => {
                    let eph = mode.is_ephemeral().then(|| owner.to_owned());
                    scratch
                        .create(path, data, eph, &mut changes)
                        .map(|()| TxnResult::Created { path: path.clone() })
                }
                TxnOp::Set { path, data, version } => scratch
                    .set(path, data, *version, &mut changes)
                    .map(|version| TxnResult::Set { version }),
                TxnOp::Delete { path, version } => {
                    scratch.delete(path, *version, &mut changes).map(|()| TxnResult::Deleted)
                }
            };
            match result {
                Ok(r) => results.push(r),
                Err(e) => return Err(RegistryError::Transaction { index, source: Box::new(e) }),
            }
        }
        *self = scratch;
        events.extend(changes);
        Ok(results)
    }

    /// A plain create that makes the missing parents first (`Request::Create`).
    pub fn create_with_parents(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        owner: &str,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(), RegistryError> {
        if self.nodes.contains_key(path) {
            return Err(RegistryError::NodeExists { op: Op::Create, path: path.to_owned() });
        }
        let mut scratch = self.clone();
        let mut changes = Vec::new();
        scratch.create_parents(path, &mut changes)?;
        scratch.create(path, data, mode.is_ephemeral().then(|| owner.to_owned()), &mut changes)?;
        *self = scratch;
        events.extend(changes);
        Ok(())
    }

    /// Creates `path` (and parents) as an empty persistent node unless it exists; whether it
    /// created it.
    pub fn ensure(
        &mut self,
        path: &str,
        events: &mut Vec<WatchEvent>,
    ) -> Result<bool, RegistryError> {
        if self.exists(path) {
            return Ok(false);
        }
        self.create_with_parents(path, b"", CreateMode::Persistent, "", events)?;
        Ok(true)
    }

    /// Writes `path` as a setup or another party would: created (with parents) when absent,
    /// replaced otherwise (`version` forces the stored version).
    pub fn put(
        &mut self,
        path: &str,
        data: &[u8],
        owner: Option<String>,
        version: Option<Version>,
        events: &mut Vec<WatchEvent>,
    ) -> Result<(), RegistryError> {
        if self.nodes.contains_key(path) {
            self.set(path, data, None, events)?;
        } else {
            self.create_parents(path, events)?;
            self.create(path, data, owner.clone(), events)?;
        }
        if let Some(entry) = self.nodes.get_mut(path) {
            if let Some(v) = version {
                entry.version = v;
            }
            if owner.is_some() {
                entry.owner = owner;
            }
            let node = entry.node();
            if let Some(WatchEvent::Created { node: n, .. } | WatchEvent::Changed { node: n, .. }) =
                events.last_mut()
            {
                *n = node;
            }
        }
        Ok(())
    }
}
