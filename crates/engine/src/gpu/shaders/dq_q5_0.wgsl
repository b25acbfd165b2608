// The low nibbles read four bytes at a time (blocks of 22 bytes start on an even offset).
fn dq32(base: u32, sb: u32) {
    let o = base + sb * 22u;
    let d = half_at(o);
    let qh = u32_at(o + 2u);
    for (var k = 0u; k < 4u; k++) {
        let q = u32_at(o + 6u + 4u * k);
        for (var i = 0u; i < 4u; i++) {
            let j = 4u * k + i;
            let b = (q >> (8u * i)) & 0xFFu;
            let lo = (b & 15u) | (((qh >> j) & 1u) << 4u);
            let hi = (b >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
            vals[j] = (f32(lo) - 16.0) * d;
            vals[j + 16u] = (f32(hi) - 16.0) * d;
        }
    }
}
