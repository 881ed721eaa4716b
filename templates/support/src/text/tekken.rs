//! Mistral's Tekken tokenizer (`tekken.json`), read as mistral-common's `Tekkenizer` reads it:
//! byte-level BPE over the file's ranked vocabulary (truncated to `default_vocab_size −
//! default_num_special_tokens`), with the special tokens in front (BPE id = rank + number of
//! special tokens). Plain text never encodes to a special token; decoding drops control tokens.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use super::base64::base64_decode;
use super::bpe::BytePairEncoder;
use super::tokenizer::{err, Tokenizer, TokenizerError};

#[derive(Clone, Debug, Deserialize)]
pub struct TekkenConfig {
    /// The pre-tokenizer split (tiktoken's `pat_str`).
    pub pattern: String,
    /// Regular tokens in the file (before truncation).
    pub num_vocab_tokens: u64,
    /// Ids in use: special tokens plus the kept regular tokens.
    pub default_vocab_size: u32,
    pub default_num_special_tokens: u32,
    /// "v3", "v7", "v11", …
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct AudioEncodingConfig {
    pub num_mel_bins: u32,
    pub hop_length: u32,
    pub window_size: u32,
}

/// The optional `audio` section (Voxtral): how audio becomes `[AUDIO]` tokens.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct AudioConfig {
    pub sampling_rate: u32,
    /// Audio tokens per second.
    pub frame_rate: f64,
    pub audio_encoding_config: AudioEncodingConfig,
    #[serde(default)]
    pub chunk_length_s: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct SpecialToken {
    pub rank: u32,
    pub token_str: String,
    /// Control tokens (`<s>`, `[INST]`, …) are never part of decoded text.
    pub is_control: bool,
}

#[derive(Deserialize)]
struct VocabEntry {
    rank: u64,
    token_bytes: String,
}

#[derive(Deserialize)]
struct TekkenFile {
    config: TekkenConfig,
    vocab: Vec<VocabEntry>,
    special_tokens: Option<Vec<SpecialToken>>,
    audio: Option<AudioConfig>,
}

/// The specials of files up to v7, which have no `special_tokens` list (mistral-common's
/// `DEPRECATED_SPECIAL_TOKENS`); all are control tokens, id = position.
const DEFAULT_SPECIALS: [&str; 20] = [
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
];

/// The last version whose files may omit `special_tokens`.
const LAST_VERSION_WITH_DEFAULT_SPECIALS: u32 = 7;

pub struct Tekken {
    bpe: BytePairEncoder,
    /// The specials the file lists (or the defaults); the rest up to `num_special` are the
    /// fillers `<SPECIAL_i>`, named on demand so a huge count costs no memory.
    listed_specials: Vec<SpecialToken>,
    special_ids: HashMap<String, u32>,
    num_special: u32,
    vocab_size: u32,
    config: TekkenConfig,
    audio: Option<AudioConfig>,
}

impl Tekken {
    /// Reads `path`; errors name it.
    pub fn from_file(path: &Path) -> Result<Tekken, TokenizerError> {
        let bytes = std::fs::read(path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        Tekken::from_bytes(&bytes).map_err(|e| err(format!("{}: {}", path.display(), e.0)))
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Tekken, TokenizerError> {
        let file: TekkenFile =
            serde_json::from_slice(bytes).map_err(|e| err(format!("not a valid tekken.json: {e}")))?;
        let TekkenFile { config, vocab, special_tokens, audio } = file;
        let version = parse_version(&config.version)?;
        let listed_specials = match special_tokens {
            Some(list) => list,
            None if version <= LAST_VERSION_WITH_DEFAULT_SPECIALS => DEFAULT_SPECIALS
                .iter()
                .zip(0..)
                .map(|(name, rank)| SpecialToken { rank, token_str: name.to_string(), is_control: true })
                .collect(),
            None => {
                return Err(err(format!(
                    "version {} needs a `special_tokens` list (only files up to v{LAST_VERSION_WITH_DEFAULT_SPECIALS} may omit it)",
                    config.version
                )))
            }
        };
        let num_special = config.default_num_special_tokens;
        let vocab_size = config.default_vocab_size;
        let special_ids = index_specials(&listed_specials, num_special)?;
        let Some(regular) = vocab_size.checked_sub(num_special) else {
            return Err(err(format!(
                "config.default_num_special_tokens ({num_special}) exceeds config.default_vocab_size ({vocab_size})"
            )));
        };
        let regular = regular as usize;
        if vocab.len() < regular {
            return Err(err(format!(
                "vocab has {} entries, fewer than default_vocab_size − default_num_special_tokens = {regular}",
                vocab.len()
            )));
        }
        if regular < 256 {
            return Err(err(format!(
                "only {regular} regular tokens (default_vocab_size − default_num_special_tokens); the first 256 must be the single bytes"
            )));
        }
        let ranks = vocab[..regular].iter().enumerate().map(decode_vocab_entry).collect::<Result<Vec<_>, _>>()?;
        let bpe = BytePairEncoder::new(ranks, &config.pattern).map_err(|e| err(format!("config.pattern: {}", e.0)))?;
        Ok(Tekken { bpe, listed_specials, special_ids, num_special, vocab_size, config, audio })
    }

    pub fn config(&self) -> &TekkenConfig {
        &self.config
    }

    pub fn audio(&self) -> Option<&AudioConfig> {
        self.audio.as_ref()
    }

    pub fn num_special_tokens(&self) -> u32 {
        self.num_special
    }

    /// The name of special token `id` (fillers included); None for regular ids.
    pub fn special_name(&self, id: u32) -> Option<String> {
        match self.listed_specials.get(id as usize) {
            Some(s) => Some(s.token_str.clone()),
            None if id < self.num_special => Some(filler_name(id)),
            None => None,
        }
    }

    /// Whether `id` is a control token (fillers are).
    pub fn is_control(&self, id: u32) -> bool {
        match self.listed_specials.get(id as usize) {
            Some(s) => s.is_control,
            None => id < self.num_special,
        }
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.token_to_id("<s>").filter(|&id| id < self.num_special)
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.token_to_id("</s>").filter(|&id| id < self.num_special)
    }
}

impl Tokenizer for Tekken {
    /// mistral-common's `encode(text, bos=add_special, eos=False)`.
    fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TokenizerError> {
        let mut out = Vec::new();
        if add_special {
            out.extend(self.bos_id());
        }
        self.bpe.encode(text, self.num_special, &mut out)?;
        Ok(out)
    }

    /// As mistral-common, each run of regular tokens is decoded on its own (a special token
    /// between the halves of a character leaves two U+FFFD); control tokens are always dropped,
    /// other specials unless `skip_special`.
    fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TokenizerError> {
        let mut text = String::new();
        let mut run = Vec::new();
        for &id in ids {
            if id < self.num_special {
                text.push_str(&String::from_utf8_lossy(&run));
                run.clear();
                if !skip_special && !self.is_control(id) {
                    text.push_str(&self.special_name(id).unwrap_or_default());
                }
            } else if let Some(bytes) = self.bpe.bytes(id - self.num_special) {
                run.extend_from_slice(bytes);
            }
        }
        text.push_str(&String::from_utf8_lossy(&run));
        Ok(text)
    }

    fn vocab_size(&self) -> usize {
        self.vocab_size as usize
    }

    /// Special tokens by name (`[AUDIO]`, `<SPECIAL_57>`), else a regular token by its text.
    fn token_to_id(&self, token: &str) -> Option<u32> {
        if let Some(&id) = self.special_ids.get(token) {
            return Some(id);
        }
        if let Some(i) = filler_index(token) {
            if (self.listed_specials.len() as u64..self.num_special as u64).contains(&(i as u64)) {
                return Some(i);
            }
        }
        self.bpe.rank(token.as_bytes()).and_then(|rank| rank.checked_add(self.num_special))
    }

    fn kind(&self) -> &'static str {
        "tekken"
    }
}

fn parse_version(version: &str) -> Result<u32, TokenizerError> {
    version
        .strip_prefix('v')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| err(format!("config.version {version:?} is not a version like \"v7\"")))
}

/// Bytes and rank of vocabulary entry `index`, checked as mistral-common checks them.
fn decode_vocab_entry((index, entry): (usize, &VocabEntry)) -> Result<(Vec<u8>, u32), TokenizerError> {
    if entry.rank != index as u64 {
        return Err(err(format!(
            "vocab[{index}] has rank {}: ranks must equal their position (0, 1, 2, …) with no gaps",
            entry.rank
        )));
    }
    let bytes = base64_decode(&entry.token_bytes)
        .ok_or_else(|| err(format!("vocab rank {index}: token_bytes {:?} is not valid base64", entry.token_bytes)))?;
    if index < 256 && bytes != [index as u8] {
        return Err(err(format!("vocab rank {index} must be the single byte {index:#04x}, is {bytes:02x?}")));
    }
    Ok((bytes, index as u32))
}

/// Name → id of the listed specials, checking what mistral-common asserts: ids are positions,
/// names are unique (fillers included), and there are at most `num_special`.
fn index_specials(listed: &[SpecialToken], num_special: u32) -> Result<HashMap<String, u32>, TokenizerError> {
    if listed.len() as u64 > num_special as u64 {
        return Err(err(format!(
            "{} special tokens listed, more than config.default_num_special_tokens ({num_special})",
            listed.len()
        )));
    }
    let mut ids = HashMap::new();
    for (position, special) in listed.iter().enumerate() {
        let name = &special.token_str;
        if special.rank as usize != position {
            return Err(err(format!(
                "special_tokens[{position}] ({name:?}) has rank {}: ranks must equal their position",
                special.rank
            )));
        }
        let clashes_with_filler = filler_index(name).is_some_and(|i| i as usize >= listed.len() && i < num_special);
        if ids.insert(name.clone(), special.rank).is_some() || clashes_with_filler {
            return Err(err(format!("special token {name:?} appears twice")));
        }
    }
    Ok(ids)
}

fn filler_name(id: u32) -> String {
    format!("<SPECIAL_{id}>")
}

/// `i` of a filler name `<SPECIAL_i>` written as the filler would be (no sign, no leading 0).
fn filler_index(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("<SPECIAL_")?.strip_suffix('>')?;
    let i: u32 = digits.parse().ok()?;
    (filler_name(i) == name).then_some(i)
}
