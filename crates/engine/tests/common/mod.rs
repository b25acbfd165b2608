pub mod acts;
pub mod gguf_writer;
pub mod reference;
pub mod tokenizer;
