//! Who may change the cluster: reading is open, every writing endpoint needs the console's
//! token in the `Access-Token` header (what ElasticJob-UI's page sends; `Authorization: Bearer`
//! works too), and a read-only console refuses writes whoever asks. `POST /api/login` trades the
//! token, sent as the password, for itself, so ElasticJob-UI's login flow works unchanged.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::wrapper::{ApiError, ApiResult, Wrapped};
use crate::AppState;

/// Checks that a writing request may go ahead.
pub fn require_writer(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    if state.read_only {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this console is read-only (started with --read-only)",
        ));
    }
    let sent = headers.get("access-token").and_then(|v| v.to_str().ok()).or_else(|| {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
    });
    match sent {
        Some(token) if constant_time_eq(token.as_bytes(), state.token.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(StatusCode::UNAUTHORIZED, "wrong access token")),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "log in first: changes need the console's token in the Access-Token header",
        )),
    }
}

/// Compares without stopping at the first difference, so response times do not reveal how
/// much of a guessed token was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[derive(Debug, Deserialize)]
pub struct Login {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
}

/// `POST /api/login`: the token as the password gives the token back.
pub async fn login(State(state): State<AppState>, body: String) -> ApiResult {
    let login: Login = serde_json::from_str(&body).map_err(|e| {
        ApiError::bad_request(format!("login body: {e}; send {{\"username\", \"password\"}}"))
    })?;
    if state.read_only {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "this console is read-only: no login"));
    }
    if !constant_time_eq(login.password.as_bytes(), state.token.as_bytes()) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "wrong password (the console's token)",
        ));
    }
    Wrapped::of(json!({"accessToken": &*state.token, "username": login.username, "isGuest": false}))
}

/// A random token of 32 hex digits, for a console started without one.
pub fn random_token() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
