//! Chat templates from tokenizer_config.json rendered as transformers' apply_chat_template.

use std::path::Path;

use rbuild_llm_runner::chat::{load_for_tokenizer, strftime};

mod common;

fn with_config(name: &str, config: &str) -> std::path::PathBuf {
    let dir = common::temp_dir(name);
    std::fs::write(dir.join("tokenizer_config.json"), config).unwrap();
    dir.join("tokenizer.json")
}

fn config(template: &str, bos: &str, eos: &str) -> String {
    serde_json::json!({"chat_template": template, "bos_token": bos, "eos_token": {"content": eos, "special": true}}).to_string()
}

#[test]
fn llama3_template() {
    let t = "{{- bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
    let tok = with_config("chat_llama3", &config(t, "<|begin_of_text|>", "<|eot_id|>"));
    let tpl = load_for_tokenizer(&tok).unwrap();
    assert_eq!(tpl.eos_token, "<|eot_id|>");
    assert_eq!(
        tpl.render_user("  Hi there \n").unwrap(),
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
    );
}

#[test]
fn chatml_template_with_default_system_prompt() {
    let t = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    let tok = with_config("chat_chatml", &config(t, "", "<|im_end|>"));
    assert_eq!(
        load_for_tokenizer(&tok).unwrap().render_user("Hi").unwrap(),
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn block_whitespace_and_python_methods_as_transformers() {
    // trim_blocks + lstrip_blocks, and str.strip() from Python.
    let t = "{% for m in messages %}\n    [{{ m.role }}] {{ m.content.strip() }}\n  {% endfor %}\n{% if add_generation_prompt %}\n[assistant]\n{% endif %}\n";
    let tok = with_config("chat_ws", &config(t, "<s>", "</s>"));
    assert_eq!(load_for_tokenizer(&tok).unwrap().render_user(" Hi ").unwrap(), "    [user] Hi\n[assistant]\n");
}

#[test]
fn named_template_list_and_jinja_file() {
    let cfg = serde_json::json!({"chat_template": [
        {"name": "tool_use", "template": "TOOLS"},
        {"name": "default", "template": "{{ messages[0].content }}!"}
    ]});
    let tok = with_config("chat_list", &cfg.to_string());
    assert_eq!(load_for_tokenizer(&tok).unwrap().render_user("x").unwrap(), "x!");
    let dir = common::temp_dir("chat_jinja");
    std::fs::write(dir.join("tokenizer_config.json"), r#"{"bos_token": "<s>"}"#).unwrap();
    std::fs::write(dir.join("chat_template.jinja"), "{{ bos_token }}[{{ messages[0]['content'] }}]").unwrap();
    assert_eq!(load_for_tokenizer(&dir.join("tokenizer.json")).unwrap().render_user("y").unwrap(), "<s>[y]");
}

#[test]
fn missing_template_and_template_errors_are_clear() {
    let tok = with_config("chat_none", r#"{"bos_token": "<s>"}"#);
    let e = load_for_tokenizer(&tok).unwrap_err();
    assert!(e.contains("--chat") && e.contains("chat_template") && e.contains("tokenizer_config.json"), "{e}");
    let e = load_for_tokenizer(Path::new("/nonexistent-dir/tokenizer.json")).unwrap_err();
    assert!(e.contains("chat_template"), "{e}");
    let t = "{% if messages[0]['role'] != 'system' %}{{ raise_exception('System message required') }}{% endif %}";
    let tok = with_config("chat_raise", &config(t, "", ""));
    let e = load_for_tokenizer(&tok).unwrap().render_user("x").unwrap_err();
    assert!(e.contains("System message required") && e.contains("tokenizer_config.json"), "{e}");
    let tok = with_config("chat_syntax", &config("{% for %}", "", ""));
    let e = load_for_tokenizer(&tok).unwrap().render_user("x").unwrap_err();
    assert!(e.contains("chat template"), "{e}");
    let tok = with_config("chat_badjson", "{not json");
    assert!(load_for_tokenizer(&tok).unwrap_err().contains("invalid JSON"));
}

#[test]
fn strftime_for_llama_templates() {
    assert_eq!(strftime("%d %b %Y", 0), "01 Jan 1970");
    assert_eq!(strftime("%Y-%m-%d %H:%M:%S", 1_700_000_000), "2023-11-14 22:13:20");
    // 2024-03-01 in a leap year is day 61.
    assert_eq!(strftime("%j %B %y %%", 1_709_251_200), "061 March 24 %");
}
