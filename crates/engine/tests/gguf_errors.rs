//! Each way a GGUF file can be malformed gets its own error, never a panic.

mod common;

use common::gguf_writer::{str_elems, Gguf, Tensor, V};
use llamay_engine::{GgufError, GgufFile, What};

fn open(g: &Gguf) -> Result<GgufFile, GgufError> {
    GgufFile::from_bytes(g.build())
}

#[test]
fn the_default_fixture_is_valid() {
    let f = open(&Gguf::default()).expect("well-formed");
    assert_eq!(f.version(), 3);
    assert_eq!(f.tensors().len(), 1);
    assert_eq!(f.tensors()[0].size, 32);
    assert_eq!(f.architecture().unwrap(), "llama");
    let v2 = Gguf {
        version: 2,
        ..Gguf::default()
    };
    assert_eq!(open(&v2).unwrap().version(), 2);
}

#[test]
fn bad_magic() {
    let g = Gguf {
        magic: *b"GGML",
        ..Gguf::default()
    };
    assert!(matches!(open(&g), Err(GgufError::BadMagic { found }) if &found == b"GGML"));
}

#[test]
fn unsupported_versions_and_big_endian() {
    for v in [0, 1, 4, 99] {
        let g = Gguf {
            version: v,
            ..Gguf::default()
        };
        assert!(matches!(open(&g), Err(GgufError::UnsupportedVersion(x)) if x == v));
    }
    let g = Gguf {
        version: 3u32.swap_bytes(),
        ..Gguf::default()
    };
    assert!(matches!(open(&g), Err(GgufError::BigEndian)));
}

#[test]
fn every_truncation_of_the_header_is_reported() {
    let bytes = Gguf::default().build();
    let header_end = bytes.len() - 32;
    for cut in 0..header_end {
        let r = GgufFile::from_bytes(bytes[..cut].to_vec());
        match r {
            Err(GgufError::Truncated { needed, offset, .. }) => {
                assert!(offset + needed > cut as u64, "cut {cut}")
            }
            // A count whose entries cannot fit in what is left is caught before reading.
            Err(GgufError::AbsurdCount { len, .. }) => assert_eq!(len, cut as u64),
            // Cutting inside the alignment padding leaves the header whole but the
            // tensor outside the file.
            Err(GgufError::TensorOutOfBounds { .. }) => assert!(cut >= header_end - 31),
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
}

#[test]
fn truncated_tensor_data() {
    let mut bytes = Gguf::default().build();
    bytes.truncate(bytes.len() - 1);
    assert!(matches!(
        GgufFile::from_bytes(bytes),
        Err(GgufError::TensorOutOfBounds { ref name, end: 32, len: 31, .. }) if name == "a"
    ));
}

/// An MXFP4 expert tensor (17-byte blocks of 32) cut short is refused by name, as
/// any tensor is; so is a length that is not whole blocks.
#[test]
fn a_truncated_mxfp4_tensor_names_itself() {
    let experts = |data_len: usize, dims: Vec<u64>| Gguf {
        tensors: vec![Tensor {
            name: "blk.0.ffn_down_exps.weight",
            dims,
            type_id: 39,
            offset: 0,
        }],
        data_len,
        ..Gguf::default()
    };
    // 64 x 2 x 2 elements: 8 blocks, 136 bytes; the data section holds 135.
    let e = open(&experts(135, vec![64, 2, 2])).unwrap_err();
    assert!(
        matches!(&e, GgufError::TensorOutOfBounds { name, .. } if name == "blk.0.ffn_down_exps.weight"),
        "{e}"
    );
    assert!(open(&experts(136, vec![64, 2, 2])).is_ok());
    let e = open(&experts(136, vec![48, 2, 2])).unwrap_err();
    assert!(e.to_string().contains("blk.0.ffn_down_exps.weight"), "{e}");
}

#[test]
fn absurd_counts_are_refused_before_allocating() {
    for n in [u64::MAX, u64::MAX / 2, 1 << 40] {
        let g = Gguf {
            n_tensors_override: Some(n),
            ..Gguf::default()
        };
        assert!(matches!(
            open(&g),
            Err(GgufError::AbsurdCount { what: What::TensorInfo, count, .. }) if count == n
        ));
        let g = Gguf {
            n_kv_override: Some(n),
            ..Gguf::default()
        };
        assert!(matches!(
            open(&g),
            Err(GgufError::AbsurdCount {
                what: What::Key,
                ..
            })
        ));
        let g = Gguf {
            kv: vec![("x", V::Arr(8, vec![], n))],
            ..Gguf::default()
        };
        assert!(matches!(
            open(&g),
            Err(GgufError::AbsurdCount {
                what: What::ArrayElement,
                ..
            })
        ));
    }
}

#[test]
fn a_string_longer_than_the_file() {
    let mut bytes = Gguf::default().build();
    // The first key's length field sits right after the 24-byte header.
    bytes[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        GgufFile::from_bytes(bytes),
        Err(GgufError::Truncated {
            what: What::Key,
            needed: u64::MAX,
            ..
        })
    ));
}

#[test]
fn unknown_value_and_tensor_types() {
    let mut bytes = Gguf::default().build();
    // header 24 + key len 8 + "general.architecture" 20 = type tag at 52.
    bytes[52..56].copy_from_slice(&13u32.to_le_bytes());
    assert!(matches!(
        GgufFile::from_bytes(bytes),
        Err(GgufError::UnknownValueType { ref key, type_id: 13 }) if key == "general.architecture"
    ));
    let g = Gguf {
        kv: vec![("x", V::Arr(77, vec![], 0))],
        ..Gguf::default()
    };
    assert!(matches!(
        open(&g),
        Err(GgufError::UnknownValueType { type_id: 77, .. })
    ));
    for bad in [4, 5, 31, 36, 9999] {
        let g = Gguf {
            tensors: vec![Tensor {
                name: "w",
                dims: vec![32],
                type_id: bad,
                offset: 0,
            }],
            ..Gguf::default()
        };
        assert!(matches!(
            open(&g),
            Err(GgufError::UnknownTensorType { ref name, type_id }) if name == "w" && type_id == bad
        ));
    }
}

#[test]
fn duplicate_keys_and_tensors() {
    let g = Gguf {
        kv: vec![("k", V::U32(1)), ("k", V::U32(2))],
        ..Gguf::default()
    };
    assert!(matches!(open(&g), Err(GgufError::DuplicateKey { ref key }) if key == "k"));
    let t = |offset| Tensor {
        name: "same",
        dims: vec![4],
        type_id: 0,
        offset,
    };
    let g = Gguf {
        tensors: vec![t(0), t(32)],
        data_len: 64,
        ..Gguf::default()
    };
    assert!(matches!(open(&g), Err(GgufError::DuplicateTensor { ref name }) if name == "same"));
}

#[test]
fn tensor_shapes() {
    let g = |dims: Vec<u64>, type_id| Gguf {
        tensors: vec![Tensor {
            name: "w",
            dims,
            type_id,
            offset: 0,
        }],
        data_len: 4096,
        ..Gguf::default()
    };
    assert!(matches!(
        open(&g(vec![1, 1, 1, 1, 1], 0)),
        Err(GgufError::TooManyDims { n_dims: 5, .. })
    ));
    // Q4_0 rows must be whole 32-element blocks.
    assert!(matches!(
        open(&g(vec![33, 2], 2)),
        Err(GgufError::BadShape { .. })
    ));
    assert!(matches!(
        open(&g(vec![u64::MAX, 2], 0)),
        Err(GgufError::BadShape { .. })
    ));
    assert!(matches!(
        open(&g(vec![1 << 40, 1 << 40], 0)),
        Err(GgufError::BadShape { .. })
    ));
    assert!(open(&g(vec![64, 2], 2)).is_ok());
}

#[test]
fn tensors_outside_overlapping_or_misaligned() {
    let two = |a: u64, b: u64| Gguf {
        tensors: vec![
            Tensor {
                name: "first",
                dims: vec![16],
                type_id: 0,
                offset: a,
            },
            Tensor {
                name: "second",
                dims: vec![16],
                type_id: 0,
                offset: b,
            },
        ],
        data_len: 128,
        ..Gguf::default()
    };
    assert!(open(&two(0, 64)).is_ok());
    assert!(matches!(
        open(&two(0, 32)),
        Err(GgufError::OverlappingTensors { ref a, ref b }) if a == "first" && b == "second"
    ));
    assert!(matches!(
        open(&two(0, 96)),
        Err(GgufError::TensorOutOfBounds { ref name, start: 96, end: 160, len: 128 }) if name == "second"
    ));
    assert!(matches!(
        open(&two(0, u64::MAX - 31)),
        Err(GgufError::TensorOutOfBounds { .. })
    ));
    assert!(matches!(
        open(&two(0, 65)),
        Err(GgufError::MisalignedTensor {
            offset: 65,
            alignment: 32,
            ..
        })
    ));
}

#[test]
fn alignment_key() {
    let with = |v: V| Gguf {
        kv: vec![("general.alignment", v)],
        alignment: 64,
        ..Gguf::default()
    };
    assert_eq!(open(&with(V::U32(64))).unwrap().alignment(), 64);
    assert_eq!(open(&with(V::U32(64))).unwrap().data_offset() % 64, 0);
    for bad in [0, 3, 48, 1 << 21] {
        assert!(matches!(
            open(&with(V::U32(bad))),
            Err(GgufError::BadAlignment(_))
        ));
    }
    assert!(matches!(
        open(&with(V::Str("32"))),
        Err(GgufError::WrongType { .. })
    ));
}

#[test]
fn nested_arrays_decode_and_deep_nesting_is_refused() {
    // [[1, 2], [3]] as an array of u32 arrays.
    let mut inner = Vec::new();
    for items in [&[1u32, 2][..], &[3u32][..]] {
        inner.extend(4u32.to_le_bytes());
        inner.extend((items.len() as u64).to_le_bytes());
        for v in items {
            inner.extend(v.to_le_bytes());
        }
    }
    let g = Gguf {
        kv: vec![("nested", V::Arr(9, inner, 2))],
        ..Gguf::default()
    };
    let f = open(&g).unwrap();
    let outer = f.get_array("nested").unwrap();
    let rows: Vec<Vec<i64>> = f
        .array_items(outer)
        .map(|v| match v {
            llamay_engine::Value::Array(a) => f
                .array_items(&a)
                .map(|x| x.as_i128().unwrap() as i64)
                .collect(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(rows, vec![vec![1, 2], vec![3]]);

    // Ten levels of one-element arrays.
    let mut raw = Vec::new();
    for _ in 0..10 {
        let mut next = Vec::new();
        next.extend(9u32.to_le_bytes());
        next.extend(1u64.to_le_bytes());
        next.extend(&raw);
        raw = next;
    }
    let g = Gguf {
        kv: vec![("deep", V::Arr(9, raw, 1))],
        ..Gguf::default()
    };
    assert!(matches!(open(&g), Err(GgufError::NestingTooDeep { .. })));
}

#[test]
fn typed_accessors() {
    let g = Gguf {
        kv: vec![
            ("s", V::Str("text")),
            ("u", V::U32(7)),
            ("i", V::I32(-1)),
            ("f", V::F32(0.5)),
            ("b", V::Bool(true)),
            ("big", V::U64(1 << 40)),
            ("names", V::Arr(8, str_elems(&["a", "bc"]), 2)),
            (
                "scores",
                V::Arr(
                    6,
                    [1.5f32, -2.0]
                        .iter()
                        .flat_map(|f| f.to_le_bytes())
                        .collect(),
                    2,
                ),
            ),
            ("bytes", V::U8(3)),
        ],
        ..Gguf::default()
    };
    let f = open(&g).unwrap();
    assert_eq!(f.get_str("s").unwrap(), "text");
    assert_eq!(f.get_u32("u").unwrap(), 7);
    assert_eq!(f.get_u32("bytes").unwrap(), 3);
    assert!(matches!(f.get_u32("i"), Err(GgufError::WrongType { .. })));
    assert!(matches!(f.get_u32("big"), Err(GgufError::WrongType { .. })));
    assert_eq!(f.get_u64("big").unwrap(), 1 << 40);
    assert_eq!(f.get_f32("f").unwrap(), 0.5);
    assert_eq!(f.opt_bool("b").unwrap(), Some(true));
    assert!(matches!(
        f.get_str("missing"),
        Err(GgufError::MissingKey { .. })
    ));
    assert_eq!(f.opt_u32("missing").unwrap(), None);
    let names: Vec<&[u8]> = f.array_strings("names").unwrap().collect();
    assert_eq!(names, vec![&b"a"[..], &b"bc"[..]]);
    assert_eq!(f.array_f32("scores").unwrap(), vec![1.5, -2.0]);
    assert!(matches!(
        f.array_strings("scores"),
        Err(GgufError::WrongType { .. })
    ));
    assert!(matches!(
        f.array_f32("names"),
        Err(GgufError::WrongType { .. })
    ));
}

#[test]
fn a_missing_file_names_its_path() {
    let e = GgufFile::open("/nonexistent/model.gguf").unwrap_err();
    assert!(e.to_string().contains("/nonexistent/model.gguf"), "{e}");
}

#[test]
fn a_zero_sized_tensor_still_needs_its_data_section() {
    // Found by the fuzzer: a tensor with a zero dimension, in a file cut before the
    // aligned start of the data section.
    let g = Gguf {
        tensors: vec![Tensor {
            name: "empty",
            dims: vec![4, 0],
            type_id: 0,
            offset: 0,
        }],
        data_len: 0,
        ..Gguf::default()
    };
    assert!(GgufFile::from_bytes(g.build()).is_ok());
    // Written without padding: the file ends where the header does.
    let bytes = Gguf { alignment: 1, ..g }.build();
    assert_ne!(bytes.len() % 32, 0);
    assert!(matches!(
        GgufFile::from_bytes(bytes),
        Err(GgufError::Truncated {
            what: What::TensorInfo,
            ..
        })
    ));
}
