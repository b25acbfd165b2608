// Reading GGUF blocks from a weight buffer: bytes, f16 and u32 at any even offset,
// and `dq32`, which decodes one run of 32 consecutive elements of a row into `vals`.
// The format's own `dq32` is appended to this file; each follows ggml's arithmetic.

@group(0) @binding(0) var<storage, read> w: array<u32>;

var<private> vals: array<f32, 32>;

fn byte_at(o: u32) -> u32 {
    return (w[o >> 2u] >> ((o & 3u) * 8u)) & 0xFFu;
}

fn sbyte_at(o: u32) -> f32 {
    return f32(i32(byte_at(o) << 24u) >> 24u);
}

fn half_bits(o: u32) -> u32 {
    let v = w[o >> 2u];
    return select(v & 0xFFFFu, v >> 16u, (o & 2u) != 0u);
}

fn half_at(o: u32) -> f32 {
    return unpack2x16float(half_bits(o)).x;
}

// A u32 at an offset that is a multiple of 2 (block fields are not 4-aligned).
fn u32_at(o: u32) -> u32 {
    let i = o >> 2u;
    if (o & 3u) == 0u {
        return w[i];
    }
    return (w[i] >> 16u) | (w[i + 1u] << 16u);
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block `j` from the 12 bytes at `o`.
fn k4_scale_min(o: u32, j: u32) -> vec2<f32> {
    if j < 4u {
        return vec2<f32>(f32(byte_at(o + j) & 63u), f32(byte_at(o + j + 4u) & 63u));
    }
    let a = byte_at(o + j + 4u);
    let sc = (a & 15u) | ((byte_at(o + j - 4u) >> 6u) << 4u);
    let mn = (a >> 4u) | ((byte_at(o + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(mn));
}

// Q4_K / Q5_K: sub-block `s`'s scale d·scale[s] and offset dmin·min[s], for the block
// at `o` (d, dmin, then the 12 scale bytes).
fn k_scale_offset(o: u32, s: u32) -> vec2<f32> {
    let sm = k4_scale_min(o + 4u, s);
    return vec2<f32>(half_at(o) * sm.x, half_at(o + 2u) * sm.y);
}
