use std::fmt::Write;

use minijinja::{Environment, Error, ErrorKind, Value};

use super::message::ChatMessage;

/// Why a chat template could not turn a conversation into a prompt.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template's source does not parse (found at load, or when an Ollama layer is
    /// read).
    #[error("the chat template does not compile: {0}")]
    Compile(String),
    /// Rendering failed: the template raised an exception, ran out of fuel, wrote too
    /// much or wrote invalid UTF-8.
    #[error("the chat template failed: {0}")]
    Render(String),
}

/// Template instructions one rendering may run. A chat template comes from the model
/// file, which anyone can publish: one that loops (`range(3000)` three deep) must end
/// with an error in well under a second instead of pinning a core past its request's
/// timeout and its client's disconnect. Real templates, long conversations with tools
/// included, use a few thousand per message.
pub(crate) const TEMPLATE_FUEL: u64 = 20_000_000;

/// Largest rendered prompt, in bytes: far past any context, short of exhausting memory.
pub(crate) const MAX_RENDERED_BYTES: usize = 16 << 20;

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
    /// End the prompt with the opening of the assistant's turn, for the model to
    /// write it (always true when prompting for a reply).
    pub add_generation_prompt: bool,
    /// The text of the model's BOS token (`{{ bos_token }}`); empty when it has none.
    pub bos_token: &'a str,
    /// The text of the model's EOS token (`{{ eos_token }}`); empty when it has none.
    pub eos_token: &'a str,
    /// Tool definitions (OpenAI `tools` shape), passed to templates that render them.
    pub tools: Option<&'a serde_json::Value>,
    /// Extra variables (`chat_template_kwargs`, `enable_thinking`); the named ones
    /// above win.
    pub kwargs: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

impl ChatTemplate {
    /// Compiles a Jinja chat template, with the Python string methods and the helpers
    /// Hugging Face templates call, and a fuel limit on each rendering.
    pub fn new(source: &str) -> Result<ChatTemplate, TemplateError> {
        let mut env = Environment::new();
        // Hugging Face templates are Python-Jinja: `.strip()`, `.startswith()`, … .
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", super::pyjson::tojson);
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

    /// The prompt text for `messages`. A template that loops past its fuel or writes
    /// more than `MAX_RENDERED_BYTES` (16 MiB) fails with [`TemplateError::Render`].
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
            ..Value::from_serialize(opts.kwargs.cloned().unwrap_or_default())
        };
        let mut out = Capped {
            bytes: Vec::new(),
            limit: MAX_RENDERED_BYTES,
            overflowed: false,
        };
        match tmpl.render_captured_to(ctx, &mut out) {
            Ok(_) => String::from_utf8(out.bytes)
                .map_err(|_| TemplateError::Render("the template wrote invalid UTF-8".into())),
            Err(_) if out.overflowed => Err(TemplateError::Render(format!(
                "the template wrote more than {MAX_RENDERED_BYTES} bytes"
            ))),
            Err(e) if e.kind() == ErrorKind::OutOfFuel => Err(TemplateError::Render(format!(
                "the template ran more than {TEMPLATE_FUEL} instructions (does it loop?)"
            ))),
            Err(e) => Err(TemplateError::Render(describe(&e))),
        }
    }
}

/// A buffer that refuses to grow past `limit`.
struct Capped {
    bytes: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            self.overflowed = true;
            return Err(std::io::Error::other("rendered prompt too large"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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
