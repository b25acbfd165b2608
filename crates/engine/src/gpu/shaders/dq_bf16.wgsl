fn dq32(base: u32, sb: u32) {
    let i = (base >> 2u) + sb * 16u;
    for (var j = 0u; j < 16u; j++) {
        let v = w[i + j];
        vals[2u * j] = bitcast<f32>(v << 16u);
        vals[2u * j + 1u] = bitcast<f32>(v & 0xFFFF0000u);
    }
}
