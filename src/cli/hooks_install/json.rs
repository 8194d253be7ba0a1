//! A JSON value that keeps its keys in file order (serde_json's `Value` sorts them): editing a user's
//! settings file must not reorder what is there.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Parses JSON with comments (what Gemini CLI reads), keeping key order.
    pub fn from_jsonc(text: &str) -> anyhow::Result<Json> {
        use jsonc_parser::JsonValue;
        fn convert(v: JsonValue) -> anyhow::Result<Json> {
            Ok(match v {
                JsonValue::Null => Json::Null,
                JsonValue::Boolean(b) => Json::Bool(b),
                JsonValue::Number(n) => Json::Number(
                    serde_json::from_str(n).map_err(|_| anyhow::anyhow!("{n} is not a JSON number"))?,
                ),
                JsonValue::String(s) => Json::String(s.into_owned()),
                JsonValue::Array(a) => Json::Array(a.into_iter().map(convert).collect::<Result<_, _>>()?),
                JsonValue::Object(o) => Json::Object(
                    o.into_iter()
                        .map(|(k, v)| Ok((k.into_owned(), convert(v)?)))
                        .collect::<anyhow::Result<_>>()?,
                ),
            })
        }
        // Comments only: trailing commas and bare names are not what the CLI's JSON.parse takes.
        let options = jsonc_parser::ParseOptions {
            allow_comments: true,
            allow_loose_object_property_names: false,
            allow_trailing_commas: false,
            ..Default::default()
        };
        match jsonc_parser::parse_to_value(text, &options)? {
            Some(v) => convert(v),
            None => Ok(Json::Object(vec![])),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Json;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Json, E> {
                Ok(Json::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
                Ok(Json::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
                Ok(Json::Number(n.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Json, E> {
                serde_json::Number::from_f64(n)
                    .map(Json::Number)
                    .ok_or_else(|| E::custom("not a JSON number"))
            }
            fn visit_str<E>(self, s: &str) -> Result<Json, E> {
                Ok(Json::String(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Json, E> {
                Ok(Json::String(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = a.next_element()? {
                    out.push(v);
                }
                Ok(Json::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
                let mut out: Vec<(String, Json)> = Vec::new();
                while let Some((k, v)) = a.next_entry::<String, Json>()? {
                    // A repeated key: the last one wins, as in serde_json, at the first one's place.
                    match out.iter_mut().find(|(ok, _)| *ok == k) {
                        Some(slot) => slot.1 = v,
                        None => out.push((k, v)),
                    }
                }
                Ok(Json::Object(out))
            }
        }
        d.deserialize_any(V)
    }
}
