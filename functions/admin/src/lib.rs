//! The `admin` function: a resource's life. `POST /v1/resources` (create),
//! `PATCH /v1/resources/{id}` (settings, capacity, metadata) and
//! `DELETE /v1/resources/{id}` (archive) are for admins; `GET /v1/resources/{id}` for
//! every principal.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use serde::Deserialize;
use shared::AppState;
use shared::booking::{self, NewResource, ResourceChange, ResourceDefaults};
use shared::domain::{Authority, Metadata, validate_metadata};
use shared::http::{
    ApiError, Function, Op, Reply, fingerprint, json_body, principal, respond, route_for, run_idempotent,
};

pub async fn handler(state: &AppState, req: Request) -> Result<Response<Body>, Error> {
    Ok(respond(&req, serve(state, &req)).await)
}

async fn serve(state: &AppState, req: &Request) -> Result<Response<Body>, ApiError> {
    let matched = route_for(req.method(), req.uri().path(), Function::Admin)?;
    let who = principal(req, &state.config)?;
    match matched.spec.op {
        Op::CreateResource => {
            if !who.admin {
                return Err(ApiError::Forbidden);
            }
            let body = json_body::<CreateResource>(req, false)?.value;
            let client = state.pool.get().await?;
            let defaults = ResourceDefaults {
                hold_ttl_seconds: state.config.hold_ttl_seconds,
                offer_ttl_seconds: state.config.offer_ttl_seconds,
            };
            let r = booking::create_resource(&client, &who, body.into_new()?, defaults, state.clock.now()).await?;
            Ok(Reply::json(StatusCode::CREATED, &r).with_location(format!("/v1/resources/{}", r.id)).into_response())
        }
        Op::GetResource => {
            let id = matched.id(ApiError::ResourceNotFound)?;
            let client = state.pool.get().await?;
            Ok(Reply::json(StatusCode::OK, &booking::get_resource(&client, id).await?).into_response())
        }
        Op::UpdateResource => {
            if !who.admin {
                return Err(ApiError::Forbidden);
            }
            let id = matched.id(ApiError::ResourceNotFound)?;
            let body = json_body::<UpdateResource>(req, false)?;
            let fingerprint = fingerprint(req, &body.canonical);
            let change = body.value.into_change()?;
            let limits = state.config.limits();
            run_idempotent(state, &who, req, matched.spec, &fingerprint, async |tx| {
                let r = booking::update_resource(tx, id, change, limits, state.clock.now()).await?;
                Ok(Reply::json(StatusCode::OK, &r))
            })
            .await
        }
        Op::ArchiveResource => {
            if !who.admin {
                return Err(ApiError::Forbidden);
            }
            let id = matched.id(ApiError::ResourceNotFound)?;
            let mut client = state.pool.get().await?;
            let tx = client.transaction().await?;
            let r = booking::archive_resource(&tx, id, state.clock.now()).await?;
            tx.commit().await?;
            Ok(Reply::json(StatusCode::OK, &r).into_response())
        }
        _ => Err(ApiError::RouteNotFound),
    }
}

/// A `PATCH`: any of these; at least one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateResource {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    capacity: Option<i32>,
    #[serde(default)]
    hold_ttl_seconds: Option<i32>,
    #[serde(default)]
    offer_ttl_seconds: Option<i32>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

impl UpdateResource {
    fn into_change(self) -> Result<ResourceChange, ApiError> {
        let UpdateResource { name, capacity, hold_ttl_seconds, offer_ttl_seconds, metadata } = self;
        if name.is_none()
            && capacity.is_none()
            && hold_ttl_seconds.is_none()
            && offer_ttl_seconds.is_none()
            && metadata.is_none()
        {
            return Err(ApiError::validation(
                "body",
                "must change at least one of name, capacity, hold_ttl_seconds, offer_ttl_seconds, metadata",
            ));
        }
        Ok(ResourceChange {
            name,
            capacity,
            hold_ttl_seconds,
            offer_ttl_seconds,
            metadata: metadata.as_ref().map(validate_metadata).transpose().map_err(ApiError::Validation)?,
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateResource {
    name: String,
    #[serde(default = "one")]
    capacity: i32,
    #[serde(default = "local")]
    authority: AuthorityIn,
    #[serde(default)]
    upstream_ref: Option<String>,
    #[serde(default)]
    hold_ttl_seconds: Option<i32>,
    #[serde(default)]
    offer_ttl_seconds: Option<i32>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum AuthorityIn {
    Local,
    Upstream,
}

fn one() -> i32 {
    1
}

fn local() -> AuthorityIn {
    AuthorityIn::Local
}

impl CreateResource {
    fn into_new(self) -> Result<NewResource, ApiError> {
        let metadata = match &self.metadata {
            Some(m) => validate_metadata(m).map_err(ApiError::Validation)?,
            None => Metadata::new(),
        };
        Ok(NewResource {
            name: self.name,
            capacity: self.capacity,
            authority: match self.authority {
                AuthorityIn::Local => Authority::Local,
                AuthorityIn::Upstream => Authority::Upstream,
            },
            upstream_ref: self.upstream_ref,
            hold_ttl_seconds: self.hold_ttl_seconds,
            offer_ttl_seconds: self.offer_ttl_seconds,
            metadata,
        })
    }
}
