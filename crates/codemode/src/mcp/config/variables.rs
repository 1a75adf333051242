//! `${...}` expansion in server entries (see the module docs of
//! `mcp::config`): `${VAR}`, `${VAR:-default}`, `${env:VAR}`,
//! `${userHome}`, `${workspaceFolder}` and `${input:ID}`, with the secret
//! each expanded value makes.

use std::collections::BTreeMap;
use std::path::Path;

use super::input_variable;
use crate::mcp::dialect::Input;

/// Where the variables of a config come from.
pub(super) struct Vars<'a> {
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) workspace: Option<&'a Path>,
    pub(super) inputs: &'a BTreeMap<String, Input>,
}

/// One variable's value, and the secret it is (the value with the form it
/// is shown as), if it is one.
type Expanded = (String, Option<(String, String)>);

/// Expands the variables of `value` (see the module docs); also returns
/// each secret value with the form it is shown as: values from the
/// environment (`${VAR}`, `${env:VAR}`) and inputs (`${input:ID}`); a
/// default written in the file, `${userHome}` and `${workspaceFolder}` are
/// no secrets (an input's default is, when the input is a `password`).
///
/// # Errors
/// A message naming the missing variable or input and where its value can
/// come from, an unknown `${...}`, or an unterminated `${`.
pub(super) fn expand_vars(value: &str, vars: &Vars<'_>) -> Result<(String, Vec<(String, String)>), String> {
    let mut found = Vec::new();
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        // `$${` is a literal `${` (as in docker compose files).
        if rest[..start].ends_with('$') {
            out.push_str(&rest[..start]);
            out.push('{');
            rest = &rest[start + 2..];
            continue;
        }
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unterminated `${{` in `{value}`; write `${{VAR}}`"));
        };
        let (expanded, secret) = variable(&after[..end], vars)?;
        out.push_str(&expanded);
        found.extend(secret);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok((out, found))
}

/// Whether `s` can name an environment variable: ASCII letters, digits
/// and `_`, at least one.
fn identifier(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The value of the variable written `${inner}`.
///
/// # Errors
/// As [`expand_vars`].
fn variable(inner: &str, vars: &Vars<'_>) -> Result<Expanded, String> {
    let shown = format!("${{{inner}}}");
    match inner.split_once(':') {
        None if inner == "userHome" => match (vars.env)("HOME") {
            Some(home) => Ok((home, None)),
            None => Err("`${userHome}` needs HOME to be set".to_owned()),
        },
        None if inner == "workspaceFolder" => match vars.workspace {
            Some(ws) => Ok((ws.to_string_lossy().into_owned(), None)),
            None => Err("`${workspaceFolder}` is not known here: name the workspace (the CLI's \
                         --workspace; McpConfig::load_in for a library host)"
                .to_owned()),
        },
        Some(("env", var)) if identifier(var) => match (vars.env)(var) {
            Some(v) => Ok((v.clone(), Some((v, shown)))),
            None => Err(format!("environment variable `{var}` is not set; set it")),
        },
        Some(("input", id)) => input(id, shown, vars),
        Some((var, default)) if identifier(var) && default.starts_with('-') => match (vars.env)(var) {
            Some(v) => Ok((v.clone(), Some((v, format!("${{{var}}}"))))),
            None => Ok((default[1..].to_owned(), None)),
        },
        None if identifier(inner) => match (vars.env)(inner) {
            Some(v) => Ok((v.clone(), Some((v, shown)))),
            None => Err(format!(
                "environment variable `{inner}` is not set; set it or write `${{{inner}:-default}}`"
            )),
        },
        _ => Err(format!(
            "`{shown}` is not a variable codemode knows; write `${{VAR}}`, `${{VAR:-default}}`, \
             `${{env:VAR}}`, `${{input:ID}}`, `${{userHome}}` or `${{workspaceFolder}}`"
        )),
    }
}

/// The value of `${input:ID}` (written `shown`): the environment variable
/// [`input_variable`] names, else the input's `default` (a secret only
/// when the input is a `password`).
///
/// # Errors
/// The input is not in the file's `inputs`, or has no value.
fn input(id: &str, shown: String, vars: &Vars<'_>) -> Result<Expanded, String> {
    let Some(input) = vars.inputs.get(id) else {
        return Err(format!(
            "`{shown}` names no input of the file's `inputs` list; add {{\"id\": \"{id}\", ...}} there"
        ));
    };
    let variable = input_variable(id);
    match ((vars.env)(&variable), &input.default) {
        (Some(v), _) => Ok((v.clone(), Some((v, shown)))),
        (None, Some(d)) => Ok((d.clone(), input.password.then(|| (d.clone(), shown)))),
        (None, None) => {
            let about = input.description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
            Err(format!(
                "input `{id}`{about} has no value: codemode cannot prompt for inputs; set the \
                 environment variable {variable}, or give the input a `default`"
            ))
        }
    }
}
