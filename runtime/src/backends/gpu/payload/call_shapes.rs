//! Shapes within one call of a payload: symbols take their sizes as inputs and outputs get
//! shapes. Every runtime of the payload (the CPU reference, the GPU ones) binds shapes through
//! these, so they accept and reject the same calls with the same messages.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Dim, Payload, ValueDef, ValueId};

/// `value 3` or ``value 3 `name` ``, for error messages.
pub fn describe(v: &ValueDef, id: ValueId) -> String {
    if v.name.is_empty() {
        format!("value {id}")
    } else {
        format!("value {id} `{}`", v.name)
    }
}

/// Element count of `dims`; None on overflow.
pub fn checked_numel(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

impl Payload {
    /// Binds `dims` to value `id`'s declared dims: fixed sizes must match, symbols must lie in
    /// their bounds and agree with earlier bindings of the same symbol in this call (`env`,
    /// indexed by symbol). `what` names the binding in errors ("input 0", "output").
    pub fn bind_dims(&self, env: &mut [Option<usize>], id: ValueId, dims: &[usize], what: &str) -> Result<(), String> {
        let v = &self.values[id as usize];
        if v.meta.dims.len() != dims.len() {
            return Err(format!("{what}: {} has rank {}, got shape {dims:?}", describe(v, id), v.meta.dims.len()));
        }
        for (i, (&d, &n)) in v.meta.dims.iter().zip(dims).enumerate() {
            match d {
                Dim::Fixed(f) => {
                    if f != n as u64 {
                        return Err(format!("{what}: {} dim {i} is {f}, got shape {dims:?}", describe(v, id)));
                    }
                }
                Dim::Symbol(s) => {
                    let sym = &self.symbols[s as usize];
                    if (n as u64) < sym.min || (n as u64) > sym.max {
                        return Err(format!(
                            "{what}: {} dim {i} (symbol `{}`) is {n}, outside its bounds {}..={}",
                            describe(v, id),
                            sym.name,
                            sym.min,
                            sym.max
                        ));
                    }
                    match env[s as usize] {
                        Some(b) if b != n => {
                            return Err(format!(
                                "{what}: {} dim {i} (symbol `{}`) is {n}, but the symbol is {b} in this call",
                                describe(v, id),
                                sym.name
                            ))
                        }
                        _ => env[s as usize] = Some(n),
                    }
                }
            }
        }
        Ok(())
    }

    /// Value `id`'s dims with this call's symbols resolved, for an output of `total` elements:
    /// one symbol not yet bound is inferred from `total`.
    pub fn resolve_output_dims(&self, env: &[Option<usize>], id: ValueId, total: usize) -> Result<Vec<usize>, String> {
        let v = &self.values[id as usize];
        let name = || describe(v, id);
        let mut dims = Vec::with_capacity(v.meta.dims.len());
        let mut unknown = None;
        for (i, d) in v.meta.dims.iter().enumerate() {
            dims.push(match *d {
                Dim::Fixed(n) => n as usize,
                Dim::Symbol(s) => match env[s as usize] {
                    Some(n) => n,
                    None if unknown.is_none() => {
                        unknown = Some(i);
                        1
                    }
                    None => return Err(format!("output {} has two symbols not yet known in this call", name())),
                },
            });
        }
        let Some(rest) = checked_numel(&dims) else {
            return Err(format!("output {} has shape {dims:?}, which overflows", name()));
        };
        if let Some(i) = unknown {
            if total.checked_rem(rest) != Some(0) {
                return Err(format!("cannot infer dim {i} of output {} from {total} element(s)", name()));
            }
            dims[i] = total / rest;
        }
        if checked_numel(&dims) != Some(total) {
            return Err(format!("output {} has shape {dims:?}, the input has {total} element(s)", name()));
        }
        Ok(dims)
    }
}
