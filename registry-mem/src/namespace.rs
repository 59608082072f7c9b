//! The chroot: how a client's paths map onto the server's tree.

use shardcron_core::registry::{path, RegistryError};

/// A client's namespace. Client paths are relative to it: with namespace `/demo`, the client's
/// `/job/config` is the server's `/demo/job/config` and the client's `/` is `/demo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Namespace {
    /// The server path of the client's root; `None` for the server root.
    root: Option<String>,
}

impl Namespace {
    /// Parses a namespace given as `/demo`, `demo` (ElasticJob's spelling) or `/` (none).
    pub fn parse(namespace: Option<&str>) -> Result<Self, RegistryError> {
        let Some(ns) = namespace else { return Ok(Namespace { root: None }) };
        let ns = if ns.starts_with('/') { ns.to_owned() } else { format!("/{ns}") };
        path::validate(&ns)?;
        Ok(Namespace { root: (ns != path::ROOT).then_some(ns) })
    }

    /// The server path of the client's root.
    pub fn root(&self) -> &str {
        self.root.as_deref().unwrap_or(path::ROOT)
    }

    /// The server path of a (valid) client path.
    pub fn to_server(&self, client_path: &str) -> String {
        match &self.root {
            None => client_path.to_owned(),
            Some(root) if client_path == path::ROOT => root.clone(),
            Some(root) => {
                // Every operation maps its path: one exact allocation, no formatter.
                let mut server = String::with_capacity(root.len() + client_path.len());
                server.push_str(root);
                server.push_str(client_path);
                server
            }
        }
    }

    /// The client path of a server path inside the namespace.
    pub fn to_client(&self, server_path: &str) -> String {
        match &self.root {
            None => server_path.to_owned(),
            Some(root) => match server_path.strip_prefix(root.as_str()) {
                Some("") => path::ROOT.to_owned(),
                Some(rest) => rest.to_owned(),
                // Not inside the namespace: callers filter first; show it unchanged.
                None => server_path.to_owned(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let ns = Namespace::parse(Some("demo")).unwrap();
        assert_eq!(ns.root(), "/demo");
        assert_eq!(ns.to_server("/"), "/demo");
        assert_eq!(ns.to_server("/a/b"), "/demo/a/b");
        assert_eq!(ns.to_client("/demo"), "/");
        assert_eq!(ns.to_client("/demo/a/b"), "/a/b");
        let none = Namespace::parse(None).unwrap();
        assert_eq!(none.to_server("/a"), "/a");
        assert_eq!(Namespace::parse(Some("/")).unwrap(), none);
        assert!(Namespace::parse(Some("a//b")).is_err());
        assert_eq!(Namespace::parse(Some("/x/y")).unwrap().to_server("/z"), "/x/y/z");
    }
}
