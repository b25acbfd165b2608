// y[t, y_off + r] (=|+=) Σ_k W[w_row0 + r, k] · x[t, k], for rows r < rows and tokens
// t < tokens. One workgroup per output row and tile of TT tokens: each weight run is
// decoded once and dotted with every token of the tile.

struct Params {
    rows: u32,
    cols: u32,
    tokens: u32,
    row_bytes: u32,
    w_row0: u32,
    x_stride: u32,
    y_stride: u32,
    y_off: u32,
    add: u32,
}

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = 64u;
const TT: u32 = 8u;

var<workgroup> red: array<f32, 512>;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) g: vec3<u32>,
    @builtin(num_workgroups) ng: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let row = g.x + g.y * ng.x;
    let t0 = g.z * TT;
    let nt = min(TT, p.tokens - t0);
    var acc: array<f32, 8>;
    if row < p.rows {
        let base = (p.w_row0 + row) * p.row_bytes;
        let nsb = p.cols / 32u;
        for (var sb = li; sb < nsb; sb += WG) {
            dq32(base, sb);
            for (var t = 0u; t < nt; t++) {
                let xo = (t0 + t) * p.x_stride + sb * 32u;
                var s = 0.0;
                for (var j = 0u; j < 32u; j++) {
                    s += vals[j] * x[xo + j];
                }
                acc[t] += s;
            }
        }
    }
    for (var t = 0u; t < TT; t++) {
        red[t * WG + li] = acc[t];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if li < s {
            for (var t = 0u; t < TT; t++) {
                red[t * WG + li] += red[t * WG + li + s];
            }
        }
        workgroupBarrier();
    }
    if li < nt && row < p.rows {
        let o = (t0 + li) * p.y_stride + p.y_off + row;
        let v = red[li * WG];
        if p.add != 0u {
            y[o] += v;
        } else {
            y[o] = v;
        }
    }
}
