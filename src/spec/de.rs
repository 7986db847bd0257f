//! Small serde helpers shared by the typed spec elements.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use serde::Deserializer;
use serde::de::{self, Visitor};

/// Deserializes a string and parses it with `FromStr`; the parse error's text
/// becomes the serde error, so it reaches the user with its position.
pub fn from_str_visitor<'de, D, T>(d: D, expecting: &'static str) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    struct V<T>(&'static str, PhantomData<T>);
    impl<T> Visitor<'_> for V<T>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
            v.parse().map_err(E::custom)
        }
    }
    d.deserialize_str(V(expecting, PhantomData))
}

/// Formats an `f64` for people and for round trips: integral values without
/// a fractional part, others in Rust's shortest round-trip form.
pub fn fmt_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}
