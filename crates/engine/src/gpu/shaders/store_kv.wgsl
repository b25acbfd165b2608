// Rows row0 .. row0 + n of a step's keys (or values), of `width` each, stored at
// positions pos0 .. pos0 + n of one layer's cache: f16 pairs, or f32.

struct Params {
    width: u32,
    row0: u32,
    pos0: u32,
    n: u32,
    f16: u32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> cache: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>) {
    let i = gid.x + gid.y * ng.x * 64u;
    if p.f16 != 0u {
        let pairs = p.width / 2u;
        if i >= p.n * pairs {
            return;
        }
        let t = i / pairs;
        let c = (i % pairs) * 2u;
        let s = (p.row0 + t) * p.width + c;
        cache[((p.pos0 + t) * p.width + c) / 2u] = pack2x16float(vec2<f32>(src[s], src[s + 1u]));
    } else {
        if i >= p.n * p.width {
            return;
        }
        let t = i / p.width;
        let c = i % p.width;
        cache[(p.pos0 + t) * p.width + c] = bitcast<u32>(src[(p.row0 + t) * p.width + c]);
    }
}
