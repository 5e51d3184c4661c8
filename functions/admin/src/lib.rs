//! The `admin` function: `POST /v1/resources` (admins only), `GET /v1/resources` (the
//! list, newest first) and `GET /v1/resources/{id}`.

use http::StatusCode;
use lambda_http::{Body, Error, Request, Response};
use serde::Deserialize;
use shared::AppState;
use shared::booking::{self, NewResource, ResourceDefaults};
use shared::domain::Authority;
use shared::http::{ApiError, Function, Op, Reply, json_body, principal, resources_query, respond, route_for};

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
            let r = booking::create_resource(&client, &who, body.into_new(), defaults, state.clock.now()).await?;
            Ok(Reply::json(StatusCode::CREATED, &r).with_location(format!("/v1/resources/{}", r.id)).into_response())
        }
        Op::ListResources => {
            let (include_archived, page) = resources_query(req)?;
            let client = state.pool.get().await?;
            let key = state.cursor_key(&client).await?;
            Ok(Reply::json(StatusCode::OK, &booking::list_resources(&client, key, include_archived, page).await?)
                .into_response())
        }
        Op::GetResource => {
            let id = matched.id(ApiError::ResourceNotFound)?;
            let client = state.pool.get().await?;
            Ok(Reply::json(StatusCode::OK, &booking::get_resource(&client, id).await?).into_response())
        }
        _ => Err(ApiError::RouteNotFound),
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
    fn into_new(self) -> NewResource {
        NewResource {
            name: self.name,
            capacity: self.capacity,
            authority: match self.authority {
                AuthorityIn::Local => Authority::Local,
                AuthorityIn::Upstream => Authority::Upstream,
            },
            upstream_ref: self.upstream_ref,
            hold_ttl_seconds: self.hold_ttl_seconds,
            offer_ttl_seconds: self.offer_ttl_seconds,
        }
    }
}
