fn dq32(base: u32, sb: u32) {
    let s = sb & 7u;
    let o = base + (sb >> 3u) * 144u;
    let dm = k_scale_offset(o, s);
    let d1 = dm.x;
    let m1 = dm.y;
    let q = o + 16u + (s >> 1u) * 32u;
    let shift = (s & 1u) * 4u;
    for (var l = 0u; l < 32u; l++) {
        vals[l] = d1 * f32((byte_at(q + l) >> shift) & 15u) - m1;
    }
}
