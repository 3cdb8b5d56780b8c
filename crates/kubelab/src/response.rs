//! An answer as the API server sends it: JSON with its status code, and a
//! failure as a `Status` object.

use super::store::Failure;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Bytes;
use serde_json::Value;
use std::convert::Infallible;

pub(crate) type Body = BoxBody<Bytes, Infallible>;

pub(crate) fn reply(code: u16, body: &Value) -> hyper::Response<Body> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::OK);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn fail(f: Failure) -> hyper::Response<Body> {
    reply(f.code, &f.status())
}
