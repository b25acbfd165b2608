//! The vocabulary's token trie: the tokens' byte strings in one array of compact nodes,
//! which every mask walk streams through.

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

/// Longest token (in bytes) put in the trie; longer ones are never allowed.
impl Trie {
    /// The trie of tokens `sorted` (ids into `tokens`, in byte order).
    pub fn build(tokens: &[Vec<u8>], sorted: &[u32]) -> Trie {
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
        t
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

    /// The children of a [`wide`](TrieNode::wide) node, their bytes and nodes (none
    /// for another node).
    pub fn kids(&self, i: usize) -> (&[u8], &[u32]) {
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
    pub fn tokens_at(&self, i: usize) -> &[u32] {
        let n = &self.nodes[i];
        match n.tok {
            NO_TOKEN => &[],
            t if t & MANY == 0 => std::slice::from_ref(&n.tok),
            t => &self.many[(t & !MANY) as usize],
        }
    }

    /// Number of nodes, root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
}
