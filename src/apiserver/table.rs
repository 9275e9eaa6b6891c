//! STUB: replaced by the helper's module.
use serde_json::Value;
#[derive(Clone, Copy, Debug)]
pub enum IncludeObject { None, Metadata, Object }
#[allow(clippy::too_many_arguments)]
pub fn table(_resource: &str, _objects: &[Value], _include: IncludeObject, _now: std::time::SystemTime, _rv: &str, _cont: Option<&str>, _remaining: Option<i64>, _with_columns: bool) -> Value { Value::Null }
