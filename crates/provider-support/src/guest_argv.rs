//! The guest's words of an exec request, as both CLI-driven providers pass
//! them (no shell): the request's argv, behind `env -- K=V…` when it sets
//! variables.

use corral_sandbox_core::sandbox::{ExecRequest, ProviderError};

/// The request's argv, behind `env --` and its variables when it has any.
/// Refused: an empty argv, a variable name `env` would not take, and a
/// program holding `=` behind `env` (it would take it for a variable).
pub fn env_argv(request: &ExecRequest) -> Result<Vec<String>, ProviderError> {
    let Some(program) = request.argv.first() else {
        return Err(invalid(
            "argv",
            "it is empty; give at least the program to run".to_owned(),
        ));
    };
    let mut argv = Vec::new();
    if !request.env.is_empty() {
        argv.extend(["env".to_owned(), "--".to_owned()]);
        for (key, value) in &request.env {
            check_env_key(key)?;
            argv.push(format!("{key}={value}"));
        }
        if program.contains('=') {
            return Err(invalid(
                "argv",
                format!("program `{program}` contains `=`, which `env` would take for a variable"),
            ));
        }
    }
    argv.extend(request.argv.iter().cloned());
    Ok(argv)
}

fn invalid(field: &'static str, reason: String) -> ProviderError {
    ProviderError::InvalidSpec { field, reason }
}

fn check_env_key(key: &str) -> Result<(), ProviderError> {
    let ok = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "env",
            format!("variable name `{key}` is invalid; expected [A-Za-z_][A-Za-z0-9_]*"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(argv: &[&str], env: &[(&str, &str)]) -> ExecRequest {
        let mut r = ExecRequest::new(argv.iter().copied());
        r.env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        r
    }

    #[test]
    fn variables_go_behind_env_and_bad_ones_are_refused() {
        assert_eq!(
            env_argv(&request(&["id", "-u"], &[])).unwrap(),
            ["id", "-u"]
        );
        assert_eq!(
            env_argv(&request(&["id"], &[("A_1", "x y")])).unwrap(),
            ["env", "--", "A_1=x y", "id"]
        );
        assert!(env_argv(&request(&[], &[])).is_err());
        assert!(env_argv(&request(&["id"], &[("1A", "x")])).is_err());
        assert!(env_argv(&request(&["A=b"], &[("K", "v")])).is_err());
        assert!(
            env_argv(&request(&["A=b"], &[])).is_ok(),
            "no env, no ambiguity"
        );
    }
}
