// RMS norm of rows of `n`: out[r] = x[r] · scale(x[r]) · w, or out[r] += it (Gemma's
// post-norms add the normed product to the residual).

struct Params {
    n: u32,
    eps: f32,
    add: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r0 = g.x * p.n;
    var ss = 0.0;
    for (var i = li; i < p.n; i += 64u) {
        let v = x[r0 + i];
        ss += v * v;
    }
    red[li] = ss;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if li < s {
            red[li] += red[li + s];
        }
        workgroupBarrier();
    }
    let scale = 1.0 / sqrt(red[0] / f32(p.n) + p.eps);
    for (var i = li; i < p.n; i += 64u) {
        let v = x[r0 + i] * scale * w[i];
        if p.add != 0u {
            out[r0 + i] += v;
        } else {
            out[r0 + i] = v;
        }
    }
}
