//! `myelin serve`: the [`Service`] as JSON over HTTP (axum), mem0's routes under `/v1`.
//!
//! Owns routing, request parsing, status codes and the bearer token. Every error, whatever its
//! status (a 405 and a body that does not parse included), is `{"error": "..."}` with the
//! status the README's table gives, and the server keeps serving. Must not touch the store or rank:
//! every operation is a call on the [`Service`].

use std::future::Future;
use std::sync::Arc;

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::{Message, Page, Scope, SearchRequest, Service};
use crate::error::{Error, Result};

/// Largest request body accepted by default, bytes.
pub const DEFAULT_BODY_LIMIT: usize = 4 << 20;

/// Seconds a client is asked to wait (`Retry-After`) when the write queue is full.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// An error answer: a status and `{"error": message}`.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let busy = self.0 == StatusCode::SERVICE_UNAVAILABLE;
        let mut response = (self.0, Json(json!({ "error": self.1 }))).into_response();
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

#[derive(Deserialize)]
struct AddBody {
    messages: Vec<Message>,
    #[serde(flatten)]
    scope: Scope,
}

#[derive(Deserialize)]
struct BatchBody {
    requests: Vec<SearchRequest>,
}

#[derive(Deserialize)]
struct ListParams {
    #[serde(flatten)]
    scope: Scope,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

async fn add(State(s): State<Service>, body: std::result::Result<Json<AddBody>, JsonRejection>) -> Answer {
    let Json(body) = body?;
    let added = s.add(&body.scope, body.messages).await?;
    Ok(Json(json!({ "results": added })).into_response())
}

async fn search(State(s): State<Service>, body: std::result::Result<Json<SearchRequest>, JsonRejection>) -> Answer {
    let Json(body) = body?;
    Ok(Json(s.search(&body).await?).into_response())
}

/// Each request answered on its own: a result, or `{"error", "status"}` in its place.
async fn search_batch(State(s): State<Service>, body: std::result::Result<Json<BatchBody>, JsonRejection>) -> Answer {
    let Json(body) = body?;
    let answers: Vec<serde_json::Value> = s
        .search_batch(&body.requests)
        .await
        .into_iter()
        .enumerate()
        .map(|(i, r)| match r {
            Ok(found) => json!(found),
            Err(e) => json!({ "error": format!("request {i}: {e}"), "status": status_of(&e).as_u16() }),
        })
        .collect();
    Ok(Json(json!({ "results": answers })).into_response())
}

async fn list(State(s): State<Service>, params: std::result::Result<Query<ListParams>, QueryRejection>) -> Answer {
    let Query(p) = params?;
    Ok(Json(json!({ "results": s.get_all(&p.scope, Page::or_default(p.offset, p.limit)).await? })).into_response())
}

async fn delete_all(
    State(s): State<Service>,
    params: std::result::Result<Query<ListParams>, QueryRejection>,
) -> Answer {
    let Query(p) = params?;
    Ok(Json(json!({ "deleted": s.delete_all(&p.scope).await? })).into_response())
}

async fn get_one(State(s): State<Service>, Path(id): Path<String>) -> Answer {
    Ok(Json(s.get(&id).await?).into_response())
}

async fn delete_one(State(s): State<Service>, Path(id): Path<String>) -> Answer {
    s.delete(&id).await?;
    Ok(Json(json!({ "deleted": id })).into_response())
}

async fn history(State(s): State<Service>, Path(id): Path<String>) -> Answer {
    Ok(Json(json!({ "results": s.history(&id).await? })).into_response())
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

async fn check_token(State(token): State<Option<Arc<String>>>, request: Request, next: Next) -> Response {
    if let Some(token) = token {
        let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if given.and_then(|v| v.strip_prefix("Bearer ")) != Some(token.as_str()) {
            return ApiError(StatusCode::UNAUTHORIZED, "missing or wrong bearer token".into()).into_response();
        }
    }
    next.run(request).await
}

/// The routes over `service`; with a `token`, every request must carry
/// `Authorization: Bearer <token>`.
pub fn router(service: Service, token: Option<String>, body_limit: usize) -> Router {
    let token = token.map(Arc::new);
    Router::new()
        .route("/v1/memories", post(add).get(list).delete(delete_all))
        .route("/v1/memories/search", post(search))
        .route("/v1/memories/search/batch", post(search_batch))
        .route("/v1/memories/{id}", get(get_one).delete(delete_one))
        .route("/v1/memories/{id}/history", get(history))
        .route(
            "/health",
            get(|State(s): State<Service>| async move {
                let b = s.backend();
                Json(json!({ "status": "ok", "backend": b.backend.as_str(), "reason": b.reason, "read_only": s.read_only(), "stats": s.stats() }))
            }),
        )
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
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
