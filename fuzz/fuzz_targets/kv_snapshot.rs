//! The KV snapshot reader (a named context's blob in the model store, which anyone
//! with access to the store could have written) on arbitrary bytes. Must not panic
//! or allocate past what the bytes hold; an accepted snapshot's parts must fit its
//! header, and writing it back must give the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use llamay_runtime::snapshot::{parse, write};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = parse(data) else {
        return;
    };
    let h = &s.header;
    assert_eq!(s.tokens.len(), h.tokens);
    assert_eq!(s.blocks.len(), h.blocks);
    assert!(s.blocks.iter().all(|b| b.len() == h.block_bytes));
    let blocks: Vec<Vec<u8>> = s.blocks.iter().map(|b| b.to_vec()).collect();
    assert_eq!(s.recurrent.len(), h.recurrent_bytes);
    let again = write(h, &s.tokens, &blocks, s.recurrent);
    let back = parse(&again).expect("a written snapshot parses");
    assert_eq!((&back.header, &back.tokens), (h, &s.tokens));
    assert_eq!(back.recurrent, s.recurrent);
});
