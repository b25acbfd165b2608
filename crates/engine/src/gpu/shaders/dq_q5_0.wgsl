fn dq32(base: u32, sb: u32) {
    let o = base + sb * 22u;
    let d = half_at(o);
    let qh = u32_at(o + 2u);
    for (var j = 0u; j < 16u; j++) {
        let b = byte_at(o + 6u + j);
        let lo = (b & 15u) | (((qh >> j) & 1u) << 4u);
        let hi = (b >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
        vals[j] = (f32(lo) - 16.0) * d;
        vals[j + 16u] = (f32(hi) - 16.0) * d;
    }
}
