//! The load profile of a resource over time: what `free` reports and what the
//! capacity invariant is about.

use chrono::{DateTime, Utc};
use serde::Serialize;

/// A claim on capacity over the half-open range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub quantity: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FreePiece {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub remaining: i64,
}

/// Cuts `[from, to)` into maximal pieces of constant load, in order.
fn segments(from: DateTime<Utc>, to: DateTime<Utc>, claims: &[Claim]) -> Vec<(DateTime<Utc>, DateTime<Utc>, i64)> {
    // +q where a claim starts, -q where it ends; ends sort first at one instant, which
    // is what makes the ranges half-open.
    let mut events: Vec<(DateTime<Utc>, i64)> = Vec::with_capacity(claims.len() * 2);
    for c in claims {
        let (s, e) = (c.start.max(from), c.end.min(to));
        if s < e {
            events.push((s, c.quantity));
            events.push((e, -c.quantity));
        }
    }
    events.sort_unstable();
    let mut out: Vec<(DateTime<Utc>, DateTime<Utc>, i64)> = Vec::new();
    let (mut at, mut load) = (from, 0i64);
    let mut i = 0;
    while at < to {
        while i < events.len() && events[i].0 == at {
            load += events[i].1;
            i += 1;
        }
        let next = events.get(i).map_or(to, |e| e.0.min(to));
        match out.last_mut() {
            Some(last) if last.2 == load => last.1 = next,
            _ => out.push((at, next, load)),
        }
        at = next;
    }
    out
}

/// `[from, to)` as maximal pieces `(start, end, load)` of constant load, in order.
pub fn load_segments(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    claims: &[Claim],
) -> Vec<(DateTime<Utc>, DateTime<Utc>, i64)> {
    segments(from, to, claims)
}

/// The free pieces of `[from, to)`: maximal ranges of constant `remaining > 0`.
pub fn free_pieces(from: DateTime<Utc>, to: DateTime<Utc>, capacity: i64, claims: &[Claim]) -> Vec<FreePiece> {
    segments(from, to, claims)
        .into_iter()
        .filter(|(_, _, load)| capacity - load > 0)
        .map(|(start, end, load)| FreePiece { start, end, remaining: capacity - load })
        .collect()
}

/// The highest load at any instant of `[from, to)`.
pub fn peak_load(from: DateTime<Utc>, to: DateTime<Utc>, claims: &[Claim]) -> i64 {
    segments(from, to, claims).into_iter().map(|s| s.2).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn h(hour: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 3, 15, hour, 0, 0).unwrap()
    }

    fn claim(s: u32, e: u32, q: i64) -> Claim {
        Claim { start: h(s), end: h(e), quantity: q }
    }

    fn piece(s: u32, e: u32, remaining: i64) -> FreePiece {
        FreePiece { start: h(s), end: h(e), remaining }
    }

    #[test]
    fn free_matches_the_contract_example() {
        // capacity 2, one unit held 10-12, one confirmed 11-13, asked for 9-14
        let free = free_pieces(h(9), h(14), 2, &[claim(10, 12, 1), claim(11, 13, 1)]);
        assert_eq!(free, vec![piece(9, 10, 2), piece(10, 11, 1), piece(12, 13, 1), piece(13, 14, 2)]);
    }

    #[test]
    fn adjacent_claims_do_not_overlap() {
        assert_eq!(peak_load(h(9), h(14), &[claim(10, 11, 1), claim(11, 12, 1)]), 1);
        assert_eq!(
            free_pieces(h(9), h(14), 1, &[claim(10, 11, 1), claim(11, 12, 1)]),
            vec![piece(9, 10, 1), piece(12, 14, 1)]
        );
    }

    #[test]
    fn claims_outside_the_window_are_clipped_away() {
        assert_eq!(free_pieces(h(10), h(12), 1, &[claim(8, 11, 1), claim(12, 15, 1)]), vec![piece(11, 12, 1)]);
        assert_eq!(peak_load(h(10), h(12), &[claim(12, 13, 5)]), 0);
    }

    #[test]
    fn equal_neighbouring_loads_merge_into_one_piece() {
        // two back-to-back claims of the same size leave one piece of remaining 1
        let free = free_pieces(h(9), h(13), 2, &[claim(9, 11, 1), claim(11, 13, 1)]);
        assert_eq!(free, vec![piece(9, 13, 1)]);
    }

    #[test]
    fn peak_sums_nested_claims() {
        let claims = [claim(9, 17, 2), claim(10, 12, 3), claim(11, 13, 1), claim(16, 17, 4)];
        assert_eq!(peak_load(h(9), h(17), &claims), 6);
        assert_eq!(peak_load(h(12), h(16), &claims), 3);
    }

    #[test]
    fn an_empty_window_has_no_pieces() {
        assert!(free_pieces(h(10), h(10), 1, &[]).is_empty());
    }
}
