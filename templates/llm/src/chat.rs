//! Chat prompts: the Jinja `chat_template` of a Hugging Face `tokenizer_config.json` (or a
//! `chat_template.jinja` beside it), rendered as `transformers`' `apply_chat_template` does:
//! `trim_blocks` and `lstrip_blocks` on, Python string methods available, `raise_exception`.

use std::path::{Path, PathBuf};

use minijinja::{context, Environment, Error as JinjaError, ErrorKind};

#[derive(Clone, Debug)]
pub struct ChatTemplate {
    pub source: String,
    /// Where the template came from (for error messages).
    pub origin: PathBuf,
    pub bos_token: String,
    pub eos_token: String,
}

/// Reads the chat template for the tokenizer at `tokenizer`: `tokenizer_config.json` in the
/// same folder (`chat_template` as a string, or a list of named templates of which "default"
/// is used), else `chat_template.jinja` there.
pub fn load_for_tokenizer(tokenizer: &Path) -> Result<ChatTemplate, String> {
    let dir = tokenizer.parent().map(Path::to_path_buf).unwrap_or_default();
    let config = dir.join("tokenizer_config.json");
    let jinja = dir.join("chat_template.jinja");
    let mut tpl = None;
    let (mut bos, mut eos) = (String::new(), String::new());
    if config.is_file() {
        let text = std::fs::read_to_string(&config).map_err(|e| format!("{}: {e}", config.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: invalid JSON: {e}", config.display()))?;
        bos = token_text(v.get("bos_token"));
        eos = token_text(v.get("eos_token"));
        tpl = match v.get("chat_template") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Array(list)) => {
                let named = |n: &str| {
                    list.iter().find(|t| t.get("name").and_then(|x| x.as_str()) == Some(n))?.get("template")?.as_str()
                };
                Some(
                    named("default")
                        .ok_or_else(|| format!("{}: chat_template lists no template named \"default\"", config.display()))?
                        .to_string(),
                )
            }
            Some(_) => return Err(format!("{}: chat_template is neither a string nor a list", config.display())),
        }
        .map(|s| (s, config.clone()));
    }
    if tpl.is_none() && jinja.is_file() {
        let s = std::fs::read_to_string(&jinja).map_err(|e| format!("{}: {e}", jinja.display()))?;
        tpl = Some((s, jinja.clone()));
    }
    let (source, origin) = tpl.ok_or_else(|| {
        format!(
            "--chat needs a chat template, but neither {} (key \"chat_template\") nor {} has one",
            config.display(),
            jinja.display()
        )
    })?;
    Ok(ChatTemplate { source, origin, bos_token: bos, eos_token: eos })
}

/// `bos_token`/`eos_token` are a string or an AddedToken object with `content`.
fn token_text(v: Option<&serde_json::Value>) -> String {
    match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(o) => o.get("content").and_then(|c| c.as_str()).unwrap_or_default().to_string(),
        None => String::new(),
    }
}

impl ChatTemplate {
    /// The prompt for one user message, ending with the assistant turn's opening.
    pub fn render_user(&self, prompt: &str) -> Result<String, String> {
        let messages = vec![context! { role => "user", content => prompt }];
        self.render(messages, true)
    }

    pub fn render(&self, messages: Vec<minijinja::Value>, add_generation_prompt: bool) -> Result<String, String> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| e.to_string())?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, format!("the template raised: {msg}")))
        });
        env.add_function("strftime_now", |fmt: String| strftime_now(&fmt));
        let at = |e: JinjaError| format!("{}: chat template: {e:#}", self.origin.display());
        let tmpl = env.template_from_str(&self.source).map_err(at)?;
        tmpl.render(context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.clone(),
            eos_token => self.eos_token.clone(),
        })
        .map_err(at)
    }
}

/// `strftime_now(fmt)` of Llama 3.x templates, for the common directives, in UTC.
fn strftime_now(fmt: &str) -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    strftime(fmt, secs)
}

/// Formats the UTC time `secs` after the epoch with %Y %m %d %b %B %H %M %S %y %j %%.
pub fn strftime(fmt: &str, secs: i64) -> String {
    const MONTHS: [&str; 12] =
        ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let cum = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let jday = cum[(m - 1) as usize] + d + i64::from(leap && m > 2);
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('j') => out.push_str(&format!("{jday:03}")),
            Some('b') => out.push_str(&MONTHS[(m - 1) as usize][..3]),
            Some('B') => out.push_str(MONTHS[(m - 1) as usize]),
            Some('H') => out.push_str(&format!("{:02}", tod / 3600)),
            Some('M') => out.push_str(&format!("{:02}", tod / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", tod % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}
