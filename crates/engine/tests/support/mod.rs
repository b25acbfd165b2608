pub mod gguf_writer;
