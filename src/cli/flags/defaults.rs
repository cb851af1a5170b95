//! Defaults in `--help` from the code: a flag whose doc ends with the config keys it overrides
//! in brackets (`[retrieve.top_k]`, `[a.b, a.c]`, or `[a.b = false]` for a switch that sets
//! one) gets `[default: …]` appended, the value read from `Config::default()` serialised.
//!
//! Owns finding the keys in a help text and looking them up. Must not hold a default itself.

use serde_json::Value;

/// The default config as JSON: the same keys as the TOML file, numbers as written (through
/// text, so that an `f32` 0.7 reads 0.7, not 0.699999988).
pub fn of(config: &myelin::config::Config) -> Value {
    serde_json::to_string(config).and_then(|text| serde_json::from_str(&text)).unwrap_or(Value::Null)
}

/// The config keys a help text names at its end, and whether the flag sets them to a value of
/// its own (`[key = value]`, a switch) rather than overriding them with its argument.
pub fn keys(help: &str) -> Option<(Vec<&str>, bool)> {
    let inner = help.trim_end().strip_suffix(']')?;
    let inner = &inner[inner.rfind('[')? + 1..];
    let (names, switch) = match inner.split_once(" = ") {
        Some((key, _)) => (key, true),
        None => (inner, false),
    };
    let keys: Vec<&str> = names.split(", ").collect();
    let is_key = |k: &&str| {
        k.contains('.') && k.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
    };
    keys.iter().all(is_key).then_some((keys, switch))
}

/// The value at a dotted key, if the config has that key (a null is a key without a default).
pub fn lookup<'a>(defaults: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(defaults, |v, part| v.get(part))
}

/// How a default reads in `--help`: strings bare, lists comma-separated, none for null.
fn shown(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => items.iter().map(shown).collect::<Option<Vec<_>>>().map(|v| v.join(",")),
        other => Some(other.to_string()),
    }
}

/// The default several keys show together, comma-separated; none if any is unset or unknown.
fn default_of(defaults: &Value, keys: &[&str]) -> Option<String> {
    keys.iter().map(|k| lookup(defaults, k).and_then(shown)).collect::<Option<Vec<_>>>().map(|v| v.join(","))
}

/// `cmd` and its subcommands, every config-backed flag's help (and long help) ending with its
/// default.
pub fn show(mut cmd: clap::Command, defaults: &Value) -> clap::Command {
    let updates: Vec<(String, String)> = cmd
        .get_arguments()
        .filter_map(|arg| {
            let help = arg.get_help()?.to_string();
            let (keys, switch) = keys(&help)?;
            let default = if switch { None } else { default_of(defaults, &keys) }?;
            Some((arg.get_id().to_string(), default))
        })
        .collect();
    for (id, default) in updates {
        cmd = cmd.mut_arg(id, |arg| {
            let suffix = |h: &clap::builder::StyledStr| format!("{h} [default: {default}]");
            let long = arg.get_long_help().map(suffix);
            let arg = match arg.get_help().map(suffix) {
                Some(help) => arg.help(help),
                None => arg,
            };
            match long {
                Some(long) => arg.long_help(long),
                None => arg,
            }
        });
    }
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |sub| show(sub, defaults));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use myelin::config::Config;

    use super::*;
    use crate::cli::flags::Cli;

    /// Every (command path, flag id, help) of the command line, before defaults are added.
    fn flags(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String, String)>) {
        for arg in cmd.get_arguments() {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            out.push((path.to_string(), arg.get_id().to_string(), help));
        }
        for sub in cmd.get_subcommands() {
            flags(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_flag_naming_a_config_key_names_a_key_of_the_default_config() {
        let defaults = of(&Config::default());
        let mut all = Vec::new();
        flags(&Cli::command(), "myelin", &mut all);
        let mut named = 0;
        for (path, id, help) in &all {
            let Some((keys, _)) = keys(help) else { continue };
            for key in keys {
                assert!(lookup(&defaults, key).is_some(), "{path} --{id}: [{key}] is not a key of the default config");
                named += 1;
            }
        }
        assert!(named >= 40, "only {named} config keys named: is the bracket syntax still recognised?");
    }

    #[test]
    fn no_flag_naming_a_config_key_types_its_default() {
        let mut all = Vec::new();
        flags(&Cli::command(), "myelin", &mut all);
        for (path, id, help) in &all {
            if keys(help).is_some() {
                assert!(!help.contains("default"), "{path} --{id} writes a default by hand: {help}");
            }
        }
    }

    #[test]
    fn help_shows_the_defaults_of_the_code() {
        let defaults = of(&Config::default());
        let config = Config::default();
        let cmd = show(Cli::command(), &defaults);
        let help = |sub: &str, id: &str| {
            let sub = cmd.find_subcommand(sub).expect("subcommand");
            let arg = sub.get_arguments().find(|a| a.get_id() == id).expect("flag");
            arg.get_help().expect("help").to_string()
        };
        assert!(help("query", "top_k").ends_with(&format!("[retrieve.top_k] [default: {}]", config.retrieve.top_k)));
        assert!(help("query", "lexical_weight").ends_with(&format!("[default: {}]", config.retrieve.lexical_weight)));
        let r = &config.retrieve;
        let lambda = format!("{:?},{:?},{:?}", r.lambda_similarity, r.lambda_activation, r.lambda_pagerank);
        assert!(help("eval", "lambda").ends_with(&format!("[default: {lambda}]")), "{}", help("eval", "lambda"));
        assert!(help("query", "time_unit").ends_with("[default: hour]"));
        assert!(help("query", "backend").ends_with("[default: auto]"));
        assert!(help("ingest", "gpu_embed_min_texts").ends_with(&format!("[default: {}]", config.gpu.embed_min_texts)));
        assert!(help("ingest", "chunk_turns").ends_with(&format!("[default: {}]", config.ingest.chunk_turns)));
        assert!(help("serve", "max_batch").ends_with(&format!("[default: {}]", config.serve.max_batch)));
        // Unset by default, and a switch: no default shown.
        assert!(help("query", "gnn_weights").ends_with("[retrieve.gnn.weights]"));
        assert!(
            help("query", "gnn_model").ends_with("[retrieve.gnn.model] [default: locomo]"),
            "{}",
            help("query", "gnn_model")
        );
        assert!(help("query", "no_index").ends_with("[retrieve.index.enabled = false]"));
    }

    #[test]
    fn keys_are_read_only_from_a_final_bracket_of_dotted_names() {
        assert_eq!(keys("Episodes returned, k [retrieve.top_k]"), Some((vec!["retrieve.top_k"], false)));
        assert_eq!(keys("x [a.b, a.c]"), Some((vec!["a.b", "a.c"], false)));
        assert_eq!(keys("x [a.b = false]"), Some((vec!["a.b"], true)));
        assert_eq!(keys("Store directory [default: $MYELIN_STORE, else ./myelin-store]"), None);
        assert_eq!(keys("Comma-separated modes [default: all]"), None);
        assert_eq!(keys("no bracket"), None);
    }
}
