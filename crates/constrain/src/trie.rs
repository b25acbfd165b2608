//! The vocabulary's token trie: the tokens' byte strings in one array of compact nodes,
//! which every mask walk streams through.

use crate::utf8::LEAD_CLASSES;

/// The token trie in depth-first preorder: node 0 is the root; node `i` is reached by
/// `nodes[i].byte` from its parent at depth `nodes[i].depth - 1`; its subtree is
/// `i..nodes[i].end`. One compact record per node, since mask walks stream through them.
#[derive(Debug, Default)]
pub(crate) struct Trie {
    pub nodes: Vec<TrieNode>,
    /// Tokens in the vocabulary (the length of a mask), in the trie or not.
    pub n_tokens: usize,
    /// Token lists of nodes where several tokens end (identical byte strings).
    many: Vec<Box<[u32]>>,
    pub max_depth: usize,
    /// The root's child on each byte (0: none), for walks that know their first bytes.
    pub first: Vec<u32>,
    /// Nodes of many children (the root, ` `, `\n`, …), ascending, with their children:
    /// `kids_at[k]..kids_at[k + 1]` in `kid_bytes` / `kid_nodes` for `wide[k]`.
    wide: Vec<u32>,
    kids_at: Vec<u32>,
    kid_bytes: Vec<u8>,
    kid_nodes: Vec<u32>,
    /// Every token in node order, and where each node's tokens begin in it
    /// (`tok_at[i]..tok_at[i + 1]`), so a subtree's tokens are one slice.
    order: Vec<u32>,
    tok_at: Vec<u32>,
    /// Per node, the [`Shape`] of the bytes below it, and the most bytes a token below
    /// it adds to it (255 standing for 255 or more).
    shapes: Vec<Shape>,
    reach: Vec<u8>,
}

/// What the bytes below a trie node are made of: bit `k < 40` for the ASCII class `k`
/// (see [`ascii_class`]), bit `40 + k` for non-ASCII characters whose lead byte is in
/// `LEAD_CLASSES[k]`, and [`UNCLEAN`] where the node is not at a character boundary or
/// some token below it is not well-formed UTF-8 from there (a stray continuation byte,
/// an overlong or surrogate sequence; one cut short at its end is well-formed). A state
/// that every character of those classes leads back to keeps every token below alive,
/// so a walk takes them without walking them.
pub(crate) type Shape = u64;
pub(crate) const UNCLEAN: Shape = 1 << 63;
/// The bits of the ASCII classes.
pub(crate) const ASCII_CLASSES: Shape = (1 << 40) - 1;
/// The classes of the whitespace bytes, which a budget may count.
pub(crate) const WS_CLASSES: Shape = 1 << ascii_class(b' ') | 1 << ascii_class(b'\t');
/// Subtrees of at most this many nodes are walked rather than asked whether their
/// state keeps every token below alive: the question costs more than such a walk.
pub(crate) const SHORTCUT_NODES: usize = 16;

/// The classes a JSON string never writes raw: control characters, the quote (which
/// closes it) and the backslash (which escapes).
pub(crate) const NOT_RAW: Shape =
    1 << ascii_class(0) | 1 << ascii_class(b'"') | 1 << ascii_class(b'\\');

/// Whether every character of `shape`'s classes leads state `s` back to `s` through
/// `next` (a state and a byte to the state after, if alive), learnt class by class into
/// `learnt` (the classes known, and those of them that loop) as walks ask: the cheap
/// ASCII ones first, and the first that does not loop settles it.
pub(crate) fn loops_on(
    s: u32,
    shape: Shape,
    learnt: &mut (Shape, Shape),
    mut next: impl FnMut(u32, u8) -> Option<u32>,
) -> bool {
    let (known, yes) = learnt;
    if shape & *known & !*yes & !UNCLEAN != 0 {
        return false;
    }
    let unknown = shape & !*known & !UNCLEAN;
    for k in classes(unknown & ASCII_CLASSES).chain(classes(unknown & !ASCII_CLASSES)) {
        let back = match k.checked_sub(40) {
            None => (0..0x80u8)
                .filter(|&b| CLASS_BYTES[k as usize] >> b & 1 != 0)
                .all(|b| next(s, b) == Some(s)),
            Some(lead) => crate::utf8::loops_on_leads(s, LEAD_CLASSES[lead as usize], &mut next),
        };
        *known |= 1 << k;
        *yes |= u64::from(back) << k;
        if !back {
            return false;
        }
    }
    shape & !UNCLEAN & !*yes == 0
}

/// The bytes of each ASCII class, bit `b` for byte `b`.
pub(crate) const CLASS_BYTES: [u128; 40] = {
    let mut t = [0u128; 40];
    let mut b = 0;
    while b < 0x80 {
        t[ascii_class(b) as usize] |= 1 << b;
        b += 1;
    }
    t
};

/// The classes (set bits) of `x`, lowest first.
pub(crate) fn classes(mut x: u64) -> impl Iterator<Item = u32> {
    std::iter::from_fn(move || {
        (x != 0).then(|| {
            let k = x.trailing_zeros();
            x &= x - 1;
            k
        })
    })
}

/// The shape bit of a byte where a character starts (none for a continuation byte).
fn start_bit(b: u8) -> Shape {
    if b < 0x80 {
        return 1 << ascii_class(b);
    }
    LEAD_CLASSES
        .iter()
        .position(|&(lo, hi)| (lo..=hi).contains(&b))
        .map_or(0, |k| 1 << (40 + k))
}

/// The class of an ASCII byte: control characters, the space, each punctuation mark
/// alone, digits, and letters split at `f` (hex digits apart), since patterns tend to
/// treat the members of each class alike.
pub(crate) const fn ascii_class(b: u8) -> u32 {
    match b {
        0..=0x1F | 0x7F => 0,
        b' ' => 1,
        b'0'..=b'9' => 2,
        b'A'..=b'F' => 3,
        b'G'..=b'Z' => 4,
        b'a'..=b'f' => 5,
        b'g'..=b'z' => 6,
        // The 32 punctuation marks, 7..=38.
        b'!'..=b'/' => 7 + (b - b'!') as u32,
        b':'..=b'@' => 22 + (b - b':') as u32,
        b'['..=b'`' => 29 + (b - b'[') as u32,
        _ => 35 + (b - b'{') as u32,
    }
}

/// Children from which a node gets a child list: a walk that reaches such a node alive
/// asks which of those bytes live on from its state and touches only their subtrees,
/// instead of one scattered node per child (over Gemma's vocabulary the ` ` node alone
/// has thousands of children, spread over megabytes: cold cache lines and pages).
const WIDE: usize = 16;

/// One trie node.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TrieNode {
    /// One past the last node of this node's subtree.
    pub end: u32,
    /// The token ending here, [`NO_TOKEN`], or `MANY | index` into `Trie::many`.
    tok: u32,
    pub depth: u16,
    pub byte: u8,
    /// Whether the node has a child list (see [`WIDE`]).
    pub wide: bool,
}

const NO_TOKEN: u32 = u32::MAX;
const MANY: u32 = 1 << 31;

impl Trie {
    /// The trie of tokens `sorted` (ids into `tokens`, in byte order).
    pub(crate) fn build(tokens: &[Vec<u8>], sorted: &[u32]) -> Trie {
        let mut t = Trie {
            nodes: vec![TrieNode {
                tok: NO_TOKEN,
                ..TrieNode::default()
            }],
            n_tokens: tokens.len(),
            ..Trie::default()
        };
        // Path of node indices from the root to the previous token's last node.
        let mut path: Vec<u32> = vec![0];
        let mut prev: &[u8] = &[];
        for &id in sorted {
            let bytes = tokens[id as usize].as_slice();
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > common + 1 {
                let node = path.pop().unwrap();
                t.nodes[node as usize].end = t.nodes.len() as u32;
            }
            for (d, &b) in bytes.iter().enumerate().skip(common) {
                t.nodes.push(TrieNode {
                    end: 0,
                    tok: NO_TOKEN,
                    depth: (d + 1) as u16,
                    byte: b,
                    wide: false,
                });
                path.push((t.nodes.len() - 1) as u32);
            }
            let node = &mut t.nodes[*path.last().unwrap() as usize];
            // Sorted input: byte-identical tokens arrive one after another.
            node.tok = match node.tok {
                NO_TOKEN => id,
                one if one & MANY == 0 => {
                    t.many.push(Box::new([one, id]));
                    MANY | (t.many.len() - 1) as u32
                }
                many => {
                    let i = (many & !MANY) as usize;
                    t.many[i] = t.many[i].iter().copied().chain([id]).collect();
                    many
                }
            };
            t.max_depth = t.max_depth.max(bytes.len());
            prev = bytes;
        }
        for node in path {
            t.nodes[node as usize].end = t.nodes.len() as u32;
        }
        t.first = vec![0; 256];
        let mut i = 1;
        while i < t.nodes.len() {
            t.first[usize::from(t.nodes[i].byte)] = i as u32;
            i = t.nodes[i].end as usize;
        }
        t.index_wide_nodes();
        t.index_tokens();
        t.index_shapes();
        t
    }

    fn index_tokens(&mut self) {
        let (mut order, mut tok_at) = (Vec::new(), Vec::with_capacity(self.nodes.len() + 1));
        for node in &self.nodes {
            tok_at.push(order.len() as u32);
            self.push_tokens(node, &mut order);
        }
        tok_at.push(order.len() as u32);
        (self.order, self.tok_at) = (order, tok_at);
    }

    /// Computes every node's [`Shape`]: the UTF-8 places going down, the bytes below
    /// gathered coming back up (in reverse preorder, a node's children are met before
    /// it and after its later siblings' subtrees).
    fn index_shapes(&mut self) {
        use crate::utf8::Utf8At;
        let n = self.nodes.len();
        let mut by_depth = vec![Utf8At::BOUNDARY; self.max_depth + 1];
        let at: Vec<Utf8At> = (self.nodes.iter().enumerate())
            .map(|(i, node)| {
                if i == 0 {
                    return Utf8At::BOUNDARY;
                }
                let d = node.depth as usize;
                by_depth[d] = by_depth[d - 1].after(node.byte);
                by_depth[d]
            })
            .collect();
        self.shapes = vec![0; n];
        // Per depth, what the children met so far of the open node above hold, and
        // whether some byte below them broke UTF-8.
        let mut below = vec![0 as Shape; self.max_depth + 2];
        let mut broken_below = vec![false; self.max_depth + 2];
        let mut reach_below = vec![0u8; self.max_depth + 2];
        self.reach = vec![0; n];
        for i in (0..n).rev() {
            let d = self.nodes[i].depth as usize;
            let bytes = std::mem::take(&mut below[d + 1]);
            let broken = std::mem::take(&mut broken_below[d + 1]);
            self.reach[i] = std::mem::take(&mut reach_below[d + 1]);
            let clean = at[i].due == 0 && !at[i].broken && !broken;
            self.shapes[i] = if clean { bytes } else { bytes | UNCLEAN };
            if i > 0 {
                below[d] |= start_bit(self.nodes[i].byte) | bytes;
                broken_below[d] |= at[i].broken || broken;
                reach_below[d] = reach_below[d].max(self.reach[i].saturating_add(1));
            }
        }
    }

    fn index_wide_nodes(&mut self) {
        self.kids_at.push(0);
        for i in 0..self.nodes.len() {
            let mut kids = Vec::new();
            let mut j = i + 1;
            while j < self.nodes[i].end as usize {
                kids.push(j as u32);
                j = self.nodes[j].end as usize;
            }
            if kids.len() >= WIDE {
                self.nodes[i].wide = true;
                self.wide.push(i as u32);
                self.kid_bytes
                    .extend(kids.iter().map(|&k| self.nodes[k as usize].byte));
                self.kid_nodes.extend_from_slice(&kids);
                self.kids_at.push(self.kid_nodes.len() as u32);
            }
        }
    }

    /// The child of node `i` on byte `b`, if there is one.
    pub(crate) fn child(&self, i: usize, b: u8) -> Option<usize> {
        if i == 0 {
            return Some(self.first[usize::from(b)] as usize).filter(|&c| c != 0);
        }
        if self.nodes[i].wide {
            let (bytes, kids) = self.kids(i);
            return bytes.binary_search(&b).ok().map(|k| kids[k] as usize);
        }
        // Children come in byte order, each after its elder sibling's subtree.
        let (mut j, end) = (i + 1, self.nodes[i].end as usize);
        while j < end && self.nodes[j].byte < b {
            j = self.nodes[j].end as usize;
        }
        (j < end && self.nodes[j].byte == b).then_some(j)
    }

    /// The children of a [`wide`](TrieNode::wide) node, their bytes and nodes (none
    /// for another node).
    pub(crate) fn kids(&self, i: usize) -> (&[u8], &[u32]) {
        match self.wide.binary_search(&(i as u32)) {
            Ok(k) => {
                let r = self.kids_at[k] as usize..self.kids_at[k + 1] as usize;
                (&self.kid_bytes[r.clone()], &self.kid_nodes[r])
            }
            Err(_) => (&[], &[]),
        }
    }

    /// The tokens ending at node `i`.
    #[inline]
    pub(crate) fn tokens_at(&self, i: usize) -> &[u32] {
        let n = &self.nodes[i];
        match n.tok {
            NO_TOKEN => &[],
            t if t & MANY == 0 => std::slice::from_ref(&n.tok),
            t => &self.many[(t & !MANY) as usize],
        }
    }

    /// Appends the tokens ending at `node` (a node of this trie) to `out`.
    #[inline]
    pub(crate) fn push_tokens(&self, node: &TrieNode, out: &mut Vec<u32>) {
        match node.tok {
            NO_TOKEN => {}
            t if t & MANY == 0 => out.push(t),
            t => out.extend_from_slice(&self.many[(t & !MANY) as usize]),
        }
    }

    /// The shape of the bytes below node `i`.
    #[inline]
    pub(crate) fn shape(&self, i: usize) -> Shape {
        self.shapes[i]
    }

    /// The most bytes a token below node `i` adds to the node's (`u32::MAX` from 255 on:
    /// the count is kept in a byte).
    #[inline]
    pub(crate) fn reach(&self, i: usize) -> u32 {
        match self.reach[i] {
            u8::MAX => u32::MAX,
            r => u32::from(r),
        }
    }

    /// The tokens below node `i` (not its own).
    pub(crate) fn tokens_below(&self, i: usize) -> &[u32] {
        let end = self.nodes[i].end as usize;
        &self.order[self.tok_at[i + 1] as usize..self.tok_at[end] as usize]
    }

    /// Number of nodes, root included.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }
}
