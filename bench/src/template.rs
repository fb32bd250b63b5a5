//! `{name}` substitution in scenario commands; `{{` and `}}` are literal braces.

use std::collections::BTreeMap;

/// A template that names an unknown variable or has an unbalanced brace.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TemplateError {
    /// `{name}` with no such variable.
    #[error("unknown variable {{{name}}} in {template:?} (known: {known})")]
    Unknown {
        /// The variable name.
        name: String,
        /// The whole template.
        template: String,
        /// Comma-separated known names.
        known: String,
    },
    /// A `{` without `}` or a lone `}`.
    #[error("unbalanced brace in {0:?} (write {{{{ or }}}} for a literal brace)")]
    Unbalanced(String),
}

/// Variables available to templates.
pub type Vars = BTreeMap<String, String>;

/// Replaces every `{name}` in `template` with its value from `vars`.
pub fn render(template: &str, vars: &Vars) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(ch) if ch.is_ascii_alphanumeric() || ch == '_' => name.push(ch),
                        _ => return Err(TemplateError::Unbalanced(template.to_owned())),
                    }
                }
                let value = vars.get(&name).ok_or_else(|| TemplateError::Unknown {
                    name: name.clone(),
                    template: template.to_owned(),
                    known: vars.keys().cloned().collect::<Vec<_>>().join(", "),
                })?;
                out.push_str(value);
            }
            '}' => return Err(TemplateError::Unbalanced(template.to_owned())),
            _ => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars {
        [("tmp", "/t"), ("addr_b", "10.0.0.2")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into()
    }

    #[test]
    fn substitutes_known_variables() {
        assert_eq!(
            render("iperf3 -c {addr_b} --logfile {tmp}/x", &vars()),
            Ok("iperf3 -c 10.0.0.2 --logfile /t/x".into())
        );
    }

    #[test]
    fn doubled_braces_are_literal() {
        assert_eq!(
            render("awk '{{print $1}}' {tmp}", &vars()),
            Ok("awk '{print $1}' /t".into())
        );
    }

    #[test]
    fn unknown_and_unbalanced_are_errors() {
        let e = render("{nope}", &vars()).expect_err("unknown");
        assert!(
            e.to_string().contains("{nope}") && e.to_string().contains("addr_b"),
            "{e}"
        );
        assert!(matches!(
            render("a {tmp", &vars()),
            Err(TemplateError::Unbalanced(_))
        ));
        assert!(matches!(
            render("a }", &vars()),
            Err(TemplateError::Unbalanced(_))
        ));
        assert!(matches!(
            render("${HOME}", &vars()),
            Err(TemplateError::Unknown { .. })
        ));
    }
}
