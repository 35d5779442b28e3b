//! Request bodies, read by the server's guard before any handler runs: refused at once when
//! their `Content-Length` exceeds `--max-body` (413, nothing read), read whole within the body
//! deadline (`--body-timeout`, never past `--request-timeout`) and at most `--max-body` bytes
//! (a body without a length, chunked, is cut there: 413), so that a client that announces a
//! large body and sends it slowly holds its connection for the body deadline at most.

use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header;

use super::error::ApiError;

/// The request's body, read: the request again with the bytes as its body, or the error to
/// answer with.
pub async fn read_whole(
    request: Request,
    max_body: usize,
    deadline: Duration,
) -> Result<Request, ApiError> {
    let declared = declared_length(&request)?;
    if declared.is_some_and(|length| length > max_body as u64) {
        return Err(ApiError::payload_too_large(max_body));
    }
    let (parts, body) = request.into_parts();
    let capacity = declared.map_or(0, |length| length as usize);
    match tokio::time::timeout(deadline, collect(body, max_body, capacity)).await {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ApiError::body_timeout(deadline.as_secs())),
    }
}

/// The `Content-Length` the request announces, if any (hyper has checked it is one number).
fn declared_length(request: &Request) -> Result<Option<u64>, ApiError> {
    let Some(value) = request.headers().get(header::CONTENT_LENGTH) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| ApiError::bad_request("the Content-Length header is not a number of bytes"))
}

async fn collect(mut body: Body, max_body: usize, capacity: usize) -> Result<Bytes, ApiError> {
    let mut out = Vec::with_capacity(capacity.min(max_body));
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame =
            frame.map_err(|_| ApiError::bad_request("the request body could not be read"))?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > max_body {
                return Err(ApiError::payload_too_large(max_body));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn request(body: &'static str, length: Option<&str>) -> Request {
        let mut builder = Request::builder().method("POST").uri("/v1/sessions");
        if let Some(length) = length {
            builder = builder.header(header::CONTENT_LENGTH, length);
        }
        builder.body(Body::from(body)).unwrap()
    }

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn a_declared_length_over_the_limit_is_refused_before_reading() {
        let e = run(read_whole(
            request("", Some("99999999999")),
            100,
            Duration::from_secs(1),
        ))
        .unwrap_err();
        assert_eq!(e.status.as_u16(), 413);
        assert_eq!(e.category, "payload_too_large");
    }

    #[test]
    fn a_body_past_the_limit_without_a_length_is_cut() {
        let e = run(read_whole(
            request("0123456789", None),
            4,
            Duration::from_secs(1),
        ))
        .unwrap_err();
        assert_eq!(e.category, "payload_too_large");
    }

    #[test]
    fn a_body_within_the_limit_is_handed_on_whole() {
        let request = run(read_whole(
            request("{\"a\":1}", Some("7")),
            100,
            Duration::from_secs(1),
        ))
        .unwrap();
        let bytes = run(axum::body::to_bytes(request.into_body(), 100)).unwrap();
        assert_eq!(&bytes[..], b"{\"a\":1}");
    }

    #[test]
    fn a_length_that_is_not_a_number_is_a_bad_request() {
        let e = run(read_whole(
            request("", Some("ten")),
            100,
            Duration::from_secs(1),
        ))
        .unwrap_err();
        assert_eq!(e.category, "bad_request");
    }
}
