//! The JSON Schema of `report --json`, generated from the report model's
//! types (schemars), and the field tables of docs/report-json.md generated
//! from that schema: the types are the one source of truth, their doc
//! comments the descriptions.
//!
//! Every object of the schema is closed (`additionalProperties: false`),
//! so that a report holding a field the schema does not name fails
//! validation: a field added to the model without its description shows
//! up as a stale schema file, not as an undocumented key. The schema is
//! shipped as `docs/report.schema.json` and printed by
//! `hoptrace report --json-schema`; the tests validate the reports they
//! write against it.

use std::fmt::Write;

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::Schema;
use serde_json::{Map, Value};

use super::model::Report;

/// The schema of a report, as JSON (draft 2020-12).
pub fn report_schema() -> Value {
    let settings = SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(RecursiveTransform(closed_objects));
    let schema = settings.into_generator().into_root_schema_for::<Report>();
    schema.to_value()
}

/// The schema as the shipped file holds it: pretty JSON, a final newline.
pub fn report_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&report_schema()).unwrap_or_default();
    s.push('\n');
    s
}

/// An object schema with properties admits no other property.
fn closed_objects(s: &mut Schema) {
    if s.get("properties").is_some() && s.get("additionalProperties").is_none() {
        s.insert("additionalProperties".into(), Value::Bool(false));
    }
}

/// The field tables: one per object type, the report first, then its
/// parts in the order they are first named; each field with its JSON type
/// (other objects linked to their table) and its description.
pub fn field_tables(schema: &Value) -> String {
    let empty = Map::new();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let title = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("Report");
    let mut order: Vec<(String, &Value)> = vec![(title.to_string(), schema)];
    let mut out = String::new();
    let mut i = 0;
    while i < order.len() {
        let (name, obj) = (order[i].0.clone(), order[i].1);
        i += 1;
        let _ = writeln!(out, "### {name}\n");
        if let Some(d) = obj.get("description").and_then(Value::as_str) {
            let _ = writeln!(out, "{}\n", one_line(d));
        }
        let _ = writeln!(out, "| field | type | description |\n|---|---|---|");
        let props = obj.get("properties").and_then(Value::as_object);
        let required = obj.get("required").and_then(Value::as_array);
        for (field, p) in props.into_iter().flatten() {
            let mut named = Vec::new();
            let mut ty = type_of(p, &mut named);
            if !required.is_some_and(|r| r.iter().any(|x| x == field)) {
                ty.push_str(", may be absent");
            }
            for n in named {
                if !order.iter().any(|(o, _)| *o == n) {
                    if let Some(d) = defs.get(&n) {
                        order.push((n, d));
                    }
                }
            }
            let desc = p.get("description").and_then(Value::as_str).unwrap_or("");
            let _ = writeln!(
                out,
                "| `{field}` | {ty} | {} |",
                one_line(desc).replace('|', "\\|")
            );
        }
        out.push('\n');
    }
    out
}

/// A description on one line (doc comments wrap).
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A property's JSON type in words: `integer`, `string or null`,
/// `[Hop]`, an object linked to its table; `named` gets the objects named.
fn type_of(p: &Value, named: &mut Vec<String>) -> String {
    if let Some(r) = p.get("$ref").and_then(Value::as_str) {
        let n = r.rsplit('/').next().unwrap_or(r).to_string();
        let link = format!("[{n}](#{})", n.to_lowercase());
        named.push(n);
        return link;
    }
    if let Some(alts) = p
        .get("anyOf")
        .or_else(|| p.get("oneOf"))
        .and_then(Value::as_array)
    {
        let words: Vec<String> = alts.iter().map(|a| type_of(a, named)).collect();
        return words.join(" or ");
    }
    if let Some(c) = p.get("const") {
        return format!("`{c}`");
    }
    let types: Vec<&str> = match p.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let words: Vec<String> = types
        .iter()
        .map(|t| match *t {
            "array" => format!(
                "[{}]",
                p.get("items").map_or("any".into(), |i| type_of(i, named))
            ),
            "object" => match p.get("additionalProperties") {
                Some(v @ Value::Object(_)) => format!("map of {}", type_of(v, named)),
                _ => "object".into(),
            },
            "number" => "float".into(),
            t => t.to_string(),
        })
        .collect();
    if words.is_empty() {
        "any".into()
    } else {
        words.join(" or ")
    }
}

#[cfg(test)]
mod tests {
    use super::{field_tables, report_schema, report_schema_text};
    use std::path::Path;

    /// The docs folder of the repository.
    fn docs() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
    }

    /// The generated part of docs/report-json.md: between these lines.
    const BEGIN: &str = "<!-- fields: generated from the report's types, see report::schema -->\n";
    const END: &str = "<!-- end of the generated fields -->\n";

    /// Write `fresh` to `path` when HOPTRACE_BLESS is set, else require
    /// that the file holds it already.
    fn check_or_bless(path: &Path, current: &str, fresh: &str) {
        if std::env::var_os("HOPTRACE_BLESS").is_some() {
            std::fs::write(path, fresh).unwrap();
            return;
        }
        assert!(
            current == fresh,
            "{} is stale: the report's types changed. Regenerate it with \
             `HOPTRACE_BLESS=1 cargo test -p hoptrace-analysis --lib schema`",
            path.display()
        );
    }

    #[test]
    fn the_shipped_schema_is_the_one_the_types_generate() {
        let path = docs().join("report.schema.json");
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        check_or_bless(&path, &current, &report_schema_text());
    }

    #[test]
    fn the_documented_fields_are_the_ones_the_types_generate() {
        let path = docs().join("report-json.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (head, rest) = doc
            .split_once(BEGIN)
            .expect("the generated part's first line");
        let (_, tail) = rest
            .split_once(END)
            .expect("the generated part's last line");
        let fresh = format!("{head}{BEGIN}{}{END}{tail}", field_tables(&report_schema()));
        check_or_bless(&path, &doc, &fresh);
    }

    #[test]
    fn every_field_of_every_object_has_a_description() {
        let schema = report_schema();
        let tables = field_tables(&schema);
        let bare: Vec<&str> = tables.lines().filter(|l| l.ends_with("|  |")).collect();
        assert!(
            bare.is_empty(),
            "fields without a doc comment:\n{}",
            bare.join("\n")
        );
    }

    #[test]
    fn objects_are_closed_so_an_unknown_field_fails_validation() {
        let schema = report_schema();
        assert_eq!(schema["additionalProperties"], false);
        let defs = schema["$defs"].as_object().unwrap();
        for (name, d) in defs {
            if d.get("properties").is_some() {
                assert_eq!(d["additionalProperties"], false, "{name}");
            }
        }
    }
}
