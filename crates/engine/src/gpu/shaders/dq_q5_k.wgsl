fn dq32(base: u32, sb: u32) {
    let s = sb & 7u;
    let o = base + (sb >> 3u) * 176u;
    let sm = k4_scale_min(o + 4u, s);
    let d1 = half_at(o) * sm.x;
    let m1 = half_at(o + 2u) * sm.y;
    let q = o + 48u + (s >> 1u) * 32u;
    let shift = (s & 1u) * 4u;
    for (var l = 0u; l < 32u; l++) {
        let hb = ((byte_at(o + 16u + l) >> s) & 1u) << 4u;
        vals[l] = d1 * f32(((byte_at(q + l) >> shift) & 15u) | hb) - m1;
    }
}
