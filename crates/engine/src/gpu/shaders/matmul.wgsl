// y[t, y_off + r] (=|+=) Σ_k W[w_row0 + r, k] · x[t, k], for rows r < rows and tokens
// t < tokens. A workgroup takes 8 rows (8 lanes each) and a tile of TT tokens: each
// weight run is decoded once and dotted with every token of the tile. Rows of a few
// hundred values keep all lanes busy; one workgroup per row would idle most of them.

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

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const LANES: u32 = 8u;
const TT: u32 = 8u;

var<workgroup> red: array<f32, 512>;

@compute @workgroup_size(64)
fn main(
    @builtin(workgroup_id) g: vec3<u32>,
    @builtin(num_workgroups) ng: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let lane = li % LANES;
    let row = (g.x + g.y * ng.x) * 8u + li / LANES;
    let t0 = g.z * TT;
    let nt = min(TT, p.tokens - t0);
    var acc: array<f32, 8>;
    if row < p.rows {
        let base = (p.w_row0 + row) * p.row_bytes;
        let nsb = p.cols / 32u;
        for (var sb = lane; sb < nsb; sb += LANES) {
            dq32(base, sb);
            var w4: array<vec4<f32>, 8>;
            for (var i = 0u; i < 8u; i++) {
                w4[i] = vec4<f32>(vals[4u * i], vals[4u * i + 1u], vals[4u * i + 2u], vals[4u * i + 3u]);
            }
            // A constant trip count, so the loop unrolls and `acc` stays in registers.
            for (var t = 0u; t < TT; t++) {
                if t < nt {
                    let xo = ((t0 + t) * p.x_stride + sb * 32u) / 4u;
                    var s = 0.0;
                    for (var i = 0u; i < 8u; i++) {
                        s += dot(w4[i], x[xo + i]);
                    }
                    acc[t] += s;
                }
            }
        }
    }
    for (var t = 0u; t < TT; t++) {
        red[t * 64u + li] = acc[t];
    }
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if lane < s {
            for (var t = 0u; t < TT; t++) {
                red[t * 64u + li] += red[t * 64u + li + s];
            }
        }
        workgroupBarrier();
    }
    // Lane l writes token l's sum of its row.
    if lane < nt && row < p.rows {
        let o = (t0 + lane) * p.y_stride + p.y_off + row;
        let v = red[lane * 64u + li - lane];
        if p.add != 0u {
            y[o] += v;
        } else {
            y[o] = v;
        }
    }
}
