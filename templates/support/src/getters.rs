//! Getter methods: no inputs, constant outputs (an Int, a Bool, a list of Ints) that describe
//! the program to its runner (ExecuTorch's LLM and ASR exporters write them).

use rbuild_runtime::backend::BackendRegistry;
use rbuild_runtime::{KernelContext, KernelRegistry, Program, Value};

/// The output values of the no-input method `name`, or None when the program lacks it.
pub fn getter(program: &Program<'_>, name: &str, kernels: &KernelRegistry) -> Result<Option<Vec<Value>>, String> {
    if !program.method_names().contains(&name) {
        return Ok(None);
    }
    let mut m = program.load_method(name, kernels, &BackendRegistry::new()).map_err(|e| format!("method '{name}': {e}"))?;
    if !m.inputs().is_empty() {
        return Err(format!("method '{name}' should take no inputs, takes {}", m.inputs().len()));
    }
    m.execute(&mut KernelContext::default()).map_err(|e| format!("method '{name}': {e}"))?;
    let mut out = Vec::new();
    for i in 0..m.outputs().len() {
        match m.output_value(i) {
            // A list output (e.g. several EOS ids in one value): its items are indices of values
            // in the method's frame.
            Some(Value::IntList(items)) => {
                for &k in items {
                    out.push(m.frame.values.get(k as usize).cloned().unwrap_or(Value::None));
                }
            }
            Some(v) => out.push(v.clone()),
            None => return Err(format!("method '{name}': output {i} is missing")),
        }
    }
    Ok(Some(out))
}
