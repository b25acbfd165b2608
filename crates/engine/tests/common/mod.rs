pub mod acts;
pub mod families;
pub mod gguf_writer;
pub mod reference;
pub mod tokenizer;
