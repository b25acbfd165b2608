fn dq32(base: u32, sb: u32) {
    let i = (base >> 2u) + sb * 32u;
    for (var j = 0u; j < 32u; j++) {
        vals[j] = bitcast<f32>(w[i + j]);
    }
}
