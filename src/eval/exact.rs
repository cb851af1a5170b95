//! Floats that must read back from JSON to the same bits (serde's `with` modules): written as
//! text, the shortest decimal that names the value (Rust's `Display`), and read back by Rust's
//! correctly rounded parser. serde_json's own float reader is not exact to the last bit
//! without its `float_roundtrip` feature, and a merged evaluation's figures are computed from
//! what the shards wrote, so the values those figures depend on travel as text.
//!
//! Owns that encoding only.

fn parse<E: serde::de::Error>(text: &str) -> Result<f64, E> {
    text.parse::<f64>().map_err(|e| E::custom(format!("{text:?} is not a number: {e}")))
}

/// An `f64` as text.
pub mod float {
    use crate::eval::exact::parse;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `x` as its shortest exact decimal.
    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(x)
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        parse(&String::deserialize(d)?)
    }
}

/// An `Option<f64>` as text, or null.
pub mod option {
    use crate::eval::exact::parse;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `x` as its shortest exact decimal, null for none.
    pub fn serialize<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match x {
            Some(x) => s.collect_str(x),
            None => s.serialize_none(),
        }
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        Option::<String>::deserialize(d)?.map(|t| parse(&t)).transpose()
    }
}

/// A list of `Option<f64>` as text, or nulls.
pub mod options {
    use crate::eval::exact::parse;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes each value as [`option`] does.
    pub fn serialize<S: Serializer>(xs: &[Option<f64>], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(xs.iter().map(|x| x.map(|x| x.to_string())))
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Option<f64>>, D::Error> {
        Vec::<Option<String>>::deserialize(d)?.into_iter().map(|t| t.map(|t| parse(&t)).transpose()).collect()
    }
}

/// An `f32` as text (its `f64` value, which holds it exactly).
pub mod single {
    use crate::eval::exact::parse;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `x` as the shortest exact decimal of its `f64` value.
    pub fn serialize<S: Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&f64::from(*x))
    }

    /// Reads what [`serialize`] wrote; a value that is not an `f32` is an error.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        let x: f64 = parse(&String::deserialize(d)?)?;
        let single = x as f32;
        if f64::from(single) == x || x.is_nan() {
            Ok(single)
        } else {
            Err(serde::de::Error::custom(format!("{x} is not a single-precision value")))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Values {
        #[serde(with = "super::float")]
        a: f64,
        #[serde(with = "super::option")]
        b: Option<f64>,
        #[serde(with = "super::options")]
        c: Vec<Option<f64>>,
        #[serde(with = "super::single")]
        d: f32,
    }

    #[test]
    fn every_value_reads_back_to_its_bits() {
        // Values whose shortest decimals have 17 digits, where serde_json's own reader can
        // miss by an ulp, and the edges.
        let hard = [0.1f32 as f64, 0.30000001192092896, 1.0 / 3.0, 2.0f64.powi(-1074), f64::MAX, -0.0, 1e-7];
        for x in hard {
            let v = Values { a: x, b: Some(x), c: vec![None, Some(x)], d: 0.7f32 };
            let text = serde_json::to_string(&v).expect("serialises");
            let back: Values = serde_json::from_str(&text).expect("parses");
            assert_eq!(back.a.to_bits(), x.to_bits(), "{text}");
            assert_eq!(back.b.map(f64::to_bits), Some(x.to_bits()));
            assert_eq!(back.c[1].map(f64::to_bits), Some(x.to_bits()));
            assert_eq!(back, v);
        }
        let text = r#"{"a":"0.5","b":null,"c":[],"d":"0.1"}"#;
        let err = serde_json::from_str::<Values>(text).expect_err("0.1 is no f32");
        assert!(err.to_string().contains("not a single-precision value"), "{err}");
        let err = serde_json::from_str::<Values>(r#"{"a":"x","b":null,"c":[],"d":"1"}"#).expect_err("no number");
        assert!(err.to_string().contains("\"x\" is not a number"), "{err}");
    }
}
