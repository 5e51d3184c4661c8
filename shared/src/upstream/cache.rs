//! Cached, single-flight reads of the upstream's view of a seat, shared by every
//! instance through PostgreSQL: within a cache period N concurrent readers cost one
//! upstream read. The view is fetched for whole UTC days around the asked window, so
//! that neighbouring windows share it. When no fresh view can be had (upstream failing,
//! breaker open), a view up to `max_staleness` old still answers; older than that, the
//! read is refused with `Retry-After`.

use super::breaker::{Breaker, Failure};
use super::{Block, SystemOfRecord, UpstreamError};
use crate::Clock;
use crate::config::UpstreamConfig;
use crate::db::DbError;
use crate::db::upstream_views::{self, Key};
use chrono::{DateTime, Duration, DurationRound, Utc};
use deadpool_postgres::Pool;
use uuid::Uuid;

fn day_window(from: DateTime<Utc>, to: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let day = Duration::days(1);
    let start = from.duration_trunc(day).unwrap_or(from);
    let end = to.duration_trunc(day).unwrap_or(to);
    (start, if end < to { end + day } else { end })
}

fn within(blocks: Vec<Block>, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Block> {
    blocks.into_iter().filter(|b| b.start < to && b.end > from).collect()
}

/// What the upstream holds on `seat` within `[from, to)`. Takes a connection from the
/// pool for each step and none while the upstream is called or a refresh awaited.
pub async fn view(
    pool: &Pool,
    clock: &dyn Clock,
    upstream: &dyn SystemOfRecord,
    config: &UpstreamConfig,
    seat: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Result<Vec<Block>, UpstreamError>, DbError> {
    view_within(pool, clock, upstream, config, seat, (from, to), config.max_staleness).await
}

/// [`view`] for a decision to write: a view older than one cache period is never
/// used, so a seat that showed free a minute ago is not written to now.
pub async fn fresh_view(
    pool: &Pool,
    clock: &dyn Clock,
    upstream: &dyn SystemOfRecord,
    config: &UpstreamConfig,
    seat: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Result<Vec<Block>, UpstreamError>, DbError> {
    view_within(pool, clock, upstream, config, seat, (from, to), config.cache_ttl).await
}

async fn view_within(
    pool: &Pool,
    clock: &dyn Clock,
    upstream: &dyn SystemOfRecord,
    config: &UpstreamConfig,
    seat: &str,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    max_staleness: Duration,
) -> Result<Result<Vec<Block>, UpstreamError>, DbError> {
    let (start, end) = day_window(from, to);
    let key = Key { seat, start, end };
    let breaker = Breaker::from_config(config);
    let parse = |v: serde_json::Value| serde_json::from_value::<Vec<Block>>(v).unwrap_or_default();
    // Waiting for another reader's refresh is bounded by how long a refresh may take.
    let wait_until = std::time::Instant::now() + config.connect_timeout + config.request_timeout;
    loop {
        let now = clock.now();
        let cached = upstream_views::read(&pool.get().await?, &key).await?;
        if let Some((taken, at)) = &cached
            && *at > now - config.cache_ttl
        {
            return Ok(Ok(within(parse(taken.clone()), from, to)));
        }
        let owner = Uuid::new_v4();
        let lease_until = now + Duration::from_std(config.connect_timeout + config.request_timeout).unwrap_or_default();
        let took = upstream_views::take_refresh(
            &pool.get().await?,
            &key,
            owner,
            now,
            lease_until,
            config.cache_ttl.num_milliseconds(),
        )
        .await?;
        if took {
            let fetched =
                breaker.guard(pool, clock, upstream.taken(seat, start, end)).await.map_err(Failure::into_inner)?;
            return match fetched {
                Ok(blocks) => {
                    let json = serde_json::to_value(&blocks).expect("blocks serialize");
                    upstream_views::store(&pool.get().await?, &key, &json, clock.now()).await?;
                    Ok(Ok(within(blocks, from, to)))
                }
                Err(e) => {
                    upstream_views::give_back(&pool.get().await?, &key, owner).await?;
                    Ok(stale_or(cached, e, clock.now(), max_staleness).map(|b| within(parse(b), from, to)))
                }
            };
        }
        // Someone else is refreshing: wait for their answer rather than asking again.
        if std::time::Instant::now() >= wait_until {
            return Ok(stale_or(cached, UpstreamError::Unavailable { retry_after_seconds: 1 }, now, max_staleness)
                .map(|b| within(parse(b), from, to)));
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

fn stale_or(
    cached: Option<(serde_json::Value, DateTime<Utc>)>,
    error: UpstreamError,
    now: DateTime<Utc>,
    max_staleness: Duration,
) -> Result<serde_json::Value, UpstreamError> {
    match cached {
        Some((taken, at)) if at > now - max_staleness => Ok(taken),
        _ => Err(match error {
            e @ UpstreamError::Unavailable { .. } => e,
            _ => UpstreamError::Unavailable { retry_after_seconds: 1 },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn the_fetched_window_is_whole_days_around_the_asked_one() {
        let t = |d, h| Utc.with_ymd_and_hms(2027, 3, d, h, 0, 0).unwrap();
        assert_eq!(day_window(t(15, 10), t(15, 12)), (t(15, 0), t(16, 0)));
        assert_eq!(day_window(t(15, 0), t(16, 0)), (t(15, 0), t(16, 0)));
        assert_eq!(day_window(t(15, 23), t(17, 1)), (t(15, 0), t(18, 0)));
    }
}
