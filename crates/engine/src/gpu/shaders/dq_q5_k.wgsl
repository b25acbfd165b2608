fn dq32(base: u32, sb: u32) {
    let s = sb & 7u;
    let o = base + (sb >> 3u) * 176u;
    let dm = k_scale_offset(o, s);
    let d1 = dm.x;
    let m1 = dm.y;
    let q = o + 48u + (s >> 1u) * 32u;
    let shift = (s & 1u) * 4u;
    for (var l = 0u; l < 32u; l++) {
        let hb = ((byte_at(o + 16u + l) >> s) & 1u) << 4u;
        vals[l] = d1 * f32(((byte_at(q + l) >> shift) & 15u) | hb) - m1;
    }
}
