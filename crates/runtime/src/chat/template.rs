use std::fmt::Write;

use minijinja::{Environment, Error, ErrorKind, Value};

use super::message::ChatMessage;

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("the chat template does not compile: {0}")]
    Compile(String),
    #[error("the chat template failed: {0}")]
    Render(String),
}

/// A compiled chat template. Compiling once and rendering per request keeps the
/// per-request cost to the rendering itself.
pub struct ChatTemplate {
    env: Environment<'static>,
    renders_tools: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChatTemplate")
    }
}

/// What a template is rendered with besides the messages.
#[derive(Clone, Debug, Default)]
pub struct RenderOptions<'a> {
    pub add_generation_prompt: bool,
    pub bos_token: &'a str,
    pub eos_token: &'a str,
    /// Tool definitions (OpenAI `tools` shape), passed to templates that render them.
    pub tools: Option<&'a serde_json::Value>,
}

impl ChatTemplate {
    pub fn new(source: &str) -> Result<ChatTemplate, TemplateError> {
        let mut env = Environment::new();
        // Hugging Face templates are Python-Jinja: `.strip()`, `.startswith()`, … .
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| TemplateError::Compile(describe(&e)))?;
        Ok(ChatTemplate {
            env,
            // A template that reads `tools` has its own tool convention.
            renders_tools: source.contains("tools"),
        })
    }

    /// Whether the template renders the `tools` it is given (else the caller
    /// describes tools in the messages themselves).
    pub fn renders_tools(&self) -> bool {
        self.renders_tools
    }

    pub fn render(
        &self,
        messages: &[ChatMessage],
        opts: &RenderOptions<'_>,
    ) -> Result<String, TemplateError> {
        let tmpl = self
            .env
            .get_template("chat")
            .map_err(|e| TemplateError::Compile(describe(&e)))?;
        let ctx = minijinja::context! {
            messages => Value::from_serialize(messages),
            add_generation_prompt => opts.add_generation_prompt,
            bos_token => opts.bos_token,
            eos_token => opts.eos_token,
            tools => opts.tools.map(Value::from_serialize),
        };
        tmpl.render(ctx)
            .map_err(|e| TemplateError::Render(describe(&e)))
    }
}

fn describe(e: &Error) -> String {
    let mut s = e.to_string();
    if let Some(line) = e.line() {
        let _ = write!(s, " (line {line})");
    }
    s
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

fn strftime_now(format: String) -> Result<String, Error> {
    let mut out = String::new();
    // chrono reports an unknown specifier as a formatting error rather than text.
    write!(out, "{}", chrono::Local::now().format(&format)).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: bad format {format:?}"),
        )
    })?;
    Ok(out)
}
