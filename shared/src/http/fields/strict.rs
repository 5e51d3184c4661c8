//! A JSON body parsed strictly: one object, and no key given twice in any object of it
//! (serde_json would keep the last one).

use super::ApiError;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::fmt;

/// Why a body could not be read as a JSON object.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Not JSON at all; where the first error is, for a person to find it.
    Syntax { line: usize, column: usize },
    /// JSON, but not an object.
    NotAnObject,
    /// A key given twice in one object; its path (`name`, or `outer.inner`).
    DuplicateKey(String),
}

impl ParseError {
    pub fn into_api_error(self) -> ApiError {
        match self {
            ParseError::Syntax { line, column } => ApiError::validation(
                "body",
                format!("is not valid JSON (the first error is at line {line}, column {column})"),
            ),
            ParseError::NotAnObject => ApiError::validation("body", "must be a JSON object"),
            ParseError::DuplicateKey(path) => ApiError::validation(&path, "is given more than once"),
        }
    }
}

/// Parses `bytes` as one JSON object, refusing a key that appears twice in any object.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ParseError> {
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Strict { path: String::new(), duplicate: &duplicate }.deserialize(&mut de).and_then(|v| {
        de.end()?;
        Ok(v)
    });
    if let Some(path) = duplicate.into_inner() {
        return Err(ParseError::DuplicateKey(path));
    }
    match parsed {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ParseError::NotAnObject),
        Err(e) => Err(ParseError::Syntax { line: e.line(), column: e.column() }),
    }
}

/// A JSON value whose objects must not repeat a key. The first repeated key's path is
/// put in `duplicate` (the serde error itself only stops the parse).
struct Strict<'a> {
    path: String,
    duplicate: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, items.len());
            match seq.next_element_seed(Strict { path, duplicate: self.duplicate })? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
            if out.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(path);
                return Err(de::Error::custom("duplicate key"));
            }
            let value = map.next_value_seed(Strict { path, duplicate: self.duplicate })?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_refused_by_its_path() {
        assert_eq!(parse_object(br#"{"a":1,"a":2}"#), Err(ParseError::DuplicateKey("a".into())));
        assert_eq!(parse_object(br#"{"a":{"b":1,"b":1}}"#), Err(ParseError::DuplicateKey("a.b".into())));
        assert_eq!(parse_object(br#"{"a":[{"b":1,"b":1}]}"#), Err(ParseError::DuplicateKey("a[0].b".into())));
        assert_eq!(parse_object(br#"{"a":1,"b":{"a":2}}"#).unwrap().len(), 2);
    }

    #[test]
    fn what_is_not_one_json_object_is_refused() {
        assert_eq!(parse_object(b"[1]"), Err(ParseError::NotAnObject));
        assert_eq!(parse_object(b"{\"a\": "), Err(ParseError::Syntax { line: 1, column: 6 }));
        assert_eq!(parse_object(b"{} {}"), Err(ParseError::Syntax { line: 1, column: 4 }));
        assert!(matches!(parse_object(b"{\"q\": 1e999}"), Err(ParseError::Syntax { .. })));
    }
}
