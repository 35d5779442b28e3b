//! The JSON schemas a skill declares in `skill.toml` (its arguments' `[schema]`, its result's
//! `[outputs]`): TOML tables turned into JSON, and the shape every such schema must have.

use serde_json::{Map, Value};

/// A TOML value as JSON, or the dotted key and the problem where it has no JSON form.
pub fn toml_to_json(value: &toml::Value, key: &str) -> Result<Value, (String, String)> {
    Ok(match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => Value::Number(n),
            None => return Err((key.to_string(), format!("is {f}, which JSON cannot hold"))),
        },
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => {
            return Err((
                key.to_string(),
                format!("is the date-time {d}, which JSON cannot hold (quote it)"),
            ));
        }
        toml::Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| toml_to_json(v, &format!("{key}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(table) => Value::Object(
            table
                .iter()
                .map(|(k, v)| Ok((k.clone(), toml_to_json(v, &format!("{key}.{k}"))?)))
                .collect::<Result<Map<_, _>, (String, String)>>()?,
        ),
    })
}

/// The shape every argument schema must have: an object schema whose `properties` are
/// schemas and whose `required` names strings (among the properties, when they are listed).
/// On failure: the JSON pointer, the problem and what is expected.
pub fn check_schema(schema: &Value) -> Result<(), (String, String, &'static str)> {
    const OBJECT: &str = "a JSON object schema: {\"type\": \"object\", \"properties\": {...}}";
    let Some(top) = schema.as_object() else {
        return Err((String::new(), format!("is {}", json_kind(schema)), OBJECT));
    };
    match top.get("type") {
        Some(Value::String(t)) if t == "object" => {}
        Some(other) => {
            return Err((
                "/type".into(),
                format!("is {other}"),
                "\"object\": a skill takes its arguments as one JSON object",
            ));
        }
        None => {
            return Err((
                "/type".into(),
                "is missing".into(),
                "\"object\": a skill takes its arguments as one JSON object",
            ));
        }
    }
    let properties = match top.get("properties") {
        None => None,
        Some(Value::Object(props)) => {
            if let Some((name, value)) = props.iter().find(|(_, v)| !v.is_object()) {
                return Err((
                    format!("/properties/{name}"),
                    format!("is {}", json_kind(value)),
                    "a schema (a JSON object) for each property",
                ));
            }
            Some(props)
        }
        Some(other) => {
            return Err((
                "/properties".into(),
                format!("is {}", json_kind(other)),
                "an object mapping each argument's name to its schema",
            ));
        }
    };
    if let Some(required) = top.get("required") {
        let names = required
            .as_array()
            .filter(|a| a.iter().all(Value::is_string));
        let Some(names) = names else {
            return Err((
                "/required".into(),
                format!("is {required}"),
                "an array of argument names",
            ));
        };
        if let Some(props) = properties
            && let Some(missing) = names
                .iter()
                .filter_map(Value::as_str)
                .find(|n| !props.contains_key(*n))
        {
            return Err((
                "/required".into(),
                format!("names `{missing}`, which is not among the properties"),
                "names of arguments listed under `properties`",
            ));
        }
    }
    if let Some(additional) = top.get("additionalProperties")
        && !additional.is_boolean()
        && !additional.is_object()
    {
        return Err((
            "/additionalProperties".into(),
            format!("is {}", json_kind(additional)),
            "`true`, `false` or a schema",
        ));
    }
    Ok(())
}

pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
