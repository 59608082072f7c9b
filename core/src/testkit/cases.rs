//! The behaviour cases. Each is `pub async fn name(backend: &dyn Backend)`.
