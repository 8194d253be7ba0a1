//! A JSON request body decoded once into its typed request (`host_protocol`, `hook_protocol`), refused with
//! the words every host call has always used: `malformed JSON body: …`, `the body must be a JSON object`,
//! `body: unknown field "x" (allowed: …)`, `body.x is required`, `body.x must be a string` (`actor.x` inside
//! an actor object). An empty body reads as `{}`; `null` reads as an absent field.

use crate::error::{ApiError, ApiResult};
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::error::Category;
use std::marker::PhantomData;

/// The extractor: `Body(request): Body<InboundRequest>`.
pub(crate) struct Body<T>(pub T);

/// Why a body was not read: axum could not read it (too large, cut off), or it was refused. Answered
/// by `wire` (`IntoResponse`).
pub(crate) enum BodyRejection {
    Unread(BytesRejection),
    Refused(ApiError),
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = BodyRejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, BodyRejection> {
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(BodyRejection::Unread)?;
        decode(&bytes).map(Body).map_err(BodyRejection::Refused)
    }
}

/// Decodes `body` into `T`.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> ApiResult<T> {
    let body: &[u8] = if body.iter().all(|b| b.is_ascii_whitespace()) { b"{}" } else { body };
    // Decoded without tracking the path first: only a refusal's words need it (a refused body is read
    // twice). Tracking it was a third of decoding an inbound turn's body: 4.3k instructions, now 2.9k.
    let mut json = serde_json::Deserializer::from_slice(body);
    if let Ok(Object(decoded)) = Object::<T>::deserialize(&mut json)
        && json.end().is_ok()
    {
        return Ok(decoded);
    }
    let mut json = serde_json::Deserializer::from_slice(body);
    let Object(decoded) = serde_path_to_error::deserialize(&mut json).map_err(|e| refusal(&e))?;
    // Trailing characters after the object.
    json.end().map_err(|e| ApiError::invalid(format!("malformed JSON body: {e}")))?;
    Ok(decoded)
}

/// `T` (a derived struct) read from a JSON object only: serde's derive also reads a struct from an array
/// of its fields, which no host call ever accepted.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Fields<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Fields(PhantomData)).map(Object)
    }
}

/// For an optional object field (`#[serde(default, deserialize_with = "…")]`): absent or `null` is
/// `None`, an object is read as `T`, anything else refused.
pub(crate) fn optional_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(Option::<Object<T>>::deserialize(d)?.map(|Object(t)| t))
}

/// A required text field holds more than white space: `body.<field> must not be empty` otherwise.
pub(crate) fn non_empty<'a>(field: &str, value: &'a str) -> ApiResult<&'a str> {
    if value.trim().is_empty() {
        return Err(ApiError::invalid(format!("{field} must not be empty")));
    }
    Ok(value)
}

/// The words for why `e` refused a body.
fn refusal(e: &serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let inner = e.inner();
    if inner.classify() != Category::Data {
        return ApiError::invalid(format!("malformed JSON body: {inner}"));
    }
    // serde_json appends the position; the field's name says more.
    let text = inner.to_string();
    let message = text.rsplit_once(" at line ").map_or(text.as_str(), |(m, _)| m);
    let path: Vec<String> = e.path().iter().map(|s| s.to_string()).collect();
    // The only object nested in a host body is an actor (`actor`, `creator`), named so in errors.
    let object = |depth: usize| if depth == 0 { "body" } else { "actor" };
    if let Some(rest) = message.strip_prefix("unknown field `") {
        // serde's words: "unknown field `x`, expected one of `a`, `b`" (or "expected `a`", "there are no
        // fields"); the container is the path without the unknown key.
        let mut names = rest.split('`').step_by(2);
        let field = names.next().unwrap_or_default();
        let allowed: Vec<&str> = names.collect();
        let depth = path.len().saturating_sub(1);
        return ApiError::invalid(format!(
            "{}: unknown field \"{field}\" (allowed: {})",
            object(depth),
            allowed.join(", ")
        ));
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or_default();
        return ApiError::invalid(format!("{}.{field} is required", object(path.len())));
    }
    let Some(field) = path.last() else { return ApiError::invalid("the body must be a JSON object") };
    let name = format!("{}.{field}", object(path.len() - 1));
    if message.starts_with("invalid type: null") {
        return ApiError::invalid(format!("{name} is required"));
    }
    let expected = message.rsplit_once(", expected ").map_or("", |(_, x)| x);
    let must = match expected {
        "a string" => "must be a string",
        "a boolean" => "must be a boolean",
        x if x.starts_with("struct ") || x == "a map" => "must be an object",
        _ => return ApiError::invalid(format!("{name} is invalid: {message}")),
    };
    ApiError::invalid(format!("{name} {must}"))
}
