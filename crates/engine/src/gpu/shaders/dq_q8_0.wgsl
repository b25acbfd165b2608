// The quants read four at a time (blocks of 34 bytes start on an even offset).
fn dq32(base: u32, sb: u32) {
    let o = base + sb * 34u;
    let d = half_at(o);
    for (var k = 0u; k < 8u; k++) {
        let q = u32_at(o + 2u + 4u * k);
        for (var i = 0u; i < 4u; i++) {
            vals[4u * k + i] = f32(i32(q << (24u - 8u * i)) >> 24u) * d;
        }
    }
}
