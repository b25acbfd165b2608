// Elementwise passes over `n` values: the gated activations (a = act(a) · b) and the
// final soft-cap (a = cap · tanh(a / cap)).

struct Params {
    n: u32,
    op: u32,
    cap: f32,
}

const SILU: u32 = 0u;
const GELU_TANH: u32 = 1u;
const SOFTCAP: u32 = 2u;

@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>) {
    let i = gid.x + gid.y * ng.x * 64u;
    if i >= p.n {
        return;
    }
    let x = a[i];
    switch p.op {
        case 0u: {
            a[i] = x / (1.0 + exp(min(-x, 80.0))) * b[i];
        }
        case 1u: {
            let u = clamp(0.7978846 * x * (1.0 + 0.044715 * x * x), -15.0, 15.0);
            a[i] = x * (1.0 - 1.0 / (exp(2.0 * u) + 1.0)) * b[i];
        }
        default: {
            a[i] = p.cap * tanh(x / p.cap);
        }
    }
}
