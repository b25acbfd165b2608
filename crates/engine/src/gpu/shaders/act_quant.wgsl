// Activations rounded as the CPU engine quantizes them for quantized weights (and as
// llama.cpp does): per block of `block` values, d = max|x| / 127 and each value
// becomes d · round(x / d), ties to even, clamped to ±127. The products then see the
// values the CPU's integer dots see, so both backends choose alike at near-ties.

struct Params {
    n_blocks: u32,
    block: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) g: vec3<u32>,
    @builtin(num_workgroups) ng: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let b = g.x + g.y * ng.x;
    let o = min(b, p.n_blocks - 1u) * p.block;
    var m = 0.0;
    for (var i = li; i < p.block; i += 64u) {
        m = max(m, abs(x[o + i]));
    }
    red[li] = m;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if li < s {
            red[li] = max(red[li], red[li + s]);
        }
        workgroupBarrier();
    }
    if b >= p.n_blocks {
        return;
    }
    let d = red[0] / 127.0;
    let id = select(0.0, 1.0 / d, d != 0.0);
    for (var i = li; i < p.block; i += 64u) {
        out[o + i] = d * clamp(round(x[o + i] * id), -127.0, 127.0);
    }
}
