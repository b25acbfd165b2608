//! The interactive chat's slash commands and multi-line input, parsed apart from the
//! terminal so they can be tested without one.

use std::path::PathBuf;

use llamay_runtime::GenerationParams;

pub const HELP: &str = "\
Commands:
  /set system TEXT           the system message (/unset system clears it)
  /set parameter NAME VALUE  temperature, top_k, top_p, min_p, repeat_penalty, seed, num_predict
  /set format json           constrain replies to JSON (/unset format: free text again)
  /schema FILE               constrain replies to a JSON Schema
  /grammar FILE              constrain replies to a GBNF grammar
  /image FILE                an image for the next message (a model with vision)
  /set verbose | quiet       print the statistics lines after each reply, or not
  /show info                 the model: architecture, size, context, tokenizer
  /show system | parameters  the system message, the sampling parameters
  /stats                     the statistics lines of the last reply
  /clear                     forget the conversation (the system message stays)
  /help, /?                  this list
  /bye                       leave (as does Ctrl-D)

Ctrl-C stops the reply being written. Start a message with \"\"\" to write several lines,
and end it with \"\"\".
";

#[derive(Debug, PartialEq)]
pub enum Slash {
    Help,
    Bye,
    Clear,
    Stats,
    ShowInfo,
    ShowSystem,
    ShowParameters,
    SetSystem(String),
    UnsetSystem,
    SetParameter(String, String),
    SetFormatJson,
    UnsetFormat,
    SetVerbose(bool),
    Schema(PathBuf),
    Grammar(PathBuf),
    Image(PathBuf),
}

/// A line that starts with `/`. `Err` is the message to show for a line that is not
/// a command we know.
pub fn parse(line: &str) -> Result<Slash, String> {
    let line = line.trim();
    let mut words = line.split_whitespace();
    let head = words.next().unwrap_or("");
    let rest_after = |n: usize| -> String {
        let mut s = line;
        for _ in 0..n {
            s = s.trim_start();
            s = s.find(char::is_whitespace).map_or("", |i| &s[i..]);
        }
        s.trim().to_string()
    };
    let arg = words.next();
    let c = match (head, arg) {
        ("/help" | "/?", _) => Slash::Help,
        ("/bye" | "/exit", _) => Slash::Bye,
        ("/clear", _) => Slash::Clear,
        ("/stats", _) => Slash::Stats,
        ("/show", Some("info")) => Slash::ShowInfo,
        ("/show", Some("system")) => Slash::ShowSystem,
        ("/show", Some("parameters")) => Slash::ShowParameters,
        ("/set", Some("system")) => {
            let text = rest_after(2);
            if text.is_empty() {
                return Err("usage: /set system TEXT".into());
            }
            Slash::SetSystem(unquote(&text))
        }
        ("/set", Some("parameter")) => match (words.next(), words.next()) {
            (Some(name), Some(value)) => Slash::SetParameter(name.into(), value.into()),
            _ => return Err("usage: /set parameter NAME VALUE".into()),
        },
        ("/set", Some("format")) => match words.next() {
            Some("json") => Slash::SetFormatJson,
            _ => return Err("usage: /set format json (or /schema FILE for a schema)".into()),
        },
        ("/set", Some("verbose")) => Slash::SetVerbose(true),
        ("/set", Some("quiet")) => Slash::SetVerbose(false),
        ("/unset", Some("format")) => Slash::UnsetFormat,
        ("/unset", Some("system")) => Slash::UnsetSystem,
        ("/schema" | "/grammar" | "/image", _) => {
            let path = rest_after(1);
            if path.is_empty() {
                return Err(format!("usage: {head} FILE"));
            }
            let path = PathBuf::from(unquote(&path));
            match head {
                "/schema" => Slash::Schema(path),
                "/grammar" => Slash::Grammar(path),
                _ => Slash::Image(path),
            }
        }
        _ => return Err(format!("unknown command {line:?}; /? lists the commands")),
    };
    Ok(c)
}

/// `"text"` as typed around a value: the quotes are not part of it.
fn unquote(s: &str) -> String {
    s.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(s)
        .to_string()
}

/// `/set parameter NAME VALUE`, with Ollama's parameter names.
pub fn set_parameter(p: &mut GenerationParams, name: &str, value: &str) -> Result<(), String> {
    fn num<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
        v.parse()
            .map_err(|_| format!("{name} must be a number, not {v:?}"))
    }
    let s = &mut p.sampler;
    match name {
        "temperature" => s.temperature = checked(name, num(name, value)?, 0.0, 100.0)?,
        "top_k" => s.top_k = num(name, value)?,
        "top_p" => s.top_p = checked(name, num(name, value)?, 0.0, 1.0)?,
        "min_p" => s.min_p = checked(name, num(name, value)?, 0.0, 1.0)?,
        "repeat_penalty" => s.repeat_penalty = checked(name, num(name, value)?, 0.0, 100.0)?,
        "seed" => s.seed = num(name, value)?,
        "num_predict" => {
            let n: usize = num(name, value)?;
            if n == 0 {
                return Err("num_predict must be at least 1".into());
            }
            p.max_tokens = n;
        }
        other => {
            return Err(format!(
                "unknown parameter {other:?}: temperature, top_k, top_p, min_p, repeat_penalty, seed or num_predict"
            ))
        }
    }
    Ok(())
}

fn checked(name: &str, v: f32, lo: f32, hi: f32) -> Result<f32, String> {
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{name} must be between {lo} and {hi}, not {v}"))
    }
}

/// The parameters `/set parameter` sets, one per line, for `/show parameters`.
pub fn show_parameters(p: &GenerationParams) -> String {
    let s = &p.sampler;
    format!(
        "  temperature      {}\n  top_k            {}\n  top_p            {}\n  min_p            {}\n  repeat_penalty   {}\n  seed             {}\n  num_predict      {}\n",
        s.temperature, s.top_k, s.top_p, s.min_p, s.repeat_penalty, s.seed, p.max_tokens
    )
}

/// A message that opens with `"""` goes on until a line that ends with `"""`;
/// `more` gives the next lines (`None`: input ended). The quotes are not part of
/// the message. `None` when the input ended before the closing quotes.
pub fn multi_line(first: &str, more: &mut dyn FnMut() -> Option<String>) -> Option<String> {
    let body = first.trim_start().strip_prefix("\"\"\"")?;
    if let Some(done) = body.strip_suffix("\"\"\"") {
        return Some(done.to_string());
    }
    let mut lines = vec![body.to_string()];
    loop {
        let line = more()?;
        if let Some(done) = line.trim_end().strip_suffix("\"\"\"") {
            lines.push(done.to_string());
            break;
        }
        lines.push(line);
    }
    let text = lines.join("\n");
    Some(text.trim_matches('\n').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run`'s defaults.
    fn params() -> GenerationParams {
        GenerationParams {
            max_tokens: 512,
            ..GenerationParams::default()
        }
    }

    #[test]
    fn commands_parse() {
        assert_eq!(
            parse("/set system You are terse.  Very."),
            Ok(Slash::SetSystem("You are terse.  Very.".into()))
        );
        assert_eq!(
            parse("/set system \"quoted\""),
            Ok(Slash::SetSystem("quoted".into()))
        );
        assert_eq!(
            parse("/set parameter temperature 0"),
            Ok(Slash::SetParameter("temperature".into(), "0".into()))
        );
        assert_eq!(parse("/set format json"), Ok(Slash::SetFormatJson));
        assert_eq!(
            parse("/schema my schemas/s.json"),
            Ok(Slash::Schema("my schemas/s.json".into()))
        );
        assert_eq!(parse("/?"), Ok(Slash::Help));
        assert_eq!(parse("/bye"), Ok(Slash::Bye));
        assert_eq!(parse("/show info"), Ok(Slash::ShowInfo));
        assert!(parse("/set system").is_err());
        assert!(parse("/set format yaml").is_err());
        assert!(parse("/frobnicate").is_err());
        assert!(parse("/schema").is_err());
        assert_eq!(
            parse("/image \"my cat.png\""),
            Ok(Slash::Image("my cat.png".into()))
        );
        assert!(parse("/image").is_err());
    }

    #[test]
    fn parameters_are_checked() {
        let mut p = params();
        set_parameter(&mut p, "temperature", "0").unwrap();
        set_parameter(&mut p, "num_predict", "64").unwrap();
        set_parameter(&mut p, "seed", "7").unwrap();
        assert_eq!(
            (p.sampler.temperature, p.max_tokens, p.sampler.seed),
            (0.0, 64, 7)
        );
        assert!(set_parameter(&mut p, "top_p", "1.5").is_err());
        assert!(set_parameter(&mut p, "temperature", "NaN").is_err());
        assert!(set_parameter(&mut p, "num_predict", "0").is_err());
        assert!(set_parameter(&mut p, "mirostat", "1").is_err());
        assert!(show_parameters(&p).contains("num_predict      64"));
    }

    #[test]
    fn multi_line_messages_end_at_the_closing_quotes() {
        let mut rest = vec!["second line".to_string(), "third\"\"\"".to_string()].into_iter();
        assert_eq!(
            multi_line("\"\"\"first", &mut || rest.next()),
            Some("first\nsecond line\nthird".into())
        );
        assert_eq!(
            multi_line("\"\"\"one line\"\"\"", &mut || None),
            Some("one line".into())
        );
        let mut unfinished = vec!["a".to_string()].into_iter();
        assert_eq!(multi_line("\"\"\"", &mut || unfinished.next()), None);
        assert_eq!(multi_line("no quotes", &mut || None), None);
    }
}
