//! Mistral 3 (Ministral 3; the text model, as llama.cpp's `mistral3` graph runs it):
//! Llama's layer, with the YaRN keys llama.cpp reads for it (`yarn_beta_fast`,
//! `yarn_beta_slow`, `yarn_log_multiplier`) and Llama 4's attention temperature on the
//! queries. llama.cpp also routes experts for it when the file has them (as Mixtral);
//! that is not checked here, so such a file is refused (its dense tensors are missing).

use super::llama::LLAMA;
use super::Family;

pub(in crate::model) const MISTRAL3: Family = Family {
    name: "mistral3",
    yarn_keys: true,
    attn_temperature: true,
    experts: None,
    ..LLAMA
};
