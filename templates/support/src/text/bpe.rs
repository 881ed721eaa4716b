//! Byte-level byte-pair encoding by rank, tiktoken's algorithm: the text is split by a
//! pre-tokenizer pattern, and each piece is merged pair by pair, lowest rank first. Shared by
//! tiktoken rank files (id = rank) and Tekken (id = rank + number of special tokens).

use std::collections::HashMap;

use super::tokenizer::{err, TokenizerError};

pub struct BytePairEncoder {
    rank_of_bytes: HashMap<Vec<u8>, u32>,
    bytes_of_rank: HashMap<u32, Vec<u8>>,
    split: fancy_regex::Regex,
}

impl BytePairEncoder {
    /// `ranks`: (token bytes, rank) pairs, both unique; `pattern`: the pre-tokenizer split
    /// (tiktoken's `pat_str`).
    pub fn new(ranks: Vec<(Vec<u8>, u32)>, pattern: &str) -> Result<BytePairEncoder, TokenizerError> {
        let split = fancy_regex::Regex::new(pattern).map_err(|e| err(format!("pre-tokenizer pattern does not compile: {e}")))?;
        let mut rank_of_bytes = HashMap::with_capacity(ranks.len());
        let mut bytes_of_rank = HashMap::with_capacity(ranks.len());
        for (bytes, rank) in ranks {
            if let Some(earlier) = rank_of_bytes.insert(bytes.clone(), rank) {
                return Err(err(format!("duplicate token: ranks {earlier} and {rank} have the same bytes {bytes:02x?}")));
            }
            if bytes_of_rank.insert(rank, bytes).is_some() {
                return Err(err(format!("duplicate rank {rank}")));
            }
        }
        Ok(BytePairEncoder { rank_of_bytes, bytes_of_rank, split })
    }

    pub fn rank(&self, bytes: &[u8]) -> Option<u32> {
        self.rank_of_bytes.get(bytes).copied()
    }

    pub fn bytes(&self, rank: u32) -> Option<&[u8]> {
        self.bytes_of_rank.get(&rank).map(Vec::as_slice)
    }

    pub fn max_rank(&self) -> Option<u32> {
        self.bytes_of_rank.keys().max().copied()
    }

    /// Appends the ids (rank + `id_offset`) of `text`, special-token strings included as
    /// plain text.
    pub fn encode(&self, text: &str, id_offset: u32, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        for m in self.split.find_iter(text) {
            let m = m.map_err(|e| err(format!("pre-tokenizer: {e}")))?;
            let piece = m.as_str().as_bytes();
            let start = out.len();
            match self.rank_of_bytes.get(piece) {
                Some(&rank) => out.push(rank),
                None => self.merge_piece(piece, out)?,
            }
            for id in &mut out[start..] {
                let rank = *id;
                *id = rank
                    .checked_add(id_offset)
                    .ok_or_else(|| err(format!("token id of rank {rank} + {id_offset} does not fit in 32 bits")))?;
            }
        }
        Ok(())
    }

    /// Repeatedly merges the adjacent pair whose concatenation has the lowest rank (leftmost
    /// on ties), as tiktoken does; appends the ranks of the final parts.
    fn merge_piece(&self, piece: &[u8], out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let mut bounds: Vec<usize> = (0..=piece.len()).collect();
        while bounds.len() > 2 {
            let mut best: Option<(u32, usize)> = None;
            for i in 0..bounds.len() - 2 {
                if let Some(&r) = self.rank_of_bytes.get(&piece[bounds[i]..bounds[i + 2]]) {
                    if best.is_none_or(|(br, _)| r < br) {
                        best = Some((r, i));
                    }
                }
            }
            match best {
                Some((_, i)) => {
                    bounds.remove(i + 1);
                }
                None => break,
            }
        }
        for w in bounds.windows(2) {
            let part = &piece[w[0]..w[1]];
            let rank = self
                .rank_of_bytes
                .get(part)
                .ok_or_else(|| err(format!("bytes {part:02x?} have no token (the vocabulary lacks single bytes)")))?;
            out.push(*rank);
        }
        Ok(())
    }
}
