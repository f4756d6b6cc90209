//! Which of a fixed set of words occur in a text, ignoring ASCII case: the
//! rules' keyword prefilter and the allowlists' stopwords.
//!
//! One pass over the text; at each byte, a bit per two-byte prefix says
//! whether any word could start there, and only then are the words with
//! that prefix compared. Small and branch-light, so it stays fast even where
//! a Wasm engine interprets rather than compiles it.

pub(super) struct WordSet {
    /// Lowercased, sorted by their first two bytes.
    words: Vec<(u16, &'static [u8])>,
    /// Where each word sits in the caller's list.
    ids: Vec<usize>,
    /// A bit per two-byte prefix that some word starts with.
    starts: Vec<u64>,
    /// One-byte words, by byte.
    singles: Vec<(u8, usize)>,
}

fn pair(a: u8, b: u8) -> u16 {
    u16::from(a.to_ascii_lowercase()) << 8 | u16::from(b.to_ascii_lowercase())
}

impl WordSet {
    /// The set of `words` (non-empty, ASCII-lowercased or not ASCII at all).
    pub fn new<'a>(words: impl IntoIterator<Item = &'a &'static str>) -> WordSet {
        let mut entries: Vec<(u16, &'static [u8], usize)> = Vec::new();
        let mut singles = Vec::new();
        for (id, word) in words.into_iter().enumerate() {
            match word.as_bytes() {
                [] => {}
                [b] => singles.push((b.to_ascii_lowercase(), id)),
                w => entries.push((pair(w[0], w[1]), w, id)),
            }
        }
        entries.sort_by_key(|&(p, _, id)| (p, id));
        let mut starts = vec![0u64; 1 << 10];
        for &(p, _, _) in &entries {
            starts[usize::from(p >> 6)] |= 1 << (p & 63);
        }
        WordSet {
            words: entries.iter().map(|&(p, w, _)| (p, w)).collect(),
            ids: entries.iter().map(|&(_, _, id)| id).collect(),
            starts,
            singles,
        }
    }

    /// Calls `found` with the index of each word at each place it occurs,
    /// until `found` returns false. Kept out of line: the hot loop stays a
    /// small function of its own.
    #[inline(never)]
    pub fn scan(&self, hay: &[u8], mut found: impl FnMut(usize) -> bool) {
        for (i, &b) in hay.iter().enumerate() {
            for &(single, id) in &self.singles {
                if single == b.to_ascii_lowercase() && !found(id) {
                    return;
                }
            }
            let Some(&next) = hay.get(i + 1) else { break };
            let p = pair(b, next);
            if self.starts[usize::from(p >> 6)] & (1 << (p & 63)) == 0 {
                continue;
            }
            let from = self.words.partition_point(|&(q, _)| q < p);
            for (k, &(q, word)) in self.words[from..].iter().enumerate() {
                if q != p {
                    break;
                }
                if hay[i..].len() >= word.len() && hay[i..i + word.len()].eq_ignore_ascii_case(word) && !found(self.ids[from + k]) {
                    return;
                }
            }
        }
    }

    /// Whether any of the words occurs in `hay`.
    pub fn any_in(&self, hay: &[u8]) -> bool {
        let mut any = false;
        self.scan(hay, |_| {
            any = true;
            false
        });
        any
    }
}
