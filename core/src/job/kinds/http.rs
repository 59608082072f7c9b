//! HTTP jobs: one request per item, ElasticJob's `HTTP` job type.
//!
//! The properties and their defaults are ElasticJob's (`http.uri`, `http.method`, `http.data`,
//! `http.connect.timeout.milliseconds`, `http.read.timeout.milliseconds`, `http.content.type`),
//! and the item's [`ShardingContext`] goes as JSON in the `shardingContext` request header, so an
//! endpoint written for ElasticJob works unchanged. One difference: a response with status 400 or
//! above fails the item, where ElasticJob only logs it; `http.fail.on.error.status: false` keeps
//! ElasticJob's behaviour.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use thiserror::Error;

use super::RunItem;
use crate::handles::Handles;
use crate::job::{ItemOutcome, JobFailure, ShardingContext};

/// The request header carrying the item's [`ShardingContext`] as JSON.
pub const SHARDING_CONTEXT_HEADER: &str = "shardingContext";

/// How much of an error response's body a [`JobFailure::Http`] keeps (its start).
pub const HTTP_ERROR_BODY_BYTES: usize = 1024;

/// The request an HTTP job sends for each item. Build it with [`HttpJobConfig::new`] or from a
/// job config's `props` with [`HttpJobConfig::from_props`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpJobConfig {
    /// `http.uri` (required): where the request goes, `http://` or `https://`.
    pub uri: String,
    /// `http.method` (required): `GET`, `POST`, `PUT`, `DELETE`, ... (upper-cased).
    pub method: String,
    /// `http.data`: the body, sent with `POST`, `PUT` and `DELETE` (as in ElasticJob).
    pub data: Option<String>,
    /// `http.connect.timeout.milliseconds`, default 3000.
    pub connect_timeout: Duration,
    /// `http.read.timeout.milliseconds`, default 5000: the longest wait for the response (its
    /// head, then each read of its body).
    pub read_timeout: Duration,
    /// `http.content.type`: the `Content-Type` header, when set.
    pub content_type: Option<String>,
    /// `http.fail.on.error.status`, default `true`: a response with status 400 or above fails
    /// the item. `false` counts it a success, as ElasticJob does (it is still logged).
    pub fail_on_error_status: bool,
}

/// The property names of an HTTP job, as in ElasticJob (plus `http.fail.on.error.status`).
pub mod props {
    /// Required: the request's URI.
    pub const URI: &str = "http.uri";
    /// Required: the request's method.
    pub const METHOD: &str = "http.method";
    /// The body of `POST`, `PUT` and `DELETE` requests.
    pub const DATA: &str = "http.data";
    /// Milliseconds, default 3000.
    pub const CONNECT_TIMEOUT: &str = "http.connect.timeout.milliseconds";
    /// Milliseconds, default 5000.
    pub const READ_TIMEOUT: &str = "http.read.timeout.milliseconds";
    /// The `Content-Type` header.
    pub const CONTENT_TYPE: &str = "http.content.type";
    /// `true` (default) or `false`.
    pub const FAIL_ON_ERROR_STATUS: &str = "http.fail.on.error.status";
}

/// ElasticJob's default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(3000);
/// ElasticJob's default read timeout.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_millis(5000);

/// The properties of an HTTP job are unusable.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpJobError {
    /// A required property is missing or blank.
    #[error("HTTP job: property {key} is required (e.g. {example})")]
    Missing {
        /// The property.
        key: &'static str,
        /// A value that would do.
        example: &'static str,
    },
    /// A property has a value that cannot be used.
    #[error("HTTP job: property {key} = {value:?}: {reason}")]
    Invalid {
        /// The property.
        key: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (e.g. no TLS backend).
    #[error("HTTP job: cannot build the HTTP client: {reason}")]
    Client {
        /// The client library's message.
        reason: String,
    },
}

impl HttpJobConfig {
    /// A request of `method` to `uri` with ElasticJob's defaults for the rest.
    pub fn new(method: impl Into<String>, uri: impl Into<String>) -> Self {
        HttpJobConfig {
            uri: uri.into(),
            method: method.into().to_ascii_uppercase(),
            data: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: DEFAULT_READ_TIMEOUT,
            content_type: None,
            fail_on_error_status: true,
        }
    }

    /// Reads the `http.*` properties of a job config (its `props`); other keys are ignored.
    pub fn from_props(props: &BTreeMap<String, String>) -> Result<Self, HttpJobError> {
        let get = |key: &str| props.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let uri = get(props::URI).ok_or(HttpJobError::Missing {
            key: props::URI,
            example: "http://127.0.0.1:8080/run",
        })?;
        let method = get(props::METHOD)
            .ok_or(HttpJobError::Missing { key: props::METHOD, example: "POST" })?;
        let mut config = HttpJobConfig::new(method, uri);
        config.data = props.get(props::DATA).cloned();
        config.content_type = get(props::CONTENT_TYPE).map(str::to_owned);
        if let Some(ms) = get(props::CONNECT_TIMEOUT) {
            config.connect_timeout = millis(props::CONNECT_TIMEOUT, ms)?;
        }
        if let Some(ms) = get(props::READ_TIMEOUT) {
            config.read_timeout = millis(props::READ_TIMEOUT, ms)?;
        }
        if let Some(flag) = get(props::FAIL_ON_ERROR_STATUS) {
            config.fail_on_error_status = match flag.to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(HttpJobError::Invalid {
                        key: props::FAIL_ON_ERROR_STATUS,
                        value: flag.to_owned(),
                        reason: "expected true or false".into(),
                    })
                }
            };
        }
        config.check()?;
        Ok(config)
    }

    /// Checks the method and the URI.
    fn check(&self) -> Result<(), HttpJobError> {
        reqwest::Method::from_bytes(self.method.as_bytes()).map_err(|e| HttpJobError::Invalid {
            key: props::METHOD,
            value: self.method.clone(),
            reason: e.to_string(),
        })?;
        let uri = reqwest::Url::parse(&self.uri).map_err(|e| HttpJobError::Invalid {
            key: props::URI,
            value: self.uri.clone(),
            reason: format!("not an absolute URI: {e}"),
        })?;
        if !matches!(uri.scheme(), "http" | "https") {
            return Err(HttpJobError::Invalid {
                key: props::URI,
                value: self.uri.clone(),
                reason: "the scheme must be http or https".into(),
            });
        }
        Ok(())
    }

    /// Whether the body is sent: ElasticJob writes it for `POST`, `PUT` and `DELETE` only.
    fn sends_body(&self) -> bool {
        matches!(self.method.as_str(), "POST" | "PUT" | "DELETE")
    }
}

fn millis(key: &'static str, value: &str) -> Result<Duration, HttpJobError> {
    match value.parse::<u64>() {
        Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
        _ => Err(HttpJobError::Invalid {
            key,
            value: value.to_owned(),
            reason: "expected a whole number of milliseconds above 0".into(),
        }),
    }
}

pub(super) struct HttpRunner {
    config: HttpJobConfig,
    method: reqwest::Method,
    /// One client per job: its connection pool is reused across fires.
    client: reqwest::Client,
}

impl HttpRunner {
    pub(super) fn new(config: HttpJobConfig) -> Result<Self, HttpJobError> {
        config.check()?;
        let method = reqwest::Method::from_bytes(config.method.as_bytes()).map_err(|e| {
            HttpJobError::Invalid {
                key: props::METHOD,
                value: config.method.clone(),
                reason: e.to_string(),
            }
        })?;
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.read_timeout)
            .build()
            .map_err(|e| HttpJobError::Client { reason: e.to_string() })?;
        Ok(HttpRunner { config, method, client })
    }

    fn failure(&self, status: Option<u16>, reason: String) -> ItemOutcome {
        ItemOutcome::Failed(JobFailure::Http {
            method: self.config.method.clone(),
            uri: self.config.uri.clone(),
            status,
            reason,
        })
    }

    /// Sends the request and reads the response to its end.
    async fn call(&self, context_json: String) -> ItemOutcome {
        let mut request = self
            .client
            .request(self.method.clone(), &self.config.uri)
            .header(SHARDING_CONTEXT_HEADER, context_json);
        if let Some(content_type) = &self.config.content_type {
            request = request.header(reqwest::header::CONTENT_TYPE, content_type);
        }
        if let (true, Some(data)) = (self.config.sends_body(), &self.config.data) {
            request = request.body(data.clone());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => return self.failure(None, describe(&error)),
        };
        let status = response.status();
        let body = match response.bytes().await {
            Ok(body) => body,
            Err(error) => return self.failure(Some(status.as_u16()), describe(&error)),
        };
        if status.as_u16() < 400 {
            return ItemOutcome::Completed;
        }
        let start = &body[..body.len().min(HTTP_ERROR_BODY_BYTES)];
        let text = String::from_utf8_lossy(start).into_owned();
        if !self.config.fail_on_error_status {
            tracing::error!(
                uri = %self.config.uri,
                status = status.as_u16(),
                body = %text,
                "HTTP job got an error status; counted a success (http.fail.on.error.status is false)"
            );
            return ItemOutcome::Completed;
        }
        self.failure(Some(status.as_u16()), format!("response body: {text:?}"))
    }
}

/// The client's error with its causes (reqwest's own message is terse: "error sending request").
fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    format!("{kind}: {}", crate::job::failure::error_chain(error))
}

#[async_trait]
impl RunItem for HttpRunner {
    async fn run(&self, ctx: ShardingContext, _handles: &Handles) -> ItemOutcome {
        if ctx.is_cancelled() {
            return ItemOutcome::Cancelled;
        }
        let json = match ctx.to_json() {
            Ok(json) => json,
            Err(error) => return self.failure(None, format!("cannot encode the context: {error}")),
        };
        // Dropping the request's future closes its connection: the server sees the abort.
        tokio::select! {
            biased;
            () = ctx.cancellation.cancelled() => ItemOutcome::Cancelled,
            outcome = self.call(json) => outcome,
        }
    }
}
