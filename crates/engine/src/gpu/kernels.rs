//! The kernels and their WGSL sources. Kernels that read weights are built once per
//! block format: the shared readers, the format's `dq32`, then the kernel.

use crate::ggml_type::GgmlType;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kernel {
    /// Weight × activations, for weights of one format.
    Matmul(GgmlType),
    /// Embedding rows of one format.
    Embed(GgmlType),
    Norm,
    Heads,
    StoreKv,
    Attention,
    Elementwise,
    /// Activations rounded to 8-bit blocks, as the CPU engine quantizes them.
    ActQuant,
}

/// The formats the kernels decode.
pub(crate) fn decodes(ty: GgmlType) -> bool {
    dq_source(ty).is_some()
}

fn dq_source(ty: GgmlType) -> Option<&'static str> {
    use GgmlType as T;
    Some(match ty {
        T::F32 => include_str!("shaders/dq_f32.wgsl"),
        T::F16 => include_str!("shaders/dq_f16.wgsl"),
        T::BF16 => include_str!("shaders/dq_bf16.wgsl"),
        T::Q4_0 => include_str!("shaders/dq_q4_0.wgsl"),
        T::Q4_1 => include_str!("shaders/dq_q4_1.wgsl"),
        T::Q5_0 => include_str!("shaders/dq_q5_0.wgsl"),
        T::Q5_1 => include_str!("shaders/dq_q5_1.wgsl"),
        T::Q8_0 => include_str!("shaders/dq_q8_0.wgsl"),
        T::Q4_K => include_str!("shaders/dq_q4_k.wgsl"),
        T::Q5_K => include_str!("shaders/dq_q5_k.wgsl"),
        T::Q6_K => include_str!("shaders/dq_q6_k.wgsl"),
        _ => return None,
    })
}

impl Kernel {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kernel::Matmul(_) => "matmul",
            Kernel::Embed(_) => "embed",
            Kernel::Norm => "norm",
            Kernel::Heads => "heads",
            Kernel::StoreKv => "store_kv",
            Kernel::Attention => "attention",
            Kernel::Elementwise => "elementwise",
            Kernel::ActQuant => "act_quant",
        }
    }
}

/// The WGSL of `k`.
pub(super) fn source(k: Kernel) -> String {
    let with_weights = |ty: GgmlType, body: &str| {
        let dq = dq_source(ty).expect("kernels are built only for decoded formats");
        format!("{}\n{dq}\n{body}", include_str!("shaders/weights.wgsl"))
    };
    match k {
        Kernel::Matmul(ty) => with_weights(ty, include_str!("shaders/matmul.wgsl")),
        Kernel::Embed(ty) => with_weights(ty, include_str!("shaders/embed.wgsl")),
        Kernel::Norm => include_str!("shaders/norm.wgsl").into(),
        Kernel::Heads => include_str!("shaders/heads.wgsl").into(),
        Kernel::StoreKv => include_str!("shaders/store_kv.wgsl").into(),
        Kernel::Attention => include_str!("shaders/attention.wgsl").into(),
        Kernel::Elementwise => include_str!("shaders/elementwise.wgsl").into(),
        Kernel::ActQuant => include_str!("shaders/act_quant.wgsl").into(),
    }
}
