//! Loads methods of a parsed program into executable [`Method`]s and runs them.

mod fold;
mod load;
mod method;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

pub use method::{InputError, Method, MethodError, Observer};

use crate::backend::BackendRegistry;
use crate::decimal::Dec;
use crate::format::schema::ExecutionPlan;
use crate::format::{FormatError, PteFile};
use crate::KernelRegistry;

/// Why a program or method could not be loaded.
#[derive(Clone, Debug, PartialEq)]
pub enum LoadError {
    Format(FormatError),
    MethodNotFound { name: String, available: Vec<String> },
    /// Every operator of the method without a kernel (`name.overload`), reported together.
    MissingOperators { method: String, ops: Vec<String> },
    /// A delegate id no registered backend handles.
    BackendNotAvailable { method: String, id: String },
    BackendInit { method: String, id: String, message: String },
    /// The program is structurally valid flatbuffer but violates runtime rules.
    Invalid { method: String, what: String },
    NotSupported { method: String, what: String },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Format(e) => write!(f, "{e}"),
            LoadError::MethodNotFound { name, available } => {
                write!(f, "method '{name}' not found (program has: ")?;
                list(f, available)?;
                f.write_str(")")
            }
            LoadError::MissingOperators { method, ops } => {
                write!(f, "method '{method}': no kernel for {} operator(s): ", ops.len())?;
                list(f, ops)
            }
            LoadError::BackendNotAvailable { method, id } => {
                write!(f, "method '{method}': backend '{id}' is not available in this runtime")
            }
            LoadError::BackendInit { method, id, message } => {
                write!(f, "method '{method}': backend '{id}' failed to initialize: {message}")
            }
            LoadError::Invalid { method, what } => write!(f, "method '{method}': invalid program: {what}"),
            LoadError::NotSupported { method, what } => write!(f, "method '{method}': not supported: {what}"),
        }
    }
}

/// `a, b, c`
fn list(f: &mut fmt::Formatter<'_>, items: &[String]) -> fmt::Result {
    for (k, item) in items.iter().enumerate() {
        if k > 0 {
            f.write_str(", ")?;
        }
        f.write_str(item)?;
    }
    Ok(())
}

/// Renders `template`, replacing each `{}` with the next argument as an unsigned integer and
/// each `{i}` with it as a signed one (its bits reinterpreted). Load errors build their
/// messages through this one routine instead of a `format!` per call site (code size).
#[inline(never)]
pub(crate) fn detail(template: &str, args: &[u64]) -> String {
    use core::fmt::Write;
    let mut s = String::new();
    let mut args = args.iter().copied();
    let mut rest = template;
    while let Some((text, tail)) = rest.split_once('{') {
        s.push_str(text);
        let (spec, tail) = tail.split_once('}').unwrap_or((tail, ""));
        let v = args.next().unwrap_or(0);
        let v = if spec == "i" { Dec::signed(v as i64) } else { Dec::unsigned(v) };
        let _ = write!(s, "{v}");
        rest = tail;
    }
    s.push_str(rest);
    s
}

#[cfg(feature = "std")]
impl std::error::Error for LoadError {}

impl From<FormatError> for LoadError {
    fn from(e: FormatError) -> Self {
        LoadError::Format(e)
    }
}

/// A parsed program; methods are loaded from it on demand.
pub struct Program<'p> {
    pub file: PteFile<'p>,
}

impl<'p> Program<'p> {
    /// Parses and validates the container. The bytes should be 16-aligned (constants are
    /// viewed in place); misaligned constants are reported when a kernel reads them.
    pub fn load(data: &'p [u8]) -> Result<Program<'p>, LoadError> {
        Ok(Program { file: PteFile::parse(data)? })
    }

    pub fn plans(&self) -> &[ExecutionPlan<'p>] {
        self.file.program.execution_plan.as_deref().unwrap_or(&[])
    }

    pub fn method_names(&self) -> Vec<&'p str> {
        self.plans().iter().map(|p| p.name.unwrap_or("")).collect()
    }

    pub fn plan(&self, name: &str) -> Result<&ExecutionPlan<'p>, LoadError> {
        self.plans().iter().find(|p| p.name == Some(name)).ok_or_else(|| LoadError::MethodNotFound {
            name: name.into(),
            available: self.method_names().into_iter().map(String::from).collect(),
        })
    }

    /// The dtype and sizes of each input of method `name` (None for an input that is not a
    /// tensor), read from the program alone: no kernels, no planned memory, no delegates, so a
    /// host tool can size inputs for a program whose backends only the target has.
    pub fn input_tensor_metas(&self, name: &str) -> Result<Vec<Option<(crate::ScalarType, Vec<usize>)>>, LoadError> {
        use crate::format::schema::KernelTypes;
        let plan = self.plan(name)?;
        let values = plan.values.as_deref().unwrap_or(&[]);
        let invalid = |what: String| LoadError::Invalid { method: name.into(), what };
        let mut metas = Vec::new();
        for (i, &v) in plan.inputs.as_deref().unwrap_or(&[]).iter().enumerate() {
            let value = usize::try_from(v).ok().and_then(|v| values.get(v)).ok_or_else(|| invalid(alloc::format!("input {i}: no value {v}")))?;
            let Some(KernelTypes::Tensor(t)) = &value.val else {
                metas.push(None);
                continue;
            };
            let dtype = crate::ScalarType::from_code(t.scalar_type as i64)
                .ok_or_else(|| invalid(alloc::format!("input {i}: unknown scalar type {}", t.scalar_type)))?;
            let sizes = t
                .sizes
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| invalid(alloc::format!("input {i}: negative size {d}"))))
                .collect::<Result<Vec<_>, _>>()?;
            metas.push(Some((dtype, sizes)));
        }
        Ok(metas)
    }

    /// Builds the method's values and planned memory, resolves every kernel (all missing ones
    /// are reported together) and initializes its delegates.
    pub fn load_method(
        &self,
        name: &str,
        kernels: &KernelRegistry,
        backends: &BackendRegistry,
    ) -> Result<Method<'p>, LoadError> {
        load::load_method(&self.file, self.plan(name)?, kernels, backends, None)
    }

    /// As [`Program::load_method`], with the planned arenas (memory_id 1, 2, …) in memory the
    /// caller placed, e.g. linker sections in chosen regions of a microcontroller: each at least
    /// the planned size and aligned for any element type. Nothing else is allocated for them.
    pub fn load_method_in(
        &self,
        name: &str,
        kernels: &KernelRegistry,
        backends: &BackendRegistry,
        arenas: Vec<&'p mut [u8]>,
    ) -> Result<Method<'p>, LoadError> {
        load::load_method(&self.file, self.plan(name)?, kernels, backends, Some(arenas))
    }

    /// The sizes of the method's planned arenas (memory_id 1, 2, …), in bytes.
    pub fn planned_arena_sizes(&self, name: &str) -> Result<Vec<usize>, LoadError> {
        let plan = self.plan(name)?;
        let sizes = plan.non_const_buffer_sizes.as_deref().unwrap_or(&[]);
        Ok(sizes.iter().skip(1).map(|&s| usize::try_from(s).unwrap_or(0)).collect())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn detail_renders_unsigned_and_signed_arguments() {
        let m = super::detail("value {}: size {i} of {} ({})", &[3, -5i64 as u64, u64::MAX]);
        assert_eq!(m, "value 3: size -5 of 18446744073709551615 (0)");
        assert_eq!(super::detail("no arguments", &[]), "no arguments");
    }
}
