//! The model-family export, as the CLI and the recipe build step call it: command-line
//! spellings of the quantization modes, and [`rbuild_models::family::export`] with errors
//! that name the checkpoint.

use rbuild_export::passes::quantize::{EmbeddingQuant, LinearQuant};
use rbuild_models::family::{self, ExportOptions, ExportReport, Family, Source};

use crate::error::{CliError, CliResult};

/// Parses a linear quantization mode: `fp32`, `fp16`, `int8`, `int4`, `8da4w` (group size separate).
pub fn parse_linear_quant(mode: &str, group: usize) -> CliResult<Option<LinearQuant>> {
    Ok(match mode {
        "fp32" | "none" => None,
        "fp16" | "f16" => Some(LinearQuant::F16),
        "int8" => Some(LinearQuant::Int8),
        "int4" => Some(LinearQuant::Int4 { group: check_group(group)? }),
        "8da4w" => Some(LinearQuant::Int8DynInt4 { group: check_group(group)? }),
        other => return Err(CliError(format!("quantization '{other}' is not known (fp32, fp16, int8, int4, 8da4w)"))),
    })
}

/// Parses an embedding quantization mode: `none`, `int8`, `int4`.
pub fn parse_embedding_quant(mode: &str, group: usize) -> CliResult<Option<EmbeddingQuant>> {
    Ok(match mode {
        "none" | "fp32" => None,
        "int8" | "8" => Some(EmbeddingQuant::Int8),
        "int4" | "4" => Some(EmbeddingQuant::Int4 { group: check_group(group)? }),
        other => return Err(CliError(format!("embedding quantization '{other}' is not known (none, int8, int4)"))),
    })
}

fn check_group(g: usize) -> CliResult<usize> {
    if [32, 64, 128, 256].contains(&g) {
        Ok(g)
    } else {
        Err(CliError(format!("group size {g} is not supported (32, 64, 128, 256)")))
    }
}

/// The registered family `name`, or an error listing them.
pub fn family(name: &str) -> CliResult<&'static dyn Family> {
    family::family(name).ok_or_else(|| CliError(format!("'{name}' is not a model family (known: {})", family::names().join(", "))))
}

/// Exports `model` from `source`; errors name the checkpoint.
pub fn export(model: &str, source: &Source, o: &ExportOptions) -> CliResult<(Vec<u8>, ExportReport)> {
    let f = family(model)?;
    family::export(f, source, o).map_err(|e| CliError(format!("{}: {e}", source.describe())))
}
