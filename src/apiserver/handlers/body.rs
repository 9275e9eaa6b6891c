//! Request bodies of the writes: read up to kube-apiserver's limit, decoded by their
//! `Content-Type` (JSON, YAML, protobuf, the three patch types; none is JSON, as the Python
//! client sends none), with duplicate fields found on the way for `fieldValidation`.
//! Protobuf bodies become the JSON of the same object (`apiserver::protobuf`), so every
//! handler sees JSON.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go` (`limitedReadBody`,
//! 3 MiB), `handlers/patch.go` (the patch types, server-side apply's) and the
//! `fieldValidation` query parameter (`handlers/create.go`, `update.go`: `Ignore`, `Warn`,
//! `Strict`; `Warn` when unset).
//!
//! Invariants: a body over [`MAX_BODY_BYTES`] is refused with 413 before more than the
//! limit is read (at once when its `Content-Length` says so); every refusal is a `Status`;
//! decoding one body takes at most about [`MAX_DECODED_BYTES`] of memory for its values (and
//! as much again for a YAML parser's events), however the body is shaped: a body that would
//! take more is refused with 413 before, or as soon as, the budget is spent.
//!
//! Why a budget: a decoded `serde_json::Value` costs a multiple of its JSON. Realistic
//! objects cost 6 to 19 × their bytes, but tiny containers cost far more (`{}` takes 72
//! bytes for its 3, `{"a":{}}` about 470 for its 8), so a 3 MiB body of them took 170 to 400
//! MB to decode. JSON is charged as it is decoded ([`Cost`] per value, member, container and
//! string), and decoding stops at the budget. A YAML parser first reads the whole document
//! into a list of events (about 100 bytes each) before a value is built, so a YAML body's
//! events are estimated from its bytes first ([`yaml_events_estimate`]) and the body refused
//! unless they fit the budget too. The estimate is high (block YAML of containers comes to
//! about 26 × its bytes), so YAML bodies of realistic shape fit up to about 2.5 MiB, every
//! object etcd can store among them; kubectl and client-go send JSON.

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{header, HeaderMap};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::apiserver::errors::ApiError;
use crate::apiserver::patch::cost::{Cost, MemoryBudget, MAX_DECODED_BYTES};
use crate::apiserver::protobuf;

/// kube-apiserver's largest request body (`MaxRequestBodyBytes`, 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The media types a write body may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyType {
    Json,
    Yaml,
    /// `application/vnd.kubernetes.protobuf`: kubectl's generator commands, client-go's
    /// typed clients.
    Protobuf,
    MergePatch,
    JsonPatch,
    StrategicMergePatch,
    /// `application/apply-patch+yaml`: a server-side apply's configuration, YAML or JSON.
    ApplyPatch,
}

/// The accepted media types, as kube-apiserver lists them in its 415.
const ACCEPTED: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";
const ACCEPTED_PATCHES: &str = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json";

/// Reads a body of at most [`MAX_BODY_BYTES`].
///
/// # Errors
/// 413 when it is larger (its `Content-Length` is believed, so such a body is not read at
/// all); 400 when the connection fails while it is read.
pub async fn read(headers: &HeaderMap, body: Body) -> Result<Vec<u8>, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(ApiError::too_large(MAX_BODY_BYTES));
    }
    let mut stream = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
        if bytes.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::too_large(MAX_BODY_BYTES));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// The body type of a create or update (`patch` false) or a patch.
///
/// # Errors
/// 415 for anything else; for server-side apply, saying kcm does not implement it.
pub fn body_type(headers: &HeaderMap, patch: bool) -> Result<BodyType, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let found = match (media.as_str(), patch) {
        ("" | "application/json", false) => Some(BodyType::Json),
        ("application/yaml", false) => Some(BodyType::Yaml),
        (protobuf::MEDIA_TYPE, false) => Some(BodyType::Protobuf),
        ("application/merge-patch+json", true) => Some(BodyType::MergePatch),
        ("application/json-patch+json", true) => Some(BodyType::JsonPatch),
        ("application/strategic-merge-patch+json", true) => Some(BodyType::StrategicMergePatch),
        ("application/apply-patch+yaml", true) => Some(BodyType::ApplyPatch),
        _ => None,
    };
    found.ok_or_else(|| {
        ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            if patch { ACCEPTED_PATCHES } else { ACCEPTED }
        ))
    })
}

/// What a write does with unknown and duplicate fields (`?fieldValidation=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    /// The query parameter's value; `Warn` when unset, as kube-apiserver.
    ///
    /// # Errors
    /// 400 for another value.
    pub fn parse(value: Option<&str>) -> Result<FieldValidation, ApiError> {
        match value.unwrap_or("") {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            "Strict" => Ok(FieldValidation::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, not {other:?}"
            ))),
        }
    }
}

/// A decoded body and the paths of the fields it held twice (the last one wins, as in
/// Go's decoder).
#[derive(Debug)]
pub struct Decoded {
    pub value: Value,
    pub duplicates: Vec<String>,
}

/// Decodes a body of `body_type` within [`MAX_DECODED_BYTES`].
///
/// # Errors
/// 400 for a body that is not JSON (or YAML, or protobuf), naming where it breaks; 413 for
/// one whose values (or YAML events) would take more than the budget.
pub fn decode(body_type: BodyType, bytes: &[u8]) -> Result<Decoded, ApiError> {
    decode_within(body_type, bytes, MAX_DECODED_BYTES)
}

/// The memory one YAML parser event is charged (an event and its position take about 100
/// bytes in serde_yaml_ng's list, with the list's growth slack).
const YAML_EVENT: usize = 96;

/// The 413 for a body over the decode budget of `limit` bytes.
fn over_budget(what: &str, limit: usize) -> ApiError {
    let mut error = ApiError::too_large(MAX_BODY_BYTES);
    error.message = format!(
        "the request body {what} more than {limit} bytes of memory once decoded, the most one \
         request may decode to (about 21 x the {MAX_BODY_BYTES}-byte body limit): it holds too many \
         small values for its size"
    );
    error
}

/// [`decode`] with a budget of `limit` bytes.
fn decode_within(body_type: BodyType, bytes: &[u8], limit: usize) -> Result<Decoded, ApiError> {
    if body_type == BodyType::Protobuf {
        // A protobuf message cannot hold a field twice (the last one wins on the wire).
        return Ok(Decoded {
            value: protobuf::decode(bytes, crate::apiserver::resources::protobuf_of)?,
            duplicates: Vec::new(),
        });
    }
    let mut duplicates = BTreeSet::new();
    let mut budget = MemoryBudget::new(limit);
    let tracking = Tracking {
        path: String::new(),
        duplicates: &mut duplicates,
        budget: &mut budget,
    };
    let over = |budget: &MemoryBudget| budget.spent() > budget.limit();
    // An apply configuration is YAML, and most clients (kubectl, kube-rs) send it as JSON,
    // which YAML includes: that is read by the JSON decoder, many times faster, and what
    // it cannot read (YAML's own flow style, `{kind: Pod}`) by the YAML one.
    if body_type == BodyType::ApplyPatch
        && bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
    {
        if let Ok(decoded) = decode_within(BodyType::Json, bytes, limit) {
            return Ok(decoded);
        }
    }
    let value = if matches!(body_type, BodyType::Yaml | BodyType::ApplyPatch) {
        if yaml_flow_depth(bytes) > MAX_YAML_FLOW_DEPTH {
            return Err(ApiError::bad_request(format!(
                "the body is not valid YAML: its flow collections ([...], {{...}}) nest deeper \
                 than {MAX_YAML_FLOW_DEPTH}, the most the decoder takes"
            )));
        }
        if yaml_events_estimate(bytes).saturating_mul(YAML_EVENT) > limit {
            return Err(over_budget("would parse into", limit));
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|_| ApiError::bad_request("the YAML body is not UTF-8"))?;
        let decoded = tracking.deserialize(serde_yaml_ng::Deserializer::from_str(text));
        if over(&budget) {
            return Err(over_budget("would take", limit));
        }
        decoded.map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))?
    } else {
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        let decoded = tracking
            .deserialize(&mut deserializer)
            .and_then(|v| deserializer.end().map(|()| v));
        if over(&budget) {
            return Err(over_budget("would take", limit));
        }
        decoded.map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?
    };
    Ok(Decoded {
        value,
        duplicates: duplicates.into_iter().collect(),
    })
}

/// The deepest nesting of flow collections a YAML body may have: serde_yaml_ng refuses
/// values nested deeper than 128 anyway, but only after libyaml has scanned them, which takes
/// time quadratic in the depth of flow mappings (100,000 deep took minutes).
const MAX_YAML_FLOW_DEPTH: usize = 128;

/// The deepest nesting of `[` and `{` that start a token in `text` (after a blank, another
/// bracket, a comma or a `: ` / `- ` indicator), each `]` and `}` closing one. Brackets in
/// quoted strings and block scalars count too, so text with more than 128 unclosed brackets
/// after blanks would be refused; structure is never undercounted.
fn yaml_flow_depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for (index, &byte) in text.iter().enumerate() {
        let previous = index.checked_sub(1).map(|i| text[i]);
        let after_token = previous.is_none_or(|p| {
            matches!(
                p,
                b' ' | b'\t' | b'\r' | b'\n' | b'[' | b'{' | b',' | b':' | b'-' | b'?'
            )
        });
        match byte {
            b'[' | b'{' if after_token => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// An upper estimate of the events a YAML parser makes of `text`, counted from its bytes
/// without parsing: every event needs a byte that announces it, and each such byte is
/// charged the most events it can bring. A scalar starts a run of non-blank bytes (1); `[`
/// and `{` open a collection (1); `]` and `}` close it, perhaps after an empty value (2); `,`
/// may end a flow-map entry without a value (1); `- ` may start and end a block sequence (2),
/// and `: ` a map (2), as `:` does after a quote or bracket (a JSON-like key) or an alias or
/// anchor name; either brings an empty scalar more when nothing follows it on its line, and
/// `: ` another when no key precedes it; `? ` counts 4. Quoted strings, block scalars and
/// comments are counted as if they were structure, so text full of indicators is
/// overcounted, never the structure undercounted.
fn yaml_events_estimate(text: &[u8]) -> usize {
    let blank = |byte: Option<&u8>| matches!(byte, None | Some(b' ' | b'\t' | b'\r' | b'\n'));
    let separator = |byte: u8| matches!(byte, b'[' | b']' | b'{' | b'}' | b',' | b'"' | b'\'');
    // Whether nothing but spaces, a comment or the end of a flow entry follows `index`.
    let nothing_follows = |index: usize| {
        let rest = &text[index.min(text.len())..];
        let next = rest.iter().find(|&&byte| byte != b' ' && byte != b'\t');
        matches!(next, None | Some(b'\r' | b'\n' | b'#' | b',' | b']' | b'}'))
    };
    let mut events = 1; // an empty document is one event
    let mut run_start = None;
    // Whether the byte before was an indicator: what follows it starts a token.
    let mut after_indicator = false;
    for (index, &byte) in text.iter().enumerate() {
        let previous = index.checked_sub(1).map(|i| text[i]);
        let next = text.get(index + 1);
        if blank(Some(&byte)) {
            run_start = None;
            continue;
        }
        let after_token =
            after_indicator || previous.is_none_or(|p| blank(Some(&p)) || separator(p));
        after_indicator = false;
        if after_token {
            run_start = Some(byte);
        }
        let empty_value = || usize::from(nothing_follows(index + 1));
        events += match byte {
            b'[' | b'{' => 1,
            b']' | b'}' => 2,
            b',' => 1,
            b'-' if blank(next) => 2 + empty_value(),
            b'?' if blank(next) => {
                after_indicator = true;
                4
            }
            b':' if blank(next) || after_token || matches!(run_start, Some(b'*' | b'&')) => {
                let empty_key =
                    previous.is_none_or(|p| blank(Some(&p)) || matches!(p, b'[' | b'{' | b','));
                after_indicator = true;
                2 + usize::from(empty_key) + empty_value()
            }
            _ => usize::from(after_token),
        };
    }
    events
}

/// Builds a [`Value`] within a [`MemoryBudget`] and records the path of every key an object
/// repeats.
struct Tracking<'a> {
    path: String,
    duplicates: &'a mut BTreeSet<String>,
    budget: &'a mut MemoryBudget,
}

impl Tracking<'_> {
    fn child(&mut self, segment: &str) -> Tracking<'_> {
        let path = if self.path.is_empty() {
            segment.to_string()
        } else if segment.starts_with('[') {
            format!("{}{segment}", self.path)
        } else {
            format!("{}.{segment}", self.path)
        };
        Tracking {
            path,
            duplicates: self.duplicates,
            budget: self.budget,
        }
    }

    /// Charges `bytes`, or fails the decode once the budget is spent (the caller then
    /// answers 413, whatever the decoder makes of the error).
    fn charge<E: serde::de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        if self.budget.charge(bytes) {
            Ok(())
        } else {
            Err(E::custom("the decode budget is spent"))
        }
    }
}

impl<'de> DeserializeSeed<'de> for Tracking<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(
        mut self,
        deserializer: D,
    ) -> Result<Value, D::Error> {
        // The root's slot; every other value's is charged by its array or object.
        if self.path.is_empty() {
            self.charge::<D::Error>(Cost::VALUE)?;
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tracking<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E: serde::de::Error>(mut self, v: &str) -> Result<Value, E> {
        self.charge(Cost::string(v.len()))?;
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: serde::de::Error>(mut self, v: String) -> Result<Value, E> {
        self.charge(Cost::string(v.len()))?;
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child(&format!("[{}]", items.len())))? {
            // The item's contents were charged as it was built; its slot is charged as the
            // array grows.
            let growth = Cost::array(items.len() + 1) - Cost::array(items.len());
            self.charge::<A::Error>(growth)?;
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // Charged before the value is built: the key, and the entry as the map grows
            // (a repeated key is charged again; the last one wins).
            let growth = Cost::object(object.len() + 1) - Cost::object(object.len());
            self.charge::<A::Error>(growth + Cost::string(key.len()))?;
            let value = map.next_value_seed(self.child(&key))?;
            if object.insert(key.clone(), value).is_some() {
                let path = self.child(&key).path;
                self.duplicates.insert(path);
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_fields_are_found_with_their_paths_and_the_last_wins() {
        let decoded = decode(
            BodyType::Json,
            br#"{"metadata":{"name":"a","name":"b"},"spec":{"containers":[{"image":"x","image":"y"}]}}"#,
        )
        .unwrap();
        assert_eq!(decoded.value["metadata"]["name"], "b");
        assert_eq!(
            decoded.duplicates,
            ["metadata.name", "spec.containers[0].image"]
        );
        assert!(decode(BodyType::Json, b"{").is_err());
        let yaml = decode(
            BodyType::Yaml,
            b"metadata:\n  name: a\n  name: b\nspec:\n  replicas: 3\n",
        )
        .unwrap();
        assert_eq!(yaml.value["metadata"]["name"], "b");
        assert_eq!(yaml.value["spec"]["replicas"], 3);
        assert_eq!(yaml.duplicates, ["metadata.name"]);
        assert!(decode(BodyType::Json, b"{} x").is_err());
    }

    /// A pod template's containers, `n` of them, as JSON.
    fn containers(n: usize) -> Value {
        let containers: Vec<Value> = (0..n)
            .map(|i| {
                serde_json::json!({"name": format!("c{i}"), "image": "nginx:1.25",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "100m"}},
                    "env": [{"name": "A", "value": "b"}, {"name": "B", "value": "c"}],
                    "imagePullPolicy": "IfNotPresent"})
            })
            .collect();
        serde_json::json!({"spec": {"containers": containers}})
    }

    #[test]
    fn a_body_of_tiny_objects_is_refused_once_its_budget_is_spent() {
        let limit = 4 << 20;
        let tiny = format!("[{}{{}}]", "{},".repeat(60_000));
        for body_type in [BodyType::Json, BodyType::Yaml] {
            let refused = decode_within(body_type, tiny.as_bytes(), limit).unwrap_err();
            assert_eq!(
                (refused.code, refused.reason),
                (413, "RequestEntityTooLarge")
            );
            assert!(refused.message.contains("4194304"), "{}", refused.message);
        }
        // The same budget holds realistic objects of the same size and more.
        let realistic = serde_json::to_vec(&containers(900)).unwrap();
        assert!(realistic.len() > tiny.len());
        let decoded = decode_within(BodyType::Json, &realistic, limit).unwrap();
        assert_eq!(decoded.value["spec"]["containers"][899]["name"], "c899");
        // YAML's events are estimated high (about 26 x the body for these): a third of it.
        let yaml = serde_yaml_ng::to_string(&containers(300)).unwrap();
        let decoded = decode_within(BodyType::Yaml, yaml.as_bytes(), limit).unwrap();
        assert_eq!(decoded.value["spec"]["containers"][299]["name"], "c299");
        // A body that is not JSON still says so.
        let broken = decode_within(BodyType::Json, b"[{}, {}", limit).unwrap_err();
        assert_eq!(broken.code, 400);
    }

    #[test]
    fn the_decode_budget_takes_a_realistic_body_at_the_size_limit() {
        let mut n = 1000;
        let body = loop {
            let body = serde_json::to_vec(&containers(n)).unwrap();
            if body.len() > MAX_BODY_BYTES - 10_000 {
                break body;
            }
            n += 1000;
        };
        assert!(decode(BodyType::Json, &body).is_ok());
    }

    #[test]
    fn yaml_flow_collections_deeper_than_128_are_refused_before_parsing() {
        let deep = |depth: usize| format!("{}x{}", "{a: ".repeat(depth), "}".repeat(depth));
        assert_eq!(yaml_flow_depth(deep(128).as_bytes()), 128);
        assert_eq!(yaml_flow_depth(b"a: [1, {b: [2]}]\nc: [x[y], z]\n"), 3);
        let refused = decode(BodyType::Yaml, deep(100_000).as_bytes()).unwrap_err();
        assert_eq!(refused.code, 400);
        assert!(refused.message.contains("128"), "{}", refused.message);
    }

    #[track_caller]
    fn check_yaml_estimate(text: &str, events: usize, at_most: usize) {
        let estimate = yaml_events_estimate(text.as_bytes());
        assert!(
            (events..=at_most).contains(&estimate),
            "{text:?}: estimated {estimate}, has {events}, expected at most {at_most}"
        );
    }

    #[test]
    fn yaml_events_are_never_underestimated() {
        // (text, the events it parses to, the most the estimate may say)
        check_yaml_estimate("", 1, 1);
        check_yaml_estimate("a", 1, 2);
        check_yaml_estimate("[{}, {}]", 6, 12);
        check_yaml_estimate("{a}", 4, 5);
        check_yaml_estimate("{a,b}", 6, 8);
        check_yaml_estimate("[a: b]", 6, 10);
        check_yaml_estimate("[\"a\":b]", 6, 10);
        check_yaml_estimate("[\"a\":b, \"a\":b]", 10, 16);
        check_yaml_estimate("- :\n- :\n", 10, 16);
        check_yaml_estimate("- \n-\n", 4, 8);
        check_yaml_estimate("? a\n: b\n", 4, 12);
        check_yaml_estimate("&x a: [*x:b]", 9, 16);
        check_yaml_estimate("image: nginx:1.25\nurl: http://x/y\n", 6, 14);
        check_yaml_estimate("a:\n  b:\n    - 1\n    - 2\n", 10, 20);
    }

    #[test]
    fn an_apply_configuration_in_json_or_yaml_decodes_to_the_same_object_with_its_duplicates() {
        let json = br#" {"kind": "ConfigMap", "data": {"a": "1", "a": "2"}}"#;
        let yaml = b"kind: ConfigMap\ndata:\n  a: \"1\"\n  a: \"2\"\n";
        let (from_json, from_yaml) = (
            decode(BodyType::ApplyPatch, json).unwrap(),
            decode(BodyType::ApplyPatch, yaml).unwrap(),
        );
        assert_eq!(from_json.value, from_yaml.value);
        assert_eq!(from_json.duplicates, from_yaml.duplicates);
        assert_eq!(from_json.duplicates, ["data.a"]);
        // YAML's flow style starts like JSON and is not.
        let flow = decode(BodyType::ApplyPatch, b"{kind: ConfigMap, data: {a: '1'}}").unwrap();
        assert_eq!(
            flow.value,
            serde_json::json!({"kind": "ConfigMap", "data": {"a": "1"}})
        );
        let neither = decode(BodyType::ApplyPatch, b"{\n  :: [").unwrap_err();
        assert!(
            neither.message.contains("not valid YAML"),
            "{}",
            neither.message
        );
    }

    #[test]
    fn content_types_choose_the_decoder_and_an_apply_configuration_is_a_patch() {
        let with = |ct: &str| {
            let mut headers = HeaderMap::new();
            if !ct.is_empty() {
                headers.insert(header::CONTENT_TYPE, ct.parse().unwrap());
            }
            headers
        };
        assert_eq!(body_type(&with(""), false), Ok(BodyType::Json));
        assert_eq!(
            body_type(&with("application/json; charset=utf-8"), false),
            Ok(BodyType::Json)
        );
        assert_eq!(
            body_type(&with("application/yaml"), false),
            Ok(BodyType::Yaml)
        );
        assert_eq!(
            body_type(&with("application/strategic-merge-patch+json"), true),
            Ok(BodyType::StrategicMergePatch)
        );
        assert_eq!(
            body_type(&with("application/apply-patch+yaml"), true),
            Ok(BodyType::ApplyPatch)
        );
        // An apply configuration is a patch: a POST or PUT body cannot be one.
        assert_eq!(
            body_type(&with("application/apply-patch+yaml"), false)
                .unwrap_err()
                .code,
            415
        );
        assert_eq!(
            body_type(&with("application/vnd.kubernetes.protobuf"), false),
            Ok(BodyType::Protobuf)
        );
        assert_eq!(
            body_type(&with("application/vnd.kubernetes.protobuf"), true)
                .unwrap_err()
                .code,
            415
        );
        assert_eq!(
            body_type(&with("application/json"), true).unwrap_err().code,
            415
        );
    }
}
