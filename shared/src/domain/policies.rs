//! A resource's booking policies: the deadlines for an owner's cancel and move, how
//! often a booking may be moved, and how long a hold may be kept by extending it.
//! Admins are not held to them (what they do is recorded in `acted_by`).

use super::Patch;
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

/// `None`: no such rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Policies {
    /// A confirmed booking may be cancelled by its owner until this long before its start.
    pub cancel_notice_minutes: Option<i32>,
    /// A booking may be moved by its owner until this long before its start.
    pub reschedule_notice_minutes: Option<i32>,
    /// How many times its owner may move a booking.
    pub max_reschedules: Option<i32>,
    /// How long a hold may be kept in all, from its creation, by extending it; without
    /// it a hold cannot be extended.
    pub max_hold_seconds: Option<i32>,
}

/// Which deadline closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    Cancel,
    Reschedule,
}

impl Deadline {
    /// The resource field that sets it.
    pub fn field(self) -> &'static str {
        match self {
            Deadline::Cancel => "cancel_notice_minutes",
            Deadline::Reschedule => "reschedule_notice_minutes",
        }
    }
}

/// A deadline past which the owner may no longer act: the last instant allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed {
    pub deadline: Deadline,
    pub at: DateTime<Utc>,
}

impl Policies {
    /// Whether the owner may still act on a booking starting at `start`: allowed up to
    /// and including `notice` minutes before it (as `min_notice_minutes` allows a start
    /// exactly that far ahead).
    pub fn check(&self, deadline: Deadline, start: DateTime<Utc>, now: DateTime<Utc>) -> Result<(), Closed> {
        let notice = match deadline {
            Deadline::Cancel => self.cancel_notice_minutes,
            Deadline::Reschedule => self.reschedule_notice_minutes,
        };
        match notice {
            Some(minutes) => {
                let at = start - Duration::minutes(minutes.into());
                if now <= at { Ok(()) } else { Err(Closed { deadline, at }) }
            }
            None => Ok(()),
        }
    }
}

/// What a resource's body asks to change of its policies.
#[derive(Debug, Default)]
pub struct PoliciesChange {
    pub cancel_notice_minutes: Patch<i32>,
    pub reschedule_notice_minutes: Patch<i32>,
    pub max_reschedules: Patch<i32>,
    pub max_hold_seconds: Patch<i32>,
}

impl PoliciesChange {
    /// The policies `current` becomes.
    pub fn apply(self, current: &Policies) -> Policies {
        Policies {
            cancel_notice_minutes: self.cancel_notice_minutes.apply(&current.cancel_notice_minutes),
            reschedule_notice_minutes: self.reschedule_notice_minutes.apply(&current.reschedule_notice_minutes),
            max_reschedules: self.max_reschedules.apply(&current.max_reschedules),
            max_hold_seconds: self.max_hold_seconds.apply(&current.max_hold_seconds),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn an_owner_may_act_until_the_notice_and_not_a_second_after() {
        let start = Utc.with_ymd_and_hms(2027, 3, 15, 10, 0, 0).unwrap();
        let p = Policies { cancel_notice_minutes: Some(60), ..Policies::default() };
        let deadline = start - Duration::minutes(60);
        assert_eq!(p.check(Deadline::Cancel, start, deadline), Ok(()));
        assert_eq!(
            p.check(Deadline::Cancel, start, deadline + Duration::seconds(1)),
            Err(Closed { deadline: Deadline::Cancel, at: deadline })
        );
        assert_eq!(p.check(Deadline::Reschedule, start, start), Ok(()), "no reschedule notice is set");
    }
}
