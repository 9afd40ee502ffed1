//! The admin listener's response body, and a plain reply.

use std::convert::Infallible;

use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Response, StatusCode};

/// A response body: whole, or the stream of `/events`.
pub(super) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A response of `status` with `body` as `content_type`.
pub(super) fn reply(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut response = Response::new(Full::new(body.into()).boxed_unsync());
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

/// `200` with `json`, or `500` with why it could not be written.
pub(super) fn json(json: Result<String, serde_json::Error>) -> Response<Body> {
    match json {
        Ok(json) => reply(StatusCode::OK, "application/json", json),
        Err(err) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            err.to_string(),
        ),
    }
}
