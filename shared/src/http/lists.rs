//! Reading the lists' query strings. Every parameter must be one the list knows, given
//! once (`status` may repeat) and well-formed; otherwise the request is a 400
//! `validation-error` that names each parameter at fault, as a strict body would.

use super::fields::principal_name;
use super::request::{query_names, query_params};
use super::{ApiError, Rfc3339};
use crate::booking::{DEFAULT_LIMIT, MAX_LIMIT, OwnWaitlistFilter, PageRequest, ReservationFilter};
use crate::domain::{FieldError, Principal, Status};
use lambda_http::Request;

/// `GET /v1/reservations`: `resource_id`, `status` (repeatable), `from`, `to`, `owner`
/// (admins; others may name only themselves, else 403), `limit`, `cursor`.
pub fn reservations_query(req: &Request, who: &Principal) -> Result<(ReservationFilter, PageRequest), ApiError> {
    let mut q = Reader::new(req, &["resource_id", "status", "from", "to", "owner", "limit", "cursor"]);
    let resource_id = q.one("resource_id", uuid_value);
    let statuses = q.all("status", |v| {
        v.parse::<Status>().map_err(|_| {
            let names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
            format!("must be one of {}", names.join(", "))
        })
    });
    let from = q.one("from", |v| Rfc3339::parse(v).map(|t| t.0));
    let to = q.one("to", |v| Rfc3339::parse(v).map(|t| t.0));
    let owner = q.one("owner", principal_name);
    let page = q.page();
    q.finish()?;
    may_name(who, owner.as_deref())?;
    Ok((ReservationFilter { owner, resource_id, statuses, from, to }, page))
}

/// `GET /v1/resources`: `include_archived` (`true` or `false`), `limit`, `cursor`.
pub fn resources_query(req: &Request) -> Result<(bool, PageRequest), ApiError> {
    let mut q = Reader::new(req, &["include_archived", "limit", "cursor"]);
    let archived = q.one("include_archived", |v| match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("must be true or false".to_string()),
    });
    let page = q.page();
    q.finish()?;
    Ok((archived.unwrap_or(false), page))
}

/// `GET /v1/resources/{id}/waitlist`: `limit`, `cursor`.
pub fn waitlist_query(req: &Request) -> Result<PageRequest, ApiError> {
    let mut q = Reader::new(req, &["limit", "cursor"]);
    let page = q.page();
    q.finish()?;
    Ok(page)
}

/// `GET /v1/waitlist`: `resource_id`, `owner` (admins; others may name only
/// themselves, else 403), `limit`, `cursor`.
pub fn own_waitlist_query(req: &Request, who: &Principal) -> Result<(OwnWaitlistFilter, PageRequest), ApiError> {
    let mut q = Reader::new(req, &["resource_id", "owner", "limit", "cursor"]);
    let resource_id = q.one("resource_id", uuid_value);
    let owner = q.one("owner", principal_name);
    let page = q.page();
    q.finish()?;
    may_name(who, owner.as_deref())?;
    Ok((OwnWaitlistFilter { owner, resource_id }, page))
}

/// Only admins may name an owner other than themselves.
fn may_name(who: &Principal, owner: Option<&str>) -> Result<(), ApiError> {
    if !who.admin && owner.is_some_and(|o| o != who.id) {
        return Err(ApiError::Forbidden);
    }
    Ok(())
}

/// The owner a booking made by `who` is for: `None` for `who` themselves (named or
/// not), else the `owner` named, which only an admin may name (else 403, as the lists'
/// `owner` filter answers).
pub fn booking_owner(who: &Principal, owner: Option<String>) -> Result<Option<String>, ApiError> {
    may_name(who, owner.as_deref())?;
    Ok(owner.filter(|o| *o != who.id))
}

fn uuid_value(v: &str) -> Result<uuid::Uuid, String> {
    uuid::Uuid::parse_str(v).map_err(|_| "must be a UUID".to_string())
}

/// Reads parameters, collecting every fault before answering.
struct Reader<'a> {
    req: &'a Request,
    errors: Vec<FieldError>,
}

impl<'a> Reader<'a> {
    fn new(req: &'a Request, known: &[&str]) -> Self {
        let mut errors: Vec<FieldError> = Vec::new();
        for name in query_names(req) {
            if !known.contains(&name.as_str()) && !errors.iter().any(|e| e.field == name) {
                errors.push(FieldError::new(&name, "is not a parameter of this list"));
            }
        }
        Reader { req, errors }
    }

    fn values(&mut self, name: &str) -> Vec<String> {
        query_params(self.req, name).unwrap_or_else(|e| {
            if let ApiError::Validation(errors) = e {
                self.errors.extend(errors);
            }
            Vec::new()
        })
    }

    /// A parameter given at most once.
    fn one<T>(&mut self, name: &str, parse: impl Fn(&str) -> Result<T, String>) -> Option<T> {
        match self.values(name).as_slice() {
            [] => None,
            [one] => parse(one).map_err(|message| self.errors.push(FieldError::new(name, message))).ok(),
            _ => {
                self.errors.push(FieldError::new(name, "must be given at most once"));
                None
            }
        }
    }

    /// A repeatable parameter: each value.
    fn all<T>(&mut self, name: &str, parse: impl Fn(&str) -> Result<T, String>) -> Vec<T> {
        let mut out = Vec::new();
        for value in self.values(name) {
            match parse(&value) {
                Ok(v) => out.push(v),
                Err(message) => self.errors.push(FieldError::new(name, message)),
            }
        }
        out
    }

    /// `limit` (1 to 100, default 50) and `cursor`.
    fn page(&mut self) -> PageRequest {
        let limit = self.one("limit", |v| match v.parse::<i64>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(format!("must be an integer from 1 to {MAX_LIMIT}")),
        });
        let cursor = self.one("cursor", |v| Ok(v.to_string()));
        PageRequest { limit: limit.unwrap_or(DEFAULT_LIMIT), cursor }
    }

    fn finish(self) -> Result<(), ApiError> {
        if self.errors.is_empty() { Ok(()) } else { Err(ApiError::Validation(self.errors)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str) -> Request {
        http::Request::builder().uri(uri).body(lambda_http::Body::Empty).unwrap()
    }

    fn alice() -> Principal {
        Principal { id: "alice".into(), admin: false }
    }

    fn fields(e: ApiError) -> Vec<String> {
        let ApiError::Validation(errors) = e else { panic!("a validation error, not {e:?}") };
        errors.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_list_query_reads_its_filters_and_defaults_its_page() {
        let (f, page) = reservations_query(
            &get("/v1/reservations?status=HELD&status=CONFIRMED&from=2027-03-15T10:00:00Z&to=2027-03-16T10:00:00%2B02:00"),
            &alice(),
        )
        .unwrap();
        assert_eq!(f.statuses, [Status::Held, Status::Confirmed]);
        assert_eq!(f.from.unwrap().to_rfc3339(), "2027-03-15T10:00:00+00:00");
        assert_eq!(f.to.unwrap().to_rfc3339(), "2027-03-16T08:00:00+00:00");
        assert_eq!((page.limit, page.cursor), (50, None));
    }

    #[test]
    fn every_unknown_repeated_or_malformed_parameter_is_named() {
        let e = reservations_query(
            &get("/v1/reservations?limit=0&status=HELD&status=LOST&from=yesterday&resource_id=7&colour=red&limit=2"),
            &alice(),
        )
        .unwrap_err();
        let mut named = fields(e);
        named.sort();
        assert_eq!(named, ["colour", "from", "limit", "resource_id", "status"]);
        assert_eq!(fields(resources_query(&get("/v1/resources?limit=101")).unwrap_err()), ["limit"]);
        assert_eq!(
            fields(resources_query(&get("/v1/resources?include_archived=yes")).unwrap_err()),
            ["include_archived"]
        );
        assert_eq!(fields(waitlist_query(&get("/x?limit=abc&owner=bob")).unwrap_err()), ["owner", "limit"]);
        assert_eq!(waitlist_query(&get("/x?limit=100")).unwrap().limit, 100);
    }

    #[test]
    fn only_admins_name_another_owner() {
        let (f, _) = reservations_query(&get("/v1/reservations?owner=alice"), &alice()).unwrap();
        assert_eq!(f.owner.as_deref(), Some("alice"));
        let e = reservations_query(&get("/v1/reservations?owner=bob"), &alice()).unwrap_err();
        assert!(matches!(e, ApiError::Forbidden));
        let admin = Principal { id: "admin".into(), admin: true };
        let (f, _) = reservations_query(&get("/v1/reservations?owner=bob"), &admin).unwrap();
        assert_eq!(f.owner.as_deref(), Some("bob"));
    }
}
