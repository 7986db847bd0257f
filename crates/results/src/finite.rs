//! Non-finite floats (`NaN`, `±Inf`) never reach a file. JSON has no
//! spelling for them: `serde_json` writes them as `null`, and a `null`
//! where a number must be makes the whole file unreadable for `diff`,
//! `report` and `merge`. Values from outside (a server's metrics) are
//! checked where they enter; this is the second line: `non_finite` finds
//! every non-finite float a value would write, by path, and `strip` takes
//! them out of its JSON, so a field that held one is written as absent.
//! Where the field is optional it then reads back as `None`; where it is
//! not, reading names the field (see `Results::read`).

use std::fmt;

use serde::Serialize;
use serde::ser::{self, Impossible};

/// One step of a path into a serialized value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A struct field or a map key.
    Key(String),
    /// An element of a sequence.
    Index(usize),
}

/// Where a non-finite float sits in a value, as `a.b[3].c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path(pub Vec<Step>);

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            match s {
                Step::Key(k) if i == 0 => write!(f, "{k}")?,
                Step::Key(k) => write!(f, ".{k}")?,
                Step::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// The paths of every non-finite float `value` would serialize.
pub fn non_finite<T: Serialize + ?Sized>(value: &T) -> Vec<Path> {
    let mut c = Checker::default();
    // The checker itself never fails; a value's own Serialize may, and
    // then serializing it for real reports the error.
    let _ = value.serialize(&mut c);
    c.found
}

/// Removes the non-finite floats at `paths` from `json` (the value's JSON,
/// where they are `null`): a struct field or map entry is removed, a
/// sequence element stays `null` (a sequence keeps its positions).
pub fn strip(json: &mut serde_json::Value, paths: &[Path]) {
    for p in paths {
        let Some((last, parents)) = p.0.split_last() else {
            continue;
        };
        let parent = parents.iter().try_fold(&mut *json, |at, s| match s {
            Step::Key(k) => at.get_mut(k.as_str()),
            Step::Index(i) => at.get_mut(*i),
        });
        if let (Some(obj), Step::Key(k)) = (parent.and_then(|v| v.as_object_mut()), last) {
            obj.remove(k.as_str());
        }
    }
}

/// A serializer that writes nothing and notes where non-finite floats are.
#[derive(Default)]
struct Checker {
    path: Vec<Step>,
    found: Vec<Path>,
}

#[derive(Debug)]
struct NoError;

impl fmt::Display for NoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not serializable")
    }
}

impl std::error::Error for NoError {}

impl ser::Error for NoError {
    fn custom<T: fmt::Display>(_: T) -> Self {
        NoError
    }
}

impl Checker {
    fn float(&mut self, v: f64) {
        if !v.is_finite() {
            self.found.push(Path(self.path.clone()));
        }
    }

    fn nested<T: Serialize + ?Sized>(&mut self, step: Step, value: &T) -> Result<(), NoError> {
        self.path.push(step);
        let r = value.serialize(&mut *self);
        self.path.pop();
        r
    }
}

/// A map key as a string (what JSON makes of it).
struct KeyText;

impl ser::Serializer for KeyText {
    type Ok = String;
    type Error = NoError;
    type SerializeSeq = Impossible<String, NoError>;
    type SerializeTuple = Impossible<String, NoError>;
    type SerializeTupleStruct = Impossible<String, NoError>;
    type SerializeTupleVariant = Impossible<String, NoError>;
    type SerializeMap = Impossible<String, NoError>;
    type SerializeStruct = Impossible<String, NoError>;
    type SerializeStructVariant = Impossible<String, NoError>;

    fn serialize_bool(self, v: bool) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_i8(self, v: i8) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_f32(self, v: f32) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_f64(self, v: f64) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_char(self, v: char) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_str(self, v: &str) -> Result<String, NoError> {
        Ok(v.to_string())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, NoError> {
        Err(NoError)
    }
    fn serialize_none(self) -> Result<String, NoError> {
        Err(NoError)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<String, NoError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<String, NoError> {
        Err(NoError)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, NoError> {
        Err(NoError)
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, NoError> {
        Ok(variant.to_string())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<String, NoError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, NoError> {
        Err(NoError)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NoError> {
        Err(NoError)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NoError> {
        Err(NoError)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, NoError> {
        Err(NoError)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, NoError> {
        Err(NoError)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NoError> {
        Err(NoError)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, NoError> {
        Err(NoError)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, NoError> {
        Err(NoError)
    }
}

/// The checker's state inside a compound value.
struct Compound<'a> {
    c: &'a mut Checker,
    index: usize,
    key: Option<String>,
}

impl<'a> ser::Serializer for &'a mut Checker {
    type Ok = ();
    type Error = NoError;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, _: bool) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), NoError> {
        self.float(v as f64);
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), NoError> {
        self.float(v);
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<(), NoError> {
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), NoError> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<(), NoError> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<(), NoError> {
        self.nested(Step::Key(variant.into()), v)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, NoError> {
        Ok(Compound {
            c: self,
            index: 0,
            key: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, NoError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Compound<'a>, NoError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'a>, NoError> {
        self.path.push(Step::Key(variant.into()));
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, NoError> {
        self.serialize_seq(None)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, NoError> {
        self.serialize_seq(None)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, NoError> {
        self.path.push(Step::Key(variant.into()));
        self.serialize_seq(None)
    }
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), NoError> {
        let i = self.index;
        self.index += 1;
        self.c.nested(Step::Index(i), v)
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = NoError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), NoError> {
        self.element(v)
    }
    fn end(self) -> Result<(), NoError> {
        Ok(())
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = NoError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), NoError> {
        self.element(v)
    }
    fn end(self) -> Result<(), NoError> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = NoError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), NoError> {
        self.element(v)
    }
    fn end(self) -> Result<(), NoError> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = NoError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), NoError> {
        self.element(v)
    }
    fn end(self) -> Result<(), NoError> {
        self.c.path.pop();
        Ok(())
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = NoError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), NoError> {
        self.key = Some(k.serialize(KeyText).unwrap_or_default());
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), NoError> {
        let k = self.key.take().unwrap_or_default();
        self.c.nested(Step::Key(k), v)
    }
    fn end(self) -> Result<(), NoError> {
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = NoError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), NoError> {
        self.c.nested(Step::Key(key.into()), v)
    }
    fn end(self) -> Result<(), NoError> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = NoError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), NoError> {
        self.c.nested(Step::Key(key.into()), v)
    }
    fn end(self) -> Result<(), NoError> {
        self.c.path.pop();
        Ok(())
    }
}

/// The JSON text of `value` with every non-finite float left out (see the
/// module's comment); pretty, with a final newline. Values without one
/// are written exactly as `serde_json` writes them, field order kept.
pub fn to_json_pretty<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let paths = non_finite(value);
    let mut s = if paths.is_empty() {
        serde_json::to_string_pretty(value)?
    } else {
        let mut json = serde_json::to_value(value)?;
        strip(&mut json, &paths);
        serde_json::to_string_pretty(&json)?
    };
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    struct Inner {
        plain: f64,
        opt: Option<f64>,
        series: Vec<Option<f64>>,
        by_name: BTreeMap<String, f64>,
    }

    #[derive(Serialize)]
    struct Outer {
        name: String,
        inner: Vec<Inner>,
    }

    fn sample() -> Outer {
        Outer {
            name: "x".into(),
            inner: vec![
                Inner {
                    plain: 1.0,
                    opt: Some(2.0),
                    series: vec![Some(1.0), None],
                    by_name: [("a".to_string(), 1.0)].into(),
                },
                Inner {
                    plain: f64::NAN,
                    opt: Some(f64::INFINITY),
                    series: vec![Some(f64::NEG_INFINITY), Some(3.0)],
                    by_name: [("b c".to_string(), f64::NAN), ("d".to_string(), 4.0)].into(),
                },
            ],
        }
    }

    #[test]
    fn finds_every_non_finite_float_by_path() {
        let found: Vec<String> = non_finite(&sample())
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(
            found,
            [
                "inner[1].plain",
                "inner[1].opt",
                "inner[1].series[0]",
                "inner[1].by_name.b c",
            ]
        );
    }

    #[test]
    fn writes_them_as_absent_and_nothing_else_changes() {
        let text = to_json_pretty(&sample()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let bad = &v["inner"][1];
        assert!(
            bad.get("plain").is_none() && bad.get("opt").is_none(),
            "{bad}"
        );
        assert_eq!(bad["series"], serde_json::json!([null, 3.0]));
        assert_eq!(bad["by_name"], serde_json::json!({"d": 4.0}));
        assert_eq!(v["inner"][0]["opt"], 2.0);
        // Without one, the text is serde_json's own.
        let mut good = sample();
        good.inner.pop();
        let mut plain = serde_json::to_string_pretty(&good).unwrap();
        plain.push('\n');
        assert_eq!(to_json_pretty(&good).unwrap(), plain);
    }
}
