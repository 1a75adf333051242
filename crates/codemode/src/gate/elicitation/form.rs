//! The form of a form-mode elicitation: its fields, their defaults, and
//! checking values against the requested schema.
//!
//! MCP 2025-11-25 (client/elicitation, "Supported Schema Types") restricts
//! the requested schema to a flat object whose properties are strings
//! (optionally with `format`, `minLength`, `maxLength`), numbers and
//! integers (optionally with `minimum`, `maximum`), booleans, single-select
//! enums (`enum`, optionally titled by the legacy `enumNames`, or `oneOf`
//! of `{const, title}`) and multi-select enums (`type: array` with
//! `items.enum` or `items.anyOf` of `{const, title}`); each may carry a
//! `default` (SEP-1034). Checking values is JSON Schema validation of the
//! whole answer against the requested schema (the `jsonschema` crate, through
//! `catalog::schema_validator`, which fetches nothing).

use serde_json::{Map, Value};

/// One field of a form, in the order of the schema's `properties` (which
/// reach codemode as a JSON object, so in name order).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    /// The property name: the key of the answer's content.
    pub name: String,
    /// What kind of value it takes.
    pub kind: Kind,
    /// Whether the schema's `required` lists it.
    pub required: bool,
    /// The schema's `default`, when it has one.
    pub default: Option<Value>,
    /// The property's `title` and `description`, joined (server text).
    pub label: Option<String>,
    /// The property's schema, for checking a value.
    pub schema: Value,
}

/// The kind of value a field takes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A string.
    Text,
    /// A whole number.
    Integer,
    /// A number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// One of these values.
    Choice(Vec<Choice>),
    /// Any number of these values (a JSON array).
    Choices(Vec<Choice>),
}

impl Kind {
    /// The kind's name as the prompt shows it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::Boolean => "yes/no",
            Kind::Choice(_) => "one of",
            Kind::Choices(_) => "any of",
        }
    }
}

/// One value of an enum field, and its title when the schema gives one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Choice {
    pub value: String,
    pub title: Option<String>,
}

/// The fields of `schema` (a form's requested schema).
///
/// # Errors
///
/// A sentence when the schema is not an object schema, or a property is not
/// one of the kinds a form can ask (a nested object, an array that is not a
/// multi-select enum, a type it does not name).
pub(crate) fn fields(schema: &Value) -> Result<Vec<Field>, String> {
    let Some(object) = schema.as_object() else {
        return Err("the requested schema is not a JSON object".to_owned());
    };
    if object.get("type").is_some_and(|t| t != "object") {
        return Err("the requested schema is not of type `object`".to_owned());
    }
    let required: Vec<&str> = object
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = object.get("properties") else { return Ok(Vec::new()) };
    let Some(properties) = properties.as_object() else {
        return Err("the requested schema's `properties` is not an object".to_owned());
    };
    properties
        .iter()
        .map(|(name, property)| {
            let kind = kind_of(property).ok_or_else(|| {
                let ty = property.get("type").map_or_else(|| "none".to_owned(), Value::to_string);
                format!("field `{name}` has type {ty}, which a form cannot ask")
            })?;
            let text = |key: &str| property.get(key).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
            let label = match (text("title"), text("description")) {
                (Some(t), Some(d)) if t != d => Some(format!("{t}: {d}")),
                (Some(t), _) => Some(t.to_owned()),
                (None, d) => d.map(str::to_owned),
            };
            Ok(Field {
                name: name.clone(),
                kind,
                required: required.contains(&name.as_str()),
                default: property.get("default").cloned(),
                label,
                schema: property.clone(),
            })
        })
        .collect()
}

/// The kind of a property's schema, `None` when a form cannot ask it.
fn kind_of(property: &Value) -> Option<Kind> {
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        let titles = property.get("enumNames").and_then(Value::as_array).filter(|t| t.len() == values.len());
        let choices = values
            .iter()
            .enumerate()
            .map(|(i, v)| Choice {
                value: v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                title: titles.and_then(|t| t[i].as_str()).map(str::to_owned),
            })
            .collect();
        return Some(Kind::Choice(choices));
    }
    if let Some(options) = property.get("oneOf").and_then(Value::as_array) {
        return const_titles(options).map(Kind::Choice);
    }
    match property.get("type").and_then(Value::as_str)? {
        "string" => Some(Kind::Text),
        "integer" => Some(Kind::Integer),
        "number" => Some(Kind::Number),
        "boolean" => Some(Kind::Boolean),
        "array" => {
            let items = property.get("items")?;
            if let Some(values) = items.get("enum").and_then(Value::as_array) {
                let choices = values
                    .iter()
                    .map(|v| Choice {
                        value: v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                        title: None,
                    })
                    .collect();
                return Some(Kind::Choices(choices));
            }
            let options = items.get("anyOf").or_else(|| items.get("oneOf"))?.as_array()?;
            const_titles(options).map(Kind::Choices)
        }
        _ => None,
    }
}

/// `[{const, title}]` as choices; `None` when an entry has no string `const`.
fn const_titles(options: &[Value]) -> Option<Vec<Choice>> {
    options
        .iter()
        .map(|o| {
            Some(Choice {
                value: o.get("const")?.as_str()?.to_owned(),
                title: o.get("title").and_then(Value::as_str).map(str::to_owned),
            })
        })
        .collect()
}

/// The answer made of the fields' defaults (what the `allow` approver
/// sends): every field with a `default`, at its default.
///
/// # Errors
///
/// A sentence naming the required fields that have no default (nobody can
/// fill them in).
pub(crate) fn defaults(fields: &[Field]) -> Result<Map<String, Value>, String> {
    let missing: Vec<String> = fields
        .iter()
        .filter(|f| f.required && f.default.is_none())
        .map(|f| format!("`{}`", f.name))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "required field{} {} {} no default",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "has" } else { "have" }
        ));
    }
    Ok(fields.iter().filter_map(|f| Some((f.name.clone(), f.default.clone()?))).collect())
}

/// Checks `content` against the requested `schema` (JSON Schema).
///
/// # Errors
///
/// A sentence per problem (at most 8), naming the field and the schema
/// keyword it fails, never the value (an answer may be personal).
pub(crate) fn check(schema: &Value, content: &Map<String, Value>) -> Result<(), String> {
    let validator = crate::catalog::schema_validator(schema)
        .map_err(|e| format!("the requested schema is not valid JSON Schema: {e}"))?;
    let instance = Value::Object(content.clone());
    let problems: Vec<String> = validator
        .iter_errors(&instance)
        .take(8)
        .map(|e| {
            let at = e.instance_path().to_string();
            let keyword = e.kind().keyword().to_owned();
            if at.is_empty() {
                format!("the answer fails `{keyword}`")
            } else {
                format!("{at} fails `{keyword}`")
            }
        })
        .collect();
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// Checks one field's `value` against its schema, for the prompt: the
/// messages may show the value (the person who typed it reads them).
///
/// # Errors
///
/// The validator's messages, joined.
pub(crate) fn check_field(field: &Field, value: &Value) -> Result<(), String> {
    let validator = crate::catalog::schema_validator(&field.schema)
        .map_err(|e| format!("the field's schema is not valid: {e}"))?;
    let problems: Vec<String> = validator.iter_errors(value).take(4).map(|e| e.to_string()).collect();
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// Reads what a person typed for `field` (without its line end). `None`
/// for an empty line (the caller takes the default).
///
/// # Errors
///
/// What is wrong with the text, for the person to try again.
pub(crate) fn parse_input(field: &Field, text: &str) -> Result<Option<Value>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let value = match &field.kind {
        Kind::Text => Value::String(text.to_owned()),
        Kind::Integer => {
            let n: i64 = text.parse().map_err(|_| format!("`{text}` is not a whole number"))?;
            Value::from(n)
        }
        Kind::Number => {
            let n: f64 = text.parse().map_err(|_| format!("`{text}` is not a number"))?;
            serde_json::Number::from_f64(n)
                .map(Value::Number)
                .ok_or_else(|| format!("`{text}` is not a finite number"))?
        }
        Kind::Boolean => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return Err("answer y or n".to_owned()),
        },
        Kind::Choice(choices) => Value::String(pick(choices, text)?),
        Kind::Choices(choices) => Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| pick(choices, p).map(Value::String))
                .collect::<Result<_, _>>()?,
        ),
    };
    check_field(field, &value)?;
    Ok(Some(value))
}

/// The choice `text` names: its value, or its number in the list (1-based).
fn pick(choices: &[Choice], text: &str) -> Result<String, String> {
    if let Some(c) = choices.iter().find(|c| c.value == text) {
        return Ok(c.value.clone());
    }
    if let Ok(n) = text.parse::<usize>()
        && let Some(c) = n.checked_sub(1).and_then(|i| choices.get(i))
    {
        return Ok(c.value.clone());
    }
    Err(format!("`{text}` is not one of the choices; type a value or its number"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The form of the conformance scenario elicitation-sep1034-client-defaults.
    fn sep1034() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true}
        }, "required": []})
    }

    #[test]
    fn defaults_fill_every_kind_with_its_type() {
        let fields = fields(&sep1034()).unwrap();
        let content = defaults(&fields).unwrap();
        assert_eq!(
            Value::Object(content.clone()),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true})
        );
        assert!(content["age"].is_i64() && content["score"].is_f64());
        check(&sep1034(), &content).unwrap();
    }

    #[test]
    fn a_required_field_without_a_default_cannot_be_filled() {
        let schema = json!({"type": "object", "properties": {
            "email": {"type": "string", "format": "email"}, "n": {"type": "integer", "default": 1}
        }, "required": ["email"]});
        let err = defaults(&fields(&schema).unwrap()).unwrap_err();
        assert_eq!(err, "required field `email` has no default");
    }

    #[test]
    fn kinds_are_read_from_every_enum_spelling() {
        let schema = json!({"type": "object", "properties": {
            "legacy": {"type": "string", "enum": ["a", "b"], "enumNames": ["A", "B"]},
            "titled": {"type": "string", "oneOf": [{"const": "x", "title": "Ex"}]},
            "many": {"type": "array", "items": {"type": "string", "enum": ["p", "q"]}},
            "many_titled": {"type": "array", "items": {"anyOf": [{"const": "r", "title": "Ar"}]}},
        }});
        let fields = fields(&schema).unwrap();
        let kind = |n: &str| fields.iter().find(|f| f.name == n).unwrap().kind.clone();
        assert_eq!(
            kind("legacy"),
            Kind::Choice(vec![
                Choice { value: "a".into(), title: Some("A".into()) },
                Choice { value: "b".into(), title: Some("B".into()) }
            ])
        );
        assert_eq!(
            kind("titled"),
            Kind::Choice(vec![Choice { value: "x".into(), title: Some("Ex".into()) }])
        );
        assert!(matches!(kind("many"), Kind::Choices(c) if c.len() == 2));
        assert!(matches!(kind("many_titled"), Kind::Choices(c) if c[0].value == "r"));
        let nested = json!({"type": "object", "properties": {"o": {"type": "object"}}});
        assert_eq!(
            super::fields(&nested).unwrap_err(),
            "field `o` has type \"object\", which a form cannot ask"
        );
    }

    #[test]
    fn typed_input_is_parsed_and_checked() {
        let schema = json!({"type": "object", "properties": {
            "age": {"type": "integer", "minimum": 0},
            "status": {"type": "string", "enum": ["active", "inactive"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}},
            "ok": {"type": "boolean"},
            "score": {"type": "number"},
        }});
        let fields = fields(&schema).unwrap();
        let f = |n: &str| fields.iter().find(|f| f.name == n).unwrap();
        assert_eq!(parse_input(f("age"), " 42 ").unwrap(), Some(json!(42)));
        assert!(parse_input(f("age"), "forty").unwrap_err().contains("not a whole number"));
        assert!(parse_input(f("age"), "-1").unwrap_err().contains("minimum"), "the schema's bound holds");
        assert_eq!(parse_input(f("status"), "2").unwrap(), Some(json!("inactive")));
        assert_eq!(parse_input(f("status"), "active").unwrap(), Some(json!("active")));
        assert!(parse_input(f("status"), "gone").is_err());
        assert_eq!(parse_input(f("tags"), "a, 3").unwrap(), Some(json!(["a", "c"])));
        assert_eq!(parse_input(f("ok"), "Yes").unwrap(), Some(json!(true)));
        assert_eq!(parse_input(f("score"), "2.5").unwrap(), Some(json!(2.5)));
        assert_eq!(parse_input(f("score"), "").unwrap(), None);
    }

    #[test]
    fn a_check_names_the_field_and_keyword_but_not_the_value() {
        let mut content = Map::new();
        content.insert("age".into(), json!("s3cret"));
        let err = check(&sep1034(), &content).unwrap_err();
        assert_eq!(err, "/age fails `type`");
        let schema = json!({"type": "object", "required": ["x"]});
        assert_eq!(check(&schema, &Map::new()).unwrap_err(), "the answer fails `required`");
    }
}
