//! `PUT` and `GET /v1/sessions/{id}/files?path=P`: a session's files in and out as tar
//! streams, translated to and from [`crate::session::transfer`] (which holds every rule).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::episode;
use super::error::ApiError;
use crate::session::transfer::TransferLimits;

type Params = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The `path` query parameter of a transfer.
fn transfer_path(query: Params) -> Result<String, ApiError> {
    let Query(query) = query.map_err(|_| {
        ApiError::bad_request("the query string could not be read: give ?path=PATH, URL-encoded")
    })?;
    query.get("path").cloned().ok_or_else(|| {
        ApiError::missing_field(
            "path",
            "a path in the workspace (relative to it, or absolute under its mount point)",
        )
    })
}

/// `PUT /v1/sessions/{id}/files?path=DIR` with a tar body → the tar unpacked beneath `DIR`
/// (made where missing), all or nothing: `{"path", "entries", "bytes"}`.
pub async fn upload(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    query: Params,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let path = transfer_path(query)?;
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(ApiError::payload_too_large(state.config.max_body));
        }
        Err(_) => return Err(ApiError::bad_request("the request body could not be read")),
    };
    let uploaded = episode::with_session(&state, &id, move |session| {
        session.upload(&path, &bytes, TransferLimits::default())
    })
    .await?
    .map_err(ApiError::transfer)?;
    Ok(Json(uploaded).into_response())
}

/// `GET /v1/sessions/{id}/files?path=P` → a tar of `P` (a directory's contents, or the one
/// file), with `X-Envcraft-Kind` (`file` or `directory`), `X-Envcraft-Entries` and
/// `X-Envcraft-Skipped` (sockets, FIFOs and devices left out).
pub async fn download(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    query: Params,
) -> Result<Response, ApiError> {
    let path = transfer_path(query)?;
    let downloaded = episode::with_session(&state, &id, move |session| {
        session.download(&path, TransferLimits::default())
    })
    .await?
    .map_err(ApiError::transfer)?;
    let named = |name: &'static str, value: String| (header::HeaderName::from_static(name), value);
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-tar".to_string()),
            named("x-envcraft-kind", downloaded.kind.to_string()),
            named("x-envcraft-entries", downloaded.entries.to_string()),
            named("x-envcraft-skipped", downloaded.skipped.to_string()),
        ],
        downloaded.tar,
    )
        .into_response())
}
