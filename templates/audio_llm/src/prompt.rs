//! Voxtral's prompts, as mistral-common builds them:
//! - transcription: `<s>[INST][BEGIN_AUDIO][AUDIO]×N[/INST]` + `lang:xx` (only with a
//!   language) + `[TRANSCRIBE]`;
//! - a question about the audio: `<s>[INST][BEGIN_AUDIO][AUDIO]×N` + question + `[/INST]`;
//! - or token ids given directly (`--prompt-ids`, for checkpoints without a tokenizer), where
//!   the word `audio` stands for the N placeholders.

use rbuild_runner_support::text::Tokenizer;

fn special(tok: &dyn Tokenizer, name: &str) -> Result<u32, String> {
    tok.token_to_id(name).ok_or_else(|| format!("the tokenizer has no {name} token (not a Voxtral/Tekken tokenizer?)"))
}

fn audio_block(tok: &dyn Tokenizer, bos: u32, audio_id: u32, n_audio: usize) -> Result<Vec<u32>, String> {
    let mut ids = vec![bos, special(tok, "[INST]")?, special(tok, "[BEGIN_AUDIO]")?];
    ids.extend(std::iter::repeat_n(audio_id, n_audio));
    Ok(ids)
}

/// Text without the tokenizer's BOS.
fn plain(tok: &dyn Tokenizer, text: &str) -> Result<Vec<u32>, String> {
    tok.encode(text, false).map_err(|e| e.0)
}

/// The transcription prompt for `n_audio` audio tokens.
pub fn transcription(tok: &dyn Tokenizer, bos: u32, audio_id: u32, n_audio: usize, language: Option<&str>) -> Result<Vec<u32>, String> {
    let mut ids = audio_block(tok, bos, audio_id, n_audio)?;
    ids.push(special(tok, "[/INST]")?);
    if let Some(lang) = language {
        ids.extend(plain(tok, &format!("lang:{lang}"))?);
    }
    ids.push(special(tok, "[TRANSCRIBE]")?);
    Ok(ids)
}

/// A question (or instruction) about the audio.
pub fn question(tok: &dyn Tokenizer, bos: u32, audio_id: u32, n_audio: usize, text: &str) -> Result<Vec<u32>, String> {
    let mut ids = audio_block(tok, bos, audio_id, n_audio)?;
    ids.extend(plain(tok, text)?);
    ids.push(special(tok, "[/INST]")?);
    Ok(ids)
}

/// `--prompt-ids "1,3,25,audio,26,301"`: comma- or space-separated ids, `audio` expanding to
/// the `n_audio` placeholders. Explicit placeholder ids must then number exactly `n_audio`.
pub fn from_ids(spec: &str, audio_id: u32, n_audio: usize) -> Result<Vec<u32>, String> {
    let mut ids = Vec::new();
    let mut expanded = false;
    for word in spec.split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()) {
        if word.eq_ignore_ascii_case("audio") {
            if expanded {
                return Err("--prompt-ids: `audio` may appear once (it stands for all the audio tokens)".into());
            }
            expanded = true;
            ids.extend(std::iter::repeat_n(audio_id, n_audio));
        } else {
            ids.push(word.parse::<u32>().map_err(|_| format!("--prompt-ids: `{word}` is neither a token id nor `audio`"))?);
        }
    }
    if ids.is_empty() {
        return Err("--prompt-ids holds no ids".into());
    }
    let placeholders = ids.iter().filter(|&&t| t == audio_id).count();
    if placeholders != n_audio {
        return Err(format!(
            "--prompt-ids has {placeholders} audio tokens ({audio_id}) but the audio gives {n_audio} embeddings; write `audio` where they go"
        ));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_expand_the_audio_word() {
        assert_eq!(from_ids("1, 3 25,audio,26", 24, 3).unwrap(), vec![1, 3, 25, 24, 24, 24, 26]);
        assert_eq!(from_ids("1,24,24", 24, 2).unwrap(), vec![1, 24, 24]);
        assert!(from_ids("1,24", 24, 2).unwrap_err().contains("1 audio tokens"));
        assert!(from_ids("1,x", 24, 0).unwrap_err().contains("`x`"));
        assert!(from_ids("audio,audio", 24, 1).is_err());
        assert!(from_ids(" , ", 24, 0).is_err());
    }
}
