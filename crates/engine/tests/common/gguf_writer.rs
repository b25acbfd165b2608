//! A minimal GGUF writer for tests: builds well-formed files, and files broken in
//! exactly one chosen way, so each reader error can be provoked on purpose.

#![allow(dead_code)]

pub enum V {
    U8(u8),
    U32(u32),
    I32(i32),
    F32(f32),
    U64(u64),
    Bool(bool),
    Str(&'static str),
    /// (element type id, raw encoded elements, count)
    Arr(u32, Vec<u8>, u64),
}

impl V {
    fn type_id(&self) -> u32 {
        match self {
            V::U8(_) => 0,
            V::U32(_) => 4,
            V::I32(_) => 5,
            V::F32(_) => 6,
            V::Bool(_) => 7,
            V::Str(_) => 8,
            V::Arr(..) => 9,
            V::U64(_) => 10,
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            V::U8(v) => out.push(*v),
            V::U32(v) => out.extend(v.to_le_bytes()),
            V::I32(v) => out.extend(v.to_le_bytes()),
            V::F32(v) => out.extend(v.to_le_bytes()),
            V::U64(v) => out.extend(v.to_le_bytes()),
            V::Bool(v) => out.push(*v as u8),
            V::Str(s) => put_str(out, s.as_bytes()),
            V::Arr(t, raw, n) => {
                out.extend(t.to_le_bytes());
                out.extend(n.to_le_bytes());
                out.extend(raw);
            }
        }
    }
}

pub fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s);
}

/// Encodes a string array's elements.
pub fn str_elems(items: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for s in items {
        put_str(&mut out, s.as_bytes());
    }
    out
}

pub struct Tensor {
    pub name: &'static str,
    pub dims: Vec<u64>,
    pub type_id: u32,
    pub offset: u64,
}

pub struct Gguf {
    pub magic: [u8; 4],
    pub version: u32,
    pub kv: Vec<(&'static str, V)>,
    pub tensors: Vec<Tensor>,
    pub alignment: u64,
    /// Bytes of tensor data appended after the aligned header.
    pub data_len: usize,
    /// Overrides for the header counts (to lie about them).
    pub n_tensors_override: Option<u64>,
    pub n_kv_override: Option<u64>,
}

impl Default for Gguf {
    fn default() -> Self {
        Gguf {
            magic: *b"GGUF",
            version: 3,
            kv: vec![("general.architecture", V::Str("llama"))],
            tensors: vec![Tensor {
                name: "a",
                dims: vec![4, 2],
                type_id: 0,
                offset: 0,
            }],
            alignment: 32,
            data_len: 32,
            n_tensors_override: None,
            n_kv_override: None,
        }
    }
}

impl Gguf {
    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(self.magic);
        out.extend(self.version.to_le_bytes());
        let nt = self.n_tensors_override.unwrap_or(self.tensors.len() as u64);
        let nkv = self.n_kv_override.unwrap_or(self.kv.len() as u64);
        out.extend(nt.to_le_bytes());
        out.extend(nkv.to_le_bytes());
        for (k, v) in &self.kv {
            put_str(&mut out, k.as_bytes());
            out.extend(v.type_id().to_le_bytes());
            v.encode(&mut out);
        }
        for t in &self.tensors {
            put_str(&mut out, t.name.as_bytes());
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.type_id.to_le_bytes());
            out.extend(t.offset.to_le_bytes());
        }
        while !(out.len() as u64).is_multiple_of(self.alignment) {
            out.push(0);
        }
        out.extend((0..self.data_len).map(|i| i as u8));
        out
    }
}
