//! `myelin serve`: the [`Service`] as JSON over HTTP (axum), on mem0's platform routes (`/v1`,
//! `/v2`, `/v3`, with and without the trailing slash its clients add).
//!
//! Owns routing, status codes and the token. Every error, whatever its status (a 405 and a
//! body that does not parse included), is `{"detail": "..."}` with the status docs/serving.md's
//! table ("HTTP errors") gives, and the server keeps serving. Must not parse mem0's fields (`serve::wire`
//! does), touch the store or rank: every operation is a call on the [`Service`].

use std::future::Future;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::wire::{self, Fields};
use super::{SearchRequest, Service};
use crate::error::{Error, Result};

/// Largest request body accepted by default, bytes.
pub const DEFAULT_BODY_LIMIT: usize = 4 << 20;

/// Seconds a client is asked to wait (`Retry-After`) when the write queue is full.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// An error answer: a status and `{"detail": message}` (where mem0's clients read it).
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let busy = self.0 == StatusCode::SERVICE_UNAVAILABLE;
        let mut response = (self.0, Json(json!({ "detail": self.1 }))).into_response();
        if busy {
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}

/// The status of a library error: the one place that maps them.
pub fn status_of(e: &Error) -> StatusCode {
    match e {
        Error::NotFound(_) => StatusCode::NOT_FOUND,
        Error::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        Error::ReadOnly { .. } => StatusCode::FORBIDDEN,
        Error::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        Error::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
        Error::DiskFull(_) => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(status_of(&e), e.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        // A body that parses but has the wrong shape is a bad request like any other (axum
        // says 422); a body over the limit stays 413, a missing content type 415.
        let status = match r.status() {
            StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
            other => other,
        };
        ApiError(status, r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError(StatusCode::BAD_REQUEST, r.body_text())
    }
}

type Answer = std::result::Result<Response, ApiError>;
type Body = std::result::Result<Json<Value>, JsonRejection>;
type Params = std::result::Result<Query<Vec<(String, String)>>, QueryRejection>;

/// What mem0's `/v1/ping/` answers: the clients read the organisation and project from it.
pub const PING_ORG: &str = "myelin";

#[derive(Deserialize)]
struct BatchBody {
    requests: Vec<Value>,
}

fn body(b: Body) -> std::result::Result<Fields, ApiError> {
    let Json(v) = b?;
    Ok(Fields::body(v)?)
}

fn params(p: Params) -> std::result::Result<Fields, ApiError> {
    let Query(pairs) = p?;
    Ok(Fields::query(pairs)?)
}

/// A body that may be absent (a listing's filters may come in the query string alone).
fn optional_body(b: Body) -> std::result::Result<Fields, ApiError> {
    match b {
        Err(JsonRejection::MissingJsonContentType(_)) => Ok(Fields::body(json!({}))?),
        other => body(other),
    }
}

async fn add(State(s): State<Service>, b: Body) -> Answer {
    let request = wire::add(body(b)?)?;
    let added = s.add(&request.scope, request.messages).await?;
    let results: Vec<Value> = added
        .iter()
        .map(|item| {
            let mut v = json!(item);
            v["event"] = json!("ADD");
            v
        })
        .collect();
    let mut answer = json!({ "results": results });
    if request.infer {
        answer["message"] = json!(wire::STORED_AS_GIVEN);
    }
    Ok(Json(answer).into_response())
}

async fn search(State(s): State<Service>, b: Body) -> Answer {
    let request = wire::search(body(b)?)?;
    Ok(Json(s.search(&request).await?).into_response())
}

/// Each request answered on its own: a result, or `{"detail", "status"}` in its place.
async fn search_batch(State(s): State<Service>, b: std::result::Result<Json<BatchBody>, JsonRejection>) -> Answer {
    let Json(b) = b?;
    let mut parsed: Vec<std::result::Result<SearchRequest, Error>> = Vec::new();
    for r in b.requests {
        parsed.push(Fields::body(r).and_then(wire::search));
    }
    let good: Vec<SearchRequest> = parsed.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
    let mut found = s.search_batch(&good).await.into_iter();
    let answers: Vec<Value> = parsed
        .into_iter()
        .enumerate()
        .map(|(i, r)| match r.and_then(|_| found.next().unwrap_or_else(|| Err(Error::Batch("not answered".into())))) {
            Ok(found) => json!(found),
            Err(e) => json!({ "detail": format!("request {i}: {e}"), "status": status_of(&e).as_u16() }),
        })
        .collect();
    Ok(Json(json!({ "results": answers })).into_response())
}

/// Myelin's listing (`GET /v1/memories`): the scope and page in the query string.
async fn list(State(s): State<Service>, p: Params) -> Answer {
    let (scope, filters, page) = wire::list(Fields::body(json!({}))?, params(p)?)?;
    Ok(Json(json!({ "results": s.list(&scope, filters.as_ref(), page).await?.1 })).into_response())
}

/// mem0's paged listing (`POST /v2/memories/`, `/v3/memories/`): filters in the body, the
/// page in the query string.
async fn list_page(State(s): State<Service>, uri: Uri, p: Params, b: Body) -> Answer {
    let (scope, filters, page) = wire::list(optional_body(b)?, params(p)?)?;
    let (count, results) = s.list(&scope, filters.as_ref(), page).await?;
    Ok(Json(wire::page_answer(uri.path(), page, count, results)).into_response())
}

async fn delete_all(State(s): State<Service>, p: Params) -> Answer {
    let mut query = params(p)?;
    let scope = query.scope()?;
    query.finish()?;
    let deleted = s.delete_all(&scope).await?;
    Ok(Json(json!({ "message": "Memories deleted successfully!", "deleted": deleted })).into_response())
}

async fn get_one(State(s): State<Service>, Path(id): Path<String>, p: Params) -> Answer {
    params(p)?.finish()?;
    Ok(Json(s.get(&id).await?).into_response())
}

async fn delete_one(State(s): State<Service>, Path(id): Path<String>, p: Params) -> Answer {
    params(p)?.finish()?;
    s.delete(&id).await?;
    Ok(Json(json!({ "message": "Memory deleted successfully!", "deleted": id })).into_response())
}

/// mem0's update: `{"text", "metadata"}` (either or both) replace the memory's (same id; a new
/// text is embedded anew).
async fn update_one(State(s): State<Service>, Path(id): Path<String>, p: Params, b: Body) -> Answer {
    params(p)?.finish()?;
    let edit = wire::update(body(b)?)?;
    let mut answer = json!(s.update(&id, edit).await?);
    answer["event"] = json!("UPDATE");
    answer["message"] = json!("Memory updated successfully!");
    Ok(Json(answer).into_response())
}

/// `{"memories": [{"memory_id", "text"}, …]}`: each updated in turn; the first that fails stops
/// the batch and is named (those before it are updated).
async fn batch_update(State(s): State<Service>, b: Body) -> Answer {
    let mut updated = Vec::new();
    for (id, edit) in wire::batch(body(b)?, true)? {
        s.update(&id, edit.unwrap_or_default()).await?;
        updated.push(id);
    }
    Ok(Json(json!({ "message": "Memories updated successfully!", "updated": updated })).into_response())
}

/// `{"memories": [{"memory_id": …}, …]}`: each deleted in turn; the first that fails stops
/// the batch and is named (those before it are deleted).
async fn batch_delete(State(s): State<Service>, b: Body) -> Answer {
    let ids: Vec<String> = wire::batch(body(b)?, false)?.into_iter().map(|(id, _)| id).collect();
    for id in &ids {
        s.delete(id).await?;
    }
    Ok(Json(json!({ "message": "Memories deleted successfully!", "deleted": ids })).into_response())
}

async fn history(State(s): State<Service>, Path(id): Path<String>, p: Params) -> Answer {
    params(p)?.finish()?;
    let events = s.history(&id).await?;
    let text = s.get(&id).await.ok().map(|item| item.memory);
    Ok(Json(wire::history(&events, text.as_deref())).into_response())
}

async fn ping(State(s): State<Service>, p: Params) -> Answer {
    params(p)?.finish()?;
    Ok(Json(json!({
        "status": "ok",
        "message": "myelin",
        "org_id": PING_ORG,
        "project_id": PING_ORG,
        "user_email": null,
        "read_only": s.read_only(),
    }))
    .into_response())
}

async fn entities(State(s): State<Service>, p: Params) -> Answer {
    params(p)?.finish()?;
    Ok(Json(wire::entities(&s.scopes().await)).into_response())
}

async fn delete_entity(State(s): State<Service>, Path((kind, name)): Path<(String, String)>, p: Params) -> Answer {
    params(p)?.finish()?;
    let scopes = wire::entity_scopes(&s.scopes().await, &kind, &name)?;
    if scopes.is_empty() {
        return Err(Error::NotFound(format!("no {kind} '{}' holds memories", name.escape_debug())).into());
    }
    let mut deleted = 0;
    for scope in &scopes {
        deleted += s.delete_all(scope).await?;
    }
    Ok(Json(json!({ "message": "Entity deleted successfully.", "deleted": deleted })).into_response())
}

async fn fallback() -> ApiError {
    ApiError(StatusCode::NOT_FOUND, "no such route (see docs/serving.md for the API)".into())
}

async fn method_not_allowed(request: Request) -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not allowed on {} (see docs/serving.md for the API)", request.method(), request.uri().path()),
    )
}

/// The key of an `Authorization` value of the scheme `Bearer` or `Token`, the scheme in any
/// case (RFC 9110: schemes are case-insensitive).
fn bearer_key(value: &str) -> Option<&str> {
    let (scheme, key) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token")).then(|| key.trim_start())
}

async fn check_token(State(token): State<Option<Arc<String>>>, request: Request, next: Next) -> Response {
    if let Some(token) = token {
        let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if given.and_then(bearer_key) != Some(token.as_str()) {
            return ApiError(
                StatusCode::UNAUTHORIZED,
                "missing or wrong token (Authorization: Bearer or Token)".into(),
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// The first name or value of a query string that is not UTF-8 once percent-decoded, as the
/// error a client gets (the query extractor would pass it on with U+FFFD in its place, and a
/// scope named by a mangled id would be another scope).
fn query_not_utf8(query: &str) -> Option<String> {
    let decoded = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8().map(|_| ());
    query.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let shown = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
        match (decoded(name), decoded(value)) {
            (Err(_), _) => {
                Some(format!("query string: a parameter name ('{shown}') is not UTF-8 once percent-decoded"))
            }
            (_, Err(_)) => Some(format!("query string: the value of '{shown}' is not UTF-8 once percent-decoded")),
            _ => None,
        }
    })
}

/// Refuses a path or query string that is not UTF-8 once percent-decoded, in the JSON error
/// shape (the path extractor would answer in plain text).
async fn check_utf8(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let message = if percent_encoding::percent_decode_str(path).decode_utf8().is_err() {
        Some(format!("path '{path}' is not UTF-8 once percent-decoded"))
    } else {
        request.uri().query().and_then(query_not_utf8)
    };
    match message {
        Some(message) => ApiError(StatusCode::BAD_REQUEST, message).into_response(),
        None => next.run(request).await,
    }
}

/// Reads a request's body whole before any handler sees it, within `serve.body_timeout_ms`
/// and `body_limit` bytes: a body that arrives too slowly is 408, one over the limit 413, both
/// in the JSON error shape.
async fn read_body(State((s, limit)): State<(Service, usize)>, request: Request, next: Next) -> Response {
    let ms = s.inner.config.serve.body_timeout_ms;
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(std::time::Duration::from_millis(ms), axum::body::to_bytes(body, limit)).await {
        Err(_) => ApiError(
            StatusCode::REQUEST_TIMEOUT,
            format!("the request body did not arrive within {ms} ms (serve.body_timeout_ms)"),
        )
        .into_response(),
        Ok(Err(e)) => {
            let e = e.into_inner();
            if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() {
                ApiError(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body is over {limit} bytes (--max-body-bytes)"),
                )
                .into_response()
            } else {
                ApiError(StatusCode::BAD_REQUEST, format!("reading the request body: {e}")).into_response()
            }
        }
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
    }
}

/// The routes over `service`; with a `token`, every request must carry
/// `Authorization: Bearer <token>` or mem0's `Authorization: Token <token>`. Every path is
/// served with and without its trailing slash (mem0's clients add one).
pub fn router(service: Service, token: Option<String>, body_limit: usize) -> Router {
    let token = token.map(Arc::new);
    let routes: Vec<(&str, MethodRouter<Service>)> = vec![
        ("/v1/ping", get(ping)),
        ("/v1/memories", post(add).get(list).delete(delete_all)),
        ("/v1/memories/search", post(search)),
        ("/v1/memories/search/batch", post(search_batch)),
        ("/v1/memories/{id}", get(get_one).put(update_one).delete(delete_one)),
        ("/v1/memories/{id}/history", get(history)),
        ("/v1/batch", put(batch_update).delete(batch_delete)),
        ("/v1/entities", get(entities)),
        ("/v2/memories", post(list_page)),
        ("/v2/memories/search", post(search)),
        ("/v2/entities/{kind}/{name}", delete(delete_entity)),
        ("/v3/memories", post(list_page)),
        ("/v3/memories/add", post(add)),
        ("/v3/memories/search", post(search)),
    ];
    let mut router = Router::new();
    for (path, methods) in routes {
        router = router.route(path, methods.clone()).route(&format!("{path}/"), methods);
    }
    router
        .route(
            "/health",
            get(|State(s): State<Service>| async move {
                let b = s.backend();
                Json(json!({ "status": "ok", "backend": b.backend.as_str(), "reason": b.reason, "read_only": s.read_only(), "replica": s.replica(), "stats": s.stats() }))
            }),
        )
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state((service.clone(), body_limit), read_body))
        .layer(middleware::from_fn(check_utf8))
        .layer(middleware::from_fn_with_state(token, check_token))
        .with_state(service)
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let addr = listener.local_addr().ok();
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| Error::InvalidArgument(format!("serving on {addr:?}: {e}")))
}
