//! [`EtcdOptions`]: where the cluster is, which namespace, session TTL, timeouts, credentials
//! and TLS, and the URL form operators write them in.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use shardcron_core::registry::lease;

/// The URL form [`EtcdOptions::from_url`] accepts, shown in every parse error.
pub const URL_FORM: &str = "etcd://host:port[,host:port...]/namespace\
     [?ttl_s=N&lease_margin_ms=N&connect_timeout_ms=N&op_timeout_ms=N&user=NAME&password=SECRET\
     &ca=PEM_FILE&cert=PEM_FILE&key=PEM_FILE&domain=NAME] \
     (etcds:// for TLS; percent-encode special characters in user and password)";

/// A configuration value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The URL does not have the expected form.
    #[error("bad etcd URL {url:?}: {reason}; expected {URL_FORM}")]
    Url { url: String, reason: String },
    /// An option has a value outside its range.
    #[error("bad etcd option {name}: {reason}")]
    Option { name: &'static str, reason: String },
    /// A TLS file could not be read.
    #[error("cannot read TLS file {path}: {reason}")]
    TlsFile { path: String, reason: String },
}

/// User name and password for etcd's authentication. The password never shows in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials").field("user", &self.user).field("password", &"***").finish()
    }
}

/// TLS settings: PEM files, read at connect time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// CA certificate(s) to verify the server with; the system's roots are not used.
    pub ca: Option<PathBuf>,
    /// Client certificate and key, for servers started with `--client-cert-auth`.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// The name to verify the server certificate against, when it differs from the host.
    pub domain: Option<String>,
}

/// How to reach etcd and how the registry client behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOptions {
    /// `host:port` (or full `http://` / `https://` URLs) of the cluster members.
    pub endpoints: Vec<String>,
    /// The chroot of every path (`demo` or `/demo`); `None` for the keyspace root.
    pub namespace: Option<String>,
    /// Time-to-live of the session lease: how long etcd keeps ephemeral nodes of a client it
    /// no longer hears from. Keep-alives go out every third of it. etcd raises values below its
    /// minimum (about 1.5 s with default heartbeat settings).
    pub lease_ttl: Duration,
    /// The longest `connect` waits for the first answer.
    pub connect_timeout: Duration,
    /// The longest one operation may take before failing with `Timeout`.
    pub operation_timeout: Duration,
    pub credentials: Option<Credentials>,
    /// `Some` for TLS (endpoints become `https://`).
    pub tls: Option<TlsFiles>,
    /// How much earlier than the lease TTL a client whose keep-alives go unanswered reports its
    /// session `Lost` (see the crate docs); `None` for the contract's default, a tenth of the
    /// TTL etcd granted. Between 1 % and half of the TTL.
    pub lease_margin: Option<Duration>,
}

impl EtcdOptions {
    /// Defaults for the given endpoints: no namespace, 60 s lease (Curator's session timeout,
    /// which the other backends use too), 15 s connect and operation timeouts.
    pub fn new<S: Into<String>>(endpoints: impl IntoIterator<Item = S>) -> Self {
        EtcdOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            namespace: None,
            lease_ttl: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(15),
            operation_timeout: Duration::from_secs(15),
            credentials: None,
            tls: None,
            lease_margin: None,
        }
    }

    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    pub fn lease_margin(mut self, margin: Duration) -> Self {
        self.lease_margin = Some(margin);
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

    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.credentials = Some(Credentials { user: user.into(), password: password.into() });
        self
    }

    pub fn tls(mut self, tls: TlsFiles) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Parses `etcd://host:port[,host:port]/namespace?ttl_s=..&user=..&password=..` (see
    /// [`URL_FORM`] for every parameter); `etcds://` turns TLS on.
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &str| ConfigError::Url { url: redact(url), reason: reason.to_owned() };
        let (tls, rest) = if let Some(rest) = url.strip_prefix("etcd://") {
            (false, rest)
        } else if let Some(rest) = url.strip_prefix("etcds://") {
            (true, rest)
        } else {
            return Err(bad("the scheme must be etcd:// or etcds://"));
        };
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (hosts, namespace) = match rest.split_once('/') {
            Some((h, ns)) => (h, Some(ns)),
            None => (rest, None),
        };
        let mut endpoints = Vec::new();
        for host in hosts.split(',') {
            let Some((name, port)) = host.rsplit_once(':') else {
                return Err(bad(&format!("endpoint {host:?} needs a port (host:port)")));
            };
            if name.is_empty() || port.parse::<u16>().is_err() {
                return Err(bad(&format!("endpoint {host:?} is not host:port")));
            }
            endpoints.push(host.to_owned());
        }
        let mut options = EtcdOptions::new(endpoints);
        match namespace.map(|ns| ns.trim_end_matches('/')) {
            None | Some("") => {}
            Some(ns) => options.namespace = Some(decode(ns).map_err(|r| bad(&r))?),
        }
        let mut files = TlsFiles::default();
        let (mut user, mut password) = (None, None);
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| bad(&format!("parameter {pair:?} has no '='")))?;
            let value = decode(value).map_err(|r| bad(&r))?;
            let millis = |v: &str| {
                v.parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|_| bad(&format!("{name} must be a whole number, got {v:?}")))
            };
            match name {
                "ttl_s" => {
                    let secs = value
                        .parse::<u64>()
                        .map_err(|_| bad(&format!("ttl_s must be whole seconds, got {value:?}")))?;
                    options.lease_ttl = Duration::from_secs(secs);
                }
                "lease_margin_ms" => options.lease_margin = Some(millis(&value)?),
                "connect_timeout_ms" => options.connect_timeout = millis(&value)?,
                "op_timeout_ms" => options.operation_timeout = millis(&value)?,
                "user" => user = Some(value),
                "password" => password = Some(value),
                "ca" => files.ca = Some(PathBuf::from(value)),
                "cert" => files.cert = Some(PathBuf::from(value)),
                "key" => files.key = Some(PathBuf::from(value)),
                "domain" => files.domain = Some(value),
                other => return Err(bad(&format!("unknown parameter {other:?}"))),
            }
        }
        match (user, password) {
            (Some(user), Some(password)) => {
                options.credentials = Some(Credentials { user, password })
            }
            (None, None) => {}
            _ => return Err(bad("user and password go together")),
        }
        let any_file = files != TlsFiles::default();
        if tls {
            options.tls = Some(files);
        } else if any_file {
            return Err(bad("ca, cert, key and domain need the etcds:// scheme"));
        }
        options.validate()?;
        Ok(options)
    }

    /// Checks the values against their ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |name, reason: &str| Err(ConfigError::Option { name, reason: reason.to_owned() });
        if self.endpoints.is_empty() {
            return bad("endpoints", "at least one endpoint is needed");
        }
        if self.lease_ttl < Duration::from_secs(1) {
            return bad("lease_ttl", "must be at least 1 s (etcd counts leases in seconds)");
        }
        if let Some(margin) = self.lease_margin {
            let ttl = Duration::from_secs(self.ttl_secs().unsigned_abs());
            if let Err(reason) = lease::check_margin(ttl, margin) {
                return bad("lease_margin", &reason);
            }
        }
        if self.connect_timeout.is_zero() {
            return bad("connect_timeout", "must be positive");
        }
        if self.operation_timeout.is_zero() {
            return bad("operation_timeout", "must be positive");
        }
        if let Some(tls) = &self.tls {
            if tls.cert.is_some() != tls.key.is_some() {
                return bad("tls", "a client certificate needs its key and the other way round");
            }
        }
        Ok(())
    }

    /// The lease TTL in whole seconds, as etcd takes it (rounded up).
    pub(crate) fn ttl_secs(&self) -> i64 {
        let secs = self.lease_ttl.as_secs() + u64::from(self.lease_ttl.subsec_nanos() > 0);
        i64::try_from(secs).unwrap_or(i64::MAX)
    }

    /// Endpoints as URLs with the scheme TLS needs.
    pub(crate) fn endpoint_urls(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() { "https://" } else { "http://" };
        self.endpoints
            .iter()
            .map(|e| if e.contains("://") { e.clone() } else { format!("{scheme}{e}") })
            .collect()
    }
}

/// Percent-decoding of one URL component.
fn decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(|| format!("truncated escape in {s:?}"))?;
            let byte =
                u8::from_str_radix(hex, 16).map_err(|_| format!("bad escape %{hex} in {s:?}"))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

/// The URL with the password replaced, for error messages.
fn redact(url: &str) -> String {
    let Some(start) = url.find("password=") else { return url.to_owned() };
    let value_start = start + "password=".len();
    let end = url[value_start..].find('&').map_or(url.len(), |i| value_start + i);
    format!("{}***{}", &url[..value_start], &url[end..])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_the_full_form() {
        let o = EtcdOptions::from_url(
            "etcd://10.0.0.1:2379,10.0.0.2:2379/demo?ttl_s=10&user=root&password=p%26ss&op_timeout_ms=500",
        )
        .unwrap();
        assert_eq!(o.endpoints, vec!["10.0.0.1:2379", "10.0.0.2:2379"]);
        assert_eq!(o.namespace.as_deref(), Some("demo"));
        assert_eq!(o.lease_ttl, Duration::from_secs(10));
        assert_eq!(o.operation_timeout, Duration::from_millis(500));
        let c = o.credentials.clone().unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("root", "p&ss"));
        assert!(!format!("{o:?}").contains("p&ss"), "Debug hides the password");
        assert_eq!(o.endpoint_urls()[0], "http://10.0.0.1:2379");
    }

    #[test]
    fn tls_scheme_and_files() {
        let o = EtcdOptions::from_url("etcds://h:2379/x/y?ca=/etc/ca.pem&domain=etcd").unwrap();
        let tls = o.tls.clone().unwrap();
        assert_eq!(tls.ca, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(tls.domain.as_deref(), Some("etcd"));
        assert_eq!(o.namespace.as_deref(), Some("x/y"));
        assert_eq!(o.endpoint_urls()[0], "https://h:2379");
        let o = EtcdOptions::from_url("etcd://h:2379").unwrap();
        assert_eq!(o.namespace, None);
        assert_eq!(o.tls, None);
    }

    #[test]
    fn errors_show_the_expected_form() {
        for (url, reason) in [
            ("http://h:1/x", "scheme"),
            ("etcd://h/x", "needs a port"),
            ("etcd://h:port/x", "not host:port"),
            ("etcd://h:1/x?ttl_s=soon", "ttl_s"),
            ("etcd://h:1/x?user=a", "together"),
            ("etcd://h:1/x?colour=red", "unknown parameter"),
            ("etcd://h:1/x?ca=/c.pem", "etcds://"),
            ("etcd://h:1/x?ttl_s=0", "lease_ttl"),
        ] {
            let err = EtcdOptions::from_url(url).unwrap_err().to_string();
            assert!(err.contains(reason), "{url}: {err}");
            if !reason.contains("lease_ttl") {
                assert!(err.contains("expected etcd://host:port"), "{url}: {err}");
            }
        }
        let err = EtcdOptions::from_url("etcd://h:1/x?user=u&password=secret&ttl_s=x").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}
