//! One module per subcommand.

pub mod bundle;
pub mod eval;
pub mod export;
pub mod export_pt2;
pub mod inspect;
pub mod inspect_pt2;
pub mod ops;
pub mod placement;
pub mod recipes;
pub mod run;
