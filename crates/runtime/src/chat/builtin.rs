/// Templates for files that carry none. Written in the same Jinja dialect as the
/// templates files carry, so both go through one renderer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// ChatML (`<|im_start|>` / `<|im_end|>`), the fallback.
    ChatMl,
    /// Llama 3's header turns (`<|start_header_id|>` … `<|eot_id|>`).
    Llama3,
    /// Gemma's turns (`<start_of_turn>` … `<end_of_turn>`), with no system role.
    Gemma,
}

impl Builtin {
    /// Picks the family from the turn markers the vocabulary has; ChatML otherwise,
    /// since it is the most widely followed convention.
    pub fn detect(has_token: impl Fn(&str) -> bool) -> Builtin {
        if has_token("<start_of_turn>") && has_token("<end_of_turn>") {
            Builtin::Gemma
        } else if has_token("<|start_header_id|>") && has_token("<|eot_id|>") {
            Builtin::Llama3
        } else {
            Builtin::ChatMl
        }
    }

    /// The text that ends a turn: generation stops when the model writes it.
    pub fn end_of_turn(self) -> &'static str {
        match self {
            Builtin::ChatMl => "<|im_end|>",
            Builtin::Llama3 => "<|eot_id|>",
            Builtin::Gemma => "<end_of_turn>",
        }
    }

    /// The template's Jinja source, for
    /// [`ChatTemplate::new`](crate::ChatTemplate::new).
    pub fn source(self) -> &'static str {
        match self {
            Builtin::ChatMl => CHATML,
            Builtin::Llama3 => LLAMA3,
            Builtin::Gemma => GEMMA,
        }
    }
}

const CHATML: &str = "{% for message in messages %}\
{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') + '<|im_end|>\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const LLAMA3: &str = "{{ bos_token }}{% for message in messages %}\
{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + (message['content'] or '') | trim + '<|eot_id|>' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

// Gemma has no system role: a system message is folded into the first user turn, as
// Gemma's own published template does; the assistant's role is called "model".
const GEMMA: &str = "{{ bos_token }}\
{% if messages and messages[0]['role'] == 'system' %}\
{% set system = messages[0]['content'] + '\n\n' %}{% set rest = messages[1:] %}\
{% else %}{% set system = '' %}{% set rest = messages %}{% endif %}\
{% for message in rest %}\
{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}\
{{ '<start_of_turn>' + role + '\n' + (system if loop.first else '') + (message['content'] or '') | trim + '<end_of_turn>\n' }}\
{% endfor %}\
{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}";
