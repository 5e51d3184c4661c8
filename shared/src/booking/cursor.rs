//! Opaque, tamper-evident list cursors.
//!
//! A cursor is where a page ended (the position of its last item), bound to the list it
//! came from, and signed: `base64url(version || position || tag)`, where the tag is the
//! first 16 bytes of HMAC-SHA256 under the database's cursor key (`list_cursor_key`) over
//! the list's [`Scope`] and the position. A cursor that was altered, forged, or taken
//! from another list, another principal's list or another filter set fails the check;
//! one that passes names a position this service wrote itself.
//!
//! The position is not secret (it is the last item's `created_at` and id, a queue
//! sequence number, or a claim's times and id, all of which the page showed), so it is
//! signed, not encrypted.

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use uuid::Uuid;

const VERSION: u8 = 1;
/// 128 bits of tag: a forger's chance per try is 2^-128.
const TAG_LEN: usize = 16;

/// The MAC key of the cursors. Its `Debug` prints nothing of it.
#[derive(Clone)]
pub struct CursorKey([u8; 32]);

impl CursorKey {
    pub fn new(secret: [u8; 32]) -> Self {
        Self(secret)
    }

    fn mac(&self, scope: &Scope, position: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(&scope.0);
        mac.update(position);
        mac
    }
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

/// Which list a cursor belongs to: its name and every filter that shapes it, each
/// length-prefixed, so two different lists never sign the same bytes.
#[derive(Debug, Clone)]
pub struct Scope(Vec<u8>);

impl Scope {
    pub fn new(list: &str) -> Self {
        Scope(Vec::new()).field("list", list)
    }

    pub fn field(mut self, name: &str, value: &str) -> Self {
        for part in [name, value] {
            self.0.extend_from_slice(&(part.len() as u32).to_be_bytes());
            self.0.extend_from_slice(part.as_bytes());
        }
        self
    }
}

/// Where a page ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// Newest-first lists: the last item's `(created_at, id)`.
    Newest { created_at: DateTime<Utc>, id: Uuid },
    /// A queue: the last entry's sequence number.
    Seq(i64),
    /// A calendar's claims in time order: the last one's `(start, end, id)` (the nil id
    /// for an upstream's claim, which has none of its own).
    Span { start: DateTime<Utc>, end: DateTime<Utc>, id: Uuid },
}

impl Position {
    fn to_bytes(self) -> Vec<u8> {
        match self {
            Position::Newest { created_at, id } => {
                let mut out = created_at.timestamp_micros().to_be_bytes().to_vec();
                out.extend_from_slice(id.as_bytes());
                out
            }
            Position::Seq(seq) => seq.to_be_bytes().to_vec(),
            Position::Span { start, end, id } => {
                let mut out = start.timestamp_micros().to_be_bytes().to_vec();
                out.extend_from_slice(&end.timestamp_micros().to_be_bytes());
                out.extend_from_slice(id.as_bytes());
                out
            }
        }
    }

    fn from_bytes(bytes: &[u8]) -> Option<Position> {
        match bytes.len() {
            24 => {
                let micros = i64::from_be_bytes(bytes[..8].try_into().ok()?);
                Some(Position::Newest {
                    created_at: DateTime::from_timestamp_micros(micros)?,
                    id: Uuid::from_slice(&bytes[8..]).ok()?,
                })
            }
            8 => Some(Position::Seq(i64::from_be_bytes(bytes.try_into().ok()?))),
            32 => {
                let micros = |at: &[u8]| at.try_into().ok().map(i64::from_be_bytes);
                Some(Position::Span {
                    start: DateTime::from_timestamp_micros(micros(&bytes[..8])?)?,
                    end: DateTime::from_timestamp_micros(micros(&bytes[8..16])?)?,
                    id: Uuid::from_slice(&bytes[16..]).ok()?,
                })
            }
            _ => None,
        }
    }
}

/// The cursor of `position` in the list of `scope`.
pub fn encode(key: &CursorKey, scope: &Scope, position: Position) -> String {
    let position = position.to_bytes();
    let tag = key.mac(scope, &position).finalize().into_bytes();
    let mut raw = vec![VERSION];
    raw.extend_from_slice(&position);
    raw.extend_from_slice(&tag[..TAG_LEN]);
    base64url::encode(&raw)
}

/// The position a cursor names, if this service wrote it for the list of `scope`.
pub fn decode(key: &CursorKey, scope: &Scope, cursor: &str) -> Option<Position> {
    let raw = base64url::decode(cursor)?;
    let (&version, rest) = raw.split_first()?;
    if version != VERSION || rest.len() < TAG_LEN {
        return None;
    }
    let (position, tag) = rest.split_at(rest.len() - TAG_LEN);
    // In constant time: how much of a guess was right must not show in the timing.
    key.mac(scope, position).verify_truncated_left(tag).ok()?;
    Position::from_bytes(position)
}

/// RFC 4648 base64url without padding, strict: a text that another encoder would not
/// produce (padding, stray bits in the last character) is refused, so a cursor has
/// exactly one spelling and any change to it is a change to its bytes.
mod base64url {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..=chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    }

    pub fn decode(text: &str) -> Option<Vec<u8>> {
        if text.len() % 4 == 1 {
            return None;
        }
        let values: Vec<u32> =
            text.bytes().map(|c| ALPHABET.iter().position(|&a| a == c).map(|v| v as u32)).collect::<Option<_>>()?;
        let mut out = Vec::with_capacity(values.len() * 3 / 4);
        for chunk in values.chunks(4) {
            let n = chunk.iter().enumerate().fold(0u32, |n, (i, v)| n | (v << (18 - 6 * i)));
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            let keep = chunk.len() - 1;
            // The bits past the last whole byte must be zero.
            if bytes[keep..].iter().any(|&b| b != 0) {
                return None;
            }
            out.extend_from_slice(&bytes[..keep]);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> CursorKey {
        CursorKey::new([byte; 32])
    }

    fn newest() -> Position {
        Position::Newest {
            created_at: DateTime::from_timestamp_micros(1_800_000_000_123_456).unwrap(),
            id: Uuid::from_u128(0x0192_3456_789a_7bcd_8ef0_1234_5678_9abc),
        }
    }

    #[test]
    fn a_cursor_names_its_position_in_its_own_list() {
        let scope = Scope::new("reservations").field("owner", "alice");
        let cursor = encode(&key(7), &scope, newest());
        assert!(cursor.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{cursor}");
        assert_eq!(decode(&key(7), &scope, &cursor), Some(newest()));
        let seq = encode(&key(7), &scope, Position::Seq(42));
        assert_eq!(decode(&key(7), &scope, &seq), Some(Position::Seq(42)));
        let at = |micros| DateTime::from_timestamp_micros(micros).unwrap();
        let span = Position::Span { start: at(1_800_000_000_000_000), end: at(1_800_003_600_000_001), id: Uuid::nil() };
        assert_eq!(decode(&key(7), &scope, &encode(&key(7), &scope, span)), Some(span));
    }

    #[test]
    fn another_list_another_filter_or_another_key_refuses_it() {
        let scope = Scope::new("reservations").field("owner", "alice");
        let cursor = encode(&key(7), &scope, newest());
        assert_eq!(decode(&key(8), &scope, &cursor), None);
        assert_eq!(decode(&key(7), &Scope::new("reservations").field("owner", "bob"), &cursor), None);
        assert_eq!(decode(&key(7), &Scope::new("resources").field("owner", "alice"), &cursor), None);
        // Length prefixes: moving text from one field to the next is another scope.
        let a = Scope::new("x").field("a", "bc").field("d", "");
        let b = Scope::new("x").field("a", "b").field("cd", "");
        assert_eq!(decode(&key(7), &b, &encode(&key(7), &a, newest())), None);
    }

    #[test]
    fn every_change_to_a_cursor_is_refused() {
        let scope = Scope::new("reservations");
        let cursor = encode(&key(7), &scope, newest());
        for i in 0..cursor.len() {
            for replacement in ['A', 'B', 'g', '_'] {
                let mut altered = cursor.clone().into_bytes();
                if altered[i] == replacement as u8 {
                    continue;
                }
                altered[i] = replacement as u8;
                let altered = String::from_utf8(altered).unwrap();
                assert_eq!(decode(&key(7), &scope, &altered), None, "{altered}");
            }
        }
        for garbage in ["", "x", "====", "not a cursor", &format!("{cursor}A"), &cursor[1..], "AQ"] {
            assert_eq!(decode(&key(7), &scope, garbage), None, "{garbage}");
        }
    }

    #[test]
    fn base64url_round_trips_and_has_one_spelling() {
        for len in 0..20 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 250) as u8).collect();
            let text = base64url::encode(&bytes);
            assert_eq!(base64url::decode(&text), Some(bytes), "{text}");
        }
        assert_eq!(base64url::encode(b"\xfb\xff"), "-_8");
        assert_eq!(base64url::decode("-_8"), Some(b"\xfb\xff".to_vec()));
        assert_eq!(base64url::decode("-_9"), None, "stray bits in the last character");
        assert_eq!(base64url::decode("-_8="), None, "padding");
    }
}
