//! Go `text/template`, the subset Ollama's template layers are written in: text and
//! actions with trim markers, `if`/`else if`/`else`, `range` (with `$i, $v :=`,
//! `break`, `continue`), `with`, variables, pipelines, parenthesised calls, and the
//! functions `and or not eq ne lt le gt ge len index slice printf print println`
//! plus Ollama's `json`. Our own implementation: no crate renders Go templates well
//! enough to trust with the exact bytes a model was trained on.

mod eval;
mod lex;
mod parse;
mod value;

pub(crate) use value::{go_json, Struct, Value};

use super::template::MAX_RENDERED_BYTES;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct GoTemplateError(String);

impl GoTemplateError {
    fn at(src: &str, offset: usize, msg: &str) -> GoTemplateError {
        let before = &src[..offset.min(src.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        GoTemplateError(format!("line {line}, column {column}: {msg}"))
    }
}

/// A parsed template, rendered once per request.
#[derive(Debug)]
pub(crate) struct GoTemplate {
    nodes: Vec<parse::Node>,
    uses_messages: bool,
}

impl GoTemplate {
    pub(crate) fn parse(src: &str) -> Result<GoTemplate, GoTemplateError> {
        Ok(GoTemplate {
            nodes: parse::parse(src)?,
            uses_messages: src.contains(".Messages"),
        })
    }

    /// Whether the template reads `.Messages` (else it is Ollama's legacy form, fed
    /// `.System`/`.Prompt`/`.Response` one exchange at a time).
    pub(crate) fn uses_messages(&self) -> bool {
        self.uses_messages
    }

    pub(crate) fn render(&self, data: &Value) -> Result<String, GoTemplateError> {
        self.run(data, None)
    }

    /// Renders until the field `name` (`Response`) has been printed: the legacy form's
    /// last exchange ends where the model's reply begins.
    pub(crate) fn render_until(&self, data: &Value, name: &str) -> Result<String, GoTemplateError> {
        self.run(data, Some(name))
    }

    fn run(&self, data: &Value, cut_at: Option<&str>) -> Result<String, GoTemplateError> {
        let mut e = eval::Eval::new(data, MAX_RENDERED_BYTES, cut_at);
        e.nodes(&self.nodes, data).map_err(GoTemplateError)?;
        Ok(e.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(src: &str, data: serde_json::Value) -> String {
        GoTemplate::parse(src)
            .unwrap()
            .render(&Value::from_json(&data))
            .unwrap_or_else(|e| panic!("{src}: {e}"))
    }

    #[test]
    fn go_semantics() {
        let d = json!({"L": ["a", "b", "c"], "M": {"z": 1, "a": 2}, "S": "", "N": 0, "T": "x"});
        assert_eq!(
            render(
                "{{ range $i, $v := .L }}{{ $i }}={{ $v }};{{ end }}",
                d.clone()
            ),
            "0=a;1=b;2=c;"
        );
        // Maps range in key order.
        assert_eq!(
            render(
                "{{ range $k, $v := .M }}{{ $k }}{{ $v }}{{ end }}",
                d.clone()
            ),
            "a2z1"
        );
        assert_eq!(
            render("{{ range .S }}x{{ else }}empty{{ end }}", json!({"S": []})),
            "empty"
        );
        assert_eq!(
            render(
                "{{ if .S }}a{{ else if .N }}b{{ else }}c{{ end }}",
                d.clone()
            ),
            "c"
        );
        assert_eq!(
            render("{{ if and .T (not .S) }}yes{{ end }}", d.clone()),
            "yes"
        );
        assert_eq!(render("{{ or .S .N .T }}", d.clone()), "x");
        assert_eq!(render("{{ and .T .N }}", d.clone()), "0");
        assert_eq!(
            render("{{ len .L }} {{ index .L 1 }} {{ slice .L 1 }}", d.clone()),
            "3 b [b c]"
        );
        assert_eq!(render("{{ eq (len (slice .L 2)) 1 }}", d.clone()), "true");
        assert_eq!(render("{{ eq .T \"y\" \"x\" }}", d.clone()), "true");
        assert_eq!(
            render(
                "{{ $x := \"a\" }}{{ range .L }}{{ $x = printf \"%s%s\" $x . }}{{ end }}{{ $x }}",
                d.clone()
            ),
            "aabc"
        );
        assert_eq!(
            render(
                "{{ range .L }}{{ if eq . \"b\" }}{{ continue }}{{ end }}{{ . }}{{ end }}",
                d.clone()
            ),
            "ac"
        );
        assert_eq!(
            render(
                "{{ range .L }}{{ if eq . \"b\" }}{{ break }}{{ end }}{{ . }}{{ end }}",
                d.clone()
            ),
            "a"
        );
        assert_eq!(
            render(
                "{{ with .T }}[{{ . }}]{{ end }}{{ with .S }}no{{ else }}none{{ end }}",
                d.clone()
            ),
            "[x]none"
        );
        assert_eq!(render("{{ .L | len }}", d.clone()), "3");
        assert_eq!(
            render("{{ json .M }}", json!({"M": {"b": "<&>"}})),
            r#"{"b":"\u003c\u0026\u003e"}"#
        );
        assert_eq!(
            render("{{ range $.L }}{{ $.T }}{{ end }}", d.clone()),
            "xxx"
        );
        assert_eq!(render("{{ .Missing }}|{{ .M.Missing }}", d), "|");
    }

    #[test]
    fn errors_say_what_and_where() {
        let e = GoTemplate::parse("a\n{{ if .X }}").unwrap_err();
        assert!(e.to_string().starts_with("line 2, column 1"), "{e}");
        let t = GoTemplate::parse("{{ nosuch .X }}").unwrap();
        let e = t.render(&Value::Nil).unwrap_err();
        assert!(e.to_string().contains("nosuch"), "{e}");
        let t = GoTemplate::parse("{{ $y = 1 }}").unwrap();
        assert!(t.render(&Value::Nil).is_err());
    }

    #[test]
    fn ranging_over_a_huge_number_runs_out_of_fuel_without_allocating() {
        let t = GoTemplate::parse("{{ range $i, $_ := 7777777777777777771 }}x{{ end }}").unwrap();
        assert!(t.render(&Value::Nil).is_err());
    }

    #[test]
    fn a_template_that_loops_forever_runs_out_of_fuel() {
        let src = "{{ range $a := 100000 }}{{ range $b := 100000 }}x{{ end }}{{ end }}";
        let t = GoTemplate::parse(src).unwrap();
        let e = t.render(&Value::Nil).unwrap_err();
        assert!(
            e.to_string().contains("too long") || e.to_string().contains("more than"),
            "{e}"
        );
    }

    #[test]
    fn the_legacy_form_stops_at_the_response() {
        let t = GoTemplate::parse(
            "{{ if .System }}S:{{ .System }}\n{{ end }}U:{{ .Prompt }}\nA:{{ .Response }}<end>",
        )
        .unwrap();
        let d = Value::from_json(&json!({"System": "sys", "Prompt": "hi", "Response": ""}));
        assert_eq!(t.render_until(&d, "Response").unwrap(), "S:sys\nU:hi\nA:");
        assert_eq!(t.render(&d).unwrap(), "S:sys\nU:hi\nA:<end>");
        assert!(!t.uses_messages());
    }
}
