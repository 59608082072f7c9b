//! Registry URLs. Parsed here rather than by a URL crate because `zk://` connect strings list
//! several `host:port` pairs in the authority, which general URL parsers reject.

use shardcron_core::registry::RegistryError;

/// A parsed registry URL; backend options stay as query text for the backend to read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryUrl {
    /// `mem:[/namespace]`: a new in-process registry.
    Mem {
        /// The namespace, `None` for the root.
        namespace: Option<String>,
    },
    /// `zk://host:port[,host:port]/namespace[?options]`.
    ZooKeeper {
        /// The `host:port` pairs, in the order given.
        hosts: Vec<String>,
        /// The namespace, `None` for the root.
        namespace: Option<String>,
        /// The query text after `?`, for the backend to read.
        query: String,
    },
    /// `etcd://host:port[,host:port]/namespace[?options]`.
    Etcd {
        /// The `host:port` endpoints, in the order given.
        endpoints: Vec<String>,
        /// The namespace, `None` for the root.
        namespace: Option<String>,
        /// The query text after `?`, for the backend to read.
        query: String,
    },
}

/// Why a registry could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not one of the accepted forms.
    #[error("malformed registry URL {url:?}: {reason}; expected one of: mem:[/namespace] | zk://host:port[,host:port]/namespace[?session_timeout_ms=..&digest=user:password] | etcd://host:port[,host:port]/namespace[?ttl_s=..&user=..&password=..]")]
    Malformed {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The URL's backend is not built into this binary.
    #[error("{scheme}:// registries need shardcron's `{feature}` cargo feature; rebuild with --features {feature}")]
    Unsupported {
        /// The URL's scheme.
        scheme: &'static str,
        /// The cargo feature of `shardcron` that adds the backend.
        feature: &'static str,
    },

    /// The registry could not be reached or refused the connection.
    #[error(transparent)]
    Registry(RegistryError),

    /// `mem:` was asked for under a paused tokio clock, where its wall clock never moves.
    #[error("mem: runs on the wall clock, which stands still while tokio's clock is paused (`#[tokio::test(start_paused = true)]`, `tokio::time::pause`): no job would ever fire. In tests on a paused clock use `shardcron::testing::virtual_scheduler()`, a scheduler and an in-memory registry on tokio's virtual clock; or build one yourself with `Handles::simulated` for both `mem::MemServer::new` and `SchedulerBuilder::handles`")]
    PausedClock,
}

impl ConnectError {
    /// True when connecting again later may succeed (the registry was unreachable); false for
    /// a URL that is wrong or needs another build.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ConnectError::Registry(e) if e.is_retryable())
    }
}

impl RegistryUrl {
    /// Parses a registry URL; see [`connect`](crate::connect) for the forms.
    pub fn parse(url: &str) -> Result<Self, ConnectError> {
        let bad = |reason: &str| ConnectError::Malformed {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        if let Some(rest) = url.strip_prefix("mem:") {
            let namespace = namespace_of(rest.trim_start_matches("//")).map_err(&bad)?;
            return Ok(RegistryUrl::Mem { namespace });
        }
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = match location.find('/') {
            Some(i) => (&location[..i], &location[i..]),
            None => (location, ""),
        };
        let hosts: Vec<String> = authority.split(',').map(str::trim).map(str::to_owned).collect();
        if hosts.iter().any(|h| !valid_host_port(h)) {
            return Err(bad("every host must be host:port with a numeric port"));
        }
        let namespace = namespace_of(path).map_err(&bad)?;
        let query = query.to_owned();
        match scheme {
            "zk" | "zookeeper" => Ok(RegistryUrl::ZooKeeper { hosts, namespace, query }),
            "etcd" | "etcds" => Ok(RegistryUrl::Etcd { endpoints: hosts, namespace, query }),
            _ => Err(bad("unknown scheme")),
        }
    }
}

fn valid_host_port(h: &str) -> bool {
    match h.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok(),
        None => false,
    }
}

fn namespace_of(path: &str) -> Result<Option<String>, &'static str> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        return Ok(None);
    }
    let ns = format!("/{trimmed}");
    shardcron_core::registry::path::validate(&ns)
        .map_err(|_| "the namespace is not a valid registry path")?;
    Ok(Some(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(RegistryUrl::parse("mem:").unwrap(), RegistryUrl::Mem { namespace: None });
        assert_eq!(
            RegistryUrl::parse("mem:/demo").unwrap(),
            RegistryUrl::Mem { namespace: Some("/demo".into()) }
        );
        assert_eq!(
            RegistryUrl::parse(
                "zk://127.0.0.1:2181,10.0.0.2:2181/prod/jobs?session_timeout_ms=4000"
            )
            .unwrap(),
            RegistryUrl::ZooKeeper {
                hosts: vec!["127.0.0.1:2181".into(), "10.0.0.2:2181".into()],
                namespace: Some("/prod/jobs".into()),
                query: "session_timeout_ms=4000".into()
            }
        );
        assert!(matches!(
            RegistryUrl::parse("etcd://h:2379/ns").unwrap(),
            RegistryUrl::Etcd { .. }
        ));
    }

    #[test]
    fn malformed_urls_show_the_expected_form() {
        for bad in [
            "",
            "zk://",
            "zk://host/ns",
            "zk://host:port/ns",
            "redis://h:1/ns",
            "zk://h:1/a//b",
            "localhost:2181",
        ] {
            let err = RegistryUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains("expected one of: mem:"), "{bad}: {err}");
        }
    }
}
