// Queries, keys or values made ready for attention, one head of one token per
// workgroup, in place: bias, the per-head RMS norm, RoPE from the step's cos/sin
// table, a multiplier (the query scale) and f16 rounding (an f16 cache), in the CPU
// engine's order. Token t0 + y of the step, head x.

struct Params {
    width: u32,
    hd: u32,
    flags: u32,
    eps: f32,
    mul: f32,
    half: u32,
    neox: u32,
    t0: u32,
}

const BIAS: u32 = 1u;
const NORM: u32 = 2u;
const ROPE: u32 = 4u;
const ROUND: u32 = 8u;

@group(0) @binding(0) var<storage, read_write> buf: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read> norm: array<f32>;
@group(0) @binding(3) var<storage, read> cs: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> v: array<f32, 512>;
var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = g.x;
    let t = p.t0 + g.y;
    let o = t * p.width + h * p.hd;
    for (var i = li; i < p.hd; i += 64u) {
        var a = buf[o + i];
        if (p.flags & BIAS) != 0u {
            a += bias[h * p.hd + i];
        }
        v[i] = a;
    }
    workgroupBarrier();
    if (p.flags & NORM) != 0u {
        var ss = 0.0;
        for (var i = li; i < p.hd; i += 64u) {
            ss += v[i] * v[i];
        }
        red[li] = ss;
        workgroupBarrier();
        for (var s = 32u; s > 0u; s >>= 1u) {
            if li < s {
                red[li] += red[li + s];
            }
            workgroupBarrier();
        }
        let scale = 1.0 / sqrt(red[0] / f32(p.hd) + p.eps);
        for (var i = li; i < p.hd; i += 64u) {
            v[i] = v[i] * (scale * norm[i]);
        }
        workgroupBarrier();
    }
    // The rotated values go to v[256..] first: a pair's partner may be another
    // thread's.
    for (var i = li; i < p.hd; i += 64u) {
        var a = v[i];
        if (p.flags & ROPE) != 0u && i < 2u * p.half {
            var k: u32;
            var first: bool;
            var partner: u32;
            if p.neox != 0u {
                first = i < p.half;
                k = select(i - p.half, i, first);
                partner = select(i - p.half, i + p.half, first);
            } else {
                first = (i & 1u) == 0u;
                k = i >> 1u;
                partner = select(i - 1u, i + 1u, first);
            }
            let c = cs[(t * p.half + k) * 2u];
            let s = cs[(t * p.half + k) * 2u + 1u];
            let b = v[partner];
            if first {
                a = a * c - b * s;
            } else {
                a = b * s + a * c;
            }
        }
        v[256u + i] = a;
    }
    workgroupBarrier();
    for (var i = li; i < p.hd; i += 64u) {
        var a = v[256u + i] * p.mul;
        if (p.flags & ROUND) != 0u {
            a = unpack2x16float(pack2x16float(vec2<f32>(a, 0.0))).x;
        }
        buf[o + i] = a;
    }
}
