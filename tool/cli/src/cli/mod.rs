//! One module per subcommand.

pub mod bundle;
pub mod export;
pub mod inspect;
pub mod recipes;
pub mod run;
