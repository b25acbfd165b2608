fn dq32(base: u32, sb: u32) {
    let o = base + sb * 24u;
    let d = half_at(o);
    let m = half_at(o + 2u);
    let qh = u32_at(o + 4u);
    for (var j = 0u; j < 16u; j++) {
        let b = byte_at(o + 8u + j);
        let lo = (b & 15u) | (((qh >> j) & 1u) << 4u);
        let hi = (b >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
        vals[j] = f32(lo) * d + m;
        vals[j + 16u] = f32(hi) * d + m;
    }
}
