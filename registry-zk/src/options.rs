//! How to reach the ensemble: [`ZkOptions`], built in code or parsed from the facade's
//! `zk://` URL with [`ZkOptions::from_url`].

use std::fmt;
use std::time::Duration;

use shardcron_core::registry::{lease, path};

/// The URL form [`ZkOptions::from_url`] accepts, quoted in every parse error.
pub const URL_FORM: &str = "zk://host:port[,host:port...]/namespace[?session_timeout_ms=N\
    &connect_timeout_ms=N&operation_timeout_ms=N&retry_base_ms=N&retry_max_ms=N\
    &retry_attempts=N&lease_margin_ms=N&digest=user:password]";

/// The port a host without one gets, as in ZooKeeper's own connect strings.
pub const DEFAULT_PORT: u16 = 2181;

/// Everything needed to open sessions on a ZooKeeper ensemble.
///
/// The defaults are ElasticJob's (`ZookeeperConfiguration`), so an operator moving a deployment
/// over gets the same timing: 60 s sessions, 15 s to connect, 1-3 s between 3 connect attempts.
/// The server bounds the session timeout to `[2, 20] × tickTime` (4-40 s with the default 2 s
/// tick) and the client uses what the server grants.
#[derive(Clone, PartialEq, Eq)]
pub struct ZkOptions {
    /// The ensemble, `host:port` separated by commas (`[v6::addr]:port` for IPv6). The client
    /// moves to another host when one fails, keeping its session.
    pub hosts: Vec<String>,
    /// The chroot of every path (`/shardcron`, or `shardcron` as ElasticJob spells it). Must not be
    /// the server root: a namespace keeps one deployment's nodes (and ZooKeeper's own
    /// `/zookeeper`) apart from another's. Created with its parents at connect time if missing.
    pub namespace: String,
    /// How long the server keeps a session whose client it no longer hears from. Ephemeral
    /// nodes (live instances, running items, the leader) outlive a crash by this much.
    pub session_timeout: Duration,
    /// How long one attempt to open a session may take.
    pub connect_timeout: Duration,
    /// The longest any registry operation may take before it fails with `Timeout`.
    pub operation_timeout: Duration,
    /// Pauses between attempts to open a session (at start-up, and after an expiry).
    pub retry: RetryPolicy,
    /// Digest credentials; with them every node this client creates is readable and writable by
    /// these credentials only (see the crate docs, "Security").
    pub digest: Option<Digest>,
    /// How much earlier than the session timeout a client that has not heard from the server
    /// reports its session `Lost` (see the crate docs, "Sessions"); `None` for the contract's
    /// default, a tenth of the negotiated timeout. Between 1 % and half of the session timeout.
    pub lease_margin: Option<Duration>,
}

impl ZkOptions {
    /// Options for `hosts` (a connect string, `h1:2181,h2:2181`) and `namespace`, defaults for
    /// the rest.
    pub fn new(hosts: &str, namespace: &str) -> Self {
        ZkOptions {
            hosts: hosts.split(',').map(str::trim).map(str::to_owned).collect(),
            namespace: namespace.to_owned(),
            session_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(15),
            operation_timeout: Duration::from_secs(15),
            retry: RetryPolicy::default(),
            digest: None,
            lease_margin: None,
        }
    }

    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout;
        self
    }

    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn lease_margin(mut self, margin: Duration) -> Self {
        self.lease_margin = Some(margin);
        self
    }

    pub fn digest(mut self, user: &str, password: &str) -> Self {
        self.digest = Some(Digest { user: user.to_owned(), password: password.to_owned() });
        self
    }

    /// Parses `zk://host:port[,host:port]/namespace?key=value&...` (see [`URL_FORM`]).
    ///
    /// Query keys: `session_timeout_ms`, `connect_timeout_ms`, `operation_timeout_ms`,
    /// `retry_base_ms`, `retry_max_ms`, `retry_attempts`, `lease_margin_ms`, `digest`
    /// (`user:password`; percent-encode
    /// `&`, `%` and `#` in the password). Unknown keys are errors, so a typo never silently
    /// falls back to a default.
    pub fn from_url(url: &str) -> Result<Self, UrlError> {
        let fail = |reason: String| UrlError { url: redact(url), reason };
        let rest = url
            .strip_prefix("zk://")
            .ok_or_else(|| fail("the URL must start with zk://".into()))?;
        let (location, query) = match rest.split_once('?') {
            Some((location, query)) => (location, Some(query)),
            None => (rest, None),
        };
        let (authority, namespace) = match location.find('/') {
            Some(i) => (&location[..i], &location[i..]),
            None => (location, ""),
        };
        if authority.is_empty() {
            return Err(fail("no host given".into()));
        }
        let hosts = authority
            .split(',')
            .map(|host| check_host(host).map(str::to_owned).map_err(|e| fail(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let mut options = ZkOptions::new("", namespace);
        options.hosts = hosts;
        check_namespace(namespace).map_err(|e| fail(e.to_string()))?;
        let mut seen: Vec<&str> = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, raw) = pair
                .split_once('=')
                .ok_or_else(|| fail(format!("query item {pair:?} has no '='")))?;
            if seen.contains(&key) {
                return Err(fail(format!("{key} is given twice")));
            }
            seen.push(key);
            let value = percent_decode(raw).map_err(|e| fail(format!("{key}: {e}")))?;
            let millis = || {
                value.parse::<u64>().map(Duration::from_millis).map_err(|_| {
                    fail(format!("{key} must be a whole number of milliseconds, got {value:?}"))
                })
            };
            match key {
                "session_timeout_ms" => options.session_timeout = millis()?,
                "connect_timeout_ms" => options.connect_timeout = millis()?,
                "operation_timeout_ms" => options.operation_timeout = millis()?,
                "retry_base_ms" => options.retry.base = millis()?,
                "retry_max_ms" => options.retry.max = millis()?,
                "lease_margin_ms" => options.lease_margin = Some(millis()?),
                "retry_attempts" => {
                    options.retry.attempts = value.parse().map_err(|_| {
                        fail(format!("retry_attempts must be a whole number, got {value:?}"))
                    })?;
                }
                "digest" => {
                    let (user, password) = value.split_once(':').ok_or_else(|| {
                        fail("digest must be user:password (no ':' found)".into())
                    })?;
                    if user.is_empty() {
                        return Err(fail("digest user is empty".into()));
                    }
                    options.digest =
                        Some(Digest { user: user.to_owned(), password: password.to_owned() });
                }
                other => {
                    return Err(fail(format!(
                        "unknown query key {other:?}; known: session_timeout_ms, \
                         connect_timeout_ms, operation_timeout_ms, retry_base_ms, retry_max_ms, \
                         retry_attempts, lease_margin_ms, digest"
                    )))
                }
            }
        }
        options.validate().map_err(|e| fail(e.to_string()))?;
        Ok(options)
    }

    /// Checks what [`crate::ZkRegistry::connect`] relies on; the message says what to fix.
    pub fn validate(&self) -> Result<(), InvalidOptions> {
        if self.hosts.is_empty() {
            return Err(InvalidOptions("no host given".into()));
        }
        for host in &self.hosts {
            check_host(host)?;
        }
        check_namespace(&self.namespace)?;
        for (name, value) in [
            ("session_timeout", self.session_timeout),
            ("connect_timeout", self.connect_timeout),
            ("operation_timeout", self.operation_timeout),
        ] {
            if value.is_zero() {
                return Err(InvalidOptions(format!("{name} must be above zero")));
            }
        }
        if let Some(margin) = self.lease_margin {
            lease::check_margin(self.session_timeout, margin)
                .map_err(|e| InvalidOptions(format!("lease_margin: {e}")))?;
        }
        if self.retry.max < self.retry.base {
            return Err(InvalidOptions(format!(
                "retry_max ({:?}) is below retry_base ({:?})",
                self.retry.max, self.retry.base
            )));
        }
        if let Some(digest) = &self.digest {
            if digest.user.is_empty() || digest.user.contains(':') {
                return Err(InvalidOptions("digest user must be non-empty, without ':'".into()));
            }
        }
        Ok(())
    }

    /// The namespace as a server path: `/name`.
    pub fn namespace_path(&self) -> String {
        if self.namespace.starts_with('/') {
            self.namespace.clone()
        } else {
            format!("/{}", self.namespace)
        }
    }

    /// The connect string the ZooKeeper client takes: `h1:p1,h2:p2` (no chroot: the namespace
    /// is applied after connecting, once it is known to exist).
    pub fn connect_string(&self) -> String {
        self.hosts.join(",")
    }
}

impl fmt::Debug for ZkOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkOptions")
            .field("hosts", &self.hosts)
            .field("namespace", &self.namespace)
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("operation_timeout", &self.operation_timeout)
            .field("retry", &self.retry)
            .field("digest", &self.digest)
            .field("lease_margin", &self.lease_margin)
            .finish()
    }
}

/// Exponential backoff between attempts to open a session: `base`, `2 × base`, ... capped at
/// `max`. At start-up [`crate::ZkRegistry::connect`] gives up after `attempts` tries; after an
/// expiry the client keeps trying (at `max` intervals) until it gets a session or is closed,
/// because giving up there would leave a running scheduler without a registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub max: Duration,
    /// Attempts to connect at start-up, the first included (0 behaves as 1).
    pub attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { base: Duration::from_secs(1), max: Duration::from_secs(3), attempts: 3 }
    }
}

impl RetryPolicy {
    /// The pause before attempt `n + 1` after `n` failed attempts (`n` ≥ 1).
    pub fn pause(&self, failed: u32) -> Duration {
        let factor = 1u32.checked_shl(failed.saturating_sub(1)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }
}

/// Credentials of ZooKeeper's `digest` scheme. Debug output hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Digest {
    pub user: String,
    pub password: String,
}

impl Digest {
    /// The auth packet the `digest` scheme takes: `user:password`.
    pub(crate) fn auth_bytes(&self) -> Vec<u8> {
        format!("{}:{}", self.user, self.password).into_bytes()
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({}:***)", self.user)
    }
}

/// A `zk://` URL that does not parse; the message shows the expected form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ZooKeeper URL {url:?}: {reason}; expected {form}", form = URL_FORM)]
pub struct UrlError {
    /// The URL as given, password hidden.
    pub url: String,
    pub reason: String,
}

/// Options that cannot work; the message says which field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid ZooKeeper options: {0}")]
pub struct InvalidOptions(pub String);

fn check_host(host: &str) -> Result<&str, InvalidOptions> {
    let bad = |why: &str| Err(InvalidOptions(format!("host {host:?}: {why}")));
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        match v6.split_once(']') {
            Some((addr, "")) => (addr, None),
            Some((addr, rest)) => match rest.strip_prefix(':') {
                Some(port) => (addr, Some(port)),
                None => return bad("expected [address]:port"),
            },
            None => return bad("missing ']' after an IPv6 address"),
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if name.is_empty() {
        return bad("empty host name");
    }
    if name.contains(['/', '?', '@', ' ']) {
        return bad("not a host name");
    }
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return bad("the port must be a number from 1 to 65535"),
        }
    }
    Ok(host)
}

fn check_namespace(namespace: &str) -> Result<(), InvalidOptions> {
    let ns =
        if namespace.starts_with('/') { namespace.to_owned() } else { format!("/{namespace}") };
    if ns == path::ROOT {
        return Err(InvalidOptions(
            "a namespace is required (zk://host:port/namespace): it keeps one deployment's nodes \
             apart from another's and from ZooKeeper's own /zookeeper"
                .into(),
        ));
    }
    path::validate(&ns).map_err(|e| InvalidOptions(format!("namespace: {e}")))
}

/// Decodes `%XX` escapes (and nothing else: `+` stays `+`, as in a URL path).
fn percent_decode(raw: &str) -> Result<String, String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = raw.get(i + 1..i + 3).ok_or("a '%' must be followed by two hex digits")?;
            let byte =
                u8::from_str_radix(hex, 16).map_err(|_| format!("bad percent escape %{hex}"))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent escapes do not decode to UTF-8".to_owned())
}

/// The URL with the digest password replaced by `***`, for error messages and logs.
fn redact(url: &str) -> String {
    let Some(start) = url.find("digest=") else { return url.to_owned() };
    let value_start = start + "digest=".len();
    let value_end = url[value_start..].find('&').map_or(url.len(), |i| value_start + i);
    match url[value_start..value_end].split_once(':') {
        Some((user, _)) => format!("{}{user}:***{}", &url[..value_start], &url[value_end..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn full_url() {
        let o = ZkOptions::from_url(
            "zk://10.0.0.1:2181,10.0.0.2:2182,[::1]:2183/prod/jobs?session_timeout_ms=20000\
             &connect_timeout_ms=5000&operation_timeout_ms=7000&retry_base_ms=100\
             &retry_max_ms=800&retry_attempts=5&digest=ops:s%26cr%3Aet",
        )
        .unwrap();
        assert_eq!(o.hosts, ["10.0.0.1:2181", "10.0.0.2:2182", "[::1]:2183"]);
        assert_eq!(o.namespace_path(), "/prod/jobs");
        assert_eq!(o.session_timeout, Duration::from_secs(20));
        assert_eq!(o.connect_timeout, Duration::from_secs(5));
        assert_eq!(o.operation_timeout, Duration::from_secs(7));
        assert_eq!(
            o.retry,
            RetryPolicy {
                base: Duration::from_millis(100),
                max: Duration::from_millis(800),
                attempts: 5
            }
        );
        let digest = o.digest.clone().unwrap();
        assert_eq!((digest.user.as_str(), digest.password.as_str()), ("ops", "s&cr:et"));
        assert!(!format!("{o:?}").contains("s&cr"), "Debug hides the password");
        assert_eq!(o.connect_string(), "10.0.0.1:2181,10.0.0.2:2182,[::1]:2183");
    }

    #[test]
    fn minimal_url_takes_defaults() {
        let o = ZkOptions::from_url("zk://localhost/shardcron").unwrap();
        assert_eq!(o.hosts, ["localhost"]);
        assert_eq!(o.namespace_path(), "/shardcron");
        assert_eq!(o.session_timeout, Duration::from_secs(60));
        assert_eq!(o.retry, RetryPolicy::default());
        assert_eq!(o.digest, None);
    }

    #[test]
    fn errors_say_what_and_show_the_form() {
        let cases = [
            ("http://h:1/ns", "must start with zk://"),
            ("zk:///ns", "no host"),
            ("zk://h:1", "a namespace is required"),
            ("zk://h:1/", "a namespace is required"),
            ("zk://h:99999/ns", "port must be a number"),
            ("zk://h:1,/ns", "empty host name"),
            ("zk://h:1/a//b", "empty segment"),
            ("zk://h:1/ns?session_timeout=5", "unknown query key \"session_timeout\""),
            ("zk://h:1/ns?session_timeout_ms=5s", "whole number of milliseconds"),
            ("zk://h:1/ns?digest=nopassword", "user:password"),
            ("zk://h:1/ns?digest=:pw", "digest user is empty"),
            ("zk://h:1/ns?retry_attempts=1&retry_attempts=2", "given twice"),
            ("zk://h:1/ns?digest=u:%zz", "bad percent escape"),
            ("zk://h:1/ns?session_timeout_ms=0", "session_timeout must be above zero"),
            ("zk://h:1/ns?retry_base_ms=500&retry_max_ms=100", "below retry_base"),
        ];
        for (url, reason) in cases {
            let err = ZkOptions::from_url(url).unwrap_err().to_string();
            assert!(err.contains(reason), "{url}: {err}");
            assert!(err.contains("expected zk://host:port"), "{url}: {err}");
        }
    }

    #[test]
    fn errors_hide_the_password() {
        let err = ZkOptions::from_url("zk://h:1/ns?digest=ops:topsecret&bogus=1").unwrap_err();
        assert!(!err.to_string().contains("topsecret"), "{err}");
        assert!(err.to_string().contains("ops:***"), "{err}");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let r = RetryPolicy {
            base: Duration::from_millis(100),
            max: Duration::from_millis(350),
            attempts: 9,
        };
        let pauses: Vec<u128> = (1..=5).map(|n| r.pause(n).as_millis()).collect();
        assert_eq!(pauses, [100, 200, 350, 350, 350]);
        assert_eq!(r.pause(200), Duration::from_millis(350), "no overflow");
    }
}
